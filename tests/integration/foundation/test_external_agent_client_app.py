"""genenv.clients.external_agent and bench/scripted_agent.py against the real control plane (issue 33): the async
client through the app in-process (ASGI), the sync client over a socket (the app served by uvicorn in a thread),
with the real in-process verifier scoring the scripted agent's replies, on SQLite and Postgres. The epoch is put in
ROLLOUT by hand (no orchestrator here); a test ends a play by pausing the run when nothing is left to lease."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fnd_helpers import TOKEN, Api, RecordingEnqueuer, app_settings
from sqlalchemy import func, select, update

from genenv.clients.control_plane import ControlPlaneClient
from genenv.clients.external_agent import AsyncExternalAgentClient, ExternalAgentClient, RetryPolicy
from genenv.contracts.leases import AttemptsRecorded
from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import EpochRow, LeaseRow, RolloutRow, TaskRow
from genenv.db.repositories import runs
from genenv.domains import get_domain
from genenv.domains.arithmetic.scripted_agent import ScriptedAgent
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app
from tests.unit.bench import scripts
from tests.unit.foundation.external_standin import LoseFirstAnswer, served

G = 3  # rollouts_per_task
EXPRESSIONS = ["3 + 4", "12 * 7 - 5", "345 + 678", "9 - 1 + 2 * 3"]
FAST = RetryPolicy(retries=3, backoff_s=0.0)


def _in_db(db_url: str, work: Callable[[Any], Any]) -> Any:
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            return work(s)
    finally:
        engine.dispose()


async def _external_run(api: Api, db_url: str) -> tuple[str, list[int]]:
    """A running external_agent run at epoch 0, phase ROLLOUT, one valid arithmetic task per EXPRESSIONS."""
    resp = await api.client.post("/v1/runs", json={"config": {"mode": "external_agent", "rollouts_per_task": G}})
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["id"]
    domain = get_domain("arithmetic")

    def seed(s: Any) -> list[int]:
        runs.move(s, runs.get(s, run_id), RunStatus.RUNNING)
        s.add(EpochRow(run_id=run_id, index=0, phase="rollout", summary={}))
        tasks = [TaskRow(run_id=run_id, epoch=0, seed_id="s", domain="arithmetic", variation=i, status="valid",
                         payload=domain.validate_generation({"expression": e}, None), raw_text="{}",
                         prompt_messages=[]) for i, e in enumerate(EXPRESSIONS)]
        s.add_all(tasks)
        s.flush()
        return [t.id for t in tasks]

    return run_id, _in_db(db_url, seed)


def _pause(db_url: str, run_id: str) -> None:
    _in_db(db_url, lambda s: runs.move(s, runs.get(s, run_id), RunStatus.PAUSED))


def _attempts_per_task(db_url: str, ids: list[int]) -> dict[int, int]:
    rows = _in_db(db_url, lambda s: s.execute(
        select(RolloutRow.task_id, func.count()).where(RolloutRow.task_id.in_(ids)).group_by(RolloutRow.task_id)
    ).all())
    return {int(t): int(n) for t, n in rows}


def _pause_when_idle(db_url: str, run_id: str, waits: list[float]) -> Callable[[float], Awaitable[None]]:
    """The stream's sleep: nothing is leasable once every attempt is in (no orchestrator closes the epoch here),
    so the first idle wait pauses the run and the next lease is the 409 that ends the stream."""

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        _pause(db_url, run_id)

    return sleep


async def test_async_stream_plays_the_scripted_agent_through_the_real_app(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url)
    agent = ScriptedAgent("strong", seed=5)
    knew: list[bool] = []
    reports: list[AttemptsRecorded] = []
    waits: list[float] = []
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST, transport=api.transport) as client:
        stream = client.prompts(run_id, limit=3, on_report=reports.append,
                                sleep=_pause_when_idle(db_url, run_id, waits))
        async for prompt in stream:
            attempt = agent.attempt(prompt.messages)
            assert attempt.expression is not None  # the agent reads the task from the domain's prompt
            knew.append(attempt.correct)
            await stream.answer(prompt, attempt.reply)
    assert stream.stopped is not None and stream.stopped.code == "run_not_running"
    assert len(waits) == 1 and 1.0 <= waits[0] <= 30.0  # the empty lease's retry_after_s, honoured
    assert _attempts_per_task(db_url, ids) == dict.fromkeys(ids, G)
    # The service's checker agrees with the agent on every attempt it knew it got right or wrong.
    verdicts = [v for r in reports for v in r.verdicts]
    assert [v.success for v in verdicts] == knew and all(v.valid for v in verdicts)
    assert (stream.stats.prompts, stream.stats.reported, stream.stats.refused) == (G * len(ids), G * len(ids), 0)


async def test_a_report_whose_answer_was_lost_is_recorded_once(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url)
    transport = LoseFirstAnswer(api.transport)
    agent = ScriptedAgent("weak", seed=1)
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST, transport=transport) as client:
        stream = client.prompts(run_id, limit=len(ids), sleep=_pause_when_idle(db_url, run_id, []))
        async for prompt in stream:
            await stream.answer(prompt, agent.reply(prompt.messages))
    assert transport.lost == 1
    # The report reached the service and was recorded; its retry, with the same key, recorded nothing new.
    assert _attempts_per_task(db_url, ids) == dict.fromkeys(ids, G)
    assert stream.stats.reported == G * len(ids)


def _expire(db_url: str, lease_id: str) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    _in_db(db_url, lambda s: s.execute(update(LeaseRow).where(LeaseRow.id == lease_id).values(expires_at=past)))


async def test_sync_stream_over_a_socket_drops_an_expired_lease_and_plays_on(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url)
    agent = ScriptedAgent("weak", seed=2)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        _pause(db_url, run_id)

    # A second control plane on the same database, on a socket: the sync client blocks this test's loop, which
    # is fine since the server runs its own loop in its thread.
    app = create_app(app_settings(db_url), enqueuer=RecordingEnqueuer(db_url))
    try:
        with served(app) as url, ExternalAgentClient(url, token=TOKEN, retry=FAST) as client:
            stream = client.prompts(run_id, limit=1, sleep=sleep)
            for prompt in stream:
                if stream.stats.leases == 1 and prompt.attempt == 0:
                    _expire(db_url, prompt.lease_id)  # the agent is slow: its first lease runs out
                stream.answer(prompt, agent.reply(prompt.messages))
    finally:
        app.state.control_plane.close()
    assert [e.code for e in stream.expired] == ["lease_expired"] and stream.stats.refused == G
    assert stream.stopped is not None and len(waits) == 1
    # The expired lease's attempts went back to the pool and were leased and recorded again: G each, never more.
    assert _attempts_per_task(db_url, ids) == dict.fromkeys(ids, G)


async def test_the_driver_plays_a_run_to_its_pause_with_an_epoch_line(api: Api, db_url: str) -> None:
    driver = scripts.load("scripted_agent")
    run_id, ids = await _external_run(api, db_url)
    lines: list[str] = []
    async with (AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST, transport=api.transport) as client,
                ControlPlaneClient("http://cp", token=TOKEN, transport=api.transport) as control):
        status, tallies = await driver.play(ScriptedAgent("weak", seed=0), client, control, run_id, limit=2,
                                            out=lines.append, sleep=_pause_when_idle(db_url, run_id, []))
    assert status == RunStatus.PAUSED
    [tally] = tallies
    assert tally.attempts == tally.verdicts == G * len(ids) and set(tally.task_p) == set(ids)
    epoch_lines = [line for line in lines if line.startswith("epoch 0:")]
    assert len(epoch_lines) == 1 and f"{G * len(ids)} attempts on {len(ids)} tasks" in epoch_lines[0]
    assert lines[-1].startswith(f"run {run_id} is paused")
