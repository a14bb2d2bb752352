"""PEFT LoRA: load the base model, attach a fresh or parent adapter, save a version atomically."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Literal

import torch

from genenv import hardware
from genenv.contracts.adapters import Role
from genenv.contracts.runs import LoraConfig
from genenv_trainer.training.optim import save_state

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
Dtype = Literal["bfloat16", "float32"]


def resolve_device(setting: Literal["auto", "cpu", "cuda"]) -> torch.device:
    """cuda when asked for or available (auto), else cpu (genenv.hardware.resolve_device; 'cuda' without a CUDA
    device fails naming trainer.device)."""
    return torch.device(hardware.resolve_device(setting, name="trainer.device"))


def resolve_dtype(setting: Literal["auto", "bfloat16", "float32"], device: torch.device) -> Dtype:
    """The dtype to load the base model in: 'auto' is bf16 where the hardware computes it natively (CUDA, a CPU with
    AVX-512 BF16 or AMX) and fp32 elsewhere, where bf16 matmuls are emulated (genenv.hardware.cpu_computes_bf16)."""
    return hardware.resolve_dtype(setting, "cuda" if device.type == "cuda" else "cpu")


def load_tokenizer(model_path: Path) -> Any:
    """The base model's tokenizer, with a pad token (the end-of-turn token when the model defines none)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_policy(
    model_path: Path,
    lora: LoraConfig,
    parent: Path | None,
    *,
    device: torch.device,
    dtype: Literal["auto", "bfloat16", "float32"],
) -> Any:
    """The base model with a trainable LoRA adapter: the parent version's weights when given, else fresh."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    # Each job loads the model once: a per-tensor "Loading weights" bar only clutters the quickstart and worker logs.
    hf_logging.disable_progress_bar()
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=_DTYPES[resolve_dtype(dtype, device)],
                                                device_map=device)
    return attach_lora(base, lora, parent)


def attach_lora(base: Any, lora: LoraConfig, parent: Path | None) -> Any:
    """``base`` (a loaded transformers model, left in place) with a trainable LoRA adapter, in training mode.

    PEFT keeps adapter weights in float32 over a bf16 base (autocast_adapter_dtype), so the optimiser
    updates full-precision weights while the frozen base runs in bf16. Separate from loading so that a model built
    from a config alone (bench/gpu_check.py's random-init 7B) trains through exactly this code.
    """
    from peft import LoraConfig as PeftLoraConfig
    from peft import PeftModel, get_peft_model

    base.config.use_cache = False
    if parent is not None:
        model = PeftModel.from_pretrained(base, str(parent), is_trainable=True)
    else:
        model = get_peft_model(
            base,
            PeftLoraConfig(
                r=lora.rank,
                lora_alpha=lora.alpha,  # type: ignore[arg-type]  # annotated int; the α/r scale takes floats
                lora_dropout=lora.dropout,
                target_modules=list(lora.target_modules),
                task_type="CAUSAL_LM",
            ),
        )
    model.train()
    return model


def adapter_dir(store: Path, run_id: str, role: Role, version: int) -> Path:
    """Where version ``version`` of a role's adapter lives: <store>/<run>/<role>/v<N>."""
    return store / run_id / role.value / f"v{version}"


def save_adapter(
    model: Any, store: Path, run_id: str, role: Role, version: int, optimizer: torch.optim.Optimizer | None = None
) -> Path:
    """Write the adapter to a temporary sibling, then rename it into place: readers never see half a version.

    A directory already at the target is the leftover of an attempt that died before its database row was
    committed (the row, not the directory, is what makes a version exist), so it is replaced.
    """
    final = adapter_dir(store, run_id, role, version)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex[:8]}"
    model.save_pretrained(str(tmp))
    if optimizer is not None:
        save_state(optimizer, tmp)  # inside the same rename: a version never exists without its optimiser state
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    return final
