"""Celery wiring of the rollout worker (queue ``rollouts``): a thin task that takes ids and calls rollout_epoch."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from genenv.contracts.adapters import Role
from genenv.db.engine import ProcessDatabase
from genenv.inference.factory import build_backend
from genenv.queue import QUEUE_ROLLOUTS, TASK_ROLLOUT_EPOCH, make_celery, worker_identity
from genenv.serving.publisher import AdapterPublisher, VLLMAdapterServer, build_adapter_servers
from genenv.settings import GenEnvSettings, get_settings
from genenv_rollout.worker import rollout_epoch


async def _run(settings: GenEnvSettings, db: ProcessDatabase, run_id: str, epoch: int) -> dict[str, Any]:
    # One backend per job: its HTTP pool belongs to this job's event loop (asyncio.run makes a new one).
    backend = build_backend(settings, Role.AGENT)
    servers = build_adapter_servers(settings, {Role.AGENT: backend})
    publisher = AdapterPublisher(db.sessions(), servers, settings.inference.keep_adapter_versions)
    try:
        result = await rollout_epoch(db.sessions(), backend, run_id, epoch, publisher=publisher,
                                     storage=settings.rollout, worker=worker_identity(settings),
                                     services=settings.services)
    finally:
        await backend.aclose()
        for server in set(servers.values()):
            if isinstance(server, VLLMAdapterServer):
                await server.aclose()
    return dataclasses.asdict(result)


def create_celery(settings: GenEnvSettings | None = None) -> Any:
    """A Celery app with the rollout task registered (``genenv worker rollout`` runs it)."""
    settings = settings or get_settings()
    app = make_celery(settings, "genenv-rollout", queue=QUEUE_ROLLOUTS)
    db = ProcessDatabase(settings.database)

    @app.task(name=TASK_ROLLOUT_EPOCH, acks_late=True)  # type: ignore[untyped-decorator]
    def rollout_epoch_task(run_id: str, epoch: int) -> dict[str, Any]:
        """Roll out (run, epoch); safe to redeliver: a delivery claims the job first, so a redelivered message
        finds a live delivery's claim and exits, or a finished job and exits; stored attempts are skipped."""
        return asyncio.run(_run(settings, db, run_id, epoch))

    return app
