"""What the machine computes natively, and the device and dtype a model runs in (torch imported lazily)."""

from __future__ import annotations

from typing import Literal

DeviceSetting = Literal["auto", "cpu", "cuda"]
DtypeSetting = Literal["auto", "bfloat16", "float32"]
Dtype = Literal["bfloat16", "float32"]


class DeviceUnavailableError(RuntimeError):
    """A setting asks for CUDA where torch sees no CUDA device."""


def cpu_computes_bf16() -> bool:
    """True on a CPU with AVX-512 or AMX, where bf16 matmuls run natively; an AVX2-only CPU emulates them.

    Measured on an AVX2-only 2-core machine with SmolLM2-135M: a LoRA training step took 30 s in bf16 and 1.7 s in
    fp32; vLLM's CPU engine is slower in bf16 there for the same reason (docs/deployment.md).
    """
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return "AVX512" in capability or "AMX" in capability


def cpu_dtype() -> Dtype:
    """The dtype a model runs in on this CPU: bf16 where it is native, else fp32."""
    return "bfloat16" if cpu_computes_bf16() else "float32"


def resolve_device(setting: DeviceSetting, *, name: str = "device") -> Literal["cpu", "cuda"]:
    """'cuda' when asked for or available (auto), else 'cpu'; asking for CUDA without one fails here, with the setting
    named, rather than deep inside a model load."""
    import torch

    if setting == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(f"{name} is 'cuda' but torch sees no CUDA device (torch {torch.__version__}); "
                                     "set it to 'auto' or 'cpu'")
    if setting == "cuda" or (setting == "auto" and torch.cuda.is_available()):
        return "cuda"
    return "cpu"


def resolve_dtype(setting: DtypeSetting, device: Literal["cpu", "cuda"]) -> Dtype:
    """The dtype to load a base model in: 'auto' is bf16 where the hardware computes it natively (a CUDA GPU that
    supports it, a CPU with AVX-512 or AMX) and fp32 elsewhere."""
    if setting != "auto":
        return setting
    if device == "cuda":
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return cpu_dtype()
