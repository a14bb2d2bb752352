"""Celery wiring of the orchestrator (queue ``control``): ``advance_run(run_id, token)``, thin and idempotent.

When a worker starts it re-enqueues every running run, so a killed orchestrator never strands a run (its
unacknowledged message would otherwise wait for the broker's visibility timeout). While it runs, a watchdog thread
re-enqueues any running run whose next advance is long overdue: a restarted broker, or a failed advance that could
not schedule the next, would otherwise leave the run waiting for that timeout (an hour) without a word.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from celery.signals import worker_process_init, worker_ready

from genenv.db.engine import ProcessDatabase
from genenv.outages import database_away
from genenv.queue import QUEUE_CONTROL, TASK_ADVANCE_RUN, make_celery
from genenv.settings import get_settings
from genenv_orchestrator.loop import advance, overdue_runs, running_run_ids
from genenv_orchestrator.runtime import distributed_context

log = logging.getLogger(__name__)

settings = get_settings()
app = make_celery(settings, name="genenv-orchestrator", queue=QUEUE_CONTROL)


db = ProcessDatabase(settings.database)
worker_process_init.connect(db.reset_after_fork, weak=False)


async def _advance(run_id: str, token: str | None) -> str:
    async with distributed_context(settings, app, db.sessions()) as ctx:
        return await advance(ctx, run_id, token=token)


@app.task(name=TASK_ADVANCE_RUN, bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)  # type: ignore[untyped-decorator]
def advance_run(self: Any, run_id: str, token: str | None = None) -> str:
    """Advance one run as far as it can go now; safe to deliver twice (one advancer per run at a time, and a
    message whose chain token was superseded does nothing)."""
    try:
        outcome = asyncio.run(_advance(run_id, token))
    except Exception as exc:
        if not database_away(exc):
            raise
        # The database went away mid-advance (a restart): neither the phase nor its failure could be recorded, and
        # no next advance was scheduled. Retrying this message keeps the run's chain alive (its token is unchanged)
        # instead of leaving the run to the watchdog.
        delay = min(60.0, 2.0 ** self.request.retries)
        log.warning("run %s: database unavailable; advancing again in %.0f s", run_id, delay)
        raise self.retry(exc=exc, countdown=delay) from exc
    log.info("run %s: %s", run_id, outcome)
    return outcome


def _resume_running(**_: Any) -> None:
    for run_id in running_run_ids(db.sessions()):
        app.send_task(TASK_ADVANCE_RUN, args=[run_id], queue=QUEUE_CONTROL)
        log.info("re-enqueued running run %s", run_id)
    threading.Thread(target=_watchdog, name="advance-watchdog", daemon=True).start()


def _watchdog() -> None:
    grace = settings.orchestrator.watchdog_s
    while True:
        time.sleep(grace / 2)
        try:
            for run_id in overdue_runs(db.sessions(), grace):
                app.send_task(TASK_ADVANCE_RUN, args=[run_id], queue=QUEUE_CONTROL)
                log.warning("run %s: its next advance was over %.0f s overdue (a lost message); re-enqueued",
                            run_id, grace)
        except Exception:  # the database or the broker is down: the next sweep tries again
            log.warning("advance watchdog: sweep failed; retrying in %.0f s", grace / 2, exc_info=True)


worker_ready.connect(_resume_running, weak=False)
