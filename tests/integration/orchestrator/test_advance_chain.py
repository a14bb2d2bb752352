"""One advance chain per run, and the watchdog that restarts a lost one (issue 22, item 4), on real Postgres.

A broker restart drops the countdown messages a Celery worker held (they would come back only after the visibility
timeout, an hour), and an advance that died with its database could not schedule the next: either way a running
run waited without a word. The orchestrator now stores each scheduled advance's token and due time; a message whose
token was superseded does nothing (so re-enqueuing never forks a second polling chain), and the watchdog re-enqueues
a running run whose advance is overdue while no advancer holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import EpochRow, RunRow, TaskRow
from genenv.db.repositories import runs
from genenv.settings import DatabaseSettings, GenEnvSettings
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.loop import advance, overdue_runs, run_lock

pytestmark = [pytest.mark.postgres]


class Recorder:
    """The Celery dispatcher's part this test needs: what was scheduled."""

    inline = False

    def __init__(self) -> None:
        self.scheduled: list[tuple[str, float, str | None]] = []

    async def rollout(self, run_id: str, epoch: int) -> None:
        return None

    async def train(self, job_id: int, kind: str) -> None:
        return None

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        self.scheduled.append((run_id, delay_s, token))


class NoAdapters:
    async def publish(self, adapter: Any) -> None:
        return None

    async def ensure_latest(self, run_id: str, role: Any) -> str | None:
        return None


@pytest.fixture(scope="module")
def sessions(new_pg_database: Callable[[], str]) -> Iterator[sessionmaker[Session]]:
    url = new_pg_database()
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def _running_run(sessions: sessionmaker[Session], *, due: datetime | None, token: str | None = None) -> str:
    """A running agent_only run whose epoch 0 waits on its rollout job (the phase the orchestrator polls)."""
    with session_scope(sessions) as s:
        run = runs.create(s, RunConfig.model_validate({"mode": "agent_only", "domain": "arithmetic", "epochs": 1}))
        runs.move(s, run, RunStatus.RUNNING)
        s.add(EpochRow(run_id=run.id, index=0, phase="rollout", summary={}))
        s.add(TaskRow(run_id=run.id, epoch=0, seed_id="s", domain="arithmetic", variation=0, status="valid",
                      payload={"expression": "1 + 2", "answer": 3}, raw_text="", prompt_messages=[]))
        s.execute(update(RunRow).where(RunRow.id == run.id).values(advance_token=token, advance_due_at=due))
        return run.id


def _ctx(sessions: sessionmaker[Session], dispatcher: Recorder) -> OrchestratorContext:
    settings = GenEnvSettings.model_validate({"queue": {"eager": False}, "orchestrator": {"poll_interval_s": 2}})
    return OrchestratorContext(settings=settings, session_factory=sessions, simulator=None,  # type: ignore[arg-type]
                               verifier=None, curriculum=None, dispatcher=dispatcher,  # type: ignore[arg-type]
                               publisher=NoAdapters())


def _chain(sessions: sessionmaker[Session], run_id: str) -> tuple[str | None, datetime | None]:
    with session_scope(sessions) as s:
        row = s.execute(select(RunRow.advance_token, RunRow.advance_due_at).where(RunRow.id == run_id)).one()
        return row[0], row[1]


def test_a_scheduled_advance_carries_the_runs_new_token_and_a_superseded_one_does_nothing(
    sessions: sessionmaker[Session],
) -> None:
    run_id = _running_run(sessions, due=None)
    dispatcher = Recorder()
    ctx = _ctx(sessions, dispatcher)
    assert asyncio.run(advance(ctx, run_id)) == "waiting"  # a start/resume message: no token
    (_, delay, first), = dispatcher.scheduled
    token, due = _chain(sessions, run_id)
    assert first is not None and token == first and delay == 2
    assert due is not None and abs((due - datetime.now(UTC)).total_seconds() - 2) < 5
    # The chain's message continues it with a new token; a duplicate of the old message then finds it superseded.
    assert asyncio.run(advance(ctx, run_id, token=first)) == "waiting"
    second = dispatcher.scheduled[-1][2]
    assert second not in (None, first) and _chain(sessions, run_id)[0] == second
    assert asyncio.run(advance(ctx, run_id, token=first)) == "superseded"
    assert len(dispatcher.scheduled) == 2, "a superseded message must not schedule anything"


def test_the_watchdog_re_enqueues_only_overdue_runs_nobody_advances(sessions: sessionmaker[Session]) -> None:
    now = datetime.now(UTC)
    lost = _running_run(sessions, due=now - timedelta(seconds=120), token="t" * 32)
    fine = _running_run(sessions, due=now + timedelta(seconds=5), token="u" * 32)
    busy = _running_run(sessions, due=now - timedelta(seconds=120), token="v" * 32)
    paused = _running_run(sessions, due=now - timedelta(seconds=120))
    with session_scope(sessions) as s:
        runs.transition(s, paused, RunStatus.PAUSED)

    async def sweep_while_busy_is_advanced() -> list[str]:
        async with run_lock(sessions, busy) as got:  # an advancer at work on `busy` (a long phase)
            assert got
            return await asyncio.to_thread(overdue_runs, sessions, 30.0)

    found = set(asyncio.run(sweep_while_busy_is_advanced()))
    assert lost in found and not found & {fine, busy, paused}
    # The lost run's due time moved ahead: the next sweep leaves it to the message just sent.
    assert _chain(sessions, lost)[1] is not None and _chain(sessions, lost)[1] > now  # type: ignore[operator]
    # Next sweep: the lost run is left to the message just sent; the other one is no longer held, so it is due now.
    assert overdue_runs(sessions, 30.0) == [busy]
