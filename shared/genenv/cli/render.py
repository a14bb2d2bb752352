"""Rich renderings shared by commands: the epoch table users watch."""

from __future__ import annotations

import sys
from datetime import UTC

from rich.console import Console
from rich.table import Table

from genenv.contracts.epochs import Epoch
from genenv.contracts.runs import WaitingOn
from genenv.rejections import dominant_rejection, rejection_hint


def stdout_console(width_when_piped: int = 160) -> Console:
    """A console for tables on stdout: the terminal's width, or ``width_when_piped`` when stdout is a file or a pipe
    (Rich would fall back to 80 columns and fold a wide table into unreadable slivers in a log)."""
    return Console(width=None if sys.stdout.isatty() else width_when_piped)


def waiting_line(waiting: WaitingOn) -> str:
    """One line on what a run waits for (the dashboard's run page writes the same words)."""
    since = waiting.since.astimezone(UTC)
    tries = "1 try" if waiting.attempts == 1 else f"{waiting.attempts} tries"
    return (f"waiting on {waiting.dependency} since {since:%H:%M:%S} UTC ({tries}; {waiting.phase} of epoch "
            f"{waiting.epoch}): {waiting.last_error}")


def _f(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


EPOCH_TABLE_LEGEND = (
    "band: share of seed batches in the band · ok/rej: tasks valid/rejected · all/none: tasks solved by every/no "
    "attempt · malf: unparseable replies · var: GRPO groups with reward variance · ctx: simulator prompts with "
    "statistics · steps: optimiser steps agent/simulator · t.tok/r.tok: mean task/response tokens · a.v/s.v: adapter "
    "versions · s: seconds"
)


def epoch_table(
    epochs: list[Epoch], *, title: str = "Epochs", alpha: float | None = None, k_min: float = 0.1
) -> Table:
    """One row per epoch: p̂ (green inside α ± k_min), in-band share, tasks, solved/unsolved, malformed replies,
    share of GRPO groups with reward variance, share of simulator prompts with statistics, optimiser steps per role,
    lengths, adapters, time.

    The caption says why a role was not trained in an epoch (no in-band seed batch, the KL cap, …): an adapter
    version that stops rising is the first thing a user asks about; and why generations were rejected, with the
    likely fix per reason (the next question, when "ok/rej" reads 0/24).
    """
    # Short headers, explained in the caption: the table must fit 120 columns, or rich truncates the numbers.
    caption = [EPOCH_TABLE_LEGEND, *rejection_notes(epochs), *untrained_notes(epochs)]
    table = Table(title=title, header_style="bold", caption="\n".join(caption), caption_justify="left")
    for col in ("ep", "phase", "p̂", "band", "ok/rej", "all/none", "malf", "var", "ctx", "steps", "t.tok", "r.tok",
                "a.v", "s.v", "s"):
        table.add_column(col, justify="right", no_wrap=True)
    for e in epochs:
        s = e.summary
        if s is None:
            table.add_row(str(e.index), e.phase.value, *["…"] * 13)
            continue
        steps = [s.train_metrics.get(kind, {}).get("steps") for kind in ("train_agent", "train_simulator")]
        p = _f(s.p_hat)
        if alpha is not None and s.p_hat is not None and abs(s.p_hat - alpha) <= k_min:
            p = f"[green]{p}[/green]"
        table.add_row(
            str(e.index),
            e.phase.value,
            p,
            _f(s.in_band_share),
            f"{s.tasks_valid}/{s.tasks_rejected}",
            f"{s.tasks_solved}/{s.tasks_unsolved}",
            str(s.malformed_responses),
            _f(s.groups_with_variance_share),
            _f(s.prompts_with_stats_share),
            "/".join("—" if n is None else str(n) for n in steps),
            _f(s.mean_task_tokens, 1),
            _f(s.mean_response_tokens, 1),
            "—" if s.agent_adapter_version is None else str(s.agent_adapter_version),
            "—" if s.simulator_adapter_version is None else str(s.simulator_adapter_version),
            f"{sum(s.phase_seconds.values()):.0f}",
        )
    return table


def phase_table(epochs: list[Epoch], *, title: str = "Where the time went (seconds per phase)") -> Table:
    """One row per epoch: seconds in each phase, and the generation and rollout rates those phases reached."""
    from genenv.contracts.epochs import EpochPhase

    seen = {name for e in epochs if e.summary for name in e.summary.phase_seconds}
    phases = [p.value for p in EpochPhase if p.value in seen] + sorted(seen - {p.value for p in EpochPhase})
    table = Table(title=title, header_style="bold")
    for col in ("epoch", *phases, "total", "tasks/s", "rollouts/s"):
        table.add_column(col, justify="right", no_wrap=True)
    for e in epochs:
        s = e.summary
        if s is None:
            continue
        sec = s.phase_seconds
        generated = s.tasks_valid + s.tasks_rejected
        gen_s, roll_s = sec.get(EpochPhase.GENERATE.value), sec.get(EpochPhase.ROLLOUT.value)
        table.add_row(
            str(e.index),
            *[f"{sec[p]:.1f}" if p in sec else "—" for p in phases],
            f"{sum(sec.values()):.0f}",
            f"{generated / gen_s:.1f}" if gen_s and generated else "—",
            f"{s.rollouts / roll_s:.1f}" if roll_s and s.rollouts else "—",
        )
    return table


def untrained_notes(epochs: list[Epoch], last: int = 6) -> list[str]:
    """One line per (epoch, role) whose training job wrote no adapter, with the job's reason; the last few only."""
    notes = []
    for e in epochs:
        for kind, metrics in sorted((e.summary.train_metrics if e.summary else {}).items()):
            reason = metrics.get("reason")
            kl = metrics.get("kl_at_stop")
            if not reason and metrics.get("early_stopped"):
                notes.append(f"epoch {e.index}: {kind.removeprefix('train_')} update stopped after "
                             f"{metrics.get('steps')} step(s) by the per-epoch KL cap (KL {kl:.3f})")
                continue
            if not reason:
                continue
            detail = f" (KL {kl:.3f})" if isinstance(kl, int | float) else ""
            # Nothing in band because nearly nothing was valid: the rejections are the cause, say which and the fix.
            dominant = None if e.summary is None else dominant_rejection(e.summary.rejections, e.summary.tasks_valid)
            if dominant is not None and kind == "train_simulator":
                detail += f"; {dominant.sentence()}"
            notes.append(f"epoch {e.index}: {kind.removeprefix('train_')} not trained: {reason}{detail}")
    return notes[-last:]


def rejection_notes(epochs: list[Epoch], last: int = 3) -> list[str]:
    """Per epoch (the last few with rejections) its rejected generations per reason, then the likely fix of each
    reason shown, once."""
    counted = [e for e in epochs if e.summary is not None and e.summary.rejections][-last:]
    notes: list[str] = []
    reasons: list[str] = []
    for e in counted:
        assert e.summary is not None
        ordered = sorted(e.summary.rejections.items(), key=lambda item: (-item[1], item[0]))
        notes.append(f"epoch {e.index} rejected: " + " · ".join(f"{reason} {n}" for reason, n in ordered))
        reasons.extend(reason for reason, _ in ordered if reason not in reasons)
    notes.extend(f"  {reason}: {rejection_hint(reason)}" for reason in reasons)
    if counted:
        notes.append("  the rejected generations: genenv runs tasks RUN --epoch N --status rejected (--home for a "
                     "quickstart's run)")
    return notes
