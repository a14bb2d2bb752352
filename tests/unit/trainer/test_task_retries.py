"""A redelivered training message that finds its job busy looks again for as long as the job runs: the Celery tasks
retry without limit (Celery reads ``retry(max_retries=None)`` as "the task's default", 3, so the limit must be the
task's own attribute), and each retry waits a lease."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("name", ["train_agent", "train_simulator"])
def test_busy_training_tasks_retry_without_limit(name: str) -> None:
    import genenv_trainer.tasks as tasks

    task = getattr(tasks, name)
    assert task.max_retries is None
    assert task.acks_late and task.reject_on_worker_lost
