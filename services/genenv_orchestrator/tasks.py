"""Celery wiring of the orchestrator (queue ``control``): ``advance_run(run_id)``, thin and idempotent.

When a worker starts it re-enqueues every running run, so a killed orchestrator never strands a run (its
unacknowledged message would otherwise wait for the broker's visibility timeout).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from celery.signals import worker_process_init, worker_ready

from genenv.db.engine import ProcessDatabase
from genenv.queue import QUEUE_CONTROL, TASK_ADVANCE_RUN, make_celery
from genenv.settings import get_settings
from genenv_orchestrator.loop import advance, running_run_ids
from genenv_orchestrator.runtime import distributed_context

log = logging.getLogger(__name__)

settings = get_settings()
app = make_celery(settings, name="genenv-orchestrator")


db = ProcessDatabase(settings.database)
worker_process_init.connect(db.reset_after_fork, weak=False)


async def _advance(run_id: str) -> str:
    async with distributed_context(settings, app, db.sessions()) as ctx:
        return await advance(ctx, run_id)


@app.task(name=TASK_ADVANCE_RUN, acks_late=True, reject_on_worker_lost=True)  # type: ignore[untyped-decorator]
def advance_run(run_id: str) -> str:
    """Advance one run as far as it can go now; safe to deliver twice (one advancer per run at a time)."""
    outcome = asyncio.run(_advance(run_id))
    log.info("run %s: %s", run_id, outcome)
    return outcome


def _resume_running(**_: Any) -> None:
    for run_id in running_run_ids(db.sessions()):
        app.send_task(TASK_ADVANCE_RUN, args=[run_id], queue=QUEUE_CONTROL)
        log.info("re-enqueued running run %s", run_id)


worker_ready.connect(_resume_running, weak=False)
