"""Celery app factory, queue names and task names — the contract between enqueuers and workers."""

from __future__ import annotations

from typing import Any

from genenv.settings import GenEnvSettings

QUEUE_CONTROL = "control"
QUEUE_ROLLOUTS = "rollouts"
QUEUE_GPU = "gpu"

TASK_ADVANCE_RUN = "genenv.orchestrator.advance_run"
TASK_ROLLOUT_EPOCH = "genenv.rollout.rollout_epoch"
TASK_TRAIN_AGENT = "genenv.trainer.train_agent"
TASK_TRAIN_SIMULATOR = "genenv.trainer.train_simulator"

ROUTES = {
    TASK_ADVANCE_RUN: {"queue": QUEUE_CONTROL},
    TASK_ROLLOUT_EPOCH: {"queue": QUEUE_ROLLOUTS},
    TASK_TRAIN_AGENT: {"queue": QUEUE_GPU},
    TASK_TRAIN_SIMULATOR: {"queue": QUEUE_GPU},
}


def make_celery(settings: GenEnvSettings, name: str = "genenv") -> Any:
    """A Celery app wired to Redis with late acks (a killed worker's job is redelivered, not lost)."""
    from celery import Celery

    app = Celery(name, broker=settings.redis.url, backend=settings.redis.url)
    app.conf.update(
        task_routes=ROUTES,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_transport_options={"visibility_timeout": settings.queue.visibility_timeout_s},
        result_backend_transport_options={"visibility_timeout": settings.queue.visibility_timeout_s},
        task_always_eager=settings.queue.eager,
        task_eager_propagates=True,
        broker_connection_retry_on_startup=True,
    )
    return app
