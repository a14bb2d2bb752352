"""What an experiment shows: pure functions from ExperimentSeries to numbers, verdicts and a markdown report.

Per-mode means carry t intervals over replicates; effects are paired — seed batches by (replicate, epoch, seed),
per-member measures by replicate (genenv.experiments.paired, genenv.experiments.stats). Epoch 0 is an A/A check,
never an effect. Every missing number stays None (a failed member has fewer epochs, agent_only generates no
tasks), and every hypothesis verdict carries a one-line reason, so the report can be read without the code.
Nothing here does I/O; writer.write_report does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from genenv.contracts.experiments import ExperimentSeries, MemberEpoch, MemberSeries
from genenv.contracts.runs import RunMode
from genenv.curriculum.reward import in_band
from genenv.experiments.paired import Dose, PairedComparison, dose_line, doses, paired_comparisons
from genenv.experiments.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SEED,
    METHOD,
    Interval,
    mean_ci,
    ols_slope,
    paired_diff_ci,
    smallest_detectable,
)

GENENV: Final = RunMode.GENENV.value
RANDOM: Final = RunMode.RANDOM_SIMULATOR.value
STATIC: Final = RunMode.STATIC_AUGMENTATION.value
MODE_ORDER: Final = tuple(m.value for m in RunMode)

# Per-epoch numbers of a member, in table order: (key, label in the report).
EPOCH_METRICS: Final[tuple[tuple[str, str], ...]] = (
    ("p_hat", "p̂"),
    ("in_band_share", "in-band share"),
    ("heldout_accuracy", "held-out acc."),
    ("mean_response_tokens", "response tokens"),
    ("generated_tasks_so_far", "generated tasks"),
)
# Per-member summaries the effects table compares: (key, label, True when higher is better).
EFFECT_MEASURES: Final[tuple[tuple[str, str, bool], ...]] = (
    ("mean_in_band_share", "mean in-band share", True),
    ("mean_abs_gap", "mean |p̂ − α|", False),
    ("final_heldout_accuracy", "final held-out accuracy", True),
)
BASELINES: Final = (RANDOM, STATIC)
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
    """A hypothesis and what the data say: ``status`` is supported, refuted at this scale, inconclusive (the
    rules are _tested's), descriptive (a comparison this design cannot test) or not measured; ``holds`` is
    True/False for supported/refuted and None otherwise."""

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


# ---------------------------------------------------------------------------------------------------------- helpers


def _modes(series: ExperimentSeries) -> list[str]:
    present = {m.mode.value for m in series.members}
    return [m for m in MODE_ORDER if m in present]


def _members(series: ExperimentSeries, mode: str) -> list[MemberSeries]:
    return sorted((m for m in series.members if m.mode.value == mode), key=lambda m: (m.replicate, m.run_id))


def _metric(e: MemberEpoch, key: str) -> float | None:
    value = getattr(e, key)
    return None if value is None else float(value)


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
    by_epoch: dict[int, list[MemberEpoch]] = {}
    for member in members:
        for e in member.epochs:
            by_epoch.setdefault(e.epoch, []).append(e)
    out: list[EpochStats] = []
    for epoch in sorted(by_epoch):
        rows = by_epoch[epoch]
        metrics = {key: _ci([v for e in rows if (v := _metric(e, key)) is not None], s) for key, _ in EPOCH_METRICS}
        measures = sorted({k for e in rows for k in e.difficulty})
        categories = sorted({k for e in rows for k in e.heldout_by_category})
        out.append(
            EpochStats(
                epoch=epoch,
                metrics=metrics,
                difficulty={k: _ci([e.difficulty[k] for e in rows if k in e.difficulty], s) for k in measures},
                heldout_by_category={
                    k: _ci([e.heldout_by_category[k] for e in rows if k in e.heldout_by_category], s)
                    for k in categories
                },
            )
        )
    return out


# ------------------------------------------------------------------------------------------------------ per member


def summarise_member(member: MemberSeries, alpha: float, k_min: float) -> MemberSummary:
    """Mean in-band share and mean |p̂ − α| over its epochs, final held-out accuracy, band entry and stay."""
    epochs = sorted(member.epochs, key=lambda e: e.epoch)
    shares = [e.in_band_share for e in epochs if e.in_band_share is not None]
    p_points = [(e.epoch, e.p_hat) for e in epochs if e.p_hat is not None]
    heldout = [(e.epoch, e.heldout_accuracy) for e in epochs if e.heldout_accuracy is not None]
    first, stayed, _ = _band_path(p_points, alpha, k_min)
    return MemberSummary(
        run_id=member.run_id,
        mode=member.mode.value,
        replicate=member.replicate,
        status=member.status.value,
        epochs_closed=len(epochs),
        mean_in_band_share=_mean(shares),
        mean_abs_gap=_mean([abs(p - alpha) for _, p in p_points]),
        final_heldout_accuracy=heldout[-1][1] if heldout else None,
        final_heldout_epoch=heldout[-1][0] if heldout else None,
        first_in_band_epoch=first,
        stayed_in_band=stayed if p_points else None,
    )


def _member_values(members: Sequence[MemberSummary], mode: str, key: str) -> list[float]:
    return [v for m in members if m.mode == mode and (v := getattr(m, key)) is not None]


def _by_replicate(members: Sequence[MemberSummary], mode: str, key: str) -> dict[int, float]:
    return {m.replicate: float(v) for m in members if m.mode == mode and (v := getattr(m, key)) is not None}


def _effects(members: Sequence[MemberSummary], modes: Sequence[str], s: Settings) -> list[Effect]:
    if GENENV not in modes:
        return []
    out: list[Effect] = []
    for baseline in (b for b in BASELINES if b in modes):
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


def _data_efficiency(per_epoch: dict[str, list[EpochStats]], members: Sequence[MemberSummary]) -> DataEfficiency:
    """Uses each mode's mean curves, the ones data_efficiency.png draws; the target is static_augmentation's mean
    final held-out accuracy over its replicates."""
    target = _mean(_member_values(members, STATIC, "final_heldout_accuracy"))
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


def _band_text(alpha: float, k_min: float) -> str:
    return f"[{alpha - k_min:.3f}, {alpha + k_min:.3f}]"


def _find_effect(effects: Sequence[Effect], baseline: str, measure: str) -> Effect | None:
    return next((e for e in effects if e.baseline == baseline and e.measure == measure), None)


def _find_paired(paired: Sequence[PairedComparison], baseline: str) -> PairedComparison | None:
    return next((c for c in paired if c.baseline == baseline), None)


def _iv_text(iv: Interval) -> str:
    p = "" if iv.p_value is None else f", p = {iv.p_value:.3g}"
    return f"{iv.estimate:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]{p}"


SMALLEST_EFFECT: Final[dict[str, float]] = {"H1": 0.02, "H2": 0.05, "H4": 0.02}
"""The smallest effect of interest of each tested hypothesis (docs/experiments/preregistration.md): |p̂ − α| and
the frontier-signed p̂ in units of p̂, the in-band share as a share of seed batches."""


def _tested(hypothesis: str, statement: str, c: PairedComparison | None, key: str, higher: bool, what: str,
            context: str, dosed: bool) -> Verdict:
    """The pre-registered rule. supported: the interval lies on the predicted side of 0 and every replicate's
    estimate has the predicted sign; refuted at this scale: the interval excludes an effect as large as the
    smallest effect of interest in the predicted direction; inconclusive otherwise — and always without a dose
    (a simulator never trained before it wrote tasks makes this an A/A comparison)."""
    iv: Interval | None = None if c is None else getattr(c, key)
    if c is None or iv is None:
        return Verdict(hypothesis, statement, None, f"{NOT_MEASURED}: {what}", "not measured")
    text = f"{_iv_text(iv)}{context}"
    if not dosed:
        return Verdict(hypothesis, statement, None, f"no trained simulator wrote tasks, so this compares a process "
                       f"with itself: {text}", "inconclusive")
    sign = 1.0 if higher else -1.0
    lo, hi = (iv.low, iv.high) if higher else (-iv.high, -iv.low)  # the effect in the predicted direction
    reps = [getattr(r, key) * sign for r in c.per_replicate]  # ReplicateEffect names its fields like the comparison
    if lo > 0 and all(r > 0 for r in reps):
        return Verdict(hypothesis, statement, True, text, "supported")
    smallest = SMALLEST_EFFECT[hypothesis]
    if hi < smallest:
        return Verdict(hypothesis, statement, False,
                       f"{text}: an effect of {smallest} in the predicted direction lies outside the interval",
                       "refuted at this scale")
    why = "the interval contains 0" if lo <= 0 else "a replicate goes the other way"
    return Verdict(hypothesis, statement, None, f"{text}: {why}", "inconclusive")


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
            parts.append(f"genenv − {baseline} {_iv_text(e.difference)} (n = {e.difference.n}; detectable ≈ {sde})")
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
    members = _members(series, GENENV)
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
        sides = [f"{name} {_iv_text(iv)} (n = {iv.n})" for name, iv in
                 (("below α", c.below_alpha), ("above α", c.above_alpha)) if iv is not None]
        context = f" over {c.pairs} pairs; p̂ difference {'; '.join(sides)}" + _per_rep(c, "toward_frontier")
    return _tested("H4", statement, c, "toward_frontier", True,
                   "needs paired genenv and random_simulator seed batches after epoch 0", context, dosed)


# ------------------------------------------------------------------------------------------------------------ main


def analyse(series: ExperimentSeries, settings: Settings | None = None) -> ExperimentResult:
    """All the report's numbers and verdicts; deterministic given ``settings.seed``."""
    s = settings or Settings()
    modes = _modes(series)
    per_epoch = {mode: _epoch_stats(_members(series, mode), s) for mode in modes}
    members = [summarise_member(m, series.alpha, series.k_min) for mode in modes for m in _members(series, mode)]
    effects = _effects(members, modes, s)
    efficiency = _data_efficiency(per_epoch, members)
    slopes = _difficulty_slopes(series, s)
    paired, checks = paired_comparisons(series, [b for b in BASELINES if b in modes], s.confidence)
    member_doses = doses(series)
    # A comparison with a simulator that was never trained before it wrote tasks is an A/A comparison.
    dosed = any(d.used_updates > 0 for d in member_doses)
    verdicts = [
        _h1(paired, dosed),
        _h2(paired, dosed),
        _h3(series, effects, efficiency),
        _h4(paired, dosed),
    ]
    return ExperimentResult(
        settings=s,
        modes=modes,
        replicates={mode: len(_members(series, mode)) for mode in modes},
        per_epoch=per_epoch,
        members=members,
        effects=effects,
        data_efficiency=efficiency,
        difficulty_slopes=slopes,
        verdicts=verdicts,
        paired=paired,
        aa_checks=checks,
        doses=member_doses,
    )


# -------------------------------------------------------------------------------------------------------- markdown


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _fmt_iv(iv: Interval | None, digits: int = 3, replicates: int | None = None, signed: bool = False) -> str:
    if iv is None:
        return "–"
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    text = f"{f.format(iv.estimate)} [{f.format(iv.low)}, {f.format(iv.high)}]"
    if replicates is not None and iv.n != replicates:
        text += f" (n = {iv.n})"
    return text


_DIGITS: Final[dict[str, int]] = {"mean_response_tokens": 1, "generated_tasks_so_far": 1}


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"  # |p̂ − α| must not split a cell


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_row(header), "|" + "|".join("---" for _ in header) + "|", *(_row(r) for r in rows)]


def _epoch_table(stats: Sequence[EpochStats], replicates: int) -> list[str]:
    measures = sorted({k for st in stats for k in st.difficulty})
    header = ["epoch", *(label for _, label in EPOCH_METRICS), *measures]
    rows = [
        [
            str(st.epoch),
            *(_fmt_iv(st.metrics.get(k), _DIGITS.get(k, 3), replicates) for k, _ in EPOCH_METRICS),
            *(_fmt_iv(st.difficulty.get(k), 2, replicates) for k in measures),
        ]
        for st in stats
    ]
    return _table(header, rows)


def _category_table(result: ExperimentResult) -> list[str]:
    finals = {
        mode: next((st for st in reversed(stats) if st.heldout_by_category), None)
        for mode, stats in result.per_epoch.items()
    }
    categories = sorted({k for st in finals.values() if st for k in st.heldout_by_category})
    if not categories:
        return []
    header = ["mode", "epoch", *categories]
    rows = [
        [mode, str(st.epoch), *(_fmt_iv(st.heldout_by_category.get(c), 3, result.replicates[mode]) for c in categories)]
        for mode, st in finals.items()
        if st is not None
    ]
    return ["", "### Held-out accuracy by category (last epoch with categories)", "", *_table(header, rows)]


def _paired_rows(comparisons: Sequence[PairedComparison]) -> list[list[str]]:
    rows = []
    for c in comparisons:
        p = c.in_band_diff.p_value if c.in_band_diff is not None else None
        rows.append([
            c.baseline, c.epochs, str(c.pairs), f"{_fmt(c.in_band_genenv)} vs {_fmt(c.in_band_baseline)}",
            _fmt_iv(c.in_band_diff, signed=True) + ("" if p is None else f" (McNemar p = {p:.3g})"),
            _fmt_iv(c.abs_gap_diff, signed=True), _fmt_iv(c.toward_frontier, signed=True),
            _fmt_iv(c.below_alpha, signed=True), _fmt_iv(c.above_alpha, signed=True),
        ])
    return rows


def _paired_section(result: ExperimentResult) -> list[str]:
    header = ["baseline", "epochs", "pairs", "in-band share (genenv vs baseline)", "in-band difference",
              "Δ|p̂ − α| (below 0: genenv closer)", "toward the frontier (above 0)",
              "Δp̂ where pair below α (expect > 0)", "Δp̂ where pair above α (expect < 0)"]
    lines = ["", "## Paired seed batches (genenv − baseline on the same replicate, epoch and seed)", ""]
    if not result.paired and not result.aa_checks:
        return [*lines, f"{NOT_MEASURED}: needs genenv and a baseline with scored seed batches."]
    lines += _table(header, _paired_rows([*result.aa_checks, *result.paired]))
    lines += ["", "Epochs '0' is the A/A check: no simulator has been trained yet, so its differences are noise by "
              "construction and an interval there that excludes 0 is a false alarm of the method.", ""]
    reps = [[c.baseline, str(r.replicate), str(r.pairs), f"{r.in_band_diff:+.3f}", f"{r.abs_gap_diff:+.3f}",
             f"{r.toward_frontier:+.3f}"] for c in result.paired for r in c.per_replicate]
    if reps:
        lines += ["Per replicate (epochs ≥ 1; training randomness between replicates is not in the pooled "
                  "intervals, so look for the same sign in each):", ""]
        lines += _table(["baseline", "replicate", "pairs", "in-band difference", "Δ|p̂ − α|",
                         "toward the frontier"], reps)
    return lines


def _dose_section(result: ExperimentResult) -> list[str]:
    if not result.doses:
        return []
    return ["", "## Dose (genenv's simulator updates that later wrote tasks)", "",
            *(f"- {dose_line(d)}" for d in result.doses)]


def _measure_label(key: str) -> str:
    return next((label for k, label, _ in EFFECT_MEASURES if k == key), key)


def render_markdown(series: ExperimentSeries, result: ExperimentResult, figures: Sequence[str]) -> str:
    """The experiment report as markdown: settings, per-epoch tables, effects, H1–H4 and links to ``figures``."""
    s = result.settings
    conf = f"{s.confidence:.0%}"
    reps = sorted(set(result.replicates.values()))
    reps_text = (
        (str(reps[0]) if len(reps) == 1 else ", ".join(f"{m} {n}" for m, n in result.replicates.items()))
        if reps
        else "0"
    )
    lines = [
        f"# Experiment report: {series.name}",
        "",
        f"- experiment: `{series.experiment_id}` ({series.status.value})",
        f"- domain: {series.domain}; held-out benchmark: {series.heldout_benchmark or '–'}",
        f"- α = {series.alpha:.3f}, k_min = {series.k_min:.3f} (band {_band_text(series.alpha, series.k_min)}); "
        f"epochs = {series.epochs}",
        f"- modes: {', '.join(result.modes) or '–'}; replicates per mode: {reps_text}",
        f"- intervals: {conf} Student-t intervals. Per-mode cells: over replicates (n = replicates); effects: "
        "paired — per-member measures by replicate (replicate r of every mode draws the same seeds), seed batches "
        "by (replicate, epoch, seed), with the paired permutation test's p (McNemar's exact test for in-band "
        "share). Epoch 0 is an A/A check (no simulator trained yet) and is left out of every effect. A zero-width "
        "interval (one replicate, or no spread) states no uncertainty. Cells show mean [low, high]; (n = k) marks "
        "cells with fewer replicates than the mode has.",
    ]
    if series.difficulty_measures:
        lines.append(
            "- difficulty measures: " + "; ".join(f"`{k}`: {v}" for k, v in sorted(series.difficulty_measures.items()))
        )
    lines += ["", "## Per-epoch means by mode"]
    for mode in result.modes:
        lines += ["", f"### {mode} (n = {result.replicates[mode]})", ""]
        lines += _epoch_table(result.per_epoch[mode], result.replicates[mode])
    lines += _category_table(result)

    lines += ["", "## Effects (genenv − baseline, per-member measures, paired by replicate)", ""]
    if result.effects:
        rows = [
            [
                e.baseline,
                _measure_label(e.measure) + ("" if e.higher_is_better else " (lower is better)"),
                _fmt_iv(e.genenv),
                _fmt_iv(e.baseline_value),
                _fmt_iv(e.difference, signed=True) + ("" if e.difference is None or e.difference.p_value is None
                                                       else f" (p = {e.difference.p_value:.3g}, n = {e.difference.n})"),
                _fmt(e.detectable),
            ]
            for e in result.effects
        ]
        lines += _table(["baseline", "measure", "genenv", "baseline", "paired difference", "detectable (80 %)"],
                        rows)
    else:
        lines.append(f"{NOT_MEASURED}: needs genenv and random_simulator or static_augmentation members.")

    lines += _paired_section(result)
    lines += _dose_section(result)

    de = result.data_efficiency
    lines += ["", "## Data efficiency", ""]
    if de.target is None:
        lines.append(f"{NOT_MEASURED}: no static_augmentation final held-out accuracy.")
    else:
        lines.append(
            f"Generated tasks (mean over replicates) at the first epoch whose mean held-out accuracy reaches "
            f"static_augmentation's final {_fmt(de.target)}:"
        )
        lines.append("")
        rows = [
            [r.mode, "never" if r.epoch is None else str(r.epoch), _fmt(r.generated_tasks, 1), _fmt(r.heldout_accuracy)]
            for r in de.rows
        ]
        lines += _table(["mode", "epoch", "generated tasks", "held-out acc."], rows)

    lines += ["", "## Hypotheses", ""]
    verdict_rows = [[v.hypothesis, v.statement, v.status, v.reason] for v in result.verdicts]
    lines += _table(["", "hypothesis", "verdict", "why"], verdict_rows)

    if result.members:
        lines += ["", "## Members", ""]
        rows = [
            [
                m.mode,
                str(m.replicate),
                f"`{m.run_id}`",
                m.status,
                str(m.epochs_closed),
                _fmt(m.mean_in_band_share),
                _fmt(m.mean_abs_gap),
                _fmt(m.final_heldout_accuracy),
                "never" if m.first_in_band_epoch is None else str(m.first_in_band_epoch),
                {True: "yes", False: "no", None: "–"}[m.stayed_in_band],
            ]
            for m in result.members
        ]
        header = [
            "mode",
            "replicate",
            "run",
            "status",
            "epochs",
            "mean in-band share",
            "mean |p̂ − α|",
            "final held-out",
            "entered band",
            "stayed",
        ]
        lines += _table(header, rows)

    if figures:
        lines += ["", "## Figures", ""]
        lines += [
            f"Lines: mean over replicates; shading (error bars in the data-efficiency figure): {conf} t interval "
            "over replicates.",
            "",
        ]
        for i, name in enumerate(figures, start=1):
            lines += [f"![{_figure_title(name)}]({name})", "", f"*Figure {i}: {_figure_title(name)}.*", ""]
    return "\n".join(lines) + "\n"


FIGURE_CAPTIONS: Final[dict[str, str]] = {
    "p_hat": "p̂ on generated tasks per epoch (α ± k_min shaded)",
    "in_band_share": "Share of seed batches inside the α band per epoch",
    "heldout_accuracy": "Held-out accuracy per epoch",
    "data_efficiency": "Held-out accuracy vs generated tasks so far",
    "difficulty": "Difficulty measures of the generated tasks per epoch",
    "response_length": "Mean agent response length (tokens) per epoch",
}
"""Caption of each figure by file stem (figures.write_figures writes ``<stem>.png``)."""


def _figure_title(name: str) -> str:
    stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return FIGURE_CAPTIONS.get(stem, stem.replace("_", " "))
