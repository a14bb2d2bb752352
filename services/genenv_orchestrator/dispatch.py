"""Dispatchers: hand rollout/training work to Celery workers, or run it inline in the embedded default."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from genenv.queue import TASK_ADVANCE_RUN, TASK_ROLLOUT_EPOCH, TASK_TRAIN_AGENT, TASK_TRAIN_SIMULATOR

_TRAIN_TASKS = {"train_agent": TASK_TRAIN_AGENT, "train_simulator": TASK_TRAIN_SIMULATOR}


class CeleryDispatcher:
    """Distributed mode: messages by task name (the orchestrator never imports worker code)."""

    inline = False

    def __init__(self, celery_app: Any) -> None:
        self._app = celery_app

    async def rollout(self, run_id: str, epoch: int) -> None:
        """Enqueue the epoch's rollout job on the rollouts queue."""
        self._app.send_task(TASK_ROLLOUT_EPOCH, args=[run_id, epoch])

    async def train(self, job_id: int, kind: str) -> None:
        """Enqueue a training job on the gpu queue."""
        self._app.send_task(_TRAIN_TASKS[kind], args=[job_id])

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        """Poll again after ``delay_s`` seconds (the message carries the run's chain token)."""
        self._app.send_task(TASK_ADVANCE_RUN, args=[run_id, token], countdown=delay_s)


class InlineDispatcher:
    """Embedded mode: the same worker functions, called in this process (training in a thread)."""

    inline = True

    def __init__(
        self,
        rollout_fn: Callable[[str, int], Awaitable[None]],
        train_fn: Callable[[int], object],
    ) -> None:
        self._rollout = rollout_fn
        self._train = train_fn

    async def rollout(self, run_id: str, epoch: int) -> None:
        """Run the rollout job now."""
        await self._rollout(run_id, epoch)

    async def train(self, job_id: int, kind: str) -> None:
        """Run the training job now, off the event loop (it is CPU-bound torch code)."""
        await asyncio.to_thread(self._train, job_id)

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        """Nothing to schedule: the embedded driver loops itself."""
