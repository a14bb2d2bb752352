"""A phase's clock and a process that ends mid-phase (services/genenv_orchestrator/loop.py): an embedded driver that
finds the phase started before it began restarts the clock, so phase_seconds (and the wall times summed from them)
leave out the hours between a session's end and the next `genenv experiment resume`; a distributed orchestrator,
whose workers went on meanwhile, keeps the first start, and a phase this process started keeps its clock. Real SQLite
and Postgres."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import session_scope
from genenv.db.models import EpochRow
from genenv.db.repositories import runs
from genenv.settings import GenEnvSettings
from genenv_orchestrator import loop
from genenv_orchestrator import queries as q
from genenv_orchestrator.context import OrchestratorContext

HOUR = 3600.0


class Dispatch:
    def __init__(self, inline: bool) -> None:
        self.inline = inline


def _run_in_phase(sessions: sessionmaker[Session], started_ago_s: float) -> tuple[str, float]:
    """A running run at epoch 0's GENERATE, begun ``started_ago_s`` ago; that start."""
    started = time.time() - started_ago_s
    with session_scope(sessions) as s:
        run = runs.create(s, RunConfig.model_validate({"mode": "genenv", "domain": "arithmetic"}))
        runs.move(s, run, RunStatus.RUNNING)
        s.add(EpochRow(run_id=run.id, index=0, phase="generate", summary={"_phase_started": {"generate": started}}))
        return run.id, started


def _clock(sessions: sessionmaker[Session], run_id: str, inline: bool) -> float:
    unused: Any = None
    ctx = OrchestratorContext(settings=GenEnvSettings(), session_factory=sessions, simulator=unused, verifier=unused,
                              curriculum=unused, dispatcher=Dispatch(inline), publisher=unused)
    step = loop._next_step(ctx, run_id, None)
    assert not isinstance(step, str)
    with session_scope(sessions) as s:
        row = q.get_or_create_epoch(s, run_id, 0)
        started = q.phase_started(row, step.phase)
        assert started is not None
        return started


@pytest.mark.parametrize("inline", [True, False])
def test_a_phase_interrupted_with_an_earlier_process(
        sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch, inline: bool) -> None:
    monkeypatch.setattr(loop, "PROCESS_STARTED", time.time() - 60)  # this process began a minute ago
    run_id, first = _run_in_phase(sessions, started_ago_s=2 * HOUR)  # the phase, two hours ago: another process
    before = time.time()
    restarted = _clock(sessions, run_id, inline)
    if inline:  # the embedded driver did the work itself: the gap is left out
        assert restarted >= before
        assert _clock(sessions, run_id, inline) == restarted  # once: later steps of this process keep it
    else:  # workers may have gone on while the orchestrator was down: the first start stays
        assert restarted == pytest.approx(first)


def test_a_phase_this_process_started_keeps_its_clock(
        sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "PROCESS_STARTED", time.time() - HOUR)
    run_id, first = _run_in_phase(sessions, started_ago_s=600)  # after this process began
    assert _clock(sessions, run_id, inline=True) == pytest.approx(first)
