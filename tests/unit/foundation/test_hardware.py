"""genenv.hardware: bf16 counts as native on a CPU only with AVX-512 BF16 or AMX (AVX-512F alone emulates it)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from genenv import hardware


@pytest.mark.parametrize(("bf16", "amx", "native"), [(False, False, False), (True, False, True), (False, True, True)])
def test_native_bf16_needs_avx512_bf16_or_amx(monkeypatch: pytest.MonkeyPatch, bf16: bool, amx: bool,
                                              native: bool) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: True)  # AVX-512F alone decides nothing
    assert hardware.cpu_computes_bf16() is native
    assert hardware.cpu_dtype() == ("bfloat16" if native else "float32")
    assert hardware.resolve_dtype("auto", "cpu") == hardware.cpu_dtype()
    assert hardware.resolve_dtype("bfloat16", "cpu") == "bfloat16"  # an explicit setting wins


@pytest.mark.skipif(platform.system() != "Linux", reason="reads /proc/cpuinfo")
def test_this_machine_agrees_with_its_cpu_flags() -> None:
    flags = set(next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split(":", 1)[1].split())
    assert hardware.cpu_computes_bf16() is bool(flags & {"avx512_bf16", "amx_bf16"}), sorted(
        f for f in flags if f.startswith(("avx512", "amx")))
