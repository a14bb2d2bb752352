"""The learning experiment's figures (genenv.experiments.learning, learning_calibration): what a reader would rather
look at than read — each contrast's per-replicate differences against 0 and the smallest effect of interest, the
arms' held-out curves and p̂ dynamics, and the calibration's gain per dose against its criterion.

Built without pyplot (as genenv.experiments.figures), so no global state or GUI backend; needs matplotlib (the
`bench` extra). Only drawing: every number comes from the result objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from genenv.contracts import modes
from genenv.experiments.figures import save_figures
from genenv.experiments.learning import FILTER, LEARNING_PROGRESS, ArmEpoch, LearningResult
from genenv.experiments.learning_calibration import CalibrationResult
from genenv.experiments.stats import Interval
from genenv.observability.plot import style_axes

CI_ALPHA: Final = 0.2
SESOI_COLOUR: Final = "#2ca02c"
# The two random_simulator arms need colours of their own (the mode table has one for random_simulator).
_ARM_COLOURS: Final = {FILTER: modes.colour("random_simulator"), LEARNING_PROGRESS: "#17becf"}


def arm_colour(arm: str) -> str:
    """An arm's colour: its mode's (the run-mode table's), the filter arm random_simulator's, learning_progress its
    own."""
    return _ARM_COLOURS.get(arm) or modes.colour(arm)


def _contrasts_figure(result: LearningResult) -> Figure | None:
    """One row per contrast: every replicate's difference (dots), the mean with the primary interval (thick) and the
    95 % one (thin), 0 and the smallest effect of interest marked, (0, SESOI) shaded."""
    rows = [c for c in result.contrasts if c.differences]
    if not rows:
        return None
    fig = Figure(figsize=(7.5, 1.2 + 0.9 * len(rows)), layout="constrained")
    ax = fig.subplots()
    ax.axvspan(0.0, result.smallest_effect, color=SESOI_COLOUR, alpha=0.12, linewidth=0,
               label=f"detected, below the smallest effect of interest (0, {result.smallest_effect:g})")
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.axvline(result.smallest_effect, color=SESOI_COLOUR, linewidth=0.8, linestyle="--")
    for y, c in enumerate(reversed(rows)):
        colour = arm_colour(c.baseline)
        n = len(c.differences)
        jitter = [(i - (n - 1) / 2) * (0.25 / max(1, n - 1)) for i in range(n)]
        ax.scatter(c.differences, [y + 0.25 + j for j in jitter], s=14, color=colour, alpha=0.7, zorder=3)
        for iv, width in ((c.interval_95, 1.0), (c.interval, 3.5)):
            if iv is not None:
                ax.plot([iv.low, iv.high], [y, y], color=colour, linewidth=width, solid_capstyle="butt", zorder=2)
        if c.interval is not None:
            ax.plot([c.interval.estimate], [y], marker="D", color="black", markersize=5, zorder=4)
    ax.set_yticks(range(len(rows)), [f"genenv − {c.baseline}\n{c.decision}" for c in reversed(rows)], fontsize=8)
    ax.set_xlabel(f"final held-out accuracy difference (thick: {100 * result.confidence:.2f} % t interval over "
                  "training runs; thin: 95 %; dots: replicates)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(fontsize=7, loc="outside lower center")
    ax.set_title(f"genenv − each baseline over {len(result.analysed_seeds)} replicate(s)", fontsize=10)
    return fig


def _curve(ax: Axes, result: LearningResult, get: Callable[[ArmEpoch], Interval | None],
           x: Callable[[ArmEpoch], float | None]) -> bool:
    """Each arm's mean line with its shaded 95 % interval; False when no arm has the quantity."""
    drawn = False
    for arm in result.arms:
        pts = [(xv, iv) for a in result.dynamics if a.arm == arm
               if (iv := get(a)) is not None and (xv := x(a)) is not None]
        if not pts:
            continue
        drawn = True
        colour = arm_colour(arm)
        xs = [p for p, _ in pts]
        ax.plot(xs, [iv.estimate for _, iv in pts], marker="o", markersize=3, color=colour, label=arm)
        ax.fill_between(xs, [iv.low for _, iv in pts], [iv.high for _, iv in pts], color=colour, alpha=CI_ALPHA,
                        linewidth=0)
    return drawn


def _dynamics_figure(result: LearningResult, alpha: float | None, k_min: float | None) -> Figure | None:
    if not result.dynamics:
        return None
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    (acc, eff), (p_hat, rep) = fig.subplots(2, 2)
    epoch: Callable[[ArmEpoch], float | None] = lambda a: float(a.epoch)  # noqa: E731
    # (axes, title, y label, quantity, x, x label, y spans 0–1): accuracy keeps matplotlib's own y range, as a small
    # model's accuracy would be a flat line at the bottom of 0–1.
    panels: Sequence[tuple[Axes, str, str, Callable[[ArmEpoch], Interval | None], Callable[[ArmEpoch], float | None],
                           str, bool]] = (
        (acc, "Held-out accuracy", "accuracy", lambda a: a.heldout_accuracy, epoch, "epoch", False),
        (eff, "Held-out accuracy against agent attempts", "accuracy", lambda a: a.heldout_accuracy,
         lambda a: a.attempts_so_far, "cumulative realised agent attempts", False),
        (p_hat, "Mean seed-batch p̂ on the epoch's tasks", "p̂", lambda a: a.batch_p_hat, epoch, "epoch", True),
        (rep, "Valid tasks repeating an earlier epoch's", "repeat share", lambda a: a.repeat_share, epoch, "epoch",
         True),
    )
    for ax, title, ylabel, get, x, xlabel, share in panels:
        if ax is p_hat and alpha is not None and k_min is not None:
            ax.axhspan(max(0.0, alpha - k_min), min(1.0, alpha + k_min), color="#bbbbbb", alpha=0.3, linewidth=0,
                       label=f"band α ± k_min ({alpha:g} ± {k_min:g})")
        drawn = _curve(ax, result, get, x)
        style_axes(ax, title if drawn else f"{title}: no data", share, xlabel=xlabel, ylabel=ylabel)
        if not share:
            ax.autoscale(axis="y")
        if xlabel == "epoch":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"Learning experiment, {len(result.analysed_seeds)} replicate(s) per arm: mean and 95 % t interval "
                 "over replicates", fontsize=9)
    return fig


def write_learning_figures(result: LearningResult, out_dir: Path, *, alpha: float | None = None,
                           k_min: float | None = None) -> list[Path]:
    """learning-contrasts.png and learning-dynamics.png into ``out_dir`` (a figure without data is skipped); the
    paths written. ``alpha``/``k_min`` shade the band in the p̂ panel."""
    return save_figures(out_dir, [("learning-contrasts.png", lambda: _contrasts_figure(result)),
                            ("learning-dynamics.png", lambda: _dynamics_figure(result, alpha, k_min))])


def _calibration_figure(result: CalibrationResult) -> Figure | None:
    """Gain over the base per dose (dots: replicates; bar: mean) against the rule's minimum gain, and each
    replicate's reply validity against the collapse threshold; the chosen dose marked."""
    doses = result.decision.doses
    if not doses:
        return None
    rule, base, chosen = result.rule, result.base, result.decision.chosen
    keys = [(d.learning_rate, d.steps) for d in doses]
    labels = [f"lr {lr:g}\n× {steps}" for lr, steps in keys]
    fig = Figure(figsize=(max(6.0, 0.9 * len(doses) + 2), 6.5), layout="constrained")
    gain_ax, valid_ax = fig.subplots(2, 1, sharex=True)
    for i, (d, key) in enumerate(zip(doses, keys, strict=True)):
        outcomes = [o for o in result.outcomes if (o.learning_rate, o.steps) == key]
        is_chosen = chosen is not None and key == (chosen.learning_rate, chosen.steps)
        colour = "#1f77b4" if is_chosen else "#7f7f7f"
        gain_ax.bar(i, d.mean_gain, color=colour, alpha=0.35 if not is_chosen else 0.6, width=0.6)
        gain_ax.scatter([i] * len(outcomes), [o.accuracy - base.accuracy for o in outcomes], s=14, color=colour,
                        zorder=3)
        valid_ax.scatter([i] * len(outcomes), [o.valid_share for o in outcomes], s=14, color=colour, zorder=3)
    gain_ax.axhline(rule.min_gain, color=SESOI_COLOUR, linestyle="--", linewidth=0.9,
                    label=f"criterion: mean gain ≥ {rule.min_gain:g}")
    gain_ax.axhline(0.0, color="black", linewidth=0.8)
    gain_ax.set_ylabel("held-out accuracy − base", fontsize=8)
    gain_ax.set_title(f"Agent-dose calibration: base accuracy {base.accuracy:.3f}"
                      + ("" if chosen is None else f"\nchosen: lr {chosen.learning_rate:g} × {chosen.steps} "
                         f"({'criterion met' if result.decision.criterion_met else 'criterion failed'})"),
                      fontsize=10)
    threshold = rule.collapse_ratio * base.valid_share
    valid_ax.axhline(threshold, color="#d62728", linestyle="--", linewidth=0.9,
                     label=f"collapse below {rule.collapse_ratio:g} × base validity ({threshold:.3f})")
    valid_ax.set_ylim(min(threshold, *(o.valid_share for o in result.outcomes)) - 0.02, 1.005)
    valid_ax.set_ylabel("reply validity (1 − malformed / n)", fontsize=8)
    valid_ax.set_xticks(range(len(doses)), labels, fontsize=8)
    valid_ax.set_xlabel("learning rate × optimiser steps per epoch (dots: replicates)", fontsize=8)
    for ax in (gain_ax, valid_ax):
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7, loc="best")
    return fig


def write_calibration_figure(result: CalibrationResult, out_dir: Path) -> list[Path]:
    """calibration.png into ``out_dir`` (none without doses); the paths written."""
    return save_figures(out_dir, [("calibration.png", lambda: _calibration_figure(result))])
