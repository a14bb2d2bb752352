"""How a started run reaches the orchestrator: a Celery message on Redis, or an in-process runner."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool

from genenv.queue import QUEUE_CONTROL, TASK_ADVANCE_RUN

log = logging.getLogger(__name__)

# Bounded publish retries: with the broker down, POST /start answers 503 in about a second instead of hanging.
PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.0, "interval_step": 0.2, "interval_max": 0.5}


class Enqueuer(Protocol):
    """Hands a run to the orchestrator. Called only after the transaction that changed the run committed."""

    async def advance_run(self, run_id: str) -> None:
        """Ask the orchestrator to advance ``run_id``."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class CeleryEnqueuer:
    """Distributed mode: ``advance_run`` is a Celery message on the ``control`` queue.

    ``send_task`` by name, so the control plane never imports the orchestrator.
    """

    def __init__(self, celery: Any) -> None:
        self.celery = celery

    async def advance_run(self, run_id: str) -> None:
        """Publish ``TASK_ADVANCE_RUN(run_id)`` (kombu publishes synchronously: keep it off the event loop)."""
        await run_in_threadpool(self._publish, run_id)

    def _publish(self, run_id: str) -> None:
        # ignore_result: nobody waits for the result, and subscribing to it would need the result backend too.
        self.celery.send_task(
            TASK_ADVANCE_RUN,
            args=[run_id],
            queue=QUEUE_CONTROL,
            ignore_result=True,
            retry=True,
            retry_policy=PUBLISH_RETRY_POLICY,
        )

    def close(self) -> None:
        """Close the broker connection pool."""
        self.celery.close()


AdvanceRunner = Callable[[str], Awaitable[None]]
"""An in-process orchestrator entry point: advance (or schedule advancing) the run with this id."""


class InProcessEnqueuer:
    """Embedded mode (``queue.eager``): call an in-process runner the orchestrator provides."""

    def __init__(self, runner: AdvanceRunner | None = None) -> None:
        self.runner = runner

    async def advance_run(self, run_id: str) -> None:
        """Hand the run to the runner; without one the run stays 'running' until something advances it."""
        if self.runner is None:
            log.warning("queue.eager is set but no in-process runner is plugged in; run %s waits", run_id)
            return
        await self.runner(run_id)

    def close(self) -> None:
        """Nothing to release."""
