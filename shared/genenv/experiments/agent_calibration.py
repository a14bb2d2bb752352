"""The agent's dose, calibrated before the learning experiment (issue 35; pre-registered in
docs/experiments/preregistration-learning.md). Pure.

A grid of agent learning rate × optimiser steps per epoch runs under static_augmentation only, and the rule looks
at nothing but the agent's own held-out gain and the validity of its replies, never at a difference between modes
(as Exp 0 chose the simulator's dose: genenv.experiments.mechanism.choose_dose). The calibration's
replicate-to-replicate spread at the chosen dose then sizes the learning experiment.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from genenv.contracts.experiments import ExperimentCreate
from genenv.experiments.stats import smallest_detectable

TOLERANCE = 1e-9
"""Float slack in the ≥ comparisons (a gain of exactly 0.05 qualifies)."""


@dataclass(frozen=True)
class DoseOutcome:
    """One training run of the calibration: its dose, and the agent's held-out accuracy and valid-reply share
    after the run's last epoch (valid = the reply parsed: 1 − malformed / n of the benchmark's summary)."""

    learning_rate: float
    steps: int
    replicate_seed: int
    accuracy: float
    valid_share: float


@dataclass(frozen=True)
class BaseOutcome:
    """The base agent (no adapter, greedy, so one measurement) on the same held-out items."""

    accuracy: float
    valid_share: float


@dataclass(frozen=True)
class CalibrationRule:
    """The pre-registered rule: a dose qualifies when its mean held-out gain over its replicates is ≥ ``min_gain``
    and no replicate's valid share fell below ``collapse_ratio`` × the base's (a collapse of reply form)."""

    min_gain: float = 0.05
    collapse_ratio: float = 0.9


@dataclass(frozen=True)
class DoseSummary:
    """One dose over its replicates."""

    learning_rate: float
    steps: int
    replicates: int
    mean_accuracy: float
    mean_gain: float
    min_valid_share: float
    accuracy_sd: float | None
    collapsed: bool
    qualifies: bool


@dataclass(frozen=True)
class CalibrationDecision:
    """The chosen dose and why. ``criterion_met`` False: no dose qualified and ``chosen`` is the fallback (the
    largest mean gain among the doses that kept validity, else the smallest dose), which the report must say."""

    chosen: DoseSummary | None
    criterion_met: bool
    reason: str
    doses: list[DoseSummary]


def _order(d: DoseSummary) -> tuple[int, float]:
    # The smallest dose: fewest steps (they cost time in every epoch of every arm), then the lowest rate.
    return d.steps, d.learning_rate


def summarise(outcomes: Sequence[DoseOutcome], base: BaseOutcome, rule: CalibrationRule) -> list[DoseSummary]:
    """Every dose of ``outcomes`` over its replicates, smallest first."""
    by_dose: dict[tuple[int, float], list[DoseOutcome]] = {}
    for o in outcomes:
        by_dose.setdefault((o.steps, o.learning_rate), []).append(o)
    out = []
    for (steps, lr), runs in sorted(by_dose.items()):
        accs = [r.accuracy for r in runs]
        mean_acc = statistics.fmean(accs)
        min_valid = min(r.valid_share for r in runs)
        collapsed = min_valid < rule.collapse_ratio * base.valid_share - TOLERANCE
        gain = mean_acc - base.accuracy
        out.append(DoseSummary(
            learning_rate=lr, steps=steps, replicates=len(runs), mean_accuracy=mean_acc, mean_gain=gain,
            min_valid_share=min_valid, accuracy_sd=statistics.stdev(accs) if len(accs) > 1 else None,
            collapsed=collapsed, qualifies=not collapsed and gain >= rule.min_gain - TOLERANCE,
        ))
    return out


def _line(d: DoseSummary, base: BaseOutcome) -> str:
    return (f"lr {d.learning_rate:g} × {d.steps} steps/epoch: held-out {base.accuracy:.3f} → {d.mean_accuracy:.3f} "
            f"(gain {d.mean_gain:+.3f}, {d.replicates} replicates), valid share ≥ {d.min_valid_share:.3f} "
            f"(base {base.valid_share:.3f})")


def choose_agent_dose(
    outcomes: Sequence[DoseOutcome], base: BaseOutcome, rule: CalibrationRule = CalibrationRule()
) -> CalibrationDecision:
    """The smallest qualifying dose (fewest steps, then lowest learning rate). When none qualifies the decision
    says so and names the fallback: the largest mean gain among the doses that did not collapse (ties: the
    smaller dose), or, when every dose collapsed, the smallest dose."""
    doses = summarise(outcomes, base, rule)
    if not doses:
        return CalibrationDecision(None, False, "no dose was measured", [])
    qualifying = sorted((d for d in doses if d.qualifies), key=_order)
    if qualifying:
        best = qualifying[0]
        return CalibrationDecision(best, True, "criterion met: " + _line(best, base), doses)
    kept = [d for d in doses if not d.collapsed]
    if kept:
        best = min(kept, key=lambda d: (-d.mean_gain, *_order(d)))
        why = (f"no dose lifted held-out accuracy by ≥ {rule.min_gain:g} without a collapse; fallback, the largest "
               f"gain that kept validity: ")
    else:
        best = min(doses, key=_order)
        why = "every dose collapsed reply validity; fallback, the smallest dose: "
    return CalibrationDecision(best, False, why + _line(best, base), doses)


def calibration_grid(
    template: ExperimentCreate, learning_rates: Sequence[float], steps: Sequence[int]
) -> list[ExperimentCreate]:
    """One experiment per dose (rate-major order): the template with agent.learning_rate and
    agent.max_steps_per_epoch set and the dose in its name; every other field, the replicate seeds included,
    kept."""
    out = []
    for lr in learning_rates:
        for n in steps:
            agent = template.template.agent.model_copy(update={"learning_rate": lr, "max_steps_per_epoch": n})
            name = f"{template.name}-lr{lr:g}-s{n}"
            run = template.template.model_copy(update={"agent": agent, "name": name})
            out.append(ExperimentCreate.model_validate({**template.model_dump(), "name": name,
                                                        "template": run.model_dump()}))
    return out


def difference_sd(replicate_sd: float) -> float:
    """SD of a paired difference of two arms' final accuracies from one arm's replicate SD, taking the pairing's
    correlation as 0 (unknown before the run; a positive one only narrows the interval): √2 × SD."""
    return math.sqrt(2.0) * replicate_sd


def replicates_needed(
    sd: float, effect: float, confidence: float = 0.95, power: float = 0.8, max_replicates: int = 1000
) -> int | None:
    """The fewest replicates (≥ 2) whose paired t test detects ``effect`` with ``power`` at this SD of the paired
    differences: the smallest n with (t_{(1+confidence)/2, n−1} + z_power)·sd/√n ≤ effect
    (genenv.experiments.stats.smallest_detectable). None when even ``max_replicates`` is not enough."""
    if effect <= 0 or sd < 0:
        raise ValueError("effect must be > 0 and sd ≥ 0")
    for n in range(2, max_replicates + 1):
        detectable = smallest_detectable(sd, n, confidence, power)
        if detectable is not None and detectable <= effect + TOLERANCE:
            return n
    return None
