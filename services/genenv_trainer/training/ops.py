"""Pieces both losses share: per-token log-probabilities, the reference policy, the k3 KL, memory peaks.

Written by hand rather than taken from TRL: the installed environment has no TRL, and its trainers (GRPOTrainer,
SFT with weights) generate or batch on their own, while here rollouts and generations come from the database
with their recorded logprobs. What remains is a few tensor lines, which are kept here and tested directly.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from genenv_trainer.training.data import Batch

LOGIT_CHUNK_TOKENS = 1024
"""Completion positions whose full-vocabulary logits exist at once (per chunk, all rows of the batch together)."""


def _core(model: torch.nn.Module) -> Any:
    """The transformers model under a PEFT wrapper (LoRA layers are injected into it, so it runs the adapter)."""
    wrapped: Any = model
    return wrapped.get_base_model() if hasattr(wrapped, "get_base_model") else wrapped


def token_logprobs(
    model: torch.nn.Module, batch: Batch, *, temperature: float = 1.0, chunk_tokens: int = LOGIT_CHUNK_TOKENS
) -> torch.Tensor:
    """log π_T(token_{t+1} | tokens_≤t) at the completion positions (``batch.completion_mask``), float32, shape
    [B, T-1], 0 at every other position, where π_T is the distribution sampled at temperature T:
    softmax(logits / T) (T ≤ 0 means greedy: the model's own, T = 1).

    Only the completion positions go through the LM head: every loss reads those alone, and the head over the whole
    sequence was most of a step when prompts are long and the vocabulary large (Qwen2.5 on BFCL: ≈ 560 prompt
    tokens before a 40-token reply, 151,936 logits per position; forward + backward of 4 × 600 tokens took 42 s
    before, 14 s after; docs/models.md). They go a chunk at a time, each chunk checkpointed when gradients are on,
    so full-vocabulary fp32 logits never exist for every position at once: with a 150k vocabulary and 9k tokens
    they alone would be 5 GB, and their gradient as much again.
    """
    core = _core(model)
    hidden = core.get_decoder()(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
    ).last_hidden_state[:, :-1, :]
    head = core.get_output_embeddings()
    labels = batch.input_ids[:, 1:]
    scale = 1.0 / temperature if temperature > 0 else 1.0
    rows, cols = batch.completion_mask.bool().nonzero(as_tuple=True)
    picked, targets = hidden[rows, cols], labels[rows, cols]  # [N, H], [N]

    def chunk_logprobs(h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = head(h).float() * scale
        # gather − logsumexp is log_softmax at the label without materialising the [c, V] log-softmax.
        return logits.gather(-1, y.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)

    parts: list[torch.Tensor] = []
    for start in range(0, picked.shape[0], max(1, chunk_tokens)):
        h, y = picked[start : start + chunk_tokens], targets[start : start + chunk_tokens]
        if torch.is_grad_enabled() and h.requires_grad:
            parts.append(checkpoint(chunk_logprobs, h, y, use_reentrant=False))
        else:
            parts.append(chunk_logprobs(h, y))
    out = torch.zeros(labels.shape, dtype=torch.float32, device=hidden.device)
    if not parts:
        return out
    return out.index_put((rows, cols), torch.cat(parts))


def use_gradient_checkpointing(model: torch.nn.Module, batch: Batch, min_tokens: int) -> None:
    """Recompute decoder activations in backward for batches of sequences of ``min_tokens`` or more (0 = never):
    activation memory then holds one layer's worth per token instead of every layer's."""
    core = _core(model)
    on = min_tokens > 0 and batch.input_ids.shape[1] >= min_tokens
    if on and not core.is_gradient_checkpointing:
        core.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif not on and core.is_gradient_checkpointing:
        core.gradient_checkpointing_disable()


@torch.no_grad()
def reference_logprobs(model: torch.nn.Module, batch: Batch, *, temperature: float = 1.0) -> torch.Tensor:
    """Log-probs under the reference policy: the base model, i.e. the LoRA adapter switched off."""
    with model.disable_adapter():  # type: ignore[operator]
        return token_logprobs(model, batch, temperature=temperature)


class NonFiniteError(FloatingPointError):
    """A loss or gradient norm that is NaN or infinite: the step is not applied and no adapter is written."""


def require_finite(**values: float) -> None:
    """Raise NonFiniteError naming every value that is not finite."""
    bad = {k: v for k, v in values.items() if not math.isfinite(v)}
    if bad:
        raise NonFiniteError("non-finite " + ", ".join(f"{k}={v}" for k, v in bad.items()) + ": step not applied")


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token KL(π‖π_ref) estimate k3 = r − 1 − log r with r = π_ref/π (unbiased, ≥ 0, low variance)."""
    log_ratio = ref_logp - logp
    return torch.exp(log_ratio) - 1.0 - log_ratio


def masked_mean_per_row(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the masked positions of each row (rows without positions give 0)."""
    return (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


@dataclass
class Peak:
    """Peak memory seen while a block ran, in MiB: the process's RSS, and on CUDA the tensors allocated and what the
    caching allocator reserved from the driver (the figure that decides an out-of-memory)."""

    rss_mb: float = 0.0
    cuda_mb: float | None = None
    cuda_reserved_mb: float | None = None


def current_rss_mb() -> float:
    """Resident set size of this process now, in MiB (Linux /proc; elsewhere the lifetime peak)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


@contextmanager
def peak_memory(device: torch.device, interval_s: float = 0.05) -> Iterator[Peak]:
    """Track the process's peak RSS (sampled) and CUDA allocation while the block runs.

    ru_maxrss is the peak of the whole process life, useless in a long-lived worker, so RSS is sampled.
    """
    peak = Peak(rss_mb=current_rss_mb())
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval_s):
            peak.rss_mb = max(peak.rss_mb, current_rss_mb())

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    thread = threading.Thread(target=sample, name="peak-rss", daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()
        peak.rss_mb = max(peak.rss_mb, current_rss_mb())
        if device.type == "cuda":
            peak.cuda_mb = torch.cuda.max_memory_allocated(device) / 2**20
            peak.cuda_reserved_mb = torch.cuda.max_memory_reserved(device) / 2**20


class Stopwatch:
    """Wall-clock seconds since creation."""

    def __init__(self) -> None:
        self._t0 = time.perf_counter()

    @property
    def seconds(self) -> float:
        """Seconds elapsed."""
        return time.perf_counter() - self._t0


def summarise(steps: Sequence[dict[str, float]], seconds: float) -> dict[str, Any]:
    """Means of the per-step losses and KL, sums of tokens, and the per-step records themselves."""
    def mean(key: str) -> float | None:
        vals = [s[key] for s in steps if key in s]
        return sum(vals) / len(vals) if vals else None

    return {
        "steps": len(steps),
        "loss": mean("loss"),
        "kl": mean("kl"),
        "clip_fraction": mean("clip_fraction"),
        "tokens": int(sum(s.get("tokens", 0.0) for s in steps)),
        "seconds": seconds,
        "seconds_per_step": mean("seconds"),
        "per_step": [dict(s) for s in steps],
    }
