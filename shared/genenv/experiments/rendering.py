"""An experiment report as markdown: the numbers of genenv.experiments.analysis as tables, verdicts and figure links.

Only formatting: every number comes from ExperimentResult (pure, no I/O; writer.write_report writes the file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from genenv.contracts.experiments import ExperimentSeries
from genenv.experiments.analysis import (
    EFFECT_MEASURES,
    NOT_MEASURED,
    EpochStats,
    ExperimentResult,
    band_text,
)
from genenv.experiments.paired import REPLICATE_MEASURES, PairedComparison, dose_line
from genenv.experiments.series import EPOCH_METRICS
from genenv.experiments.stats import Interval


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
    primary = [[c.baseline, str(len(c.per_replicate)),
                *(_fmt_iv(c.replicate_level.get(k), signed=True) for k in REPLICATE_MEASURES)] for c in result.paired]
    if primary:
        lines += ["Over training runs (the primary intervals: each replicate is one trained simulator, so the "
                  "interval is a t interval over the per-replicate estimates, paired by replicate seed; "
                  "– with fewer than two replicates):", ""]
        lines += _table(["baseline", "replicates", "in-band difference", "Δ|p̂ − α|", "toward the frontier",
                         "Δp̂ below α", "Δp̂ above α"], primary)
        lines += ["", "Over seed batches (secondary: conditional on the simulators these replicates trained):", ""]
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


def _repeats_section(result: ExperimentResult) -> list[str]:
    """Repeat shares and in-band yield per mode; the paired effects on non-repeated tasks; the two-sided endpoints."""
    lines = ["", "## Repeats, yield and non-repeated tasks", "",
             "Repeat share: valid tasks of epochs ≥ 1 that repeat, word for word (the domain's canonical form, "
             "whitespace normalised), a valid task of an earlier epoch of the same run. In-band yield: valid tasks of "
             "in-band seed batches per 1,000 valid agent attempts (epochs ≥ 1). Mean [t interval] over replicates.",
             ""]
    lines += _table(["mode", "repeat share", "in-band tasks per 1,000 attempts"],
                    [[mode, _fmt_iv(m.get("repeat_share")), _fmt_iv(m.get("in_band_per_1000_attempts"), 1)]
                     for mode, m in result.mode_measures.items()])
    fresh = [[c.baseline, str(c.pairs), *(_fmt_iv(c.replicate_level.get(k), signed=True)
                                          for k in REPLICATE_MEASURES)] for c in result.paired_fresh]
    if fresh:
        lines += ["", "On non-repeated tasks only (each seed batch's p̂ over its valid tasks that repeat nothing; "
                  "intervals over training runs):", ""]
        lines += _table(["baseline", "pairs", "in-band difference", "Δ|p̂ − α|", "toward the frontier",
                         "Δp̂ below α", "Δp̂ above α"], fresh)
    if result.sides:
        lines += ["", "Both sides of α, by the pre-registered side of each difficulty group (genenv − baseline p̂; "
                  "above: predicted < 0, below: predicted > 0):", ""]
        lines += _table(["baseline", "side", "tasks", "pairs", "over replicates (primary)", "over seed batches",
                         "per replicate"],
                        [[s.baseline, s.side, s.tasks, str(s.pairs), _fmt_iv(s.replicate_level, signed=True),
                          _fmt_iv(s.seed_batches, signed=True),
                          ", ".join(f"r{r} {v:+.3f}" for r, v in s.per_replicate.items())] for s in result.sides])
    return lines


def _dose_section(result: ExperimentResult) -> list[str]:
    if not result.doses:
        return []
    return ["", "## Dose (simulator updates that later wrote tasks: genenv, and generic_rwr at the same settings)", "",
            *(f"- {dose_line(d)}" for d in result.doses)]


def _measure_label(key: str) -> str:
    return next((label for k, label, _ in EFFECT_MEASURES if k == key), key)


def _effects_section(result: ExperimentResult) -> list[str]:
    """The per-member effects table."""
    lines: list[str] = []
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
    return lines


def _efficiency_section(result: ExperimentResult) -> list[str]:
    """Generated tasks each mode needs to reach the target."""
    lines: list[str] = []
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
    return lines


def _members_section(result: ExperimentResult) -> list[str]:
    """One row per member run ([] without members)."""
    lines: list[str] = []
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
    return lines


def _figures_section(figures: Sequence[str], conf: str) -> list[str]:
    """Links to the figures with their captions ([] without figures)."""
    lines: list[str] = []
    if figures:
        lines += ["", "## Figures", ""]
        lines += [
            f"Lines: mean over replicates; shading (error bars in the data-efficiency figure): {conf} t interval "
            "over replicates.",
            "",
        ]
        for i, name in enumerate(figures, start=1):
            lines += [f"![{_figure_title(name)}]({name})", "", f"*Figure {i}: {_figure_title(name)}.*", ""]
    return lines


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
        f"- α = {series.alpha:.3f}, k_min = {series.k_min:.3f} (band {band_text(series.alpha, series.k_min)}); "
        f"epochs = {series.epochs}",
        f"- modes: {', '.join(result.modes) or '–'}; replicates per mode: {reps_text}",
        f"- intervals: {conf} Student-t intervals. Per-mode cells: over replicates (n = replicates); effects: "
        "paired — per-member measures by replicate (replicate r of every mode draws the same seeds), seed batches "
        "by (replicate, epoch, seed), with the paired permutation test's p (McNemar's exact test for in-band "
        "share). The verdicts use the interval over training runs (per-replicate estimates), the seed-batch "
        "intervals are secondary. Epoch 0 is an A/A check (no simulator trained yet) and is left out of every "
        "effect. A zero-width interval (one replicate, or no spread) states no uncertainty. Cells show mean "
        "[low, high]; (n = k) marks cells with fewer replicates than the mode has.",
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

    lines += _effects_section(result)
    lines += _paired_section(result)
    lines += _repeats_section(result)
    lines += _dose_section(result)
    lines += _efficiency_section(result)
    lines += ["", "## Hypotheses", ""]
    verdict_rows = [[v.hypothesis, v.statement, v.status, v.reason] for v in result.verdicts]
    lines += _table(["", "hypothesis", "verdict", "why"], verdict_rows)
    lines += _members_section(result)
    lines += _figures_section(figures, conf)
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
