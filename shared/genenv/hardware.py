"""What the machine computes natively (pure: reads torch's CPU capability only)."""

from __future__ import annotations

from typing import Literal


def cpu_computes_bf16() -> bool:
    """True on a CPU with AVX-512 or AMX, where bf16 matmuls run natively; an AVX2-only CPU emulates them.

    Measured on an AVX2-only 2-core machine with SmolLM2-135M: a LoRA training step took 30 s in bf16 and 1.7 s in
    fp32; vLLM's CPU engine is slower in bf16 there for the same reason (docs/deployment.md).
    """
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return "AVX512" in capability or "AMX" in capability


def cpu_dtype() -> Literal["bfloat16", "float32"]:
    """The dtype a model runs in on this CPU: bf16 where it is native, else fp32."""
    return "bfloat16" if cpu_computes_bf16() else "float32"
