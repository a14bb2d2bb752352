"""The training-dynamics curves of a run as one matplotlib figure (the dashboard's charts, for logs and CI).

Needs matplotlib (the `bench` extra). The figure is built without pyplot, so no global state or GUI backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from genenv.contracts.epochs import PHASE_ORDER, Epoch, EpochSummary
from genenv.contracts.runs import Run

# (panel title, y is a share in [0, 1], (summary field, legend label)...) — the same curves as the dashboard.
CURVES: tuple[tuple[str, bool, tuple[tuple[str, str], ...]], ...] = (
    ("p̂ on generated tasks (α ± k_min shaded)", True, (("p_hat", "p̂"),)),
    ("Seed batches inside the α band", True, (("in_band_share", "in-band share"),)),
    ("Mean length (tokens)", False, (("mean_response_tokens", "agent response"), ("mean_task_tokens", "task prompt"))),
    ("Simulator generations", False, (("tasks_valid", "valid"), ("tasks_rejected", "rejected"))),
    ("Tasks solved by every / no attempt", False, (("tasks_solved", "solved"), ("tasks_unsolved", "unsolved"))),
    ("Adapter versions", False, (("agent_adapter_version", "agent"), ("simulator_adapter_version", "simulator"))),
)


def _points(epochs: Sequence[Epoch], field: str) -> tuple[list[int], list[float]]:
    """(epoch indexes, values) of the summarised epochs where ``field`` is set."""
    xs: list[int] = []
    ys: list[float] = []
    for e in epochs:
        value = getattr(e.summary, field, None) if e.summary is not None else None
        if value is not None:
            xs.append(e.index)
            ys.append(float(value))
    return xs, ys


def style_axes(ax: Axes, title: str, share: bool, *, xlabel: str = "epoch", ylabel: str | None = None) -> None:
    """The panel style every GenEnv figure uses: title, light grid, small ticks, y from 0 (to 1 for a share)."""
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=8)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=8)
    if share:
        ax.set_ylim(0.0, 1.0)
    else:
        ax.set_ylim(bottom=0.0)


def _benchmarks(ax: Axes, done: list[tuple[int, EpochSummary]]) -> None:
    names = sorted({name for _, s in done for name in s.benchmark_scores})
    for name in names:
        pts = [(i, s.benchmark_scores[name]) for i, s in done if name in s.benchmark_scores]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name, gid=f"benchmark:{name}")
    if not names:
        ax.text(0.5, 0.5, "no evaluations", ha="center", va="center", transform=ax.transAxes, color="grey")


def _phase_bars(ax: Axes, done: list[tuple[int, EpochSummary]]) -> None:
    known = [p.value for p in PHASE_ORDER]
    seen = {name for _, s in done for name in s.phase_seconds}
    phases = [p for p in known if p in seen] + sorted(seen - set(known))
    bottoms = [0.0] * len(done)
    for phase in phases:
        heights = [s.phase_seconds.get(phase, 0.0) for _, s in done]
        ax.bar([i for i, _ in done], heights, bottom=bottoms, label=phase, gid=f"phase:{phase}")
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]


def build_figure(run: Run, epochs: Sequence[Epoch]) -> Figure:
    """One panel per curve; every line's gid is ``curve:<summary field>`` (``benchmark:<name>`` for scores)."""
    fig = Figure(figsize=(13, 13), layout="constrained")
    axes = fig.subplots(4, 2).flatten()
    cfg = run.config
    fig.suptitle(
        f"{run.name} · {run.status.value} · {cfg.mode} on {cfg.domain} · "
        f"α={cfg.curriculum.alpha} k_min={cfg.curriculum.k_min} · run {run.id}",
        fontsize=11,
    )
    for ax, (title, share, series) in zip(axes, CURVES, strict=False):
        # The second series is dashed so equal curves (e.g. both adapter versions) stay distinguishable.
        for (field, label), style in zip(series, ("-", "--"), strict=False):
            xs, ys = _points(epochs, field)
            ax.plot(xs, ys, marker="o", linestyle=style, label=label, gid=f"curve:{field}")
        style_axes(ax, title, share)
        ax.legend(fontsize=8, loc="best")
    alpha, k_min = cfg.curriculum.alpha, cfg.curriculum.k_min
    axes[0].axhspan(max(0.0, alpha - k_min), min(1.0, alpha + k_min), color="tab:green", alpha=0.15, gid="band")
    axes[0].axhline(alpha, color="tab:green", linestyle="--", linewidth=1)

    done = [(e.index, e.summary) for e in epochs if e.summary is not None]
    _benchmarks(axes[6], done)
    style_axes(axes[6], "Benchmark scores", False)
    _phase_bars(axes[7], done)
    style_axes(axes[7], "Phase wall time (s)", False)
    for ax in axes[6:]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    indexes = [e.index for e in epochs] or [0]
    for ax in axes:
        ax.set_xlim(min(indexes) - 0.5, max(indexes) + 0.5)  # every panel on the same epoch axis
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[5].yaxis.get_major_locator().set_params(integer=True)
    return fig
