"""Cancel and pause racing the orchestrator's CLOSE, from two processes on real Postgres (issue 22, item 3).

Each round prepares a running run whose current epoch waits in CLOSE — either a middle epoch (closing it opens the
next one) or the last (closing it completes the run). Two processes then act on it at the same moment, each after a
random few milliseconds: the orchestrator's real advance loop, and a user's POST /v1/runs/{id}/cancel or /pause
through the real control-plane app. A trigger on the run table records every status change with the time the row
was written, so the test sees each edge actually taken, not only the final state.

Whatever the interleaving, every round must end in one of two exact shapes:

* the user's action won (200): the run has its status; the orchestrator moved nothing after that (the epoch was
  either closed before the action's write, or is still waiting in CLOSE); one status change, running → target;
* the orchestrator won the last epoch: the run completed, the action is a 409 naming 'completed'; one status change,
  running → completed, and every epoch closed.

Every recorded edge is legal (the table below is the state machine of docs/api.md, written out here independently of
the implementation), and the epoch rows are exact: one row per opened epoch, the closed ones before the current.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from genenv.db.migrate import upgrade

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROUNDS_PER_CASE = 40
EPOCHS = 2
LEGAL = {
    ("created", "running"), ("created", "cancelled"), ("running", "paused"), ("running", "completed"),
    ("running", "failed"), ("running", "cancelled"), ("paused", "running"), ("paused", "failed"),
    ("paused", "cancelled"),
}
TARGET = {"cancel": "cancelled", "pause": "paused"}
TOKEN = "race-token"

TRIGGER = """
CREATE TABLE status_log (id serial PRIMARY KEY, run_id text, old text, new text, at timestamptz);
CREATE FUNCTION log_run_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO status_log (run_id, old, new, at) VALUES (NEW.id, OLD.status, NEW.status, clock_timestamp());
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER run_status_log AFTER UPDATE ON run FOR EACH ROW EXECUTE FUNCTION log_run_status();
"""


def _prepare(url: str, cases: list[tuple[str, int]]) -> list[str]:
    """One running run per case (action, epoch), its epoch ``epoch`` waiting in CLOSE; returns the run ids."""
    from genenv.contracts.runs import RunConfig
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.models import EpochRow, RunRow
    from genenv.db.repositories import runs
    from genenv.settings import DatabaseSettings

    config = RunConfig.model_validate({"mode": "agent_only", "domain": "arithmetic", "epochs": EPOCHS})
    engine = make_engine(DatabaseSettings(url=url))
    ids = []
    with session_scope(make_session_factory(engine)) as s:
        for _, epoch in cases:
            run = runs.create(s, config)
            # Written as the setup of a state the orchestrator reached earlier, not as a transition under test.
            s.execute(text("UPDATE run SET status = 'running', current_epoch = :e WHERE id = :id"),
                      {"e": epoch, "id": run.id})
            for index in range(epoch + 1):
                done = index < epoch
                s.add(EpochRow(run_id=run.id, index=index, phase="closed" if done else "close",
                               finished_at=datetime.now(UTC) if done else None, summary={}))
            ids.append(run.id)
        s.flush()
        s.execute(text("DELETE FROM status_log"))  # the setup's created → running is not under test
        s.expire_all()
        assert all(s.get(RunRow, i).status == "running" for i in ids)  # type: ignore[union-attr]
    engine.dispose()
    return ids


class _Stop(Exception):
    """Raised from the phase callback once CLOSE is done: this test is about CLOSE, not the next epoch."""


def _orchestrator(url: str, run_ids: list[str], seed: int, barrier: Any, out: Any) -> None:
    from genenv.contracts.epochs import EpochPhase
    from genenv.db.engine import make_engine, make_session_factory
    from genenv.settings import GenEnvSettings
    from genenv_orchestrator.context import OrchestratorContext
    from genenv_orchestrator.loop import advance

    class Dispatcher:
        inline = False

        async def rollout(self, run_id: str, epoch: int) -> None:
            raise AssertionError("no rollout in this test")

        async def train(self, job_id: int, kind: str) -> None:
            raise AssertionError("no training in this test")

        async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
            return None

    class Publisher:
        async def publish(self, adapter: Any) -> None:
            raise AssertionError("no publishing in this test")

        async def ensure_latest(self, run_id: str, role: Any) -> str | None:
            return None  # no adapters: nothing to serve

    settings = GenEnvSettings.model_validate({"database": {"url": url}, "queue": {"eager": False}})
    engine = make_engine(settings.database)
    ctx = OrchestratorContext(settings=settings, session_factory=make_session_factory(engine), simulator=None,  # type: ignore[arg-type]
                              verifier=None, curriculum=None, dispatcher=Dispatcher(), publisher=Publisher())  # type: ignore[arg-type]

    def stop_after_close(_run: str, _epoch: int, phase: EpochPhase, event: str) -> None:
        if event == "start" and phase is not EpochPhase.CLOSE:
            raise _Stop

    rng = random.Random(seed)
    results = []
    for run_id in run_ids:
        barrier.wait()
        delay = rng.uniform(0, 0.03)

        async def one(run_id: str = run_id, delay: float = delay) -> str:
            await asyncio.sleep(delay)
            try:
                return await advance(ctx, run_id, stop_after_close)
            except _Stop:
                return "closed, next epoch opened"

        results.append(asyncio.run(one()))
    engine.dispose()
    out.put(("orchestrator", results))


def _user(url: str, work: list[tuple[str, str]], seed: int, barrier: Any, out: Any) -> None:
    import httpx

    from genenv.settings import GenEnvSettings
    from genenv_control_plane.app import create_app

    class Enqueuer:
        async def advance_run(self, run_id: str) -> None:
            return None

        def close(self) -> None:
            return None

    settings = GenEnvSettings.model_validate({"database": {"url": url}, "auth": {"tokens": [TOKEN]}})
    app = create_app(settings, enqueuer=Enqueuer())  # type: ignore[arg-type]
    rng = random.Random(seed + 1)
    results = []

    async def act(run_id: str, action: str, delay: float) -> tuple[int, dict[str, Any]]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp",
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            await asyncio.sleep(delay)
            resp = await client.post(f"/v1/runs/{run_id}/{action}")
            return resp.status_code, resp.json()

    for run_id, action in work:
        barrier.wait()
        results.append(asyncio.run(act(run_id, action, rng.uniform(0, 0.03))))
    app.state.control_plane.close()
    out.put(("user", results))


def _race(url: str, cases: list[tuple[str, int]], seed: int) -> tuple[list[str], list[str], list[Any]]:
    run_ids = _prepare(url, cases)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs: list[Any] = [
        ctx.Process(target=_orchestrator, args=(url, run_ids, seed, barrier, out)),
        ctx.Process(target=_user, args=(url, [(r, a) for r, (a, _) in zip(run_ids, cases, strict=True)], seed,
                                        barrier, out)),
    ]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return run_ids, got["orchestrator"], got["user"]


@pytest.fixture(scope="module")
def race_db(new_pg_database: Callable[[], str]) -> str:
    url = new_pg_database()
    upgrade(url)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(TRIGGER))
    engine.dispose()
    return url


def test_cancel_and_pause_racing_close_always_end_legal_and_exact(race_db: str) -> None:
    cases = [(action, epoch) for action in ("cancel", "pause") for epoch in range(EPOCHS)] * ROUNDS_PER_CASE
    random.Random(22).shuffle(cases)
    run_ids, orchestrator, user = _race(race_db, cases, seed=22)

    engine = create_engine(race_db)
    with engine.connect() as c:
        log: dict[str, list[tuple[str, str, datetime]]] = {r: [] for r in run_ids}
        for run_id, old, new, at in c.execute(text("SELECT run_id, old, new, at FROM status_log ORDER BY id")):
            log[run_id].append((old, new, at))
        runs = {r: (s, e) for r, s, e in c.execute(text("SELECT id, status, current_epoch FROM run"))}
        epochs: dict[str, list[tuple[int, str, datetime | None]]] = {r: [] for r in run_ids}
        for run_id, index, phase, finished in c.execute(
                text('SELECT run_id, index, phase, finished_at FROM epoch ORDER BY run_id, index')):
            epochs[run_id].append((index, phase, finished))
    engine.dispose()

    failures = []
    tally = {"action won": 0, "orchestrator won": 0}
    for run_id, (action, epoch), outcome, (code, body) in zip(run_ids, cases, orchestrator, user, strict=True):
        status, current = runs[run_id]
        edges = [(old, new) for old, new, _ in log[run_id]]
        closed = [i for i, phase, _ in epochs[run_id] if phase == "closed"]
        where = f"{action} at epoch {epoch}/{EPOCHS}: orchestrator {outcome!r}, user {code}"
        if any(edge not in LEGAL for edge in edges):
            failures.append(f"{where}: illegal status change(s) {edges}")
            continue
        if code == 200:
            tally["action won"] += 1
            if status != TARGET[action] or edges != [("running", TARGET[action])]:
                failures.append(f"{where}: the action answered {body.get('status')} but the run is {status}, "
                                f"changes {edges}")
                continue
            action_at = log[run_id][0][2]
            # The orchestrator moves only a running run: an epoch closed after the action's write is a bug.
            late = [i for i, phase, finished in epochs[run_id]
                    if phase == "closed" and finished is not None and finished > action_at]
            if late:
                failures.append(f"{where}: epoch(s) {late} closed after the run became {status}")
            if epoch in closed:  # the close committed before the action: the next epoch was opened exactly once
                expected = list(range(epoch + 2)) if epoch + 1 < EPOCHS else None
                if expected is None or [i for i, _, _ in epochs[run_id]] != expected or current != epoch + 1:
                    failures.append(f"{where}: closed epoch {epoch} but epochs {epochs[run_id]}, current {current}")
            elif [i for i, _, _ in epochs[run_id]] != list(range(epoch + 1)) or current != epoch:
                failures.append(f"{where}: epoch {epoch} still open but epochs {epochs[run_id]}, current {current}")
        else:
            tally["orchestrator won"] += 1
            if not (code == 409 and "completed" in body["error"]["message"] and epoch == EPOCHS - 1
                    and status == "completed" and edges == [("running", "completed")]
                    and closed == list(range(EPOCHS)) and current == EPOCHS - 1):
                failures.append(f"{where}: {body}, run {status}, changes {edges}, epochs {epochs[run_id]}")
    assert not failures, f"{len(failures)} of {len(cases)} rounds ({tally}):\n" + "\n".join(failures[:20])
    # Both orders happened, or the race was not exercised.
    assert tally["action won"] and tally["orchestrator won"], tally
