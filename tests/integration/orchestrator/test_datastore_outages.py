"""A run outlives its datastores (issue 31): Postgres or Redis down for longer than the old failure budget makes the
run wait, never fail, and it then completes with exact counts.

Each test starts its own throwaway datastore on a free loopback port in a temporary folder (bench/chaos.py's
Postgres and Redis: initdb/pg_ctl, ``redis-server --appendonly yes``) and stops and starts it from the test at a
chosen phase, so the outage lasts exactly as long as the test holds it down (a count of the orchestrator's tries,
several times ``orchestrator.max_phase_failures``), whatever the machine's load. The machine's own Postgres and
Redis are never touched. The model is the real SmolLM2-135M (local backend) in an agent_only run of tiny batches.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from chaos import Postgres, Redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.epochs import EpochPhase
from genenv.contracts.runs import RunConfig, WaitingOn
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import CurriculumScoreRow, EpochRow, RolloutRow, RunRow, TaskRow, VerdictRow
from genenv.outages import DATABASE
from genenv.queue import make_celery
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app as control_plane_app
from genenv_control_plane.enqueue import CeleryEnqueuer
from genenv_curriculum.app import create_app as curriculum_app
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack
from genenv_verifier.app import create_app as verifier_app
from tests.conftest import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

MAX_FAILURES = 2  # the old budget: 2 tries ~0.15 s apart (poll_interval_s 0.05, doubling)
SEEDS, G, EPOCHS = 2, 4, 2
CONFIG: dict[str, Any] = {
    "mode": "agent_only",
    "domain": "arithmetic",
    "epochs": EPOCHS,
    "seeds_per_epoch": SEEDS,
    "rollouts_per_task": G,
    "max_response_tokens": 8,
    "agent": {"batch_size": 8, "micro_batch_size": 8},
}


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The local model on one thread: on a shared 2-core machine, torch's threads waiting on each other made a
    rollout of 8 short answers take minutes instead of seconds."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def private_pg() -> Iterator[Postgres]:
    """A throwaway Postgres 15 (run as the ``postgres`` user when root: its folder must be reachable by that user,
    which pytest's private tmp_path is not)."""
    with tempfile.TemporaryDirectory(prefix="genenv-outage-pg-") as folder:
        os.chmod(folder, 0o755)
        pg = Postgres(Path(folder) / "postgres")
        pg.init()
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()


async def _until(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def counts(sessions: sessionmaker[Session], run_id: str, epochs: int = EPOCHS) -> dict[str, Any]:
    """Per epoch: tasks, distinct (seed, variation), valid tasks, rollouts, distinct (task, attempt), verdicts,
    scores and seeds with a valid task."""
    out: dict[int, dict[str, int]] = {}
    with sessions() as s:
        for e in range(epochs):
            in_epoch = (TaskRow.run_id == run_id) & (TaskRow.epoch == e)
            out[e] = {
                "tasks": s.scalar(select(func.count(TaskRow.id)).where(in_epoch)) or 0,
                "distinct_tasks": s.scalar(select(func.count()).select_from(
                    select(TaskRow.seed_id, TaskRow.variation).where(in_epoch).distinct().subquery())) or 0,
                "valid": s.scalar(select(func.count(TaskRow.id)).where(in_epoch, TaskRow.status == "valid")) or 0,
                "rollouts": s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(in_epoch)) or 0,
                "distinct_rollouts": s.scalar(select(func.count()).select_from(
                    select(RolloutRow.task_id, RolloutRow.attempt).join(TaskRow).where(in_epoch).distinct()
                    .subquery())) or 0,
                "verdicts": s.scalar(select(func.count(VerdictRow.id)).join(RolloutRow).join(TaskRow)
                                     .where(in_epoch)) or 0,
                "scores": s.scalar(select(func.count()).select_from(CurriculumScoreRow).where(
                    CurriculumScoreRow.run_id == run_id, CurriculumScoreRow.epoch == e)) or 0,
                "scorable_seeds": s.scalar(select(func.count(func.distinct(TaskRow.seed_id))).where(
                    in_epoch, TaskRow.status == "valid")) or 0,
            }
        run = s.get(RunRow, run_id)
        assert run is not None
        return {"status": run.status, "error": run.error, "waiting_on": run.waiting_on, "epochs": out}


def _assert_exact(found: dict[str, Any]) -> None:
    assert (found["status"], found["error"], found["waiting_on"]) == ("completed", None, None)
    assert found["epochs"]
    for e, c in found["epochs"].items():
        # One task per (epoch, seed, variation): agent_only trains on the seeds themselves (variation 0).
        assert c["tasks"] == c["distinct_tasks"] == SEEDS, (e, c)
        assert c["rollouts"] == c["distinct_rollouts"] == c["valid"] * G, (e, c)
        assert c["verdicts"] == c["rollouts"], (e, c)
        assert c["scores"] == c["scorable_seeds"] == SEEDS, (e, c)


@pytest.mark.parametrize("phase", [EpochPhase.ROLLOUT, EpochPhase.SCORE])
def test_postgres_down_longer_than_the_failure_budget_makes_the_run_wait_then_complete(
    phase: EpochPhase, private_pg: Postgres, tmp_path: Path, model_dir: Path, benchmarks_dir: Path
) -> None:
    settings = GenEnvSettings.model_validate({
        "database": {"url": private_pg.url()},
        "queue": {"eager": True},
        "paths": {"home": tmp_path, "adapter_store": tmp_path / "adapters", "model_cache": model_dir.parent,
                  "benchmarks": benchmarks_dir},
        "inference": {"backend": "local", "base_model": model_dir.name},
        "trainer": {"torch_threads": 1},
        "orchestrator": {"max_phase_failures": MAX_FAILURES, "poll_interval_s": 0.05},
    })
    waits: list[WaitingOn] = []
    retries: list[tuple[int, EpochPhase]] = []
    down: list[float] = []

    def on_phase(_run: str, epoch: int, at: EpochPhase, event: str) -> None:
        if (epoch, at, event) == (0, phase, "start") and not down:
            private_pg.stop()  # the phase starts with its database away
            down.append(time.monotonic())
        elif event == "retry":
            retries.append((epoch, at))

    async def scenario() -> tuple[str, str, float]:
        async with embedded_stack(settings) as stack:
            run = await stack.control_plane.create_run(RunConfig.model_validate(CONFIG))
            await stack.control_plane.act(run.id, "start")
            driving = asyncio.create_task(drive(stack.context, run.id, on_phase, on_wait=waits.append))
            # Three times the failure budget of tries find the database away, and the run still runs.
            await _until(lambda: driving.done() or len(waits) >= 3 * MAX_FAILURES)
            assert not driving.done(), driving.result()
            held = time.monotonic() - down[0]
            await asyncio.to_thread(private_pg.start)
            status = await asyncio.wait_for(driving, 90)
            return run.id, status, held

    run_id, status, held = asyncio.run(scenario())
    assert status == "completed"
    # What the run waited on, kept in memory while the database could not record it (and logged).
    assert {w.dependency for w in waits} == {DATABASE}
    assert [w.attempts for w in waits] == list(range(1, len(waits) + 1))
    assert len({w.since for w in waits}) == 1 and (waits[0].epoch, waits[0].phase) == (0, phase.value)
    assert "OperationalError" in waits[-1].last_error
    assert held > 0.15  # longer than the old budget's 2 tries
    assert retries and set(retries) == {(0, phase)}
    engine = make_engine(settings.database)
    try:
        _assert_exact(counts(make_session_factory(engine), run_id))
    finally:
        engine.dispose()


# ---------------------------------------------------------------- Redis: the broker of a distributed run


class Served:
    """A service app on 127.0.0.1:port, served by uvicorn in a thread of this process (its own event loop)."""

    def __init__(self, app: Any, port: int) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "service did not start"
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class Worker:
    """``genenv worker KIND`` as its own process (the real Celery worker of that queue), logging to files; restarted
    when it exits, as its supervisor does (``genenv up``, a container's restart policy)."""

    def __init__(self, kind: str, env: dict[str, str], logs: Path) -> None:
        self.kind, self.env, self.logs = kind, env, logs
        self.starts = 0
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        with (self.logs / f"{self.kind}-{self.starts}.log").open("wb") as fh:
            return subprocess.Popen(
                [sys.executable, "-m", "genenv.cli.main", "worker", self.kind, "--hostname",
                 f"{self.kind}-{secrets.token_hex(3)}@%h"],
                env=self.env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)

    def supervise(self) -> None:
        if self.proc.poll() is not None:
            self.proc = self._start()

    def text(self) -> str:
        return "\n".join((self.logs / f"{self.kind}-{n}.log").read_text(errors="replace")
                         for n in range(1, self.starts + 1))

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while " ready." not in self.text():
            assert self.proc.poll() is None and time.monotonic() < deadline, f"{self.kind}:\n{self.text()[-3000:]}"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


@pytest.fixture
def private_redis() -> Iterator[Redis]:
    """A throwaway Redis with its append-only file, as the deployments run it."""
    with tempfile.TemporaryDirectory(prefix="genenv-outage-redis-") as folder:
        rd = Redis(Path(folder) / "redis")
        rd.start()
        try:
            yield rd
        finally:
            rd.stop()


def _wait_for(check: Callable[[], bool], timeout_s: float, what: str, logs: Callable[[], str],
              workers: list[Worker]) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        for w in workers:
            w.supervise()
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{logs()}"
        time.sleep(0.05)


@pytest.mark.redis
def test_redis_down_longer_than_the_failure_budget_makes_a_distributed_run_wait_then_complete(
    private_redis: Redis, new_pg_database: Callable[[], str], tmp_path: Path, model_dir: Path,
    benchmarks_dir: Path,
) -> None:
    """The orchestrator, rollout and trainer workers are real Celery workers on the throwaway Redis. The broker goes
    down while the orchestrator is inside ROLLOUT (before it sends the rollout job: phase_delay_s holds the phase
    open), and stays down until the orchestrator's watchdog failed to re-enqueue the run several times."""
    url = new_pg_database()
    upgrade(url)
    verifier_port, curriculum_port = free_port(), free_port()
    env = {
        **os.environ,
        "GENENV_DATABASE__URL": url, "GENENV_REDIS__URL": private_redis.url, "GENENV_QUEUE__EAGER": "false",
        "GENENV_INFERENCE__BACKEND": "local", "GENENV_INFERENCE__BASE_MODEL": model_dir.name,
        "GENENV_PATHS__MODEL_CACHE": str(model_dir.parent), "GENENV_PATHS__HOME": str(tmp_path),
        "GENENV_PATHS__ADAPTER_STORE": str(tmp_path / "adapters"), "GENENV_PATHS__BENCHMARKS": str(benchmarks_dir),
        "GENENV_SERVICES__VERIFIER": f"http://127.0.0.1:{verifier_port}",
        "GENENV_SERVICES__CURRICULUM": f"http://127.0.0.1:{curriculum_port}",
        # agent_only never calls the simulator service: nothing listens there.
        "GENENV_SERVICES__SIMULATOR": f"http://127.0.0.1:{free_port()}",
        "GENENV_ORCHESTRATOR__MAX_PHASE_FAILURES": str(MAX_FAILURES),
        "GENENV_ORCHESTRATOR__POLL_INTERVAL_S": "0.5",
        "GENENV_ORCHESTRATOR__WATCHDOG_S": "2",
        # Longer than the test: a job message must be sent again because it never went out, not because it stalled.
        "GENENV_ORCHESTRATOR__STALL_TIMEOUT_S": "600",
        "GENENV_ORCHESTRATOR__PHASE_DELAY_S": '{"rollout": 2}',
        "GENENV_TRAINER__TORCH_THREADS": "1", "OMP_NUM_THREADS": "1", "GENENV_LOGGING__LEVEL": "INFO",
    }
    settings = GenEnvSettings.model_validate({"database": {"url": url}, "redis": {"url": private_redis.url},
                                              "queue": {"eager": False}})
    engine = make_engine(settings.database)
    sessions = make_session_factory(engine)
    served = [Served(verifier_app(settings, sessions=sessions), verifier_port),
              Served(curriculum_app(settings, sessions=sessions), curriculum_port)]
    workers = [Worker(kind, env, tmp_path) for kind in ("orchestrator", "rollout", "trainer")]

    def logs() -> str:
        return "\n".join(f"--- {w.kind} ({w.starts} starts)\n{w.text()[-2500:]}" for w in workers)

    def run_row() -> tuple[str, WaitingOn | None, dict[str, Any]]:
        with session_scope(sessions) as s:
            run = s.get(RunRow, run_id)
            assert run is not None
            epoch = s.scalar(select(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == 0))
            summary = dict(epoch.summary or {}) if epoch is not None else {}
            return (run.status, None if run.waiting_on is None else WaitingOn.model_validate(run.waiting_on),
                    summary)

    try:
        for w in workers:
            w.wait_ready()
        api = control_plane_app(settings, enqueuer=CeleryEnqueuer(make_celery(settings)))
        with TestClient(api) as client:
            # One epoch: the outage is in its ROLLOUT, and the workers' own starts and reconnects take their time.
            run_id = client.post("/v1/runs", json={"config": {**CONFIG, "epochs": 1}}).json()["id"]
            assert client.post(f"/v1/runs/{run_id}/start").status_code == 200
        # ROLLOUT has begun (its start is stored before phase_delay_s): the broker goes down before the job is sent.
        _wait_for(lambda: "rollout" in run_row()[2].get("_phase_started", {}), 120, "ROLLOUT", logs, workers)
        private_redis.stop()
        down = time.monotonic()
        _wait_for(lambda: (w := run_row()[1]) is not None and w.dependency == "broker", 60, "waiting_on", logs,
                  workers)
        status, waiting, summary = run_row()
        # The orchestrator tries the broker again and again (its watchdog's sweeps, or a restarted worker's
        # connection at start), well past the old budget of 2 tries, and the run still runs.
        _wait_for(lambda: len(re.findall(r"advance watchdog: sweep failed|Cannot connect to redis",
                                         workers[0].text())) >= 2, 90, "failed tries", logs, workers)
        assert run_row()[0] == "running"
        held = time.monotonic() - down
        private_redis.start()
        _wait_for(lambda: run_row()[0] != "running", 240, "the run to finish", logs, workers)
        restarts = {w.kind: w.starts - 1 for w in workers}
    finally:
        for w in workers:
            w.stop()
        for s in served:
            s.close()
    try:
        assert status == "running" and waiting is not None
        assert (waiting.epoch, waiting.phase) == (0, "rollout") and "OperationalError" in waiting.last_error
        assert "_failures" not in summary  # the outage counted toward no budget
        assert held > 2.0
        # Celery's worker exits ("Unrecoverable error") when the broker drops while it holds a message (kombu cannot
        # restore it without a connection): its supervisor restarts it, and its start re-enqueues the running run.
        assert restarts["rollout"] == restarts["trainer"] == 0, restarts
        _assert_exact(counts(sessions, run_id, epochs=1))
    finally:
        engine.dispose()
