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
