"""Celery app factory, queue names and task names — the contract between enqueuers and workers."""

from __future__ import annotations

import os
import socket
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


QUEUES = (QUEUE_CONTROL, QUEUE_ROLLOUTS, QUEUE_GPU)


def worker_identity(settings: GenEnvSettings) -> str:
    """Who claims jobs: the configured worker id, else host:pid."""
    return settings.worker_id or f"{socket.gethostname()}:{os.getpid()}"


def transport_options(settings: GenEnvSettings, queue: str | None) -> dict[str, Any]:
    """Redis transport options of a worker consuming ``queue`` (None: an app that only sends).

    kombu keeps every unacknowledged message of a Redis broker in one hash, and each consumer redelivers any entry
    older than ITS OWN visibility_timeout: with one shared hash, the shortest timeout of any worker would apply to
    every queue (a control worker would redeliver an hours-long training job after its one hour). Each queue's
    consumers therefore keep their own hash, index and mutex, so each queue's timeout is its own.
    """
    if queue is None:
        return {}
    return {
        "visibility_timeout": settings.queue.visibility_timeout_s(queue),
        "unacked_key": f"unacked:{queue}",
        "unacked_index_key": f"unacked_index:{queue}",
        "unacked_mutex_key": f"unacked_mutex:{queue}",
    }


def make_celery(settings: GenEnvSettings, name: str = "genenv", *, queue: str | None = None) -> Any:
    """A Celery app wired to Redis with late acks (a killed worker's job is redelivered, not lost); ``queue``: the
    queue this app's worker consumes (its redelivery timeout and unacked bookkeeping)."""
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
        broker_transport_options=transport_options(settings, queue),
        task_always_eager=settings.queue.eager,
        task_eager_propagates=True,
        broker_connection_retry_on_startup=True,
    )
    return app
