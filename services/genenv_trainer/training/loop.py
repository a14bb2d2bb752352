"""The optimiser-step loop GRPO and RWR share: each method supplies its batches and its loss; the loop owns the
micro-batch forward, the finite checks, gradient clipping, the AdamW step, the injected fault and the counters."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import torch

from genenv_trainer.training.data import Batch, Example, collate
from genenv_trainer.training.ops import (
    Stopwatch,
    reference_logprobs,
    require_finite,
    summarise,
    token_logprobs,
    use_gradient_checkpointing,
)
from genenv_trainer.training.optim import adamw


@dataclass(frozen=True)
class StepOptions:
    """How a step runs beyond the run config: the sampling temperature the losses compare distributions at (logits
    / T: GRPO's rollouts were sampled at the run's T; RWR trains the model's own distribution, T = 1) and the
    trainer's settings."""

    temperature: float = 1.0
    checkpointing_min_tokens: int = 0
    fault_nan_at_step: int | None = None
    step_delay_s: float = 0.0


class Sample(Protocol):
    """What the loop reads of a sample: whether it was written in the epoch being trained."""

    @property
    def fresh(self) -> bool: ...


S = TypeVar("S", bound=Sample)
Loss = Callable[[Sequence[S], bool], dict[str, float]]
"""A method's loss: accumulate the gradient of one optimiser batch (``poison``: inject a non-finite loss); its
statistics."""


class EarlyStop(Exception):
    """Raised by a loss to end the pass before this step is applied; the step's partial gradient is discarded."""


@dataclass
class Steps:
    """What the loop did: per-step statistics, the examples seen (fresh and older), the batches planned and skipped
    (no gradient), the early stop if any (and at which step), and the seconds since it started."""

    steps: list[dict[str, float]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    planned: int = 0
    skipped: int = 0
    stop: EarlyStop | None = None
    stopped_at: int | None = None
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """Means and sums over the steps (``ops.summarise``)."""
        return summarise(self.steps, self.seconds)


def run_steps(
    model: torch.nn.Module,
    batches: Sequence[Sequence[S]],
    loss: Loss[S],
    *,
    learning_rate: float,
    max_grad_norm: float,
    older: str,
    optimizer: torch.optim.Optimizer | None = None,
    options: StepOptions = StepOptions(),
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    has_gradient: Callable[[Sequence[S]], bool] | None = None,
    extra: Callable[[Sequence[S]], dict[str, float]] | None = None,
    clock: Stopwatch | None = None,
) -> Steps:
    """One AdamW step per batch: ``loss`` accumulates the gradient, which is clipped to ``max_grad_norm`` and must be
    finite (NonFiniteError before the step is applied). A batch without gradient (``has_gradient`` False) takes no
    step; an EarlyStop ends the loop. Examples not fresh are counted as ``<older>_seen``; ``extra`` adds per-step
    statistics; ``clock`` (default: now) is where the seconds count from."""
    clock = clock or Stopwatch()
    params = [p for p in model.parameters() if p.requires_grad]
    # The runner passes the optimiser resumed from the parent version; without one, a fresh AdamW.
    optimizer = optimizer or adamw(model, learning_rate, None)[0]
    out = Steps(seen={"examples_seen": 0, "fresh_seen": 0, f"{older}_seen": 0}, planned=len(batches))
    for i, batch in enumerate(batches):
        if has_gradient is not None and not has_gradient(batch):
            # No gradient, so no optimiser step (AdamW would still move the weights by its momentum).
            out.skipped += 1
            continue
        step_clock = Stopwatch()
        try:
            stats = loss(batch, options.fault_nan_at_step == i)
        except EarlyStop as exc:
            optimizer.zero_grad(set_to_none=True)
            out.stop, out.stopped_at = exc, i
            break
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
        require_finite(grad_norm=stats["grad_norm"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        fresh = sum(s.fresh for s in batch)
        out.seen["examples_seen"] += len(batch)
        out.seen["fresh_seen"] += fresh
        out.seen[f"{older}_seen"] += len(batch) - fresh
        stats["sequences"] = float(len(batch))
        if extra is not None:
            stats.update(extra(batch))
        stats["seconds"] = step_clock.seconds
        out.steps.append(stats)
        if on_step is not None:
            on_step(i, stats)
        if options.step_delay_s:
            time.sleep(options.step_delay_s)  # fault injection (trainer.step_delay_s); 0 in production
    out.seconds = clock.seconds
    return out


def forward(
    model: torch.nn.Module,
    examples: Sequence[Example],
    *,
    values: Sequence[Sequence[float] | None] | None,
    pad_id: int,
    device: torch.device,
    options: StepOptions,
) -> tuple[Batch, torch.Tensor, torch.Tensor]:
    """One micro-batch on ``device`` (``values`` aligned to its completions), and its completion log-probs under the
    policy and under the reference (the adapter off), at ``options.temperature``."""
    b = collate(examples, pad_id=pad_id, values=values).to(device)
    use_gradient_checkpointing(model, b, options.checkpointing_min_tokens)
    logp = token_logprobs(model, b, temperature=options.temperature)
    ref = reference_logprobs(model, b, temperature=options.temperature)
    return b, logp, ref


def backward(loss: torch.Tensor, *, poison: bool) -> float:
    """``loss.backward()`` unless the loss is not finite (NonFiniteError; ``poison`` makes it NaN); its value."""
    if poison:
        loss = loss * float("nan")
    value = float(loss.detach())
    require_finite(loss=value)
    loss.backward()
    return value
