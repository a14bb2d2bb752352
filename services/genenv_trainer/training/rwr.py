"""Reward-weighted regression for the simulator: weighted NLL of in-band generations, KL to the initial model.

Hand-written (see ops.py for why not TRL): a weighted SFT step is a few lines once the sequence log-probs exist,
and the KL cap needs to look inside the step.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from genenv.contracts.runs import SimulatorTrainConfig
from genenv_trainer.records import Generation
from genenv_trainer.training.data import (
    Example,
    chat_prompt_ids,
    chunks,
    collate,
    make_example,
    step_batches,
    text_completion_ids,
)
from genenv_trainer.training.ops import (
    Stopwatch,
    k3_kl,
    masked_mean_per_row,
    reference_logprobs,
    summarise,
    token_logprobs,
)
from genenv_trainer.training.optim import adamw


@dataclass(frozen=True)
class RwrSample:
    """One tokenised generation (conditioning prompt → the simulator's raw output) and its weight."""

    example: Example
    weight: float


class KlCapExceeded(Exception):
    """The sampled KL to the initial simulator went over the cap: the step is abandoned."""

    def __init__(self, kl: float) -> None:
        super().__init__(f"sampled KL {kl:.4g} exceeds the cap")
        self.kl = kl


def to_samples(
    generations: Sequence[Generation], tokenizer: Any, max_seq_len: int
) -> tuple[list[RwrSample], dict[str, int]]:
    """Tokenise (task.prompt_messages → task.raw_text) pairs."""
    samples: list[RwrSample] = []
    truncated = 0
    for g in generations:
        ex = make_example(chat_prompt_ids(tokenizer, g.prompt_messages), text_completion_ids(tokenizer, g.raw_text),
                          max_seq_len)
        truncated += ex.truncated
        samples.append(RwrSample(ex, g.weight))
    return samples, {"sequences": len(samples), "truncated": truncated}


def rwr_loss_backward(
    model: torch.nn.Module,
    batch: Sequence[RwrSample],
    *,
    micro_batch_size: int,
    kl_coef: float,
    kl_cap: float,
    pad_id: int,
    device: torch.device,
) -> dict[str, float]:
    """Accumulate the gradient of Σ_i w_i·NLL_i/N + β_KL·KL over one optimiser batch, weights renormalised to
    mean 1 within the batch. Raises KlCapExceeded (before any backward of that micro-batch) as soon as the
    token-mean k3 KL of the micro-batches seen so far exceeds ``kl_cap``."""
    n = len(batch)
    mean_w = sum(s.weight for s in batch) / n
    totals = {"loss": 0.0, "nll_sum": 0.0, "kl_sum": 0.0, "tokens": 0.0}
    for micro in chunks(batch, micro_batch_size):
        b = collate([s.example for s in micro], pad_id=pad_id).to(device)
        logp = token_logprobs(model, b)
        ref = reference_logprobs(model, b)
        mask = b.completion_mask
        kl = k3_kl(logp, ref)
        kl_so_far = (totals["kl_sum"] + float((kl.detach() * mask).sum())) / (totals["tokens"] + float(mask.sum()))
        if kl_so_far > kl_cap:
            raise KlCapExceeded(kl_so_far)
        w = torch.tensor([s.weight / mean_w for s in micro], dtype=torch.float32, device=device)
        nll = -masked_mean_per_row(logp, mask)
        loss = (w * nll + kl_coef * masked_mean_per_row(kl, mask)).sum() / n
        loss.backward()
        totals["loss"] += float(loss.detach())
        totals["nll_sum"] += float((-logp.detach() * mask).sum())
        totals["kl_sum"] += float((kl.detach() * mask).sum())
        totals["tokens"] += float(mask.sum())
    tokens = max(totals["tokens"], 1.0)
    return {"loss": totals["loss"], "nll": totals["nll_sum"] / tokens, "kl": totals["kl_sum"] / tokens,
            "tokens": totals["tokens"]}


def train_rwr(
    model: torch.nn.Module,
    samples: Sequence[RwrSample],
    cfg: SimulatorTrainConfig,
    *,
    pad_id: int,
    device: torch.device,
    rng: random.Random,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, Any]:
    """Up to ``cfg.steps_per_epoch`` AdamW steps; stops early (and records it) when the KL cap is exceeded.

    The KL is measured on each step's own batch before its update, i.e. it is the drift caused by the steps
    already taken; the offending step is abandoned, its partial gradient discarded.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    # The runner passes the optimiser resumed from the parent version; without one, a fresh AdamW.
    optimizer = optimizer or adamw(model, cfg.learning_rate, None)[0]
    clock = Stopwatch()
    steps: list[dict[str, float]] = []
    stop: dict[str, Any] = {"early_stopped": False, "kl_at_stop": None, "stopped_at_step": None}
    for i, batch in enumerate(step_batches(samples, batch_size=cfg.batch_size, steps=cfg.steps_per_epoch, rng=rng)):
        step_clock = Stopwatch()
        try:
            stats = rwr_loss_backward(
                model, batch, micro_batch_size=cfg.micro_batch_size, kl_coef=cfg.kl_coef, kl_cap=cfg.kl_cap,
                pad_id=pad_id, device=device,
            )
        except KlCapExceeded as exc:
            optimizer.zero_grad(set_to_none=True)
            stop = {"early_stopped": True, "kl_at_stop": exc.kl, "stopped_at_step": i}
            break
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        stats["sequences"] = float(len(batch))
        stats["seconds"] = step_clock.seconds
        steps.append(stats)
        if on_step is not None:
            on_step(i, stats)
    return {**summarise(steps, clock.seconds), **stop, "planned_steps": cfg.steps_per_epoch}
