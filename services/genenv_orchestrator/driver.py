"""Drive a run to the end in this process (embedded default), reporting progress phase by phase."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from genenv.contracts.epochs import EpochPhase
from genenv.lifecycle import RUN_AT_REST
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.loop import PhaseCallback, advance

_AT_REST = {s.value for s in RUN_AT_REST}


async def drive(
    ctx: OrchestratorContext,
    run_id: str,
    on_phase: PhaseCallback | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> str:
    """Advance until the run completes, fails, is paused or cancelled; returns the final status."""
    while not should_stop():
        outcome = await advance(ctx, run_id, on_phase)
        if outcome in _AT_REST or outcome == "missing":
            return outcome
        if outcome in ("busy", "waiting"):  # another advancer holds the run, or the run waits for an outside
            await asyncio.sleep(ctx.poll_interval_s)  # agent's attempts: look again after the poll interval
    return "stopped"


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
