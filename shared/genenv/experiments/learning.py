"""The learning experiment's arm-level analysis (issue 35; docs/experiments/preregistration-learning.md, Part C).
Pure.

The experiment's four arms live in several experiment files (genenv and static_augmentation in one, the filter arm
and the learning-progress arm in one each, or one file per replicate), each an experiment with its own members. An
experiment pairs its own modes by replicate; this module pairs members of any number of experiments by what makes
them a replicate here: the **replicate seed** (the ``random_seeds`` entry each member ran with). It refuses, with
the reason, anything that would make a pair unfair: two members of one arm with one seed, a seed outside the
pre-registered list, different held-out items (benchmark, split, limit or measured size), and unequal planned agent
attempts per epoch (genenv.experiments.budget.check_equal_attempts).

What it states, exactly as pre-registered:
- the primary endpoint: final held-out accuracy (after the last epoch), genenv − each baseline, paired by replicate
  seed over the replicates in which every arm finished, the t interval over training runs at level 1 − 0.05/3
  (Bonferroni over the three contrasts) with the 95 % interval, the sign-flip p and every replicate's value beside
  it, and the pre-registered decision (``decide``);
- the manipulation checks: a genenv member whose trained simulator wrote no tasks makes every contrast
  inconclusive; each arm's realised agent attempts per epoch against genenv's (20 %); the filter arm's share of
  groups with reward variance; the learning-progress arm's share of drawn seeds with a p̂ history;
- the secondary data efficiency: cumulative realised agent attempts until an arm's held-out accuracy first reaches
  static_augmentation's final accuracy (its mean over the analysed replicates), per arm, "not reached" counted;
- the other secondary endpoints, descriptive: per arm and epoch the held-out accuracy, the cumulative agent attempts,
  the mean seed-batch p̂, the in-band share and the share of valid tasks that repeat an earlier epoch's (``dynamics``),
  and per arm and level the final held-out accuracy (``levels``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from genenv.contracts.runs import GrpoBudget, RunConfig, RunStatus, SeedSampling
from genenv.experiments.budget import check_equal_attempts
from genenv.experiments.stats import (
    DETECTED_BELOW,
    INCONCLUSIVE,
    REFUTED,
    SUPPORTED,
    Decision,
    Interval,
    mean_ci,
    replicate_ci,
    smallest_detectable,
)

GENENV: Final = "genenv"
STATIC: Final = "static_augmentation"
FILTER: Final = "filter"
LEARNING_PROGRESS: Final = "learning_progress"
ARMS: Final = (GENENV, STATIC, FILTER, LEARNING_PROGRESS)
"""The pre-registered arms, in the report's order (genenv first; the others are its baselines)."""
REGISTERED_SEEDS: Final = (70157, 45463, 14488, 78243, 80675, 83619, 87738, 80315, 60987, 27207, 73929, 21074,
                           46313, 42356, 24824, 16251)
"""Part C's replicate seeds in their pre-registered order (replicate r uses the r-th)."""
SMALLEST_EFFECT: Final = 0.03
FAMILY_ALPHA: Final = 0.05
SECONDARY_CONFIDENCE: Final = 0.95
ATTEMPTS_TOLERANCE: Final = 0.2
"""An arm's realised agent attempts per epoch must lie within this share of genenv's (manipulation check)."""
_EPS: Final = 1e-9  # "reaches" is ≥: an accuracy equal to the target reaches it despite float noise


class PairingError(ValueError):
    """Members that cannot be paired as pre-registered; the message says which and why."""


def arm_of(config: RunConfig) -> str:
    """The arm a member's config runs: its mode, except that random_simulator is the filter arm with
    ``agent.budget: informative`` and the learning-progress arm with ``seed_sampling: learning_progress``."""
    if config.mode != "random_simulator":
        return config.mode
    progress = config.seed_sampling is SeedSampling.LEARNING_PROGRESS
    informative = config.agent.budget is GrpoBudget.INFORMATIVE
    if progress and informative:
        raise PairingError("a random_simulator member with both seed_sampling learning_progress and agent.budget "
                           "informative is neither pre-registered arm")
    if progress:
        return LEARNING_PROGRESS
    return FILTER if informative else "random_simulator"


# ---------------------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class HeldOut:
    """What the held-out accuracy was measured on: members are comparable only on the same items."""

    benchmark: str | None
    split: str | None
    limit: int | None
    items: int | None = None
    """Items of the member's final evaluation (its summary's n); None when not recorded."""

    def setting(self) -> tuple[str | None, str | None, int | None]:
        """The configured part (benchmark, split, limit)."""
        return self.benchmark, self.split, self.limit


@dataclass(frozen=True)
class EpochPoint:
    """One closed epoch of a member."""

    epoch: int
    heldout_accuracy: float | None
    agent_attempts: int
    """Realised agent attempts: the epoch's valid tasks × G (genenv.experiments.budget.realised_agent_attempts)."""
    groups_with_variance_share: float | None = None
    batch_p_hat: float | None = None
    """Mean seed-batch p̂ of the epoch (over its batches with a valid attempt)."""
    in_band_share: float | None = None
    """Share of the epoch's seed batches with |p̂ − α| ≤ k_min (the epoch summary's)."""
    valid_tasks: int = 0
    repeated_tasks: int = 0
    """Valid tasks whose text repeats a valid task of an earlier epoch of the same run."""
    heldout_by_level: dict[str, float] = field(default_factory=dict)
    """Held-out accuracy per level (the benchmark's categories)."""

    @property
    def repeat_share(self) -> float | None:
        """repeated_tasks / valid_tasks; None without valid tasks."""
        return self.repeated_tasks / self.valid_tasks if self.valid_tasks else None


@dataclass(frozen=True)
class LearningMember:
    """One member run of one of the experiments, with what the analysis needs of it."""

    experiment_id: str
    run_id: str
    seed: int
    """The replicate seed: the experiment's ``random_seeds`` entry this member ran with."""
    config: RunConfig
    status: RunStatus
    epochs: tuple[EpochPoint, ...]
    heldout: HeldOut
    final_valid_share: float | None = None
    """Reply validity of the final evaluation: 1 − malformed / n."""
    simulator_used: bool | None = None
    """Members whose simulator trains: True when a trained simulator adapter wrote tasks (the dose); else None."""
    dose: str | None = None
    """The dose line of such a member (genenv.experiments.paired.dose_line)."""
    seed_history_share: float | None = None
    """Seed batches of epochs ≥ 2 whose seed had a p̂ in two or more earlier epochs, over those batches."""
    wall_s: float | None = None
    """Sum of the member's stored phase seconds."""

    @property
    def arm(self) -> str:
        """The arm this member runs (``arm_of``)."""
        return arm_of(self.config)

    def final_accuracy(self) -> float | None:
        """Held-out accuracy after the last epoch (``config.epochs − 1``); None without that evaluation."""
        last = self.config.epochs - 1
        return next((p.heldout_accuracy for p in self.epochs if p.epoch == last), None)


def seed_history_share(batches: Iterable[tuple[int, str, bool]], min_history: int = 2,
                       from_epoch: int = 2) -> float | None:
    """Of the seed batches (epoch, seed id, scored) of epochs ≥ ``from_epoch``, the share whose seed was scored (had
    a p̂) in at least ``min_history`` earlier epochs of the run; None without such batches."""
    scored: dict[str, set[int]] = {}
    rows = sorted(batches)
    for epoch, seed, has_p in rows:
        if has_p:
            scored.setdefault(seed, set()).add(epoch)
    later = [(epoch, seed) for epoch, seed, _ in rows if epoch >= from_epoch]
    if not later:
        return None
    with_history = sum(1 for epoch, seed in later if sum(1 for e in scored.get(seed, ()) if e < epoch) >= min_history)
    return with_history / len(later)


# ---------------------------------------------------------------------------------------------------------- design


@dataclass(frozen=True)
class LearningDesign:
    """The pre-registered settings the analysis applies."""

    arms: tuple[str, ...] = ARMS
    smallest_effect: float = SMALLEST_EFFECT
    family_alpha: float = FAMILY_ALPHA
    registered_seeds: tuple[int, ...] | None = REGISTERED_SEEDS
    """None: any seed (a design that registered none); else members with another seed are refused."""
    seed: int = 0
    """The sign-flip permutation test's random stream (exact below 2^n ≤ 9999 flips)."""

    @property
    def baselines(self) -> tuple[str, ...]:
        """The arms compared with genenv."""
        return tuple(a for a in self.arms if a != GENENV)

    @property
    def confidence(self) -> float:
        """The primary interval's level: 1 − family α / contrasts (Bonferroni)."""
        return 1.0 - self.family_alpha / max(1, len(self.baselines))


# --------------------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Contrast:
    """genenv − one baseline on final held-out accuracy, paired by replicate seed."""

    baseline: str
    seeds: list[int]
    genenv: list[float]
    baseline_values: list[float]
    differences: list[float]
    interval: Interval | None
    """t interval over training runs at the design's level (1 − 0.05/3), with the sign-flip p."""
    interval_95: Interval | None
    detectable: float | None
    """Smallest true difference this many pairs detect with 80 % power at the primary level and observed SD."""
    decision: Decision
    reason: str


@dataclass(frozen=True)
class Incomplete:
    """A replicate seed left out because some arm did not finish it."""

    seed: int
    missing: dict[str, str]
    """arm → why (no member, its status, no held-out score after the last epoch)."""


@dataclass(frozen=True)
class ArmSummary:
    """One arm over the analysed replicates."""

    arm: str
    final_accuracy: Interval | None
    final_valid_share: Interval | None
    attempts_per_epoch: float | None
    """Realised agent attempts per epoch, mean over epochs and replicates."""
    attempts_ratio: float | None
    """attempts_per_epoch / genenv's."""
    groups_with_variance_share: float | None
    """Mean over epochs and replicates."""
    seed_history_share: float | None
    """Mean over replicates (meaningful for learning_progress)."""
    wall_s: Interval | None


@dataclass(frozen=True)
class EfficiencyRow:
    """Cumulative realised agent attempts until one arm's held-out accuracy first reaches the target."""

    arm: str
    per_replicate: dict[int, int | None]
    """replicate seed → attempts, None when never reached."""
    reached: int
    not_reached: int
    attempts: Interval | None
    """95 % t interval over the replicates that reached the target."""


@dataclass(frozen=True)
class DataEfficiency:
    """The secondary endpoint: target and one row per arm."""

    target: float | None
    rows: list[EfficiencyRow]


@dataclass(frozen=True)
class ArmEpoch:
    """One arm after one epoch, over the analysed replicates (secondary, descriptive: 95 % t intervals)."""

    arm: str
    epoch: int
    heldout_accuracy: Interval | None
    attempts_so_far: float | None
    """Cumulative realised agent attempts up to and including this epoch, mean over replicates."""
    batch_p_hat: Interval | None
    in_band_share: Interval | None
    repeat_share: Interval | None


@dataclass(frozen=True)
class ArmLevel:
    """One arm's final held-out accuracy on one level (category), over the analysed replicates."""

    arm: str
    level: str
    final_accuracy: Interval | None


@dataclass(frozen=True)
class LearningResult:
    """Everything the learning report states; report.json is this object as JSON."""

    arms: list[str]
    confidence: float
    smallest_effect: float
    experiments: list[str]
    analysed_seeds: list[int]
    incomplete: list[Incomplete]
    planned_attempts_per_epoch: int
    contrasts: list[Contrast]
    summaries: list[ArmSummary]
    efficiency: DataEfficiency
    checks: list[str]
    """Every manipulation check that failed, as a sentence (empty: all passed)."""
    dose_lines: list[str]
    members: list[dict[str, object]] = field(default_factory=list)
    """Every analysed member: arm, seed, run, experiment, final accuracy, valid share."""
    dynamics: list[ArmEpoch] = field(default_factory=list)
    """Per arm and epoch: held-out accuracy, attempts so far, p̂, in-band share, repeat share (secondary)."""
    levels: list[ArmLevel] = field(default_factory=list)
    """Per arm and level: final held-out accuracy (secondary)."""


# --------------------------------------------------------------------------------------------------------- pairing


def _label(m: LearningMember) -> str:
    return f"{m.arm} seed {m.seed} (run {m.run_id}, experiment {m.experiment_id})"


def check_pairable(members: Sequence[LearningMember], design: LearningDesign) -> int:
    """The planned agent attempts per epoch the members share; PairingError naming the members and the reason when
    they may not be paired (see the module docstring)."""
    if not members:
        raise PairingError("no members to analyse")
    by_key: dict[tuple[str, int], LearningMember] = {}
    for m in members:
        if m.arm not in design.arms:
            raise PairingError(f"{_label(m)} is in no arm of the design ({', '.join(design.arms)}); pass only the "
                               "learning experiment's experiments (--experiment)")
        if design.registered_seeds is not None and m.seed not in design.registered_seeds:
            raise PairingError(f"{_label(m)} ran with a seed outside the pre-registered replicate seeds "
                               f"{list(design.registered_seeds)}")
        other = by_key.get((m.arm, m.seed))
        if other is not None:
            raise PairingError(f"two members of arm {m.arm} ran with replicate seed {m.seed} (runs {other.run_id} "
                               f"and {m.run_id}): a replicate seed pairs one member per arm; pass each replicate once")
        by_key[(m.arm, m.seed)] = m
    missing = [a for a in design.arms if not any(m.arm == a for m in members)]
    if missing:
        raise PairingError(f"arm(s) {', '.join(missing)} have no member: pass their experiments (or analyse fewer "
                           "arms with --arm)")
    settings = {m.heldout.setting() for m in members}
    if len(settings) > 1:
        seen = sorted(f"{_label(m)}: {m.heldout.setting()}" for m in members)
        raise PairingError("the members' held-out measurements differ (benchmark, split, limit): " + "; ".join(seen))
    sizes = {m.heldout.items for m in members if m.heldout.items is not None}
    if len(sizes) > 1:
        seen = sorted(f"{_label(m)}: {m.heldout.items}" for m in members if m.heldout.items is not None)
        raise PairingError("the members' held-out evaluations have different numbers of items: " + "; ".join(seen))
    try:
        return check_equal_attempts({_label(m): m.config for m in members})
    except ValueError as exc:
        raise PairingError(f"unequal agent attempts: {exc}") from None


def _seed_order(seeds: Iterable[int], design: LearningDesign) -> list[int]:
    registered = {s: i for i, s in enumerate(design.registered_seeds or ())}
    return sorted(set(seeds), key=lambda s: (registered.get(s, len(registered)), s))


def _why_incomplete(m: LearningMember | None) -> str | None:
    if m is None:
        return "no member"
    if m.status is not RunStatus.COMPLETED:
        return f"{m.status.value} after {len(m.epochs)} closed epoch(s)"
    if m.final_accuracy() is None:
        return f"no held-out score after its last epoch ({m.config.epochs - 1})"
    return None


def complete_replicates(members: Sequence[LearningMember], design: LearningDesign) -> tuple[
        list[int], list[Incomplete]]:
    """(seeds in which every arm finished with a final held-out score, the others with what each arm lacks), in
    the pre-registered seed order."""
    by_key = {(m.arm, m.seed): m for m in members}
    done: list[int] = []
    left: list[Incomplete] = []
    for seed in _seed_order((m.seed for m in members), design):
        why = {arm: w for arm in design.arms if (w := _why_incomplete(by_key.get((arm, seed)))) is not None}
        if why:
            left.append(Incomplete(seed, why))
        else:
            done.append(seed)
    return done, left


# ------------------------------------------------------------------------------------------------------- decisions


def decide(iv: Interval | None, smallest_effect: float, manipulated: bool = True) -> tuple[Decision, str]:
    """The pre-registered rule on genenv − baseline (first that applies): detected, below the smallest effect of
    interest when the interval lies inside (0, SESOI); supported when it lies above 0 (reaching SESOI or beyond);
    refuted at this scale when it lies below SESOI; inconclusive otherwise, and always when genenv's manipulation
    check failed (``manipulated`` False) or fewer than two replicates were paired (``iv`` None)."""
    if not manipulated:
        return INCONCLUSIVE, "genenv's manipulation check failed: a trained simulator wrote no tasks in some member"
    if iv is None:
        return INCONCLUSIVE, "fewer than two complete replicates: one training run says nothing about training runs"
    flat = " (no spread between replicates: a zero-width interval)" if iv.degenerate else ""
    if iv.low > 0 and iv.high < smallest_effect:
        return DETECTED_BELOW, f"the interval lies inside (0, {smallest_effect:g}){flat}"
    if iv.low > 0:
        return SUPPORTED, f"the interval lies above 0 and reaches {smallest_effect:g}{flat}"
    if iv.high < smallest_effect:
        worse = "; it lies below 0: genenv was worse" if iv.high < 0 else ""
        return REFUTED, f"the interval lies below {smallest_effect:g}, excluding an advantage of interest{worse}{flat}"
    return INCONCLUSIVE, f"the interval includes both 0 and {smallest_effect:g}"


def _contrast(by_key: Mapping[tuple[str, int], LearningMember], seeds: Sequence[int], baseline: str,
              design: LearningDesign, manipulated: bool) -> Contrast:
    g = [_final(by_key[(GENENV, s)]) for s in seeds]
    b = [_final(by_key[(baseline, s)]) for s in seeds]
    diffs = [x - y for x, y in zip(g, b, strict=True)]
    iv = replicate_ci(diffs, design.confidence, design.seed)
    iv95 = replicate_ci(diffs, SECONDARY_CONFIDENCE, design.seed)
    detectable = None
    if len(diffs) >= 2:
        mean = sum(diffs) / len(diffs)
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
        detectable = smallest_detectable(sd, len(diffs), design.confidence)
    decision, reason = decide(iv, design.smallest_effect, manipulated)
    return Contrast(baseline, list(seeds), g, b, diffs, iv, iv95, detectable, decision, reason)


def _final(m: LearningMember) -> float:
    value = m.final_accuracy()
    assert value is not None, "complete replicates have a final held-out accuracy"
    return value


# ------------------------------------------------------------------------------------------------- data efficiency


def attempts_to_reach(member: LearningMember, target: float) -> int | None:
    """Cumulative realised agent attempts up to and including the first epoch after which the member's held-out
    accuracy reached ``target`` (≥); None when it never did."""
    total = 0
    for p in sorted(member.epochs, key=lambda p: p.epoch):
        total += p.agent_attempts
        if p.heldout_accuracy is not None and p.heldout_accuracy >= target - _EPS:
            return total
    return None


def data_efficiency(by_key: Mapping[tuple[str, int], LearningMember], seeds: Sequence[int],
                    arms: Sequence[str]) -> DataEfficiency:
    """The target is static_augmentation's final held-out accuracy, mean over the analysed replicates; None (and
    no rows' attempts) without static_augmentation or replicates."""
    finals = [_final(by_key[(STATIC, s)]) for s in seeds if (STATIC, s) in by_key]
    target = sum(finals) / len(finals) if finals else None
    rows: list[EfficiencyRow] = []
    for arm in arms:
        per: dict[int, int | None] = {s: None if target is None else attempts_to_reach(by_key[(arm, s)], target)
                                      for s in seeds}
        hits = [float(v) for v in per.values() if v is not None]
        rows.append(EfficiencyRow(arm, per, len(hits), len(per) - len(hits),
                                  mean_ci(hits, SECONDARY_CONFIDENCE) if hits else None))
    return DataEfficiency(target, rows)


# ----------------------------------------------------------------------------------------------------------- arms


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ci(values: Sequence[float]) -> Interval | None:
    return mean_ci(values, SECONDARY_CONFIDENCE) if values else None


def _summaries(analysed: Sequence[LearningMember], arms: Sequence[str]) -> list[ArmSummary]:
    def attempts(arm: str) -> float | None:
        return _mean([float(p.agent_attempts) for m in analysed if m.arm == arm for p in m.epochs])

    reference = attempts(GENENV)
    out: list[ArmSummary] = []
    for arm in arms:
        group = [m for m in analysed if m.arm == arm]
        per_epoch = attempts(arm)
        out.append(ArmSummary(
            arm=arm,
            final_accuracy=_ci([_final(m) for m in group]),
            final_valid_share=_ci([v for m in group if (v := m.final_valid_share) is not None]),
            attempts_per_epoch=per_epoch,
            attempts_ratio=per_epoch / reference if per_epoch is not None and reference else None,
            groups_with_variance_share=_mean([v for m in group for p in m.epochs
                                              if (v := p.groups_with_variance_share) is not None]),
            seed_history_share=_mean([v for m in group if (v := m.seed_history_share) is not None]),
            wall_s=_ci([v for m in group if (v := m.wall_s) is not None]),
        ))
    return out


def dynamics(analysed: Sequence[LearningMember], arms: Sequence[str]) -> list[ArmEpoch]:
    """Each arm after each epoch, over the members that closed it: the secondary p̂ dynamics, repeat share and the
    held-out curve (against epochs and against cumulative realised agent attempts)."""
    out: list[ArmEpoch] = []
    for arm in arms:
        group = [sorted(m.epochs, key=lambda p: p.epoch) for m in analysed if m.arm == arm]
        cumulative = [dict(zip((p.epoch for p in points),
                               itertools.accumulate(p.agent_attempts for p in points), strict=True))
                      for points in group]
        for epoch in sorted({p.epoch for points in group for p in points}):
            at = [p for points in group for p in points if p.epoch == epoch]
            out.append(ArmEpoch(
                arm=arm, epoch=epoch,
                heldout_accuracy=_ci([v for p in at if (v := p.heldout_accuracy) is not None]),
                attempts_so_far=_mean([float(c[epoch]) for c in cumulative if epoch in c]),
                batch_p_hat=_ci([v for p in at if (v := p.batch_p_hat) is not None]),
                in_band_share=_ci([v for p in at if (v := p.in_band_share) is not None]),
                repeat_share=_ci([v for p in at if (v := p.repeat_share) is not None]),
            ))
    return out


def levels(analysed: Sequence[LearningMember], arms: Sequence[str]) -> list[ArmLevel]:
    """Each arm's final held-out accuracy per level, over the analysed replicates (levels in name order)."""
    out: list[ArmLevel] = []
    for arm in arms:
        finals = [p.heldout_by_level for m in analysed if m.arm == arm
                  for p in m.epochs if p.epoch == m.config.epochs - 1]
        for level in sorted({name for f in finals for name in f}):
            out.append(ArmLevel(arm, level, _ci([f[level] for f in finals if level in f])))
    return out


def _checks(analysed: Sequence[LearningMember], summaries: Sequence[ArmSummary]) -> tuple[bool, list[str]]:
    """(genenv's manipulation held, every failed check as a sentence)."""
    failed: list[str] = []
    unused = [m for m in analysed if m.arm == GENENV and not m.simulator_used]
    for m in unused:
        failed.append(f"genenv seed {m.seed} (run {m.run_id}): no trained simulator wrote tasks "
                      f"({m.dose or 'no dose recorded'}); every contrast is inconclusive")
    for s in summaries:
        if s.arm != GENENV and s.attempts_ratio is not None and abs(s.attempts_ratio - 1.0) > ATTEMPTS_TOLERANCE:
            failed.append(f"{s.arm}: realised agent attempts per epoch {s.attempts_per_epoch:.0f} are "
                          f"{s.attempts_ratio:.2f} × genenv's (outside ±{ATTEMPTS_TOLERANCE:.0%})")
    return not unused, failed


# ------------------------------------------------------------------------------------------------------------ main


def analyse_learning(members: Sequence[LearningMember], design: LearningDesign | None = None) -> LearningResult:
    """Pair the members by replicate seed and apply the pre-registered analysis (PairingError when they may not be
    paired). Deterministic given ``design.seed``."""
    d = design or LearningDesign()
    if GENENV not in d.arms:
        raise PairingError("the design has no genenv arm to compare")
    planned = check_pairable(members, d)
    seeds, incomplete = complete_replicates(members, d)
    by_key = {(m.arm, m.seed): m for m in members}
    analysed = [by_key[(arm, s)] for arm in d.arms for s in seeds]
    summaries = _summaries(analysed, d.arms)
    manipulated, checks = _checks(analysed, summaries)
    contrasts = [_contrast(by_key, seeds, b, d, manipulated) for b in d.baselines]
    return LearningResult(
        arms=list(d.arms), confidence=d.confidence, smallest_effect=d.smallest_effect,
        experiments=sorted({m.experiment_id for m in members}), analysed_seeds=seeds, incomplete=incomplete,
        planned_attempts_per_epoch=planned, contrasts=contrasts, summaries=summaries,
        efficiency=data_efficiency(by_key, seeds, d.arms), checks=checks,
        dose_lines=[f"seed {m.seed}: {m.dose}" for m in analysed if m.dose is not None],
        members=[{"arm": m.arm, "seed": m.seed, "run_id": m.run_id, "experiment_id": m.experiment_id,
                  "final_accuracy": m.final_accuracy(), "final_valid_share": m.final_valid_share,
                  "wall_s": m.wall_s} for m in analysed],
        dynamics=dynamics(analysed, d.arms), levels=levels(analysed, d.arms),
    )
