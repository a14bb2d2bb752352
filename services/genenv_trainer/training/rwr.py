"""Reward-weighted regression for the simulator: weighted NLL of the pool's in-band generations, KL to the initial
model as a regulariser, and a per-epoch trust region (KL to the version the epoch started from) as the cap.

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
    TooLongError,
    chat_prompt_ids,
    chunks,
    collate,
    epoch_batches,
    make_example,
    text_completion_ids,
)
from genenv_trainer.training.loop import EarlyStop, StepOptions, Steps, backward, forward, run_steps
from genenv_trainer.training.ops import Stopwatch, k3_kl, masked_mean_per_row, token_logprobs


@dataclass(frozen=True)
class RwrSample:
    """One tokenised generation (conditioning prompt → the simulator's raw output), its weight, and whether it
    was written in the epoch being trained (else it comes from the pool's earlier epochs)."""

    example: Example
    weight: float
    fresh: bool = True


class KlCapExceeded(EarlyStop):
    """The sampled KL to the epoch's starting simulator went over the cap: the step is abandoned."""

    def __init__(self, kl: float) -> None:
        super().__init__(f"sampled KL {kl:.4g} exceeds the cap")
        self.kl = kl


def to_samples(
    generations: Sequence[Generation], tokenizer: Any, max_seq_len: int, *, epoch: int | None = None
) -> tuple[list[RwrSample], dict[str, int]]:
    """Tokenise (task.prompt_messages → task.raw_text) pairs; a pair longer than ``max_seq_len`` is dropped and
    counted. ``epoch`` marks which generations are fresh (written in that epoch)."""
    samples: list[RwrSample] = []
    dropped = 0
    for g in generations:
        try:
            ex = make_example(chat_prompt_ids(tokenizer, g.prompt_messages), text_completion_ids(tokenizer, g.raw_text),
                              max_seq_len)
        except TooLongError:
            dropped += 1
            continue
        samples.append(RwrSample(ex, g.weight, epoch is None or g.epoch == epoch))
    return samples, {"sequences": len(samples), "dropped_too_long": dropped}


@torch.no_grad()
def start_logprobs(
    model: torch.nn.Module, samples: Sequence[RwrSample], *, micro_batch_size: int, pad_id: int, device: torch.device
) -> dict[int, list[float]]:
    """Per sample (by id), the completion's token log-probs under the model as it is before the epoch's first step:
    the anchor of the per-epoch trust region."""
    anchors: dict[int, list[float]] = {}
    for micro in chunks(samples, micro_batch_size):
        b = collate([s.example for s in micro], pad_id=pad_id).to(device)
        logp = token_logprobs(model, b)
        for row, s in enumerate(micro):
            anchors[id(s)] = logp[row][b.completion_mask[row].bool()].float().tolist()
    return anchors


def rwr_loss_backward(
    model: torch.nn.Module,
    batch: Sequence[RwrSample],
    *,
    micro_batch_size: int,
    kl_coef: float,
    kl_cap: float,
    pad_id: int,
    device: torch.device,
    anchors: dict[int, list[float]],
    options: StepOptions = StepOptions(),
    poison: bool = False,
) -> dict[str, float]:
    """Accumulate the gradient of Σ_i w_i·NLL_i/N + β_KL·KL_init over one optimiser batch, weights renormalised to
    mean 1 within the batch. Raises KlCapExceeded (before any backward of that micro-batch) as soon as the
    token-mean k3 KL to the epoch's starting policy (``anchors``) of the micro-batches seen so far exceeds
    ``kl_cap``, and NonFiniteError on a non-finite loss (``poison`` injects one)."""
    n = len(batch)
    mean_w = sum(s.weight for s in batch) / n
    totals = {"loss": 0.0, "nll_sum": 0.0, "kl_sum": 0.0, "step_kl_sum": 0.0, "tokens": 0.0}
    for micro in chunks(batch, micro_batch_size):
        b, logp, ref = forward(model, [s.example for s in micro], values=[anchors[id(s)] for s in micro],
                               pad_id=pad_id, device=device, options=options)
        mask = b.completion_mask
        assert b.values is not None
        step_kl = k3_kl(logp.detach(), torch.nan_to_num(b.values))
        step_kl_so_far = (totals["step_kl_sum"] + float((step_kl * mask).sum())) / (
            totals["tokens"] + float(mask.sum()))
        if step_kl_so_far > kl_cap:
            raise KlCapExceeded(step_kl_so_far)
        kl = k3_kl(logp, ref)
        w = torch.tensor([s.weight / mean_w for s in micro], dtype=torch.float32, device=device)
        nll = -masked_mean_per_row(logp, mask)
        totals["loss"] += backward((w * nll + kl_coef * masked_mean_per_row(kl, mask)).sum() / n, poison=poison)
        totals["nll_sum"] += float((-logp.detach() * mask).sum())
        totals["kl_sum"] += float((kl.detach() * mask).sum())
        totals["step_kl_sum"] += float((step_kl * mask).sum())
        totals["tokens"] += float(mask.sum())
    tokens = max(totals["tokens"], 1.0)
    return {"loss": totals["loss"], "nll": totals["nll_sum"] / tokens, "kl": totals["kl_sum"] / tokens,
            "kl_to_start": totals["step_kl_sum"] / tokens, "tokens": totals["tokens"]}


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
    options: StepOptions = StepOptions(),
) -> dict[str, Any]:
    """``cfg.passes_per_epoch`` passes over the pool in steps of ``cfg.batch_size``, at most
    ``cfg.max_steps_per_epoch``; stops early (and records it) when the KL to the epoch's starting simulator exceeds
    ``cfg.kl_cap``.

    The cap is a trust region per epoch, not a budget for the run: it is measured against the version this epoch
    started from, so the next epoch (starting from the version written now) may always take its first step.
    The KL is measured on each step's own batch before its update, i.e. it is the drift caused by the steps
    already taken; the offending step is abandoned, its partial gradient discarded.
    """
    if options.temperature != 1.0:
        raise ValueError(f"RWR trains the model's own distribution (temperature 1.0), not {options.temperature}")
    clock = Stopwatch()  # the anchors' forward pass counts in the job's seconds
    anchors = start_logprobs(model, samples, micro_batch_size=cfg.micro_batch_size, pad_id=pad_id, device=device)
    # passes_per_epoch reshuffled passes, each in whole batches, bounded by max_steps_per_epoch in total.
    batches = [b for _ in range(cfg.passes_per_epoch)
               for b in epoch_batches(samples, batch_size=cfg.batch_size, max_steps=cfg.max_steps_per_epoch, rng=rng)
               ][: cfg.max_steps_per_epoch]

    def loss(batch: Sequence[RwrSample], poison: bool) -> dict[str, float]:
        return rwr_loss_backward(model, batch, micro_batch_size=cfg.micro_batch_size, kl_coef=cfg.kl_coef,
                                 kl_cap=cfg.kl_cap, pad_id=pad_id, device=device, anchors=anchors, options=options,
                                 poison=poison)

    done = run_steps(model, batches, loss, learning_rate=cfg.learning_rate, max_grad_norm=cfg.max_grad_norm,
                     older="pool", optimizer=optimizer, options=options, on_step=on_step, clock=clock)
    return {**done.summary(), **_stop(done), **done.seen, "planned_steps": done.planned}


def _stop(done: Steps) -> dict[str, Any]:
    """Whether the KL cap ended the epoch early, at which KL and before which step."""
    if not isinstance(done.stop, KlCapExceeded):
        return {"early_stopped": False, "kl_at_stop": None, "stopped_at_step": None}
    return {"early_stopped": True, "kl_at_stop": done.stop.kl, "stopped_at_step": done.stopped_at}
