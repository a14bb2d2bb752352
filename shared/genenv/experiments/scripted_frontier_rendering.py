"""Design (c)'s report as markdown, JSON and one figure (genenv.experiments.scripted_frontier's result).

Only formatting: every number comes from FrontierResult (no I/O but the figure's file; the caller writes the rest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from genenv.contracts import modes
from genenv.experiments.scripted_frontier import AAContrast, Contrast, FrontierResult, Paired, RunSummary
from genenv.experiments.stats import Interval
from genenv.json_safe import json_safe

_MEASURE_NAMES = {"mean_p": "mean true p", "in_band": "in-band share", "abs_gap": "mean |p − α|"}
_SET_NAMES = {"non_repeated": "non-repeated tasks", "all": "all tasks"}


def _f(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _iv(iv: Interval | None, signed: bool = True) -> str:
    if iv is None:
        return "–"
    flat = " (zero-width: no spread)" if iv.degenerate else ""
    return f"{_f(iv.estimate, signed=signed)} [{_f(iv.low, signed=signed)}, {_f(iv.high, signed=signed)}]{flat}"


def _p(iv: Interval | None) -> str:
    return "–" if iv is None or iv.p_value is None else f"{iv.p_value:.3g}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_row(header), "|" + "|".join("---" for _ in header) + "|", *(_row(r) for r in rows)]


def _pairs(p: Paired) -> str:
    return ", ".join(f"r{r}: {_f(t)} − {_f(b)} = {_f(d, signed=True)}"
                     for r, t, b, d in zip(p.replicates, p.treated, p.baseline, p.differences, strict=True)) or "none"


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def epoch_means(result: FrontierResult) -> dict[tuple[str, str], list[tuple[int, float, int]]]:
    """(agent, arm) → (epoch, mean over replicates of the run's mean true p that epoch, runs) for the figure and the
    per-epoch table: each replicate weighs the same, whatever its task count."""
    out: dict[tuple[str, str], list[tuple[int, float, int]]] = {}
    for agent in result.design.agents:
        for arm in result.design.arms:
            by_epoch: dict[int, list[float]] = {}
            for run in result.runs:
                if run.agent == agent and run.arm == arm:
                    for epoch, p, _ in run.per_epoch:
                        by_epoch.setdefault(epoch, []).append(p)
            out[(agent, arm)] = [(e, sum(ps) / len(ps), len(ps)) for e, ps in sorted(by_epoch.items())]
    return out


def _primary(c: Contrast, result: FrontierResult) -> list[str]:
    iv = c.paired.interval
    sign = "+" if c.predicted > 0 else "−"
    return [
        f"### {c.endpoint}: {c.agent}, {result.design.treated} − {c.baseline}, {_MEASURE_NAMES[c.measure]}, "
        f"{_SET_NAMES[c.task_set]}", "",
        f"- predicted sign: {sign} (the untrained simulator's tasks sit {result.design.sides[c.agent]} α)",
        f"- estimate [{result.design.confidence:.0%} t interval over replicates]: {_iv(iv)}; "
        f"n = {len(c.paired.differences)}",
        f"- per replicate (treated − baseline): {_pairs(c.paired)}",
        f"- sign-flip p: {_p(iv)}; smallest effect of interest {result.design.smallest_effects[c.measure]:g}; "
        f"detectable with 80 % power: {_f(c.detectable)}",
        f"- **{c.decision}**: {c.reason}", "",
    ]


def _side_lines(result: FrontierResult) -> list[str]:
    """Whether epoch 0 bears out each agent's pre-registered side (a failed one reverses what D-side means)."""
    lines = []
    for agent, side in result.design.sides.items():
        ps = [p for r in result.runs if r.agent == agent for e, p, _ in r.per_epoch if e == 0]
        mean = _mean(ps)
        if mean is None:
            lines.append(f"- {agent}: no epoch-0 tasks")
            continue
        observed = "above" if mean > result.design.alpha else "below"
        verdict = "as pre-registered" if observed == side else f"NOT {side} α as pre-registered"
        lines.append(f"- {agent}: epoch-0 mean true p {mean:.3f} over {len(ps)} runs, {observed} α ({verdict})")
    return lines


def _dose_lines(runs: Sequence[RunSummary], result: FrontierResult) -> list[str]:
    lines = []
    for agent in result.design.agents:
        for arm in result.design.arms:
            group = [r for r in runs if r.agent == agent and r.arm == arm]
            doses = [r.trained_share for r in group if r.trained_share is not None]
            repeats = [r.repeat_share for r in group if r.repeat_share is not None]
            zero = [str(r.replicate) for r in group if not r.trained_share]
            lines.append(f"- {agent} / {arm}: trained-writer share (epochs ≥ 1) mean {_f(_mean(doses))}, min "
                         f"{_f(min(doses) if doses else None)}; runs with none: {', '.join(zero) or 'none'}; "
                         f"repeat share mean {_f(_mean(repeats))}")
    return lines


def _secondary_row(c: Contrast, treated: str) -> list[str]:
    return [c.agent, f"{treated} − {c.baseline}", _MEASURE_NAMES[c.measure], _SET_NAMES[c.task_set],
            "+" if c.predicted > 0 else "−", str(len(c.paired.differences)), _iv(c.paired.interval),
            _p(c.paired.interval), _pairs(c.paired), f"{c.decision}: {c.reason}"]


def _aa_row(a: AAContrast) -> list[str]:
    iv = a.paired.interval
    covers = "–" if iv is None else ("yes" if iv.low <= 0 <= iv.high else "NO")
    return [a.agent, a.baseline, _MEASURE_NAMES[a.measure], str(len(a.paired.differences)), _iv(iv), _p(iv), covers]


def render_markdown(result: FrontierResult) -> str:
    """report.md of design (c)."""
    d = result.design
    sides = ", ".join(f"{a} {s} α" for a, s in d.sides.items())
    effects = ", ".join(f"{_MEASURE_NAMES[m]} {v:g}" for m, v in d.smallest_effects.items())
    lines = [
        "# Issue 34, design (c): scripted agents with a known frontier", "",
        f"α = {d.alpha:g}, in band: |p − α| ≤ {d.k_min:g}; treated {d.treated}, baselines {', '.join(d.baselines)}; "
        f"sides (fixed before the run): {sides}; smallest effects: {effects}; {d.confidence:.0%} t intervals over "
        f"replicates, sign-flip p. Effects use epochs ≥ 1 (epoch 0 is the untrained simulator's in every arm).",
        f"Replicates analysed: {len(result.replicates)} — {', '.join(map(str, result.replicates)) or 'none'}.", "",
        "## Primary endpoints", "",
    ]
    for c in result.primary:
        lines += _primary(c, result)
    lines += ["## Sides at epoch 0", "", *_side_lines(result), "", "## Dose and repeats", "",
              *_dose_lines(result.runs, result), "", "## Secondary contrasts", ""]
    lines += _table(["agent", "contrast", "measure", "tasks", "predicted", "n", "estimate [interval]", "p",
                     "per replicate", "decision"], [_secondary_row(c, d.treated) for c in result.secondary])
    lines += ["", "## Runs (epochs ≥ 1 unless marked)", ""]
    lines += _table(
        ["agent", "arm", "replicate", "tasks non-rep / all", "mean p non-rep", "in band non-rep", "|p − α| non-rep",
         "mean p all", "in band all", "epoch-0 mean p (tasks)", "repeat share", "trained share"],
        [[r.agent, r.arm, str(r.replicate), f"{r.non_repeated.tasks} / {r.all.tasks}", _f(r.non_repeated.mean_p),
          _f(r.non_repeated.in_band), _f(r.non_repeated.abs_gap), _f(r.all.mean_p), _f(r.all.in_band),
          f"{_f(r.epoch0.mean_p)} ({r.epoch0.tasks})", _f(r.repeat_share), _f(r.trained_share)] for r in result.runs])
    means = epoch_means(result)
    epochs = sorted({e for series in means.values() for e, _, _ in series})
    lines += ["", "## Mean true p per epoch (all tasks; mean over replicates)", ""]
    lines += _table(["agent", "arm", *(f"epoch {e}" for e in epochs)],
                    [[agent, arm, *(next((f"{p:.3f}" for x, p, _ in series if x == e), "–") for e in epochs)]
                     for (agent, arm), series in means.items()])
    lines += ["", "## A/A: epoch 0, treated − baseline (no verdict; the interval should cover 0)", ""]
    lines += _table(["agent", "baseline", "measure", "n", "estimate [interval]", "p", "covers 0"],
                    [_aa_row(a) for a in result.aa])
    lines.append("")
    return "\n".join(lines)


def to_json(result: FrontierResult) -> dict[str, Any]:
    """report.json: the result as plain data, with the per-epoch means the figure draws."""
    data: dict[str, Any] = json_safe(dataclasses.asdict(result))
    data["epoch_means"] = [{"agent": agent, "arm": arm, "points": [list(p) for p in series]}
                           for (agent, arm), series in epoch_means(result).items()]
    return data


def plot(result: FrontierResult, path: Path | str) -> Path:
    """One panel per agent: mean true p per epoch per arm (mean over replicates), α as a line and the band shaded.
    matplotlib (the `bench` extra) is imported here so the analysis never needs it; the Agg canvas draws without
    pyplot's global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    d = result.design
    means = epoch_means(result)
    fig = Figure(figsize=(5.5 * max(1, len(d.agents)), 4.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(d.agents)), squeeze=False)[0]
    for ax, agent in zip(axes, d.agents, strict=False):
        ax.axhspan(max(0.0, d.alpha - d.k_min), min(1.0, d.alpha + d.k_min), color="#bbbbbb", alpha=0.3, linewidth=0,
                   label=f"band α ± {d.k_min:g}")
        ax.axhline(d.alpha, color="#555555", linestyle="--", linewidth=1, label=f"α = {d.alpha:g}")
        for arm in d.arms:
            series = means.get((agent, arm), [])
            if series:
                ax.plot([e for e, _, _ in series], [p for _, p, _ in series], marker="o", color=modes.colour(arm),
                        label=f"{modes.label(arm)} (runs {max(n for _, _, n in series)})", gid=f"mode:{arm}")
        ax.set_title(f"{agent} (epoch-0 tasks {d.sides[agent]} α)")
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("mean true p")
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    out = Path(path)
    fig.savefig(out, dpi=110)
    return out
