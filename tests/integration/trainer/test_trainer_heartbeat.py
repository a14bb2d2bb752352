"""The claim of a running job stays alive between optimiser steps: a short lease covers a long step."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trn_helpers import adapters_of, agent_epoch, job, run_config, settings_for

from genenv.contracts.adapters import JobKind, JobStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import train_jobs
from genenv.db.repositories.train_jobs import ClaimOutcome
from genenv.settings import DatabaseSettings, TrainerSettings
from genenv_trainer.jobs import JobResult, run_train_job
from genenv_trainer.training import grpo

pytestmark = [pytest.mark.postgres]

LEASE_S = 1.5
STEP_S = 3.0  # one optimiser step twice as long as the lease


def test_a_step_longer_than_the_lease_keeps_the_claim(
    trainer_pg: Callable[[], str], tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = trainer_pg()
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    run = agent_epoch(sessions, run_config(tiny_model_dir, agent={"batch_size": 8, "max_steps_per_epoch": 1}))
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)
    real = grpo.grpo_loss_backward
    in_step = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        # The real step, made slower than the lease (a big model's step on a slow device).
        in_step.set()
        time.sleep(STEP_S)
        return real(*args, **kwargs)

    monkeypatch.setattr(grpo, "grpo_loss_backward", slow)
    settings = settings_for(url, tmp_path, lease_s=LEASE_S, heartbeat_s=0.25)
    results: list[JobResult] = []
    worker = threading.Thread(target=lambda: results.append(run_train_job(sessions, settings, job_id)))
    worker.start()
    try:
        assert in_step.wait(120), "the job never reached its optimiser step"
        time.sleep(LEASE_S + 0.5)  # well past the lease since the claim, and inside the step
        with session_scope(sessions) as s:
            other = train_jobs.claim_job(s, job_id, worker="w2", lease_s=LEASE_S, max_attempts=3)
        assert other.outcome is ClaimOutcome.BUSY, "a live worker's job was handed to another worker"
    finally:
        worker.join(timeout=120)
    assert results and results[0].outcome is ClaimOutcome.CLAIMED
    assert results[0].job.status is JobStatus.DONE and results[0].job.attempts == 1
    assert adapters_of(sessions, run) == [("agent", 1, None)]
    engine.dispose()


def test_a_lease_shorter_than_three_heartbeats_is_refused() -> None:
    with pytest.raises(ValueError, match="GENENV_TRAINER__LEASE_S"):
        TrainerSettings(lease_s=10, heartbeat_s=5)
    assert TrainerSettings().lease_s <= 60  # a killed trainer costs about a minute by default, not 15
