"""Celery tasks of the trainer worker (queue ``gpu``): thin wrappers over jobs.run_train_job, taking job ids.

Worker settings (make_celery + the CLI): concurrency 1 and prefetch 1 (one job holds the device), late acks and
reject-on-worker-lost (a killed worker's message is redelivered), a visibility timeout above the longest job.
A redelivered job that finds its row done exits; one that finds it held by a live worker retries after the
lease; one held by a dead worker (stale heartbeat) takes it over.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init

from genenv.db.engine import ProcessDatabase
from genenv.db.repositories.train_jobs import ClaimOutcome
from genenv.queue import QUEUE_GPU, TASK_TRAIN_AGENT, TASK_TRAIN_SIMULATOR, make_celery
from genenv.settings import get_settings
from genenv_trainer.jobs import run_train_job

settings = get_settings()
app = make_celery(settings, name="genenv-trainer", queue=QUEUE_GPU)
app.conf.update(worker_concurrency=1)

db = ProcessDatabase(settings.database)
worker_process_init.connect(db.reset_after_fork, weak=False)


def _run(task: Any, job_id: int) -> dict[str, Any]:
    result = run_train_job(db.sessions(), settings, job_id)
    if result.outcome is ClaimOutcome.BUSY:
        # Held by another worker whose lease has not expired: look again once it could have.
        raise task.retry(countdown=max(1.0, result.retry_after_s or settings.trainer.lease_s))
    return result.job.model_dump(mode="json")


def _train_agent(self: Any, job_id: int) -> dict[str, Any]:
    """GRPO update of the agent for one train_agent job row."""
    return _run(self, job_id)


def _train_simulator(self: Any, job_id: int) -> dict[str, Any]:
    """RWR update of the simulator for one train_simulator job row."""
    return _run(self, job_id)


# max_retries=None on the task (not on retry(), where None means "the task's default", 3): a redelivered message
# looks again after each lease for as long as the first delivery trains, which can be hours; with 3 it failed with
# MaxRetriesExceededError after about 4 leases, storing an error under the task id the first delivery completes.
_TASK_OPTIONS: dict[str, Any] = {"bind": True, "acks_late": True, "reject_on_worker_lost": True, "max_retries": None}
train_agent = app.task(name=TASK_TRAIN_AGENT, **_TASK_OPTIONS)(_train_agent)
train_simulator = app.task(name=TASK_TRAIN_SIMULATOR, **_TASK_OPTIONS)(_train_simulator)
