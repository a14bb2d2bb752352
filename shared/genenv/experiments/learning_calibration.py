"""Part A and B of the learning pre-registration from stored calibration runs (docs/experiments/
preregistration-learning.md). Pure.

The calibration's nine doses are nine experiments (genenv.experiments.agent_calibration.calibration_grid), each
static_augmentation × the three calibration seeds; their members become DoseOutcome rows for the pre-registered rule
(choose_agent_dose), and the chosen dose's replicate spread sizes Part C exactly as Part B says: σ_d = √2 · s, the
replicates needed for an effect of 0.03 at level 1 − 0.05/3 with 80 % power, the wall time of one replicate
W = 4 × the mean wall time of the chosen dose's runs × 1.2, n_run = min(n, 16, ⌊72 h / W⌋) and at least 3, and the
smallest detectable effect at n_run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from genenv.experiments.agent_calibration import (
    BaseOutcome,
    CalibrationDecision,
    CalibrationRule,
    DoseOutcome,
    choose_agent_dose,
    difference_sd,
    replicates_needed,
)
from genenv.experiments.learning import (
    FAMILY_ALPHA,
    REGISTERED_SEEDS,
    SMALLEST_EFFECT,
    STATIC,
    LearningMember,
    PairingError,
)
from genenv.experiments.stats import smallest_detectable

CALIBRATION_SEEDS: Final = (15745, 80132, 44812)
"""Part A's replicate seeds."""
CONTRASTS: Final = 3
POWER: Final = 0.8
BUDGET_S: Final = 72 * 3600.0
MIN_REPLICATES: Final = 3
ARMS_PER_REPLICATE: Final = 4
OVERHEAD: Final = 1.2
"""genenv's and the random simulators' generation every epoch, and genenv's RWR (Part B)."""


@dataclass(frozen=True)
class Sizing:
    """Part B's numbers."""

    s: float | None
    """Sample SD of the chosen dose's final held-out accuracy over its replicates."""
    sigma_d: float | None
    replicates_needed: int | None
    run_wall_s: float | None
    """Mean wall time of the chosen dose's runs (sum of their stored phase seconds)."""
    replicate_wall_s: float | None
    """W = 4 × run_wall_s × 1.2."""
    n_run: int | None
    budget_exceeded: bool
    smallest_detectable: float | None
    """At n_run, level 1 − 0.05/3, 80 % power."""
    seeds: list[int]
    """The first n_run replicate seeds of Part C."""


@dataclass(frozen=True)
class CalibrationResult:
    """The calibration table, the decision and the sizing."""

    base: BaseOutcome
    decision: CalibrationDecision
    sizing: Sizing
    skipped: list[str]
    """Members left out (unfinished, no final score), each with why."""
    outcomes: list[DoseOutcome] = field(default_factory=list)
    """Every analysed run: its dose, replicate seed, final accuracy and reply validity."""
    rule: CalibrationRule = field(default_factory=CalibrationRule)


def calibration_outcomes(
    members: Sequence[LearningMember], seeds: Sequence[int] | None = CALIBRATION_SEEDS
) -> tuple[list[DoseOutcome], list[str]]:
    """One DoseOutcome per finished member (its agent learning rate and steps per epoch, final held-out accuracy
    and reply validity), and the members left out with why. PairingError for a member that is not a calibration
    run (another mode, another seed), two members of one dose and seed, or held-out items that differ."""
    settings = {m.heldout.setting() for m in members}
    if len(settings) > 1:
        raise PairingError(f"the calibration runs' held-out measurements differ: {sorted(map(str, settings))}")
    sizes = {m.heldout.items for m in members if m.heldout.items is not None}
    if len(sizes) > 1:
        raise PairingError(f"the calibration runs' held-out evaluations have different sizes: {sorted(sizes)}")
    seen: dict[tuple[float, int, int], str] = {}
    outcomes: list[DoseOutcome] = []
    skipped: list[str] = []
    for m in members:
        lr, steps = m.config.agent.learning_rate, m.config.agent.max_steps_per_epoch
        where = f"run {m.run_id} (lr {lr:g} × {steps} steps, seed {m.seed})"
        if m.config.mode != STATIC:
            raise PairingError(f"{where} runs {m.config.mode}; the calibration runs static_augmentation only")
        if seeds is not None and m.seed not in seeds:
            raise PairingError(f"{where} ran with a seed outside the calibration's {list(seeds)}")
        if (key := (lr, steps, m.seed)) in seen:
            raise PairingError(f"{where} repeats run {seen[key]}: one run per dose and seed")
        seen[key] = m.run_id
        final = m.final_accuracy()
        if m.status.value != "completed" or final is None or m.final_valid_share is None:
            skipped.append(f"{where}: {m.status.value}, final held-out accuracy {final}, "
                           f"reply validity {m.final_valid_share}")
            continue
        outcomes.append(DoseOutcome(lr, steps, m.seed, final, m.final_valid_share))
    return outcomes, skipped


def size(decision: CalibrationDecision, wall_s: Sequence[float], registered: Sequence[int] = REGISTERED_SEEDS,
         effect: float = SMALLEST_EFFECT) -> Sizing:
    """Part B from the chosen dose (its replicate SD) and the wall times of its runs."""
    confidence = 1.0 - FAMILY_ALPHA / CONTRASTS
    chosen = decision.chosen
    s = chosen.accuracy_sd if chosen is not None else None
    sigma = difference_sd(s) if s is not None else None
    needed = replicates_needed(sigma, effect, confidence, POWER) if sigma is not None else None
    run_wall = sum(wall_s) / len(wall_s) if wall_s else None
    w = ARMS_PER_REPLICATE * run_wall * OVERHEAD if run_wall is not None else None
    n_run: int | None = None
    exceeded = False
    if sigma is not None:
        affordable = math.floor(BUDGET_S / w) if w else len(registered)
        exceeded = affordable < MIN_REPLICATES
        n_run = max(MIN_REPLICATES, min(needed if needed is not None else len(registered), len(registered),
                                        affordable))
    sde = smallest_detectable(sigma, n_run, confidence, POWER) if sigma is not None and n_run is not None else None
    return Sizing(s, sigma, needed, run_wall, w, n_run, exceeded, sde, list(registered[:n_run or 0]))


def calibrate(members: Sequence[LearningMember], base: BaseOutcome,
              rule: CalibrationRule = CalibrationRule()) -> CalibrationResult:
    """The pre-registered rule on the stored calibration runs, and Part B's sizing from its chosen dose."""
    outcomes, skipped = calibration_outcomes(members)
    decision = choose_agent_dose(outcomes, base, rule)
    chosen = decision.chosen
    walls = [] if chosen is None else [
        m.wall_s for m in members if m.wall_s is not None and m.final_accuracy() is not None
        and (m.config.agent.learning_rate, m.config.agent.max_steps_per_epoch) == (chosen.learning_rate,
                                                                                   chosen.steps)]
    return CalibrationResult(base, decision, size(decision, walls), skipped, list(outcomes), rule)
