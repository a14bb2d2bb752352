"""The experiment report's figures: one PNG per quantity, every mode in its fixed colour, mean ± t interval.

Built without pyplot (as genenv.observability.plot), so no global state or GUI backend; needs matplotlib (the
`bench` extra). A figure none of the members has data for is skipped, not drawn empty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from genenv.contracts import modes
from genenv.contracts.experiments import ExperimentSeries
from genenv.experiments.analysis import EpochStats, ExperimentResult
from genenv.experiments.stats import Interval
from genenv.observability.plot import style_axes

BAND_COLOUR: Final = "#bbbbbb"
CI_ALPHA: Final = 0.2  # opacity of the shaded interval around each mean line

Getter = Callable[[EpochStats], Interval | None]


def colour(mode: str) -> str:
    """The mode's colour from the run-mode table, the dashboard's too (an unknown mode gets a fixed fallback)."""
    return modes.colour(mode)


def _points(stats: Sequence[EpochStats], get: Getter) -> list[tuple[int, Interval]]:
    return [(st.epoch, iv) for st in stats if (iv := get(st)) is not None]


def _has(result: ExperimentResult, get: Getter) -> bool:
    return any(_points(stats, get) for stats in result.per_epoch.values())


def _mean_band(ax: Axes, result: ExperimentResult, get: Getter) -> None:
    """Each mode's mean line with its shaded interval (a legend entry names n)."""
    for mode, stats in result.per_epoch.items():
        pts = _points(stats, get)
        if not pts:
            continue
        xs = [ep for ep, _ in pts]
        c = colour(mode)
        ax.plot(
            xs,
            [iv.estimate for _, iv in pts],
            marker="o",
            color=c,
            gid=f"mode:{mode}",
            label=f"{modes.label(mode)} (n = {result.replicates[mode]})",
        )
        ax.fill_between(xs, [iv.low for _, iv in pts], [iv.high for _, iv in pts], color=c, alpha=CI_ALPHA, linewidth=0)


def _style(ax: Axes, title: str, ylabel: str, share: bool, xlabel: str = "epoch") -> None:
    style_axes(ax, title, share, xlabel=xlabel, ylabel=ylabel)
    if xlabel == "epoch":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")


def _caption(series: ExperimentSeries, result: ExperimentResult) -> str:
    s = result.settings
    return (
        f"{series.name} · {series.domain} · α={series.alpha} k_min={series.k_min} · "
        f"mean and {s.confidence:.0%} {s.method} interval over replicates"
    )


def _metric_figure(
    series: ExperimentSeries, result: ExperimentResult, key: str, title: str, ylabel: str, share: bool
) -> Figure | None:
    def get(st: EpochStats) -> Interval | None:
        return st.metrics.get(key)

    if not _has(result, get):
        return None
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    if key == "p_hat":
        low, high = max(0.0, series.alpha - series.k_min), min(1.0, series.alpha + series.k_min)
        ax.axhspan(low, high, color=BAND_COLOUR, alpha=0.35, gid="band", label="α ± k_min")
        ax.axhline(series.alpha, color="grey", linestyle="--", linewidth=1)
    _mean_band(ax, result, get)
    _style(ax, title, ylabel, share)
    fig.suptitle(_caption(series, result), fontsize=8)
    return fig


def _data_efficiency_figure(series: ExperimentSeries, result: ExperimentResult) -> Figure | None:
    curves: dict[str, list[tuple[float, Interval]]] = {}
    for mode, stats in result.per_epoch.items():
        pts = [
            (tasks.estimate, acc)
            for st in stats
            if (acc := st.metrics.get("heldout_accuracy")) is not None
            and (tasks := st.metrics.get("generated_tasks_so_far")) is not None
        ]
        if pts:
            curves[mode] = pts
    if not curves:
        return None
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    for mode, pts in curves.items():
        c = colour(mode)
        ax.errorbar(
            [x for x, _ in pts],
            [iv.estimate for _, iv in pts],
            yerr=[[iv.estimate - iv.low for _, iv in pts], [iv.high - iv.estimate for _, iv in pts]],
            marker="o",
            color=c,
            capsize=3,
            gid=f"mode:{mode}",
            label=f"{modes.label(mode)} (n = {result.replicates[mode]})",
        )
    target = result.data_efficiency.target
    if target is not None:
        ax.axhline(
            target,
            color=colour("static_augmentation"),
            linestyle=":",
            linewidth=1,
            label="static_augmentation final",
            gid="target",
        )
    ax.set_xlim(left=0.0)
    _style(ax, "Held-out accuracy vs generated tasks", "held-out accuracy", True, xlabel="generated tasks so far")
    fig.suptitle(_caption(series, result), fontsize=8)
    return fig


def _difficulty_figure(series: ExperimentSeries, result: ExperimentResult) -> Figure | None:
    measures = sorted({k for stats in result.per_epoch.values() for st in stats for k in st.difficulty})
    if not measures:
        return None
    fig = Figure(figsize=(max(7.0, 5.0 * len(measures)), 4.5), layout="constrained")
    axes = fig.subplots(1, len(measures), squeeze=False)[0]
    for ax, measure in zip(axes, measures, strict=True):

        def get(st: EpochStats, measure: str = measure) -> Interval | None:
            return st.difficulty.get(measure)

        _mean_band(ax, result, get)
        slope = result.difficulty_slopes.get(measure)
        title = measure if slope is None else f"{measure} (genenv slope {slope.estimate:+.3f}/epoch)"
        _style(ax, title, series.difficulty_measures.get(measure, measure), False)
    fig.suptitle(_caption(series, result), fontsize=8)
    return fig


def write_figures(series: ExperimentSeries, result: ExperimentResult, out_dir: Path) -> list[Path]:
    """Writes the PNGs into ``out_dir`` (created if needed) and returns the paths written, in report order."""
    builders: list[tuple[str, Callable[[], Figure | None]]] = [
        ("p_hat.png", lambda: _metric_figure(series, result, "p_hat", "p̂ on generated tasks", "p̂", True)),
        (
            "in_band_share.png",
            lambda: _metric_figure(
                series, result, "in_band_share", "Seed batches inside the α band", "in-band share", True
            ),
        ),
        (
            "heldout_accuracy.png",
            lambda: _metric_figure(
                series,
                result,
                "heldout_accuracy",
                f"Held-out accuracy ({series.heldout_benchmark or 'held-out benchmark'})",
                "accuracy",
                True,
            ),
        ),
        ("data_efficiency.png", lambda: _data_efficiency_figure(series, result)),
        ("difficulty.png", lambda: _difficulty_figure(series, result)),
        (
            "response_length.png",
            lambda: _metric_figure(
                series, result, "mean_response_tokens", "Mean agent response length", "tokens", False
            ),
        ),
    ]
    return save_figures(out_dir, builders)


def save_figures(out_dir: Path, builders: Sequence[tuple[str, Callable[[], Figure | None]]]) -> list[Path]:
    """Build each (file name, builder) and write it as PNG into ``out_dir`` (created if needed), skipping a builder
    that returns None (no data); the paths written, in order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, build in builders:
        fig = build()
        if fig is None:
            continue
        path = out_dir / name
        fig.savefig(path, dpi=120)
        written.append(path)
    return written
