"""Drive a run to the end in this process (embedded default), reporting progress phase by phase."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from genenv.contracts.epochs import EpochPhase
from genenv.contracts.runs import WaitingOn
from genenv.lifecycle import RUN_AT_REST
from genenv.outages import DATABASE, Outage, classify
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.loop import PhaseCallback, advance, retry_backoff

log = logging.getLogger(__name__)

_AT_REST = {s.value for s in RUN_AT_REST}

WaitCallback = Callable[[WaitingOn], None]
"""Called with what the run waits on when the database itself is away (so nothing can be stored): each try."""


async def drive(
    ctx: OrchestratorContext,
    run_id: str,
    on_phase: PhaseCallback | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_wait: WaitCallback | None = None,
) -> str:
    """Advance until the run completes, fails, is paused or cancelled; returns the final status.

    A database that does not answer is waited out here, however long it is away: ``advance`` can record neither
    the wait nor a failure, so the wait is kept in memory (logged, and handed to ``on_wait``) and ``advance`` is
    tried again with the orchestrator's backoff. Any other error ends the drive as before.
    """
    at: tuple[int, EpochPhase] | None = None
    waiting: WaitingOn | None = None

    def seen(run: str, epoch: int, phase: EpochPhase, event: str) -> None:
        nonlocal at
        at = (epoch, phase)
        if on_phase is not None:
            on_phase(run, epoch, phase, event)

    while not should_stop():
        try:
            outcome = await advance(ctx, run_id, seen)
        except Exception as exc:
            outage = classify(exc, ctx.settings.services)
            if outage is None or outage.dependency != DATABASE:
                raise
            waiting = _database_wait(waiting, outage, at)
            log.warning("run %s waits on the database (try %d, since %s): %s", run_id, waiting.attempts,
                        waiting.since.isoformat(timespec="seconds"), outage.error)
            if on_wait is not None:
                on_wait(waiting)
            if at is not None and on_phase is not None:
                on_phase(run_id, at[0], at[1], "retry")
            await asyncio.sleep(retry_backoff(ctx.poll_interval_s, waiting.attempts))
            continue
        if waiting is not None:
            log.info("run %s: the database answers again after %d tries", run_id, waiting.attempts)
            waiting = None
        if outcome in _AT_REST or outcome == "missing":
            return outcome
        if outcome in ("busy", "waiting"):  # another advancer holds the run, or the run waits for an outside
            await asyncio.sleep(ctx.poll_interval_s)  # agent's attempts: look again after the poll interval
    return "stopped"


def _database_wait(before: WaitingOn | None, outage: Outage, at: tuple[int, EpochPhase] | None) -> WaitingOn:
    """The in-memory record of a database outage, ``since`` kept from its first try."""
    # Before the first phase was read the driver does not know where the run is: epoch 0, phase "unknown".
    epoch, phase = at if at is not None else (0, None)
    return WaitingOn(dependency=outage.dependency, since=before.since if before else datetime.now(UTC),
                     last_error=outage.error, attempts=1 if before is None else before.attempts + 1,
                     epoch=epoch, phase="unknown" if phase is None else phase.value)


PHASE_LABEL = {
    EpochPhase.GENERATE: "simulator writes tasks",
    EpochPhase.ROLLOUT: "agent attempts tasks",
    EpochPhase.VERIFY: "verifier scores attempts",
    EpochPhase.SCORE: "α-curriculum scoring",
    EpochPhase.TRAIN: "GRPO (agent) + RWR (simulator)",
    EpochPhase.PUBLISH: "hot-load adapters",
    EpochPhase.EVALUATE: "benchmarks",
    EpochPhase.CLOSE: "epoch summary",
}
