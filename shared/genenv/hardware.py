"""What the machine computes natively, and the device and dtype a model runs in (torch imported lazily)."""

from __future__ import annotations

from typing import Literal

DeviceSetting = Literal["auto", "cpu", "cuda"]
DtypeSetting = Literal["auto", "bfloat16", "float32"]
Dtype = Literal["bfloat16", "float32"]


class DeviceUnavailableError(RuntimeError):
    """A setting asks for CUDA where torch sees no CUDA device."""


def cpu_computes_bf16() -> bool:
    """True on a CPU with AVX-512 BF16 or AMX, where bf16 matmuls run natively; elsewhere they are emulated.

    AVX-512 alone is not enough: on a 2-core Xeon with AVX-512F but no AVX-512 BF16 (Skylake/Cascade Lake class, common
    in clouds) SmolLM2-135M's forward + backward took 43.5 s in bf16 and 14.5 s in fp32, a bf16 matmul 3.8x an fp32
    one; on an AVX2-only machine a LoRA training step took 30 s in bf16 and 1.7 s in fp32; vLLM's CPU engine is
    slower in bf16 there for the same reason (docs/deployment.md). torch has no public query for the instruction
    sets; torch.cpu's private ones are what its own CPU kernels dispatch on.
    """
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


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
    supports it, a CPU with AVX-512 BF16 or AMX) and fp32 elsewhere."""
    if setting != "auto":
        return setting
    if device == "cuda":
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return cpu_dtype()
