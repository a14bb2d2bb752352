"""GRPO for the agent, on stored rollouts: group-normalised advantages, clipped ratio, k3 KL to the base model.

Hand-written (see ops.py for why not TRL): the rollouts were sampled earlier by vLLM and stored with their
token logprobs, so the update is the clipped surrogate against those recorded logprobs, not a generate-then-train
loop.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from genenv.contracts.runs import AgentTrainConfig
from genenv_trainer.records import RolloutGroup
from genenv_trainer.training.data import (
    Example,
    TooLongError,
    chat_prompt_ids,
    chunks,
    epoch_batches,
    make_example,
    text_completion_ids,
)
from genenv_trainer.training.loop import StepOptions, backward, forward, run_steps
from genenv_trainer.training.ops import k3_kl, masked_mean_per_row

# Added to the group std: keeps advantages finite for nearly-equal rewards (zero std is skipped outright).
ADVANTAGE_EPS = 1e-4
# Bounds the log importance ratio before exp(): a stale or mismatched recorded logprob must not overflow.
MAX_LOG_RATIO = 20.0


@dataclass(frozen=True)
class ScoredGroup:
    """A GRPO group with one advantage per attempt; ``signal`` False for a group without reward variance, kept
    only when such groups take budget (agent.budget = tasks): its advantages are all 0."""

    group: RolloutGroup
    advantages: list[float]
    signal: bool = True

    @property
    def size(self) -> int:
        """Sequences in the group."""
        return len(self.advantages)


@dataclass(frozen=True)
class GrpoSample:
    """One tokenised attempt: its advantage, its rollout-time logprobs (None → on-policy ratio 1), and whether it
    is replayed from an earlier epoch."""

    example: Example
    advantage: float
    old_logprobs: list[float] | None
    replayed: bool = False
    signal: bool = True

    @property
    def fresh(self) -> bool:
        """Sampled in the epoch being trained (not replayed)."""
        return not self.replayed


def group_advantages(rewards: Sequence[float], eps: float = ADVANTAGE_EPS) -> list[float] | None:
    """(r − mean) / (std + eps) over the group (population std); None when all rewards are equal."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if std == 0.0:
        return None
    return [(r - mean) / (std + eps) for r in rewards]


def score_groups(
    groups: Sequence[RolloutGroup], *, keep_zero_variance: bool = False
) -> tuple[list[ScoredGroup], dict[str, int]]:
    """Advantages per group; groups of fewer than 2 valid attempts are skipped and counted, and so are groups
    without reward variance (they carry no GRPO signal) unless ``keep_zero_variance``: then they are kept with
    zero advantages and ``signal=False``, so that they can take budget (agent.budget = tasks)."""
    scored: list[ScoredGroup] = []
    counts = {"groups": len(groups), "groups_too_small": 0, "groups_zero_variance": 0}
    for g in groups:
        if len(g.attempts) < 2:
            counts["groups_too_small"] += 1
            continue
        adv = group_advantages([a.reward for a in g.attempts])
        if adv is None:
            counts["groups_zero_variance"] += 1
            if keep_zero_variance:
                scored.append(ScoredGroup(g, [0.0] * len(g.attempts), signal=False))
            continue
        scored.append(ScoredGroup(g, adv))
    return scored, counts


def to_samples(
    groups: Sequence[ScoredGroup], tokenizer: Any, max_seq_len: int, *, replayed: bool = False
) -> tuple[list[GrpoSample], dict[str, int]]:
    """Tokenise attempts. The sampled token ids are used when stored; recorded logprobs are kept only when
    they match the completion token for token, otherwise the ratio falls back to on-policy (counted). An attempt
    longer than ``max_seq_len`` is dropped (counted), never cut."""
    samples: list[GrpoSample] = []
    counts = {"sequences": 0, "ratio_fallback": 0, "dropped_too_long": 0}
    for sg in groups:
        for attempt, adv in zip(sg.group.attempts, sg.advantages, strict=True):
            prompt = chat_prompt_ids(tokenizer, attempt.prompt_messages)
            completion = attempt.token_ids or text_completion_ids(tokenizer, attempt.response)
            try:
                ex = make_example(prompt, completion, max_seq_len)
            except TooLongError:
                counts["dropped_too_long"] += 1
                continue
            old = attempt.token_logprobs
            if old is None or len(old) != len(completion):
                old = None
                counts["ratio_fallback"] += 1
            counts["sequences"] += 1
            samples.append(GrpoSample(ex, adv, old, replayed, sg.signal))
    return samples, counts


def grpo_loss_backward(
    model: torch.nn.Module,
    batch: Sequence[GrpoSample],
    *,
    micro_batch_size: int,
    clip_ratio: float,
    kl_coef: float,
    pad_id: int,
    device: torch.device,
    options: StepOptions = StepOptions(),
    poison: bool = False,
) -> dict[str, float]:
    """Accumulate the gradient of one optimiser batch: per sequence the token-mean of
    −min(ρA, clip(ρ, 1±ε)A) + β_KL·k3, averaged over the batch's sequences (micro-batches sum to it).

    Sequences of groups without reward variance (``signal`` False) count in the batch's size but are not
    computed: their policy term is exactly 0, and their KL term is left out with them (what they take is budget).
    ρ and the KL compare distributions at the rollout temperature (logits / T), the ones actually sampled. Raises
    NonFiniteError before any backward of a micro-batch whose loss is not finite (``poison`` injects one)."""
    n = len(batch)
    totals = {"loss": 0.0, "kl_sum": 0.0, "clipped": 0.0, "tokens": 0.0, "ratio_sum": 0.0}
    for micro in chunks([s for s in batch if s.signal], micro_batch_size):
        b, logp, ref = forward(model, [s.example for s in micro], values=[s.old_logprobs for s in micro],
                               pad_id=pad_id, device=device, options=options)
        mask = b.completion_mask
        assert b.values is not None
        old = torch.where(torch.isnan(b.values), logp.detach(), b.values)
        ratio = torch.exp((logp - old).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
        adv = torch.tensor([s.advantage for s in micro], dtype=torch.float32, device=device).unsqueeze(1)
        clipped_ratio = ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio)
        policy_loss = -torch.min(ratio * adv, clipped_ratio * adv)
        kl = k3_kl(logp, ref)
        value = backward(masked_mean_per_row(policy_loss + kl_coef * kl, mask).sum() / n, poison=poison)
        with torch.no_grad():
            # Tokens whose gradient the clip removed: min() picked the (constant) clipped branch.
            active = (ratio * adv) > (clipped_ratio * adv)
            totals["loss"] += value
            totals["kl_sum"] += float((kl * mask).sum())
            totals["clipped"] += float((active.float() * mask).sum())
            totals["tokens"] += float(mask.sum())
            totals["ratio_sum"] += float((ratio * mask).sum())
    tokens = max(totals["tokens"], 1.0)
    return {
        "loss": totals["loss"],
        "kl": totals["kl_sum"] / tokens,
        "clip_fraction": totals["clipped"] / tokens,
        "mean_ratio": totals["ratio_sum"] / tokens,
        "tokens": totals["tokens"],
    }


def train_grpo(
    model: torch.nn.Module,
    samples: Sequence[GrpoSample],
    cfg: AgentTrainConfig,
    *,
    pad_id: int,
    device: torch.device,
    rng: random.Random,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    options: StepOptions = StepOptions(),
) -> dict[str, Any]:
    """One pass over the samples in AdamW steps of ``cfg.batch_size`` sequences, at most
    ``cfg.max_steps_per_epoch`` (gradient accumulation over ``cfg.micro_batch_size``); per-step and summary
    metrics. A non-finite loss or gradient norm raises NonFiniteError before that step is applied."""
    batches = epoch_batches(samples, batch_size=cfg.batch_size, max_steps=cfg.max_steps_per_epoch, rng=rng)

    def loss(batch: Sequence[GrpoSample], poison: bool) -> dict[str, float]:
        return grpo_loss_backward(model, batch, micro_batch_size=cfg.micro_batch_size, clip_ratio=cfg.clip_ratio,
                                  kl_coef=cfg.kl_coef, pad_id=pad_id, device=device, options=options, poison=poison)

    # A step that drew only groups without reward variance (budget = tasks) has no gradient and takes no step.
    done = run_steps(model, batches, loss, learning_rate=cfg.learning_rate, max_grad_norm=cfg.max_grad_norm,
                     older="replayed", optimizer=optimizer, options=options, on_step=on_step,
                     has_gradient=lambda batch: any(s.signal for s in batch),
                     extra=lambda batch: {"sequences_with_signal": float(sum(s.signal for s in batch))})
    return {**done.summary(), **done.seen, "planned_steps": done.planned, "steps_without_signal": done.skipped,
            "sequences_without_signal": sum(not s.signal for b in batches for s in b)}
