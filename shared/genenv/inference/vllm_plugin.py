"""A vLLM general plugin (entry point ``vllm.general_plugins``): grouped LoRA matmuls for vLLM's CPU LoRA path.

Why it exists: vLLM 0.32 serves LoRA on CPU with the pure-torch punica ops (``vllm.lora.ops.torch_ops``), which
gather a full copy of the adapter's weight matrix for every token (``weights[token_indices]``) and then do one
matrix-vector product per token (``einsum("bi,boi->bo")``). For SmolLM2-135M with a rank-16 adapter on the four
attention projections that is ~9 MB of weight copies per token; measured on 2 cores, serving through an adapter
took 5–8× as long as the base model (bench/rollout_throughput.py, rows (a) and (b)). No released vLLM or library
offers another CPU path, so this plugin replaces the four ``bgmv`` functions with an equivalent that groups the
tokens by adapter slot and does one matrix product per slot present in the batch (usually one or two). Slot
indexing, the ``limit``/``common_len`` and slicing rules are kept exactly as upstream; any shape the upstream
code handles differently (a single input row broadcast to many outputs) is passed to the upstream function.

vLLM loads general plugins in every process (API server, engine core, workers), so the engine that runs the model
is patched. ``GENENV_VLLM_GROUPED_LORA=0`` turns the plugin off (to compare, or if a vLLM upgrade changes the ops).
"""

from __future__ import annotations

import os
from typing import Any

ENV_SWITCH = "GENENV_VLLM_GROUPED_LORA"
_FUNCTIONS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")


def _grouped_matmul(inputs: Any, weights: Any, indices: Any, dtype: Any) -> Any:
    """Row t of the result = inputs[t] @ weights[indices[t]].T, one matmul per distinct slot."""
    import torch

    if weights.dim() == 4:
        weights = weights.squeeze(dim=1)
    inputs = inputs.to(dtype=dtype)
    slots = torch.unique(indices)
    if slots.numel() == 1:
        return inputs @ weights[int(slots[0])].to(dtype=dtype).T
    out = inputs.new_empty((inputs.shape[0], weights.shape[1]))
    for slot in slots.tolist():
        rows = (indices == slot).nonzero().squeeze(1)
        out[rows] = inputs[rows] @ weights[slot].to(dtype=dtype).T
    return out


def make_ops(upstream: Any) -> dict[str, Any]:
    """The replacement functions, falling back to ``upstream``'s for shapes outside the per-token case."""

    def per_token(inputs: Any, indices: Any, output: Any) -> bool:
        rows = inputs.shape[0]
        return bool(inputs.dim() == 2 and indices.dim() == 1 and indices.shape[0] == rows == output.shape[0])

    def bgmv_shrink(inputs: Any, lora_a: Any, output: Any, indices: Any, scaling: float = 1.0) -> None:
        if not per_token(inputs, indices, output):
            return upstream.bgmv_shrink(inputs, lora_a, output, indices, scaling)  # type: ignore[no-any-return]
        outputs = _grouped_matmul(inputs, lora_a, indices, output.dtype)
        output[:, : outputs.shape[1]] = scaling * outputs[:]
        return None

    def bgmv_expand(inputs: Any, lora_b: Any, output: Any, indices: Any, add_inputs: bool = True) -> None:
        if not per_token(inputs, indices, output):
            return upstream.bgmv_expand(inputs, lora_b, output, indices, add_inputs)  # type: ignore[no-any-return]
        outputs = _grouped_matmul(inputs, lora_b, indices, output.dtype)
        common = min(outputs.shape[1], output.shape[1])
        if add_inputs:
            output[:, :common] += outputs[:, :common]
        else:
            output[:, :common] = outputs[:, :common]
        return None

    def bgmv_expand_slice(
        inputs: Any, lora_b: Any, output: Any, indices: Any, slice_offset: int, slice_size: int,
        add_inputs: bool = True,
    ) -> None:
        if not per_token(inputs, indices, output):
            return upstream.bgmv_expand_slice(  # type: ignore[no-any-return]
                inputs, lora_b, output, indices, slice_offset, slice_size, add_inputs
            )
        outputs = _grouped_matmul(inputs, lora_b, indices, output.dtype)
        if add_inputs:
            output[:, slice_offset : slice_offset + slice_size] += outputs[:]
        else:
            output[:, slice_offset : slice_offset + slice_size] = outputs[:]
        return None

    return {"bgmv_shrink": bgmv_shrink, "bgmv_expand": bgmv_expand, "bgmv_expand_slice": bgmv_expand_slice}


def register() -> None:
    """Entry point: patch the CPU punica ops (idempotent; vLLM may call it more than once per process)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return
    try:
        from vllm.lora.ops.torch_ops import lora_ops
        from vllm.lora.punica_wrapper import punica_cpu
    except ImportError:  # no vLLM, or one without the torch ops: nothing to patch
        return
    if getattr(lora_ops, "_genenv_grouped", False):
        return
    upstream = type("Upstream", (), {name: staticmethod(getattr(lora_ops, name)) for name in _FUNCTIONS})
    for name, fn in make_ops(upstream).items():
        # lora_ops' sgmv_* functions look bgmv_* up in their module at call time; punica_cpu imported the names.
        setattr(lora_ops, name, fn)
        if hasattr(punica_cpu, name):
            setattr(punica_cpu, name, fn)
    lora_ops._genenv_grouped = True  # type: ignore[attr-defined]
    from vllm.logger import init_logger

    # vLLM's logger, so the line shows in the server's log (ours has no handler inside vLLM's processes).
    init_logger("vllm.plugins.genenv_grouped_lora").info(
        "genenv: grouped LoRA matmuls installed for vLLM's CPU LoRA ops (pid %d)", os.getpid()
    )
