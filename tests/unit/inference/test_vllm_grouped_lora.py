"""The grouped LoRA ops of genenv.inference.vllm_plugin compute what vLLM's per-token CPU ops compute."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
lora_ops = pytest.importorskip("vllm.lora.ops.torch_ops.lora_ops")

from genenv.inference.vllm_plugin import make_ops  # noqa: E402


class Upstream:
    bgmv_shrink = staticmethod(lora_ops.bgmv_shrink)
    bgmv_expand = staticmethod(lora_ops.bgmv_expand)
    bgmv_expand_slice = staticmethod(lora_ops.bgmv_expand_slice)


OPS = make_ops(Upstream)
# Several adapters in one batch, the last slot picked with -1 (as upstream's indexing does), and one adapter only.
INDICES = [[0, 2, 2, 1, 0, -1, 2], [3, 3, 3, 3]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("indices", INDICES)
def test_shrink_matches_upstream(dtype: torch.dtype, indices: list[int]) -> None:
    gen = torch.Generator().manual_seed(0)
    idx = torch.tensor(indices)
    x = torch.randn(len(indices), 64, generator=gen).to(dtype)
    a = torch.randn(4, 1, 16, 64, generator=gen).to(dtype)
    want, got = torch.zeros(len(indices), 16), torch.zeros(len(indices), 16)
    Upstream.bgmv_shrink(x, a, want, idx, 0.5)
    OPS["bgmv_shrink"](x, a, got, idx, 0.5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("add_inputs", [True, False])
@pytest.mark.parametrize("indices", INDICES)
def test_expand_and_expand_slice_match_upstream(add_inputs: bool, indices: list[int]) -> None:
    gen = torch.Generator().manual_seed(1)
    idx = torch.tensor(indices)
    x = torch.randn(len(indices), 16, generator=gen)
    b = torch.randn(4, 1, 96, 16, generator=gen)
    start = torch.randn(len(indices), 96, generator=gen)
    want, got = start.clone(), start.clone()
    Upstream.bgmv_expand(x, b, want, idx, add_inputs)
    OPS["bgmv_expand"](x, b, got, idx, add_inputs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    b_slice = torch.randn(4, 1, 32, 16, generator=gen)
    want, got = start.clone(), start.clone()
    Upstream.bgmv_expand_slice(x, b_slice, want, idx, 40, 32, add_inputs)
    OPS["bgmv_expand_slice"](x, b_slice, got, idx, 40, 32, add_inputs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(got[:, :40], start[:, :40]) and torch.equal(got[:, 72:], start[:, 72:])


def test_a_single_row_broadcast_is_left_to_upstream() -> None:
    x = torch.randn(1, 16)
    b = torch.randn(2, 1, 32, 16)
    idx = torch.tensor([1])
    want, got = torch.zeros(3, 32), torch.zeros(3, 32)
    Upstream.bgmv_expand(x, b, want, idx, True)
    OPS["bgmv_expand"](x, b, got, idx, True)
    assert torch.equal(got, want)


# ---------------------------------------------------------------- the punica wrapper's fused methods

punica_cpu = pytest.importorskip("vllm.lora.punica_wrapper.punica_cpu")

from genenv.inference.vllm_plugin import make_wrapper_methods, step_groups  # noqa: E402

UPSTREAM_WRAPPER = punica_cpu.PunicaWrapperCPU
assert not getattr(lora_ops, "_genenv_grouped", False), "the plugin must not be installed in the test process"
FUSED = make_wrapper_methods(UPSTREAM_WRAPPER)
# Per-token slots of one step: several adapters mixed; one adapter for all; base-model rows (-1) beside adapters.
STEPS = [[0, 2, 2, 1, 0, 2, 1], [0, 0, 0, 0, 0], [1, -1, 1, -1, -1]]  # slot 3 is the zero slot
SLICES = (96, 32, 32)  # q, k, v of a grouped-query attention layer


def wrapper_at(indices: list[int]) -> object:
    """A CPU punica wrapper whose current step has these per-token slots (decode metadata)."""
    w = UPSTREAM_WRAPPER(max_num_batched_tokens=64, max_batches=8, device="cpu")
    w._token_lora_indices[: len(indices)] = torch.tensor(indices)
    w.indices_len[0] = len(indices)
    w.is_prefill = False
    w._genenv_groups = step_groups(w.token_lora_indices)
    return w


def stacked(gen: torch.Generator, rows: int, cols: int, dtype: torch.dtype, slots: int = 4) -> torch.Tensor:
    """vLLM's [slots, 1, rows, cols] stacked weights; the last slot zero, as when it holds no adapter, so upstream's
    weights[-1] for a base-model row adds nothing (see test_base_rows_get_no_lora_term)."""
    w = torch.randn(slots, 1, rows, cols, generator=gen).to(dtype)
    w[-1] = 0
    return w


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("indices", STEPS)
def test_fused_lora_linear_matches_upstream(dtype: torch.dtype, indices: list[int]) -> None:
    """vLLM's merged-QKV path: add_shrink into a [slices, tokens, rank] fp32 buffer, then add_expand into the output."""
    gen = torch.Generator().manual_seed(2)
    tokens, rank = len(indices), 16
    x = torch.randn(tokens, 64, generator=gen).to(dtype)
    a = tuple(stacked(gen, rank, 64, dtype) for _ in SLICES)
    b = tuple(stacked(gen, size, rank, dtype) for size in SLICES)
    start = torch.randn(tokens, sum(SLICES) + 8, generator=gen).to(dtype)  # wider: the offset is honoured
    results = []
    for methods in (UPSTREAM_WRAPPER, FUSED):
        w = wrapper_at(indices)
        shrink = methods.add_shrink if methods is UPSTREAM_WRAPPER else methods["add_shrink"]
        expand = methods.add_expand if methods is UPSTREAM_WRAPPER else methods["add_expand"]
        buffer = torch.zeros(len(SLICES), tokens, rank, dtype=torch.float32)
        shrink(w, buffer, x, a, 0.5)
        out = start.clone()
        expand(w, out, buffer, b, SLICES, offset_start=8, add_inputs=True)
        results.append((buffer, out))
    (want_buf, want), (got_buf, got) = results
    torch.testing.assert_close(got_buf, want_buf, rtol=1e-5, atol=1e-5)
    tol = 1e-5 if dtype is torch.float32 else 2e-2  # bf16: one rounding of the sum, taken in another order
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    assert torch.equal(got[:, :8], start[:, :8])


@pytest.mark.parametrize("indices", STEPS)
def test_fused_path_through_add_lora_linear(indices: list[int]) -> None:
    """The single-projection path (o_proj, add_lora_linear's tuple buffers) and overwrite (add_inputs=False)."""
    gen = torch.Generator().manual_seed(3)
    tokens, rank = len(indices), 8
    x = torch.randn(tokens, 48, generator=gen)
    a, b = (stacked(gen, rank, 48, torch.float32),), (stacked(gen, 40, rank, torch.float32),)
    start = torch.randn(tokens, 40, generator=gen)
    want, got = start.clone(), start.clone()
    w_up, w_fused = wrapper_at(indices), wrapper_at(indices)
    UPSTREAM_WRAPPER.add_lora_linear(w_up, want, x, a, b, 1.0, (40,))
    buffers = (torch.zeros(tokens, rank),)
    FUSED["add_shrink"](w_fused, buffers, x, a, 1.0)
    FUSED["add_expand"](w_fused, got, buffers, b, (40,), add_inputs=True)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    want, got = start.clone(), start.clone()
    UPSTREAM_WRAPPER.add_expand(w_up, want, buffers, b, (40,), add_inputs=False)
    FUSED["add_expand"](w_fused, got, buffers, b, (40,), add_inputs=False)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_base_rows_get_no_lora_term_and_new_weights_are_seen() -> None:
    """Slot -1 rows keep the base output even when the last slot holds an adapter (upstream's torch ops would add
    that adapter: weights[-1]); weights written into a slot after a step are used by the next call."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(4, 32, generator=gen)
    a = (torch.randn(2, 1, 8, 32, generator=gen),)
    b = (torch.randn(2, 1, 24, 8, generator=gen),)
    w = wrapper_at([0, -1, 0, -1])

    def run() -> torch.Tensor:
        buffers = torch.zeros(1, 4, 8)
        FUSED["add_shrink"](w, buffers, x, a, 1.0)
        out = torch.zeros(4, 24)
        FUSED["add_expand"](w, out, buffers, b, (24,))
        return out

    first = run()
    assert torch.equal(first[1], torch.zeros(24)) and torch.equal(first[3], torch.zeros(24))
    torch.testing.assert_close(first[0], x[0] @ a[0][0, 0].T @ b[0][0, 0].T, rtol=1e-5, atol=1e-5)
    b[0][0, 0, :, :4].copy_(torch.zeros(24, 4))  # vLLM's set_lora writes in place
    a[0][0].mul_(2.0)
    second = run()
    torch.testing.assert_close(second[0], x[0] @ a[0][0, 0].T @ b[0][0, 0].T, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(second[0], first[0])


def test_a_step_without_adapters_and_a_shape_mismatch_fall_back() -> None:
    """No slot present: nothing is added. Rows that are not the step's tokens (padding): upstream handles them."""
    gen = torch.Generator().manual_seed(5)
    a = (torch.randn(2, 1, 8, 16, generator=gen),)
    b = (torch.randn(2, 1, 12, 8, generator=gen),)
    w = wrapper_at([-1, -1, -1])
    x = torch.randn(3, 16, generator=gen)
    buffers = torch.zeros(1, 3, 8)
    FUSED["add_shrink"](w, buffers, x, a, 1.0)
    assert torch.equal(buffers, torch.zeros(1, 3, 8))
    calls = []

    class Recorder:
        @staticmethod
        def add_shrink(*args: object, **kwargs: object) -> None:
            calls.append("shrink")

        @staticmethod
        def add_expand(*args: object, **kwargs: object) -> None:
            calls.append("expand")

    methods = make_wrapper_methods(Recorder)
    x5 = torch.randn(5, 16, generator=gen)
    methods["add_shrink"](w, torch.zeros(1, 5, 8), x5, a, 1.0)
    methods["add_expand"](w, torch.zeros(5, 12), torch.zeros(1, 5, 8), b, (12,))
    assert calls == ["shrink", "expand"]


def test_a_slot_of_zeros_is_skipped_with_upstreams_result() -> None:
    """A module the adapter does not target holds zeros in its slot: shrink leaves zeros where upstream writes
    x @ 0, expand adds nothing; a slot written later is computed again. (Rows of slot -1 are not written by the fused
    shrink: vLLM's callers hand in zeroed buffers, and the fused expand reads nothing for those rows.)"""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(5, 16, generator=gen)
    a = (torch.zeros(3, 1, 8, 16), torch.zeros(3, 1, 8, 16))
    b = (torch.zeros(3, 1, 12, 8), torch.zeros(3, 1, 4, 8))
    for indices in ([1, 1, 1, 1, 1], [1, 0, 1, -1, 0]):
        w = wrapper_at(indices)
        written = torch.tensor(indices) >= 0
        buffers = torch.ones(2, 5, 8)
        FUSED["add_shrink"](w, buffers, x, a, 1.0)
        assert torch.equal(buffers[:, written], torch.zeros(2, int(written.sum()), 8))
        tuple_buffers = (torch.ones(5, 8), torch.ones(5, 8))
        FUSED["add_shrink"](w, tuple_buffers, x, a, 1.0)
        assert all(torch.equal(t[written], torch.zeros(int(written.sum()), 8)) for t in tuple_buffers)
        start = torch.randn(5, 16, generator=gen)
        out = start.clone()
        FUSED["add_expand"](w, out, torch.randn(2, 5, 8, generator=gen), b, (12, 4))
        assert torch.equal(out, start)
    a[1][1, 0].copy_(torch.randn(8, 16, generator=gen))
    w = wrapper_at([1, 1, 1, 1, 1])
    buffers = torch.zeros(2, 5, 8)
    FUSED["add_shrink"](w, buffers, x, a, 1.0)
    torch.testing.assert_close(buffers[1], x @ a[1][1, 0].T)
    assert torch.equal(buffers[0], torch.zeros(5, 8))


@pytest.mark.parametrize(("level", "ops", "fused"), [("1", True, True), ("ops", True, False), ("0", False, False)])
def test_register_installs_each_level(level: str, ops: bool, fused: bool) -> None:
    """What vLLM's plugin loader gets, per GENENV_VLLM_GROUPED_LORA (in a fresh interpreter: it patches vLLM)."""
    import os
    import subprocess
    import sys

    probe = (
        "from genenv.inference.vllm_plugin import register; register(); register()\n"
        "from vllm.lora.ops.torch_ops import lora_ops\n"
        "from vllm.lora.punica_wrapper.punica_cpu import PunicaWrapperCPU as W\n"
        "print(lora_ops.bgmv_shrink.__module__, W.add_shrink.__module__, W.update_metadata.__module__)\n"
    )
    env = {**os.environ, "GENENV_VLLM_GROUPED_LORA": level}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    bgmv, shrink, metadata = out.stdout.split()
    assert (bgmv == "genenv.inference.vllm_plugin") is ops
    assert (shrink == "genenv.inference.vllm_plugin") is fused
    assert (metadata == "genenv.inference.vllm_plugin") is fused
