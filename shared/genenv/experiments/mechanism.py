"""The simulator-mechanism experiments' numbers (genenv_orchestrator.mechanism does the I/O): per-prompt outcomes,
arm summaries, paired contrasts, manipulation checks, the calibration's dose choice and the pre-registered decision
rules (docs/experiments/preregistration.md). Pure: no model, database or client is imported here.

Units. A *prompt* is one held-out seed's simulator prompt; an arm's simulator writes ``variations`` tasks for it and
the base agent attempts each valid task ``attempts`` times. The prompt's p̂ pools every attempt at its valid tasks
(the seed-batch p̂ the curriculum scores), so per-prompt |p̂ − α| is what the α band selects on. Contrasts are paired
by prompt (every arm answers the same prompts), pooled over replicates, with each replicate's own estimate beside
the interval: the interval is conditional on the adapters trained, and training randomness between replicates
shows only in the per-replicate column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from genenv.curriculum.reward import in_band
from genenv.experiments.stats import (
    DEFAULT_CONFIDENCE,
    SUPPORTED,
    Decision,
    Interval,
    classify,
    mean_ci,
    paired_diff_ci,
)


@dataclass(frozen=True)
class TaskOutcome:
    """One valid generated task: its canonical key (to spot copies and repeats), the base agent's successes k out of
    n valid attempts, and the domain's difficulty measures."""

    key: str
    k: int
    n: int
    difficulty: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PromptOutcome:
    """What one arm wrote for one prompt and how the base agent fared."""

    prompt_id: str
    group: str | None
    samples: int
    tasks: Sequence[TaskOutcome]
    """Valid tasks (len ≤ samples; the rest were rejected)."""
    copies: int = 0
    """Valid tasks whose key is in the arm's training set (a copied pool item)."""
    markers: int = 0
    """Valid tasks that carry the calibration marker (e.g. the expression multiplies)."""

    @property
    def valid_share(self) -> float:
        """Valid generations / samples."""
        return len(self.tasks) / self.samples if self.samples else 0.0

    @property
    def distinct_share(self) -> float | None:
        """Distinct valid tasks / valid tasks (None without a valid task)."""
        return len({t.key for t in self.tasks}) / len(self.tasks) if self.tasks else None

    @property
    def p_hat(self) -> float | None:
        """Successes / valid attempts over every valid task (None without an attempt)."""
        n = sum(t.n for t in self.tasks)
        return sum(t.k for t in self.tasks) / n if n else None


def abs_gap(p: PromptOutcome, alpha: float) -> float | None:
    """|p̂ − α| of the prompt (None without an attempt)."""
    return None if p.p_hat is None else abs(p.p_hat - alpha)


def task_in_band_share(p: PromptOutcome, center: float, half_width: float) -> float | None:
    """Share of the prompt's valid tasks whose own p̂ is within ``half_width`` of ``center``."""
    scored = [t for t in p.tasks if t.n]
    if not scored:
        return None
    return sum(in_band(t.k / t.n, alpha=center, k_min=half_width) for t in scored) / len(scored)


@dataclass(frozen=True)
class ArmSummary:
    """An arm's held-out prompts in aggregate: means with t intervals over prompts."""

    arm: str
    prompts: int
    valid_share: Interval | None
    distinct_share: Interval | None
    copy_share: float | None
    p_hat: Interval | None
    abs_gap: Interval | None
    task_in_band: Interval | None
    difficulty: dict[str, Interval]


def _ci(values: Sequence[float], confidence: float) -> Interval | None:
    return mean_ci(values, confidence) if values else None


def summarise_arm(arm: str, outcomes: Sequence[PromptOutcome], alpha: float, half_width: float,
                  confidence: float = DEFAULT_CONFIDENCE) -> ArmSummary:
    """Validity, diversity, copies, p̂, |p̂ − α|, tasks in band and difficulty of one arm's held-out prompts."""
    valid = [t for p in outcomes for t in p.tasks]
    measures = sorted({k for t in valid for k in t.difficulty})
    per_prompt_difficulty = {
        m: [sum(t.difficulty[m] for t in p.tasks) / len(p.tasks) for p in outcomes if p.tasks] for m in measures}
    return ArmSummary(
        arm=arm, prompts=len(outcomes),
        valid_share=_ci([p.valid_share for p in outcomes], confidence),
        distinct_share=_ci([d for p in outcomes if (d := p.distinct_share) is not None], confidence),
        copy_share=sum(p.copies for p in outcomes) / len(valid) if valid else None,
        p_hat=_ci([x for p in outcomes if (x := p.p_hat) is not None], confidence),
        abs_gap=_ci([x for p in outcomes if (x := abs_gap(p, alpha)) is not None], confidence),
        task_in_band=_ci([x for p in outcomes if (x := task_in_band_share(p, alpha, half_width)) is not None],
                         confidence),
        difficulty={m: iv for m, v in per_prompt_difficulty.items() if (iv := _ci(v, confidence)) is not None},
    )


Measure = Literal["abs_gap", "p_hat"]


def _value(p: PromptOutcome, measure: Measure, alpha: float) -> float | None:
    return abs_gap(p, alpha) if measure == "abs_gap" else p.p_hat


@dataclass(frozen=True)
class Contrast:
    """arm_a − arm_b on one per-prompt measure, paired by (replicate, prompt)."""

    name: str
    arm_a: str
    arm_b: str
    measure: str
    predicted: Literal[-1, 1]
    """The sign the hypothesis predicts for the difference."""
    difference: Interval | None
    per_replicate: dict[int, float]
    pairs_dropped: int
    """Prompts left out because one arm had no valid task there."""


def contrast(
    name: str,
    runs: Mapping[int, Mapping[str, Mapping[str, PromptOutcome]]],
    arm_a: str,
    arm_b: str,
    measure: Measure,
    predicted: Literal[-1, 1],
    alpha: float,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Contrast:
    """Pair every replicate's prompts between two arms (runs: replicate → arm → prompt id → outcome)."""
    a_vals: list[float] = []
    b_vals: list[float] = []
    per_rep: dict[int, float] = {}
    dropped = 0
    for rep, arms in sorted(runs.items()):
        a_arm, b_arm = arms.get(arm_a, {}), arms.get(arm_b, {})
        diffs = []
        for pid in sorted(set(a_arm) & set(b_arm)):
            x, y = _value(a_arm[pid], measure, alpha), _value(b_arm[pid], measure, alpha)
            if x is None or y is None:
                dropped += 1
                continue
            a_vals.append(x)
            b_vals.append(y)
            diffs.append(x - y)
        if diffs:
            per_rep[rep] = sum(diffs) / len(diffs)
    diff = paired_diff_ci(a_vals, b_vals, confidence) if a_vals else None
    return Contrast(name, arm_a, arm_b, measure, predicted, diff, per_rep, dropped)


@dataclass(frozen=True)
class ManipulationCheck:
    """Whether two arms are comparable: enough training data, similar movement from the base, validity and
    diversity kept. ``failures`` names every check that failed."""

    passed: bool
    failures: list[str]


def manipulation_check(
    arms: Sequence[str],
    train_sizes: Mapping[str, int],
    kl_to_base: Mapping[str, float],
    summaries: Mapping[str, ArmSummary],
    base: ArmSummary,
    *,
    min_train: int,
    max_kl_ratio: float,
    max_valid_drop: float,
    max_distinct_drop: float,
) -> ManipulationCheck:
    """The pre-registered checks for a contrast between ``arms`` (thresholds from the pre-registration)."""
    failures: list[str] = []
    for arm in arms:
        if train_sizes.get(arm, 0) < min_train:
            failures.append(f"{arm} trained on {train_sizes.get(arm, 0)} generations (< {min_train})")
        s = summaries.get(arm)
        if s is None or s.valid_share is None or base.valid_share is None:
            failures.append(f"{arm} has no held-out validity")
            continue
        if s.valid_share.estimate < base.valid_share.estimate - max_valid_drop:
            failures.append(f"{arm} validity {s.valid_share.estimate:.3f} < base {base.valid_share.estimate:.3f} − "
                            f"{max_valid_drop}")
        if s.distinct_share is not None and base.distinct_share is not None and \
                s.distinct_share.estimate < base.distinct_share.estimate - max_distinct_drop:
            failures.append(f"{arm} distinct share {s.distinct_share.estimate:.3f} < base "
                            f"{base.distinct_share.estimate:.3f} − {max_distinct_drop}")
    kls = [kl_to_base[a] for a in arms if a in kl_to_base]
    if len(kls) == len(arms) and min(kls) > 0 and max(kls) / min(kls) > max_kl_ratio:
        failures.append(f"KL to base differs by more than ×{max_kl_ratio}: "
                        + ", ".join(f"{a} {kl_to_base[a]:.3g}" for a in arms))
    return ManipulationCheck(not failures, failures)


def decide(c: Contrast, check: ManipulationCheck, smallest_effect: float) -> tuple[Decision, str]:
    """The pre-registered rule (genenv.experiments.stats.classify): supported when the interval lies on the
    predicted side of 0, every replicate's estimate has the predicted sign and the estimate reaches
    ``smallest_effect``; detected, below the smallest effect of interest when all that holds but the estimate is
    smaller; refuted at this scale when the interval excludes an effect as large as ``smallest_effect`` in the
    predicted direction; inconclusive otherwise, or whenever the manipulation check failed (then the arms were not
    comparable and nothing is concluded)."""
    if not check.passed:
        return "inconclusive", "manipulation check failed: " + "; ".join(check.failures)
    d = c.difference
    if d is None:
        return "inconclusive", "no paired prompts"
    text = f"{d.estimate:+.4f} [{d.low:+.4f}, {d.high:+.4f}] over {d.n} prompts"
    reps = ", ".join(f"r{r} {v:+.4f}" for r, v in sorted(c.per_replicate.items()))
    decision, why = classify(d, c.predicted, smallest_effect, list(c.per_replicate.values()))
    if decision == SUPPORTED:
        return decision, f"{text}; every replicate as predicted ({reps})"
    return decision, f"{text}: {why} ({reps})"


# ----------------------------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class CalibrationRow:
    """One dose (learning rate × steps) on the marker: its held-out marker share, validity and diversity."""

    lr: float
    steps: int
    marker_share: float
    valid_share: float
    distinct_share: float
    kl_to_base: float | None = None


@dataclass(frozen=True)
class Criterion:
    """Exp 0's pre-registered rule: the marker closes at least ``gap_closure`` of its gap to 1 while validity and
    the distinct share drop by at most the given amounts from the base simulator's."""

    gap_closure: float = 0.5
    max_valid_drop: float = 0.05
    max_distinct_drop: float = 0.10

    def passes(self, row: CalibrationRow, base: CalibrationRow) -> bool:
        """Whether ``row`` fits its pool measurably and keeps validity and diversity."""
        closed = (row.marker_share - base.marker_share) / max(1.0 - base.marker_share, 1e-9)
        return (closed >= self.gap_closure - 1e-9 and row.valid_share >= base.valid_share - self.max_valid_drop
                and row.distinct_share >= base.distinct_share - self.max_distinct_drop)


def choose_dose(rows: Sequence[CalibrationRow], base: CalibrationRow,
                criterion: Criterion = Criterion()) -> tuple[CalibrationRow | None, str]:
    """The smallest passing dose: fewest steps, then the lowest learning rate (steps cost time in every epoch; at
    equal steps a lower rate moves the simulator less). None, with the reason, when no dose passes."""
    passing = sorted((r for r in rows if criterion.passes(r, base)), key=lambda r: (r.steps, r.lr))
    if not passing:
        return None, "no dose met the criterion"
    best = passing[0]
    closed = (best.marker_share - base.marker_share) / max(1.0 - base.marker_share, 1e-9)
    return best, (f"lr {best.lr:g} × {best.steps} steps: marker {base.marker_share:.3f} → {best.marker_share:.3f} "
                  f"({closed:.0%} of the gap), validity {best.valid_share:.3f} (base {base.valid_share:.3f}), "
                  f"distinct {best.distinct_share:.3f} (base {base.distinct_share:.3f})")


# ------------------------------------------------------------------------------------------------- the pool

BANDS: Final[dict[str, float]] = {"A": 0.5, "D": 0.3, "E": 0.7}
"""Arm → the centre of its band (A is the α band; D and E steer below and above it); the band and the reward are
genenv.curriculum.reward's in_band and alpha_reward with the centre as α."""
