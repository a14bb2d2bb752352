"""The real trainer worker (`genenv worker trainer`, Celery on Redis): a job sent twice runs once; a worker
child SIGKILLed mid-job is redelivered, waits out the lease, takes over and finishes with one version."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from trn_helpers import adapters_of, agent_epoch, job, run_config

from genenv.contracts.adapters import JobKind
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import train_jobs
from genenv.queue import TASK_TRAIN_AGENT, make_celery
from genenv.settings import DatabaseSettings, GenEnvSettings

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _wait(pred: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


def test_worker_runs_a_job_once_and_survives_a_killed_child(
    trainer_pg: Callable[[], str], redis_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    url = trainer_pg()
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    env = {**os.environ, "GENENV_DATABASE__URL": url, "GENENV_REDIS__URL": redis_url, "GENENV_QUEUE__EAGER": "false",
           "GENENV_PATHS__ADAPTER_STORE": str(tmp_path / "adapters"), "GENENV_TRAINER__TORCH_THREADS": "1",
           "GENENV_TRAINER__LEASE_S": "3", "GENENV_TRAINER__HEARTBEAT_S": "0.5"}
    log_path = tmp_path / "worker.log"
    log = log_path.open("wb")
    worker = subprocess.Popen([sys.executable, "-m", "genenv.cli.main", "worker", "trainer", "--hostname",
                               f"trainer-test-{os.getpid()}@%h"], env=env, stdout=log, stderr=subprocess.STDOUT)
    client = make_celery(GenEnvSettings(redis={"url": redis_url}, queue={"eager": False}))
    try:
        # 1. The same job delivered twice → one adapter version.
        run_a = agent_epoch(sessions, run_config(tiny_model_dir))
        job_a = job(sessions, run_a, 0, JobKind.TRAIN_AGENT)
        results = [client.send_task(TASK_TRAIN_AGENT, args=[job_a]) for _ in range(2)]
        outs = [r.get(timeout=300) for r in results]
        assert [o["status"] for o in outs] == ["done", "done"] and {o["attempts"] for o in outs} == {1}
        assert adapters_of(sessions, run_a) == [("agent", 1, None)]

        # 2. A long job whose worker child is SIGKILLed after its first optimiser step.
        # The informative budget: all 8 steps carry a gradient (under the tasks budget the flat group's steps are
        # skipped and the job is shorter than the kill needs).
        one_per_step = {"batch_size": 1, "micro_batch_size": 1, "max_steps_per_epoch": 8, "budget": "informative"}
        run_b = agent_epoch(sessions, run_config(tiny_model_dir, agent=one_per_step))
        job_b = job(sessions, run_b, 0, JobKind.TRAIN_AGENT)
        client.send_task(TASK_TRAIN_AGENT, args=[job_b])
        seen: list[object] = []

        def training() -> bool:
            assert worker.poll() is None, log_path.read_text()[-4000:]
            with session_scope(sessions) as s:
                row = train_jobs.get_job(s, job_b)
                if row.status == "running":
                    seen.append(row.claimed_at)
            return len(set(seen)) > 1

        _wait(training, 300, "the first optimiser step of job B", log_path)
        children = _children(worker.pid)
        assert len(children) == 1
        os.kill(children[0], signal.SIGKILL)

        def finished() -> bool:
            with session_scope(sessions) as s:
                return train_jobs.get_job(s, job_b).status == "done"

        _wait(finished, 600, "job B to finish after redelivery", log_path)
        with session_scope(sessions) as s:
            row = train_jobs.get_job(s, job_b)
            assert row.attempts == 2 and row.adapter_version == 1 and row.metrics["steps"] == 8
        assert adapters_of(sessions, run_b) == [("agent", 1, None)]
        assert "WorkerLostError" in log_path.read_text() or "Worker exited prematurely" in log_path.read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()
        client.close()
        engine.dispose()
