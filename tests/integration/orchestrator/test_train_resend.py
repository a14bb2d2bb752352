"""The TRAIN phase's re-send of a pending train job backs off (services/genenv_orchestrator/phases.py): sent at
once, again after stall_timeout_s if still pending, then after 2×, 4×, 8× and never more than 8× — a job queued
behind a busy trainer is not re-delivered every 30 s — while a send the broker refused is retried at once and does
not lengthen the wait. Real SQLite and Postgres; the clock is the phase's own, set by the test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import JobKind, JobStatus
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import session_scope
from genenv.db.repositories import runs, train_jobs
from genenv.settings import GenEnvSettings
from genenv_orchestrator import phases
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.phases import PhaseResult, RunView

STALL = 30.0


class Queue:
    """Records each train message; refuses the next ``refuse`` sends as a broker that is away would."""

    inline = False

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []
        self.refuse = 0

    async def rollout(self, run_id: str, epoch: int) -> None:
        raise AssertionError("not in this test")

    async def train(self, job_id: int, kind: str) -> None:
        if self.refuse:
            self.refuse -= 1
            raise ConnectionError("broker away")
        self.sent.append((job_id, kind))

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        raise AssertionError("not in this test")


async def test_a_pending_train_job_is_re_sent_with_backoff(
        sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    config = RunConfig.model_validate({"mode": "agent_only", "domain": "arithmetic"})
    with session_scope(sessions) as s:
        run = runs.create(s, config)
        runs.move(s, run, RunStatus.RUNNING)
        view = RunView(id=run.id, config=config)
    queue = Queue()
    unused: Any = None  # the phase reads the database and the dispatcher only
    ctx = OrchestratorContext(
        settings=GenEnvSettings.model_validate({"orchestrator": {"stall_timeout_s": STALL}}), session_factory=sessions,
        simulator=unused, verifier=unused, curriculum=unused, dispatcher=queue, publisher=unused)
    start = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    clock = [start]
    monkeypatch.setattr(phases, "_now", lambda: clock[0])

    async def at(seconds: float) -> int:
        """The phase at start + seconds; how many messages it sent."""
        clock[0] = start + timedelta(seconds=seconds)
        before = len(queue.sent)
        assert await phases.train(ctx, view, 0) is PhaseResult.WAITING
        return len(queue.sent) - before

    assert await at(0) == 1                      # first send
    assert await at(29) == 0 and await at(31) == 1   # still pending after stall_timeout_s: sent again (as before)
    assert await at(31 + 59) == 0 and await at(31 + 61) == 1          # then after 2 ×
    assert await at(92 + 119) == 0 and await at(92 + 121) == 1        # 4 ×
    assert await at(213 + 239) == 0 and await at(213 + 241) == 1      # 8 ×
    assert await at(454 + 239) == 0 and await at(454 + 241) == 1      # never more than 8 ×
    queue.refuse = 1                             # the broker is away at the next due send
    with pytest.raises(ConnectionError):
        await at(695 + 241)
    assert await at(695 + 242) == 1              # not marked sent: retried at the next try, not 8 × later
    with session_scope(sessions) as s:
        job = train_jobs.create_or_get_job(s, run.id, 0, JobKind.TRAIN_AGENT)
        assert job.status == JobStatus.PENDING.value and job.metrics[phases.SENDS] == 7  # the refused one not counted
        assert {k for _, k in queue.sent} == {"train_agent"} and len({i for i, _ in queue.sent}) == 1


def test_resend_after_doubles_from_the_stall_timeout_and_is_capped() -> None:
    stall = timedelta(seconds=STALL)
    assert [phases.resend_after(stall, n) / stall for n in range(7)] == [1, 1, 2, 4, 8, 8, 8]
