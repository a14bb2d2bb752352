"""Carrying a GGUF in parts (genenv.models.travel): split, stash, locate, join and prepare, as on a GPU machine."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from genenv.models import travel
from genenv.models.catalogue import SMOLLM2
from tests.unit.bench import gpu_machine


def _blob(path: Path, size: int) -> Path:
    path.write_bytes(bytes((i * 7919 + i // 251) % 256 for i in range(size)))
    return path


def test_split_makes_equal_parts_under_the_limit_each_with_the_manifest(tmp_path: Path) -> None:
    src = _blob(tmp_path / "m.gguf", 2_500_000)
    manifest = travel.split(src, tmp_path / "out", model="toy", max_part_mib=1.0)
    assert [p["size"] for p in manifest["parts"]] == [833_334, 833_334, 833_332]
    assert manifest["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    for part in manifest["parts"]:
        folder = tmp_path / "out" / "toy" / f"part-{part['index']}"
        assert sorted(p.name for p in folder.iterdir()) == sorted([part["file"], "manifest.json"])
        assert json.loads((folder / "manifest.json").read_text()) == manifest
        assert hashlib.sha256((folder / part["file"]).read_bytes()).hexdigest() == part["sha256"]


def test_parts_from_several_places_join_into_the_same_bytes(tmp_path: Path) -> None:
    src = _blob(tmp_path / "m.gguf", 300_000)
    travel.split(src, tmp_path / "out", model="toy", max_part_mib=0.1)
    stashed = travel.stash(tmp_path / "out" / "toy" / "part-1", tmp_path / "stash")
    shutil.rmtree(tmp_path / "out" / "toy" / "part-1")  # only the stash holds part 1 now, as on the GPU machine
    assert stashed == tmp_path / "stash" / "toy" / "part-1"
    joined = tmp_path / "joined.gguf"
    travel.join([tmp_path / "out", tmp_path / "stash"], joined)
    assert joined.read_bytes() == src.read_bytes()


def test_a_missing_or_damaged_part_is_named(tmp_path: Path) -> None:
    src = _blob(tmp_path / "m.gguf", 300_000)
    travel.split(src, tmp_path / "out", model="toy", max_part_mib=0.1)
    parts = tmp_path / "out" / "toy"
    shutil.rmtree(parts / "part-2")
    with pytest.raises(travel.TravelError, match=r"part 2 \(m.gguf.part2\): missing"):
        travel.join([tmp_path / "out"], tmp_path / "j.gguf")
    travel.split(src, tmp_path / "out", model="toy", max_part_mib=0.1)
    damaged = parts / "part-3" / "m.gguf.part3"
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"\x00")
    with pytest.raises(travel.TravelError, match=r"part 3 .*damaged copy"):
        travel.join([tmp_path / "out"], tmp_path / "j.gguf")
    with pytest.raises(travel.TravelError, match="sha256 differs"):
        travel.stash(parts / "part-3", tmp_path / "stash")


def test_split_refuses_a_file_that_is_not_the_pinned_gguf(tmp_path: Path) -> None:
    src = _blob(tmp_path / "m.gguf", 1000)
    with pytest.raises(travel.TravelError, match="not smollm2-135m-instruct's pinned GGUF"):
        travel.split(src, tmp_path / "out", model=SMOLLM2.name)
    assert not (tmp_path / "out" / SMOLLM2.name).exists()


def test_the_command_line_reports_a_missing_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _blob(tmp_path / "m.gguf", 300_000)
    assert travel.main(["split", "--gguf", str(src), "--model", "toy", "--out", str(tmp_path / "t"),
                        "--max-part-mib", "0.2"]) == 0
    assert "whole: 300,000 bytes" in capsys.readouterr().out
    shutil.rmtree(tmp_path / "t" / "toy" / "part-1")
    assert travel.main(["join", "--from", str(tmp_path / "t"), "--out", str(tmp_path / "j")]) == 1
    assert "part 1 (m.gguf.part1): missing" in capsys.readouterr().err


@pytest.mark.slow
def test_smollm2_travels_in_two_parts_and_prepares_the_same_model(model_dir: Path, tmp_path: Path) -> None:
    """The real GGUF: two parts under 50 MiB, part 1 stashed outside the copy, joined, verified against the
    catalogue and dequantised into a folder whose weights equal those of `genenv models prepare`."""
    from safetensors.torch import load_file

    manifest = travel.split(travel.installed_gguf(SMOLLM2.name), tmp_path / "travel", model=SMOLLM2.name)
    assert [p["size"] for p in manifest["parts"]] == [49_181_216, 49_181_216]
    assert manifest["sha256"] == SMOLLM2.gguf_sha256
    travel.stash(tmp_path / "travel" / SMOLLM2.name / "part-1", tmp_path / "stash")
    shutil.rmtree(tmp_path / "travel" / SMOLLM2.name / "part-1")
    # As on the GPU machine: the command line, with only that machine's packages and the travelling wheels.
    proc = gpu_machine.run(["-m", "genenv.models.travel", "prepare", "--from", str(tmp_path / "travel"), "--from",
                            str(tmp_path / "stash"), "--cache-dir", str(tmp_path / "models")], tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = Path(proc.stdout.strip().splitlines()[-1])
    assert folder == tmp_path / "models" / SMOLLM2.name
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")]  # scratch GGUF removed
    ours, reference = load_file(folder / "model.safetensors"), load_file(model_dir / "model.safetensors")
    assert ours.keys() == reference.keys()
    assert all(ours[k].equal(reference[k]) for k in reference)
    assert (folder / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()
    assert travel.prepare([tmp_path / "stash"], tmp_path / "models") == folder  # done: no parts needed again
