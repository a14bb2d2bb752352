"""What an experiment shows: pure functions from ExperimentSeries to numbers, verdicts and a markdown report.

Every uncertainty is a bootstrap interval over replicates (genenv.experiments.stats), every missing number stays
None (a failed member has fewer epochs, agent_only generates no tasks), and every hypothesis verdict carries a
one-line reason, so the report can be read without the code. Nothing here does I/O; writer.write_report does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from genenv.contracts.experiments import ExperimentSeries, MemberEpoch, MemberSeries
from genenv.contracts.runs import RunMode
from genenv.experiments.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    METHOD,
    Interval,
    bootstrap_diff_ci,
    bootstrap_mean_ci,
    ols_slope,
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
H1_DEADLINE_EPOCH: Final = 2
"""H1: the band must be entered by epoch index 2 (epochs are 0-based, so within the first three epochs)."""
_EPS: Final = 1e-9  # band edges are inclusive; floats such as 0.6 − 0.5 must not fall out of the band
NOT_MEASURED: Final = "not measured"


@dataclass(frozen=True)
class Settings:
    """How intervals are made (recorded in report.json and the markdown)."""

    confidence: float = DEFAULT_CONFIDENCE
    n_resamples: int = DEFAULT_RESAMPLES
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
    """genenv − baseline on one per-member measure, with an interval over replicates."""

    baseline: str
    measure: str
    higher_is_better: bool
    genenv: Interval | None
    baseline_value: Interval | None
    difference: Interval | None


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
    """A hypothesis and whether the data support it: True, False, or None with reason "not measured: …"."""

    hypothesis: str
    statement: str
    holds: bool | None
    reason: str


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


# ---------------------------------------------------------------------------------------------------------- helpers


def in_band(p_hat: float, alpha: float, k_min: float) -> bool:
    """|p̂ − α| ≤ k_min, edges included."""
    return abs(p_hat - alpha) <= k_min + _EPS


def _modes(series: ExperimentSeries) -> list[str]:
    present = {m.mode.value for m in series.members}
    return [m for m in MODE_ORDER if m in present]


def _members(series: ExperimentSeries, mode: str) -> list[MemberSeries]:
    return sorted((m for m in series.members if m.mode.value == mode), key=lambda m: (m.replicate, m.run_id))


def _metric(e: MemberEpoch, key: str) -> float | None:
    value = getattr(e, key)
    return None if value is None else float(value)


def _ci(values: Sequence[float], s: Settings) -> Interval | None:
    return bootstrap_mean_ci(values, s.confidence, s.n_resamples, s.seed) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _band_path(points: Sequence[tuple[int, float]], alpha: float, k_min: float) -> tuple[int | None, bool, int | None]:
    """(first epoch in band, stayed in band every later point, first epoch it left after entering)."""
    ordered = sorted(points)
    first = next((ep for ep, p in ordered if in_band(p, alpha, k_min)), None)
    if first is None:
        return None, False, None
    left = next((ep for ep, p in ordered if ep > first and not in_band(p, alpha, k_min)), None)
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


def mean_curve(stats: Sequence[EpochStats], key: str) -> list[tuple[int, float]]:
    """(epoch, mean over replicates) of one per-epoch metric, where any replicate has it."""
    return [(st.epoch, iv.estimate) for st in stats if (iv := st.metrics.get(key)) is not None]


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


def _effects(members: Sequence[MemberSummary], modes: Sequence[str], s: Settings) -> list[Effect]:
    if GENENV not in modes:
        return []
    out: list[Effect] = []
    for baseline in (b for b in BASELINES if b in modes):
        for key, _, higher in EFFECT_MEASURES:
            g = _member_values(members, GENENV, key)
            b = _member_values(members, baseline, key)
            diff = bootstrap_diff_ci(g, b, s.confidence, s.n_resamples, s.seed) if g and b else None
            out.append(Effect(baseline, key, higher, _ci(g, s), _ci(b, s), diff))
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


def _h1(series: ExperimentSeries, per_epoch: dict[str, list[EpochStats]]) -> Verdict:
    statement = f"genenv's mean p̂ enters the α band by epoch {H1_DEADLINE_EPOCH} and stays in it"
    curve = mean_curve(per_epoch.get(GENENV, []), "p_hat")
    if not curve:
        return Verdict("H1", statement, None, f"{NOT_MEASURED}: no genenv p̂")
    band = _band_text(series.alpha, series.k_min)
    first, stayed, left = _band_path(curve, series.alpha, series.k_min)
    if first is None:
        closest = min(curve, key=lambda pt: abs(pt[1] - series.alpha))
        return Verdict(
            "H1", statement, False, f"mean p̂ never entered {band} (closest {closest[1]:.3f} at epoch {closest[0]})"
        )
    if first > H1_DEADLINE_EPOCH:
        return Verdict("H1", statement, False, f"mean p̂ first entered {band} at epoch {first} (> {H1_DEADLINE_EPOCH})")
    if not stayed and left is not None:
        return Verdict(
            "H1",
            statement,
            False,
            f"mean p̂ entered {band} at epoch {first} but left at epoch {left} ({dict(curve)[left]:.3f})",
        )
    return Verdict(
        "H1", statement, True, f"mean p̂ entered {band} at epoch {first} and stayed through epoch {curve[-1][0]}"
    )


def _find_effect(effects: Sequence[Effect], baseline: str, measure: str) -> Effect | None:
    return next((e for e in effects if e.baseline == baseline and e.measure == measure), None)


def _h2(effects: Sequence[Effect]) -> Verdict:
    statement = "the interval of genenv − random_simulator mean in-band share lies above 0"
    effect = _find_effect(effects, RANDOM, "mean_in_band_share")
    if effect is None or effect.difference is None:
        return Verdict("H2", statement, None, f"{NOT_MEASURED}: needs in-band shares of genenv and random_simulator")
    d = effect.difference
    if d.n < 2 or (d.n_baseline or 0) < 2:
        return Verdict(
            "H2",
            statement,
            None,
            f"{NOT_MEASURED}: an interval needs ≥ 2 replicates per mode (n = {d.n}, {d.n_baseline})",
        )
    text = f"difference {d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
    if d.low > 0:
        return Verdict("H2", statement, True, f"{text} lies above 0")
    return Verdict("H2", statement, False, f"{text} does not lie above 0")


def _h3(members: Sequence[MemberSummary], efficiency: DataEfficiency) -> Verdict:
    statement = (
        "final held-out accuracy genenv ≥ static_augmentation ≥ random_simulator (means), and genenv reaches "
        "static_augmentation's final accuracy with no more generated tasks"
    )
    finals = {m: _mean(_member_values(members, m, "final_heldout_accuracy")) for m in (GENENV, STATIC, RANDOM)}
    missing = [m for m, v in finals.items() if v is None]
    if missing:
        return Verdict("H3", statement, None, f"{NOT_MEASURED}: no final held-out accuracy for {', '.join(missing)}")
    g, st, r = (finals[GENENV] or 0.0), (finals[STATIC] or 0.0), (finals[RANDOM] or 0.0)
    order = g >= st - _EPS and st >= r - _EPS
    rows = {row.mode: row for row in efficiency.rows}
    g_tasks, s_tasks = rows[GENENV].generated_tasks, rows[STATIC].generated_tasks
    means = f"means {g:.3f} / {st:.3f} / {r:.3f}"
    if g_tasks is None or s_tasks is None:
        efficient = False
        tasks = "genenv never reached the target" if g_tasks is None else "static_augmentation has no task count"
    else:
        efficient = g_tasks <= s_tasks + _EPS
        tasks = f"tasks to target {g_tasks:.0f} (genenv) vs {s_tasks:.0f} (static_augmentation)"
    return Verdict("H3", statement, order and efficient, f"{means}{'' if order else ' (order broken)'}; {tasks}")


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
            out[measure] = bootstrap_mean_ci(slopes, s.confidence, s.n_resamples, s.seed)
    return out


def _h4(series: ExperimentSeries, per_epoch: dict[str, list[EpochStats]], slopes: dict[str, Interval]) -> Verdict:
    statement = "genenv's difficulty measures rise over epochs (slope > 0) while its mean p̂ stays in the band"
    curve = mean_curve(per_epoch.get(GENENV, []), "p_hat")
    if not slopes or not curve:
        what = "difficulty measures over ≥ 2 epochs" if not slopes else "p̂"
        return Verdict("H4", statement, None, f"{NOT_MEASURED}: no genenv {what}")
    first, stayed, _ = _band_path(curve, series.alpha, series.k_min)
    rising = all(iv.estimate > 0 for iv in slopes.values())
    parts = [f"{k} {iv.estimate:+.3f}/epoch [{iv.low:+.3f}, {iv.high:+.3f}]" for k, iv in slopes.items()]
    band = (
        "p̂ never in band"
        if first is None
        else (f"p̂ in band from epoch {first}" if stayed else f"p̂ entered the band at epoch {first} but left it")
    )
    return Verdict("H4", statement, rising and first is not None and stayed, f"slopes {'; '.join(parts)}; {band}")


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
    verdicts = [
        _h1(series, per_epoch),
        _h2(effects),
        _h3(members, efficiency),
        _h4(series, per_epoch, slopes),
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
        f"- intervals: {conf} {s.method} bootstrap over replicates (n = replicates; {s.n_resamples} resamples, "
        f"seed {s.seed}). With few replicates percentile intervals are optimistic (too narrow); a zero-width "
        "interval from one replicate states no uncertainty. Cells show mean [low, high]; (n = k) marks cells with "
        "fewer replicates than the mode has.",
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

    lines += ["", "## Effects (genenv − baseline, per-member measures)", ""]
    if result.effects:
        rows = [
            [
                e.baseline,
                _measure_label(e.measure) + ("" if e.higher_is_better else " (lower is better)"),
                _fmt_iv(e.genenv),
                _fmt_iv(e.baseline_value),
                _fmt_iv(e.difference, signed=True),
            ]
            for e in result.effects
        ]
        lines += _table(["baseline", "measure", "genenv", "baseline", "difference"], rows)
    else:
        lines.append(f"{NOT_MEASURED}: needs genenv and random_simulator or static_augmentation members.")

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
    verdict_rows = [
        [v.hypothesis, v.statement, {True: "holds", False: "fails", None: NOT_MEASURED}[v.holds], v.reason]
        for v in result.verdicts
    ]
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
            f"Lines: mean over replicates; shading (error bars in the data-efficiency figure): {conf} {s.method} "
            "bootstrap interval over replicates.",
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
