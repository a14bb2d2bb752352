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

Second level (``make_wrapper_methods``): with the ops grouped, what remained of the adapter's cost was Python — per
LoRA layer and per forward pass, one op call per slice (q, k and v are three), each finding the slots present again
(``torch.unique``, a host sync) and allocating and slicing buffers: about 80 small torch calls per decoder layer,
a few milliseconds per step on a 135M model whose whole step takes tens of milliseconds. So the CPU punica wrapper's
``add_shrink``/``add_expand`` are replaced too: the slots present are found once per step (``update_metadata``),
and each layer does one matrix product for all its slices — A of every slice concatenated, B as one block-diagonal
matrix — cached per layer and slot and rebuilt when vLLM writes new weights into that slot (the stacked tensors'
in-place version counter). Numerics stay upstream's: shrink in fp32 into vLLM's fp32 buffer, expand in the output
dtype. One deliberate difference: a token with slot -1 (a request without an adapter) gets no LoRA term, which is
what vLLM documents for -1 and what its GPU kernels do; upstream's torch ops index ``weights[-1]``, the last slot,
which adds that slot's adapter to base-model requests whenever every slot is in use.

vLLM loads general plugins in every process (API server, engine core, workers), so the engine that runs the model
is patched. ``GENENV_VLLM_GROUPED_LORA=0`` turns the plugin off (to compare, or if a vLLM upgrade changes the ops);
``=ops`` installs only the grouped ops, not the fused wrapper methods (to measure what each level buys).
"""

from __future__ import annotations

import os
from collections.abc import Callable
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


# ---------------------------------------------------------------- the punica wrapper's methods

_GROUPS = "_genenv_groups"  # (tokens, [(slot, row indices or None for all rows)]) of the current step
_CACHE = "_genenv_fused"  # {(id of a layer's stacked tuple, slot): (version counters, fused matrix)}


def step_groups(indices: Any) -> tuple[int, list[tuple[int, Any]]]:
    """The adapter slots present among the step's tokens, each with its rows (None: every row). Slot -1 (no adapter)
    is left out: those rows get no LoRA term."""
    import torch

    slots = torch.unique(indices).tolist()
    active = [int(s) for s in slots if s >= 0]
    if len(slots) == 1 and active:
        return int(indices.shape[0]), [(active[0], None)]
    return int(indices.shape[0]), [(s, (indices == s).nonzero().squeeze(1)) for s in active]


def _fused(owner: Any, stacked: tuple[Any, ...], slot: int, build: Callable[[list[Any]], Any]) -> Any:
    """``build`` of the slot's per-slice matrices, cached until vLLM writes into any of the stacked tensors; None
    when they are all zero. vLLM wraps every linear layer it can (the MLP's too) once LoRA is on, and a slot holds
    zeros for the modules its adapter does not target (the run default targets attention only): their LoRA term is
    exactly zero, and computing it was half of the adapter's cost on SmolLM2 (py-spy, simulator generation)."""
    cache: dict[tuple[int, int], tuple[tuple[int, ...], Any]] = owner.__dict__.setdefault(_CACHE, {})
    versions = tuple(t._version for t in stacked)
    key = (id(stacked[0]), slot)
    hit = cache.get(key)
    if hit is not None and hit[0] == versions:
        return hit[1]
    blocks = [t[slot, 0] for t in stacked]
    fused = build(blocks) if any(bool(b.any()) for b in blocks) else None
    cache[key] = (versions, fused)
    return fused


def _shrink_matrix(blocks: list[Any]) -> Any:
    """[in, n·r] fp32: x @ it gives every slice's x @ A_i.T side by side."""
    import torch

    return torch.cat(blocks, dim=0).to(torch.float32).T.contiguous()


def _expand_matrix(blocks: list[Any]) -> Any:
    """[n·r, Σ out_i]: the B_i.T on the diagonal, so [h_1 … h_n] @ it gives every slice's h_i @ B_i.T side by side."""
    import torch

    return torch.block_diag(*(b.T for b in blocks)).contiguous()  # type: ignore[no-untyped-call]


def _put_rows(target: Any, rows: Any, value: Any) -> None:
    """target[rows] = value (zeros when value is None); rows None means every row."""
    if rows is not None:
        target[rows] = 0 if value is None else value
    elif value is None:
        target.zero_()
    else:
        target.copy_(value)


def make_wrapper_methods(upstream: Any) -> dict[str, Any]:
    """``update_metadata``, ``add_shrink`` and ``add_expand`` for vLLM's ``PunicaWrapperCPU``; ``upstream`` holds the
    original functions, used for any call whose shapes are not the per-token case computed here."""
    import torch

    def update_metadata(self: Any, *args: Any, **kwargs: Any) -> None:
        upstream.update_metadata(self, *args, **kwargs)
        setattr(self, _GROUPS, step_groups(self.token_lora_indices))

    def groups_for(self: Any, rows: int) -> list[tuple[int, Any]] | None:
        groups = getattr(self, _GROUPS, None)
        return groups[1] if groups is not None and groups[0] == rows else None

    def add_shrink(self: Any, y: Any, x: Any, lora_a_stacked: tuple[Any, ...], scale: float, **kwargs: Any) -> Any:
        x = x.view(-1, x.shape[-1])
        groups = groups_for(self, x.shape[0])
        n = len(lora_a_stacked)
        as_tensor = isinstance(y, torch.Tensor)
        if groups is None or (as_tensor and (y.dim() != 3 or y.shape[0] != n)) or (not as_tensor and len(y) != n):
            return upstream.add_shrink(self, y, x, lora_a_stacked, scale, **kwargs)
        rank = lora_a_stacked[0].shape[2]
        # Token-first views of vLLM's buffer: one [tokens, n, rank] view of the tensor, or each slice's [tokens, rank].
        targets = [y.transpose(0, 1)] if as_tensor else [t.view(-1, rank) for t in y]
        for slot, rows in groups:
            a = _fused(self, lora_a_stacked, slot, _shrink_matrix)
            if a is None:  # upstream writes x @ 0 = 0 into these rows
                for target in targets:
                    _put_rows(target, rows, None)
                continue
            xs = x if rows is None else x[rows]
            h = xs.to(torch.float32) @ a  # [tokens, n·rank]
            if scale != 1.0:
                h.mul_(scale)
            values = [h.view(h.shape[0], n, rank)] if as_tensor else list(h.split(rank, dim=1))
            for target, value in zip(targets, values, strict=True):
                _put_rows(target, rows, value)
        return None

    def add_expand(
        self: Any, y: Any, x: Any, lora_b_stacked: tuple[Any, ...], output_slices: tuple[int, ...],
        offset_start: int = 0, add_inputs: bool = True, **kwargs: Any,
    ) -> Any:
        flat = y.view(-1, y.shape[-1])
        groups = groups_for(self, flat.shape[0])
        n = len(lora_b_stacked)
        if groups is None or len(output_slices) != n or len(x) != n:
            return upstream.add_expand(self, y, x, lora_b_stacked, output_slices, offset_start, add_inputs, **kwargs)
        width = sum(output_slices)
        target = flat[:, offset_start : offset_start + width]
        if not add_inputs:
            target.zero_()  # rows of slot -1 then hold zeros, as upstream's overwrite with a zero adapter would
        for slot, rows in groups:
            b = _fused(self, lora_b_stacked, slot, _expand_matrix)
            if b is None:  # adds zero
                continue
            parts = [x[i] if rows is None else x[i][rows] for i in range(n)]
            hs = parts[0] if n == 1 else torch.cat(parts, dim=1)  # [tokens, n·rank]
            delta = hs.to(y.dtype) @ b.to(y.dtype)  # [tokens, Σ out_i]
            if rows is None:
                target.add_(delta)
            else:
                target.index_add_(0, rows, delta)
        return None

    return {"update_metadata": update_metadata, "add_shrink": add_shrink, "add_expand": add_expand}


def register() -> None:
    """Entry point: patch the CPU punica ops (idempotent; vLLM may call it more than once per process)."""
    level = os.environ.get(ENV_SWITCH, "1")
    if level == "0":
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
    if level != "ops":
        # The wrapper's methods: upstream's originals stay reachable for the shapes the fused path does not cover.
        cls = punica_cpu.PunicaWrapperCPU
        original = type("UpstreamWrapper", (), {
            "update_metadata": cls.update_metadata, "add_shrink": cls.add_shrink, "add_expand": cls.add_expand})
        for name, fn in make_wrapper_methods(original).items():
            setattr(cls, name, fn)
    lora_ops._genenv_grouped = True  # type: ignore[attr-defined]
    from vllm.logger import init_logger

    # vLLM's logger, so the line shows in the server's log (ours has no handler inside vLLM's processes).
    init_logger("vllm.plugins.genenv_grouped_lora").info(
        "genenv: grouped LoRA matmuls installed for vLLM's CPU LoRA ops%s (pid %d)",
        "" if level == "ops" else " and fused per layer", os.getpid()
    )
