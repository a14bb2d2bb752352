"""What an experiment shows: pure functions from ExperimentSeries to numbers, effects and verdicts (the report's
analysis; genenv.experiments.rendering writes them as markdown).

Per-mode means carry t intervals over replicates — over the same per-epoch values the dashboard's means are made
of (genenv.experiments.series.epoch_values); effects are paired — seed batches by (replicate, epoch, seed),
per-member measures by replicate (genenv.experiments.paired, genenv.experiments.stats). Epoch 0 is an A/A check,
never an effect. Every missing number stays None (a failed member has fewer epochs, agent_only generates no
tasks), and every hypothesis verdict carries a one-line reason, so the report can be read without the code.
Nothing here does I/O; writer.write_report does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from genenv.contracts import modes as mode_table
from genenv.contracts.experiments import ExperimentSeries, MemberSeries
from genenv.curriculum.reward import in_band
from genenv.experiments.paired import (
    Dose,
    PairedComparison,
    SideEffect,
    doses,
    fresh_series,
    pair_batches,
    paired_comparisons,
    side_effects,
)
from genenv.experiments.series import (
    epoch_values,
    final_heldout,
    heldout_target,
    members_of,
    modes_present,
)
from genenv.experiments.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SEED,
    METHOD,
    REFUTED,
    SUPPORTED,
    Interval,
    classify,
    mean_ci,
    ols_slope,
    paired_diff_ci,
    smallest_detectable,
)

# The arms the hypotheses name (the experiment's design, not mode behaviour: that is genenv.contracts.modes).
GENENV: Final = "genenv"
RANDOM: Final = "random_simulator"
STATIC: Final = "static_augmentation"

# Per-member summaries the effects table compares: (key, label, True when higher is better).
EFFECT_MEASURES: Final[tuple[tuple[str, str, bool], ...]] = (
    ("mean_in_band_share", "mean in-band share", True),
    ("mean_abs_gap", "mean |p̂ − α|", False),
    ("final_heldout_accuracy", "final held-out accuracy", True),
)
_EPS: Final = 1e-9  # band edges are inclusive; floats such as 0.6 − 0.5 must not fall out of the band
NOT_MEASURED: Final = "not measured"


@dataclass(frozen=True)
class Settings:
    """How intervals are made (recorded in report.json and the markdown)."""

    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED
    method: str = METHOD


@dataclass(frozen=True)
class EpochStats:
    """One epoch of one mode: each number's mean and interval over the replicates that have it (None: none has)."""

    epoch: int
    metrics: dict[str, Interval | None]
    difficulty: dict[str, Interval | None]
    heldout_by_category: dict[str, Interval | None]


@dataclass(frozen=True)
class MemberSummary:
    """One member run over its closed epochs."""

    run_id: str
    mode: str
    replicate: int
    status: str
    epochs_closed: int
    mean_in_band_share: float | None
    mean_abs_gap: float | None
    final_heldout_accuracy: float | None
    final_heldout_epoch: int | None
    first_in_band_epoch: int | None
    stayed_in_band: bool | None
    """False when it left the band after entering or never entered; None when it has no p̂ at all."""
    repeat_share: float | None = None
    """Valid tasks of epochs ≥ 1 that repeat a valid task of an earlier epoch of the run, over those valid tasks."""
    in_band_per_1000_attempts: float | None = None
    """Valid tasks of in-band seed batches per 1,000 valid agent attempts, epochs ≥ 1: how many tasks at the
    frontier a mode yields for the agent time spent finding them (what filtering the untrained simulator's output
    would have to match)."""


@dataclass(frozen=True)
class Effect:
    """genenv − baseline on one per-member measure: the paired replicate differences (replicate r of both modes
    shares its seeds) with their t interval; ``genenv`` and ``baseline_value`` are each mode's mean over the same
    replicates. ``detectable`` is the smallest true difference a paired t test of this many replicates would detect
    with 80 % power at the observed spread of the differences."""

    baseline: str
    measure: str
    higher_is_better: bool
    genenv: Interval | None
    baseline_value: Interval | None
    difference: Interval | None
    detectable: float | None = None


@dataclass(frozen=True)
class DataEfficiencyRow:
    """Where a mode's mean held-out curve first reaches the target (generated tasks: the mean at that epoch)."""

    mode: str
    epoch: int | None
    generated_tasks: float | None
    heldout_accuracy: float | None


@dataclass(frozen=True)
class DataEfficiency:
    """Generated tasks each mode needs to reach static_augmentation's final held-out accuracy (mean over replicates)."""

    target: float | None
    rows: list[DataEfficiencyRow]


@dataclass(frozen=True)
class Verdict:
    """A hypothesis and what the data say: ``status`` is supported, detected, below the smallest effect of interest,
    refuted at this scale, inconclusive (the rules are _tested's), descriptive (a comparison this design cannot
    test) or not measured; ``holds`` is True/False for supported/refuted and None otherwise."""

    hypothesis: str
    statement: str
    holds: bool | None
    reason: str
    status: str = "not measured"


@dataclass(frozen=True)
class ExperimentResult:
    """Everything the report states; report.json is this object as JSON."""

    settings: Settings
    modes: list[str]
    replicates: dict[str, int]
    per_epoch: dict[str, list[EpochStats]]
    members: list[MemberSummary]
    effects: list[Effect]
    data_efficiency: DataEfficiency
    difficulty_slopes: dict[str, Interval]
    """genenv's slope of each difficulty measure per epoch: mean of the per-replicate OLS slopes, with its interval."""
    verdicts: list[Verdict]
    paired: list[PairedComparison]
    """genenv − baseline over paired seed batches of epochs ≥ 1."""
    aa_checks: list[PairedComparison]
    """The same at epoch 0, where no simulator has been trained: differences here are noise by construction."""
    doses: list[Dose]
    paired_fresh: list[PairedComparison] = field(default_factory=list)
    """genenv − baseline over paired seed batches of epochs ≥ 1, on non-repeated tasks only."""
    sides: list[SideEffect] = field(default_factory=list)
    """With pre-registered level sides: genenv − baseline p̂ above and below α, on non-repeated and on all tasks."""
    mode_measures: dict[str, dict[str, Interval | None]] = field(default_factory=dict)
    """Per mode, over its replicates: repeat_share and in_band_per_1000_attempts."""


# ---------------------------------------------------------------------------------------------------------- helpers


def _ci(values: Sequence[float], s: Settings) -> Interval | None:
    return mean_ci(values, s.confidence) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _band_path(points: Sequence[tuple[int, float]], alpha: float, k_min: float) -> tuple[int | None, bool, int | None]:
    """(first epoch in band, stayed in band every later point, first epoch it left after entering)."""
    ordered = sorted(points)
    first = next((ep for ep, p in ordered if in_band(p, alpha=alpha, k_min=k_min)), None)
    if first is None:
        return None, False, None
    left = next((ep for ep, p in ordered if ep > first and not in_band(p, alpha=alpha, k_min=k_min)), None)
    return first, left is None, left


# ------------------------------------------------------------------------------------------------------- per epoch


def _epoch_stats(members: Sequence[MemberSeries], s: Settings) -> list[EpochStats]:
    """The per-epoch values of genenv.experiments.series (whose means the dashboard draws) with their intervals."""
    return [
        EpochStats(
            epoch=v.epoch,
            metrics={key: _ci(values, s) for key, values in v.metrics.items()},
            difficulty={key: _ci(values, s) for key, values in v.difficulty.items()},
            heldout_by_category={key: _ci(values, s) for key, values in v.heldout_by_category.items()},
        )
        for v in epoch_values(members)
    ]


# ------------------------------------------------------------------------------------------------------ per member


def summarise_member(member: MemberSeries, alpha: float, k_min: float) -> MemberSummary:
    """Mean in-band share and mean |p̂ − α| over its epochs, final held-out accuracy, band entry and stay."""
    epochs = sorted(member.epochs, key=lambda e: e.epoch)
    shares = [e.in_band_share for e in epochs if e.in_band_share is not None]
    later = [e for e in epochs if e.epoch >= 1]
    valid = sum(e.valid_tasks for e in later)
    batches = [b for b in member.seed_batches if b.epoch >= 1]
    attempts = sum(b.n for b in batches)
    p_points = [(e.epoch, e.p_hat) for e in epochs if e.p_hat is not None]
    final = final_heldout(member)
    first, stayed, _ = _band_path(p_points, alpha, k_min)
    return MemberSummary(
        run_id=member.run_id,
        mode=member.mode,
        replicate=member.replicate,
        status=member.status.value,
        epochs_closed=len(epochs),
        mean_in_band_share=_mean(shares),
        mean_abs_gap=_mean([abs(p - alpha) for _, p in p_points]),
        final_heldout_accuracy=None if final is None else final[1],
        final_heldout_epoch=None if final is None else final[0],
        first_in_band_epoch=first,
        stayed_in_band=stayed if p_points else None,
        repeat_share=sum(e.repeated_tasks for e in later) / valid if valid else None,
        in_band_per_1000_attempts=(1000 * sum(b.valid_tasks for b in batches
                                              if b.p_hat is not None and in_band(b.p_hat, alpha=alpha, k_min=k_min))
                                   / attempts) if attempts else None,
    )


def _by_replicate(members: Sequence[MemberSummary], mode: str, key: str) -> dict[int, float]:
    return {m.replicate: float(v) for m in members if m.mode == mode and (v := getattr(m, key)) is not None}


def _effects(members: Sequence[MemberSummary], modes: Sequence[str], s: Settings) -> list[Effect]:
    if GENENV not in modes:
        return []
    out: list[Effect] = []
    for baseline in (b for b in mode_table.baselines() if b in modes):
        for key, _, higher in EFFECT_MEASURES:
            g, b = _by_replicate(members, GENENV, key), _by_replicate(members, baseline, key)
            both = sorted(set(g) & set(b))  # a replicate whose partner failed has no pair and is left out
            ga, ba = [g[r] for r in both], [b[r] for r in both]
            diff = paired_diff_ci(ga, ba, s.confidence, s.seed) if both else None
            sd = None
            if len(both) >= 2:
                d = [x - y for x, y in zip(ga, ba, strict=True)]
                mean = sum(d) / len(d)
                sd = (sum((x - mean) ** 2 for x in d) / (len(d) - 1)) ** 0.5
            detectable = smallest_detectable(sd, len(both), s.confidence) if sd is not None else None
            out.append(Effect(baseline, key, higher, _ci(ga, s), _ci(ba, s), diff, detectable))
    return out


# ------------------------------------------------------------------------------------------------- data efficiency


def _data_efficiency(per_epoch: dict[str, list[EpochStats]], series: ExperimentSeries) -> DataEfficiency:
    """Uses each mode's mean curves, the ones data_efficiency.png draws; the target is static_augmentation's mean
    final held-out accuracy over its replicates (the line the dashboard draws)."""
    target = heldout_target(series.members)
    rows: list[DataEfficiencyRow] = []
    for mode, stats in per_epoch.items():
        hit: DataEfficiencyRow | None = None
        if target is not None:
            for st in stats:
                acc, tasks = st.metrics.get("heldout_accuracy"), st.metrics.get("generated_tasks_so_far")
                if acc is not None and acc.estimate >= target - _EPS:
                    hit = DataEfficiencyRow(mode, st.epoch, tasks.estimate if tasks else None, acc.estimate)
                    break
        rows.append(hit or DataEfficiencyRow(mode, None, None, None))
    return DataEfficiency(target, rows)


# ------------------------------------------------------------------------------------------------------ hypotheses


def band_text(alpha: float, k_min: float) -> str:
    """The α band as text."""
    return f"[{alpha - k_min:.3f}, {alpha + k_min:.3f}]"


def _find_effect(effects: Sequence[Effect], baseline: str, measure: str) -> Effect | None:
    return next((e for e in effects if e.baseline == baseline and e.measure == measure), None)


def _find_paired(paired: Sequence[PairedComparison], baseline: str) -> PairedComparison | None:
    return next((c for c in paired if c.baseline == baseline), None)


def iv_text(iv: Interval) -> str:
    """An interval as signed text with its p value."""
    p = "" if iv.p_value is None else f", p = {iv.p_value:.3g}"
    return f"{iv.estimate:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]{p}"


SMALLEST_EFFECT: Final[dict[str, float]] = {"H1": 0.02, "H2": 0.05, "H4": 0.02, "D-above": 0.03, "D-below": 0.03}
"""The smallest effect of interest of each tested hypothesis (docs/experiments/preregistration.md, and for the
two-sided endpoints D-above / D-below docs/experiments/preregistration-two-sided.md): |p̂ − α|, the
frontier-signed p̂ and the per-side p̂ differences in units of p̂, the in-band share as a share of seed batches."""
MODE_MEASURES: Final = ("repeat_share", "in_band_per_1000_attempts")


def _tested(hypothesis: str, statement: str, c: PairedComparison | None, key: str, higher: bool, what: str,
            context: str, dosed: bool) -> Verdict:
    """The pre-registered rule (stats.classify) on the primary interval, the one over training runs: the t interval
    of the per-replicate estimates (paired by replicate seed). supported: it lies on the predicted side of 0, every
    replicate agrees and the estimate reaches the smallest effect of interest; detected, below the smallest effect
    of interest: the same with a smaller estimate; refuted at this scale: it excludes an effect as large as the
    smallest effect of interest in the predicted direction; inconclusive otherwise — and always without a dose (a
    simulator never trained before it wrote tasks makes this an A/A comparison) or with fewer than two replicates.
    The seed-batch interval is reported beside it as secondary (it is conditional on the simulators trained)."""
    secondary: Interval | None = None if c is None else getattr(c, key)
    if c is None or secondary is None:
        return Verdict(hypothesis, statement, None, f"{NOT_MEASURED}: {what}", "not measured")
    primary = c.replicate_level.get(key)
    batches = f"seed batches (secondary) {iv_text(secondary)}{context}"
    if not dosed:
        return Verdict(hypothesis, statement, None, f"no trained simulator wrote tasks, so this compares a process "
                       f"with itself: {batches}", "inconclusive")
    if primary is None:
        return Verdict(hypothesis, statement, None, f"fewer than two replicates: one training run cannot carry a "
                       f"claim about training runs; {batches}", "inconclusive")
    sign = 1.0 if higher else -1.0
    reps = [v for r in c.per_replicate if (v := getattr(r, key)) is not None]
    decision, why = classify(primary, sign, SMALLEST_EFFECT[hypothesis], reps)
    text = f"over {primary.n} replicates {iv_text(primary)}; {batches}"
    holds = True if decision == SUPPORTED else False if decision == REFUTED else None
    return Verdict(hypothesis, statement, holds, text if decision == SUPPORTED else f"{text}: {why}", decision)


def _per_rep(c: PairedComparison, key: str) -> str:
    return "; per replicate " + ", ".join(f"r{r.replicate} {getattr(r, key):+.3f}" for r in c.per_replicate)


def _h1(paired: Sequence[PairedComparison], dosed: bool) -> Verdict:
    statement = ("genenv's seed batches sit closer to α than random_simulator's on the same seeds "
                 "(paired |p̂ − α|, epochs ≥ 1; below 0 supports)")
    c = _find_paired(paired, RANDOM)
    return _tested("H1", statement, c, "abs_gap_diff", False,
                   "needs paired genenv and random_simulator seed batches after epoch 0",
                   "" if c is None else f" over {c.pairs} pairs" + _per_rep(c, "abs_gap_diff"), dosed)


def _h2(paired: Sequence[PairedComparison], dosed: bool) -> Verdict:
    statement = ("genenv's seed batches are in the α band more often than random_simulator's on the same seeds "
                 "(paired in-band share, epochs ≥ 1; above 0 supports; p from McNemar's exact test)")
    c = _find_paired(paired, RANDOM)
    context = "" if c is None else (
        f" over {c.pairs} pairs ({c.genenv_only_in_band} in band only under genenv, {c.baseline_only_in_band} only "
        f"under random_simulator)" + _per_rep(c, "in_band_diff"))
    return _tested("H2", statement, c, "in_band_diff", True,
                   "needs paired genenv and random_simulator seed batches after epoch 0", context, dosed)


def _h3(series: ExperimentSeries, effects: Sequence[Effect], efficiency: DataEfficiency) -> Verdict:
    statement = ("final held-out accuracy genenv ≥ static_augmentation ≥ random_simulator (descriptive: paired "
                 "replicate differences, with the smallest difference this many replicates could detect)")
    if not series.agent_trains:
        return Verdict("H3", statement, None, f"{NOT_MEASURED}: the agent is frozen (agent.train = false)",
                       "not measured")
    parts = []
    for baseline in (STATIC, RANDOM):
        e = _find_effect(effects, baseline, "final_heldout_accuracy")
        if e is not None and e.difference is not None:
            sde = "–" if e.detectable is None else f"{e.detectable:.3f}"
            parts.append(f"genenv − {baseline} {iv_text(e.difference)} (n = {e.difference.n}; detectable ≈ {sde})")
    if not parts:
        return Verdict("H3", statement, None, f"{NOT_MEASURED}: no paired final held-out accuracies", "not measured")
    rows = {row.mode: row for row in efficiency.rows}
    if GENENV in rows and STATIC in rows and efficiency.target is not None:
        g, st = rows[GENENV].generated_tasks, rows[STATIC].generated_tasks
        parts.append("genenv never reached static_augmentation's final accuracy" if g is None else
                     f"tasks to static_augmentation's final accuracy {g:.0f} (genenv) vs "
                     f"{'–' if st is None else f'{st:.0f}'}")
    return Verdict("H3", statement, None, "; ".join(parts), "descriptive")


def _difficulty_slopes(series: ExperimentSeries, s: Settings) -> dict[str, Interval]:
    members = members_of(series.members, GENENV)
    measures = sorted({k for m in members for e in m.epochs for k in e.difficulty})
    out: dict[str, Interval] = {}
    for measure in measures:
        slopes: list[float] = []
        for member in members:
            pts = sorted((e.epoch, e.difficulty[measure]) for e in member.epochs if measure in e.difficulty)
            slope = ols_slope([float(x) for x, _ in pts], [y for _, y in pts])
            if slope is not None:
                slopes.append(slope)
        if slopes:
            out[measure] = mean_ci(slopes, s.confidence)
    return out


def _h4(paired: Sequence[PairedComparison], dosed: bool) -> Verdict:
    statement = ("difficulty moves toward the agent's frontier: on the same seeds genenv's tasks are easier than "
                 "random_simulator's where the pair's p̂ is below α and harder where it is above (the "
                 "frontier-signed p̂ difference, epochs ≥ 1; above 0 supports)")
    c = _find_paired(paired, RANDOM)
    context = ""
    if c is not None:
        sides = [f"{name} {iv_text(iv)} (n = {iv.n})" for name, iv in
                 (("below α", c.below_alpha), ("above α", c.above_alpha)) if iv is not None]
        context = f" over {c.pairs} pairs; p̂ difference {'; '.join(sides)}" + _per_rep(c, "toward_frontier")
    return _tested("H4", statement, c, "toward_frontier", True,
                   "needs paired genenv and random_simulator seed batches after epoch 0", context, dosed)


def _side_verdict(sides: Sequence[SideEffect], side: str, dosed: bool) -> Verdict:
    hypothesis = f"D-{side}"
    predicted = "< 0: harder tasks" if side == "above" else "> 0: easier tasks"
    statement = (f"on the difficulty groups pre-registered {side} α, genenv's non-repeated tasks differ in p̂ from "
                 f"random_simulator's on the same seeds as the curriculum predicts ({predicted}; paired seed "
                 "batches of epochs ≥ 1, interval over replicates)")
    e = next((s for s in sides if s.baseline == RANDOM and s.side == side and s.tasks == "non-repeated"), None)
    if e is None or e.seed_batches is None:
        return Verdict(hypothesis, statement, None, f"{NOT_MEASURED}: needs pre-registered level_sides and paired "
                       f"genenv and random_simulator seed batches {side} α", "not measured")
    reps = "; per replicate " + ", ".join(f"r{r} {v:+.3f}" for r, v in e.per_replicate.items())
    batches = f"seed batches (secondary) {iv_text(e.seed_batches)} over {e.pairs} pairs{reps}"
    if not dosed:
        return Verdict(hypothesis, statement, None, f"no trained simulator wrote tasks: {batches}", "inconclusive")
    if e.replicate_level is None:
        return Verdict(hypothesis, statement, None, f"fewer than two replicates: one training run cannot carry a "
                       f"claim about training runs; {batches}", "inconclusive")
    decision, why = classify(e.replicate_level, -1.0 if side == "above" else 1.0, SMALLEST_EFFECT[hypothesis],
                             list(e.per_replicate.values()))
    text = f"over {e.replicate_level.n} replicates {iv_text(e.replicate_level)}; {batches}"
    holds = True if decision == SUPPORTED else False if decision == REFUTED else None
    return Verdict(hypothesis, statement, holds, text if decision == SUPPORTED else f"{text}: {why}", decision)


def _mode_measures(members: Sequence[MemberSummary], modes: Sequence[str], s: Settings) -> dict[
        str, dict[str, Interval | None]]:
    return {mode: {key: _ci([float(v) for m in members if m.mode == mode and (v := getattr(m, key)) is not None], s)
                   for key in MODE_MEASURES} for mode in modes}


# ------------------------------------------------------------------------------------------------------------ main


def analyse(series: ExperimentSeries, settings: Settings | None = None) -> ExperimentResult:
    """All the report's numbers and verdicts; deterministic given ``settings.seed``."""
    s = settings or Settings()
    modes = modes_present(series.members)
    by_mode = {mode: members_of(series.members, mode) for mode in modes}
    per_epoch = {mode: _epoch_stats(by_mode[mode], s) for mode in modes}
    members = [summarise_member(m, series.alpha, series.k_min) for mode in modes for m in by_mode[mode]]
    effects = _effects(members, modes, s)
    efficiency = _data_efficiency(per_epoch, series)
    slopes = _difficulty_slopes(series, s)
    baselines = [b for b in mode_table.baselines() if b in modes]
    paired, checks = paired_comparisons(series, baselines, s.confidence)
    fresh = fresh_series(series)
    paired_fresh, _ = paired_comparisons(fresh, baselines, s.confidence)
    sides: list[SideEffect] = []
    if series.level_sides:
        for b in baselines:
            for tasks, source in (("non-repeated", fresh), ("all", series)):
                later = [p for p in pair_batches(source, b) if p.epoch >= 1]
                sides += side_effects(later, b, series.level_sides, tasks, s.confidence)
    member_doses = doses(series)
    # A comparison with a simulator that was never trained before it wrote tasks is an A/A comparison.
    dosed = any(d.used_updates > 0 for d in member_doses if d.mode == GENENV)
    verdicts = [
        _h1(paired, dosed),
        _h2(paired, dosed),
        _h3(series, effects, efficiency),
        _h4(paired, dosed),
    ]
    if series.level_sides:
        verdicts += [_side_verdict(sides, "above", dosed), _side_verdict(sides, "below", dosed)]
    return ExperimentResult(
        settings=s,
        modes=modes,
        replicates={mode: len(by_mode[mode]) for mode in modes},
        per_epoch=per_epoch,
        members=members,
        effects=effects,
        data_efficiency=efficiency,
        difficulty_slopes=slopes,
        verdicts=verdicts,
        paired=paired,
        aa_checks=checks,
        doses=member_doses,
        paired_fresh=paired_fresh,
        sides=sides,
        mode_measures=_mode_measures(members, modes, s),
    )
