"""A worker killed mid-job: the redelivered job takes the stale claim over and yields exactly one version."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from trn_helpers import adapters_of, add_group, agent_epoch, job, run_config, settings_for

from genenv.contracts.adapters import JobKind, JobStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import train_jobs
from genenv.db.repositories.train_jobs import ClaimOutcome
from genenv.settings import DatabaseSettings
from genenv_trainer.jobs import run_train_job

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# The doomed worker runs the real job, only slowed down (0.5 s per step) so the kill surely lands mid-training.
DOOMED = textwrap.dedent(
    """
    import sys, time
    from genenv.db.engine import make_engine, make_session_factory
    from genenv.settings import GenEnvSettings
    from genenv_trainer.jobs import run_train_job
    from genenv_trainer.training import grpo

    real = grpo.grpo_loss_backward
    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)
    grpo.grpo_loss_backward = slow

    settings = GenEnvSettings()
    run_train_job(make_session_factory(make_engine(settings.database)), settings, int(sys.argv[1]))
    """
)


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_killed_worker_then_redelivery_completes_with_one_version(
    trainer_pg: Callable[[], str], tiny_model_dir: Path, tmp_path: Path
) -> None:
    url = trainer_pg()
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    store = tmp_path / "adapters"
    # One pass over 8 + 16·4 = 72 informative sequences, one per step: long enough for the kill to land mid-job.
    config = run_config(tiny_model_dir, agent={"batch_size": 1, "micro_batch_size": 1, "max_steps_per_epoch": 100})
    run = agent_epoch(sessions, config)
    with session_scope(sessions) as s:
        for i in range(16):
            add_group(s, run, 0, f"seed-long-{i}", 0, [1.0, 0.0, 1.0, 0.0])
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)

    env = {**os.environ, "GENENV_DATABASE__URL": url, "GENENV_PATHS__ADAPTER_STORE": str(store),
           "GENENV_TRAINER__TORCH_THREADS": "1", "GENENV_WORKER_ID": "doomed",
           "GENENV_TRAINER__HEARTBEAT_S": "0.5"}
    log = (tmp_path / "doomed.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-c", DOOMED, str(job_id)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        first_claim: list[object] = []

        def training() -> bool:
            assert proc.poll() is None, (tmp_path / "doomed.log").read_text()[-3000:]
            with session_scope(sessions) as s:
                row = train_jobs.get_job(s, job_id)
                if row.status != "running":
                    return False
                first_claim.append(row.claimed_at)
                # claimed_at moves at every heartbeat (0.5 s): a second value means the job is under way
                return len(set(first_claim)) > 1

        _wait(training, 180, "the doomed worker's first optimiser step")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()

    with session_scope(sessions) as s:
        row = train_jobs.get_job(s, job_id)
        assert (row.status, row.attempts) == ("running", 1) and (row.claimed_by or "").startswith("doomed/")
    assert adapters_of(sessions, run) == []

    settings = settings_for(url, store, lease_s=2.0, heartbeat_s=0.5)
    early = run_train_job(sessions, settings, job_id)  # redelivered at once: the claim still looks alive
    assert early.outcome is ClaimOutcome.BUSY and early.retry_after_s is not None and early.retry_after_s <= 2.0
    time.sleep(early.retry_after_s + 0.1)
    done = run_train_job(sessions, settings, job_id)
    assert done.outcome is ClaimOutcome.CLAIMED and done.job.status is JobStatus.DONE
    # One pass over the 8 sequences in steps of 1.
    assert done.job.attempts == 2 and done.job.adapter_version == 1 and done.job.metrics["steps"] == 72
    assert adapters_of(sessions, run) == [("agent", 1, None)]
    assert sorted(p.name for p in (store / run / "agent").iterdir()) == ["v1"]
    assert run_train_job(sessions, settings, job_id).outcome is ClaimOutcome.FINISHED
    engine.dispose()
