"""Process-wide resources of the control plane and the FastAPI dependencies that hand them to routes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated

import redis
from fastapi import Depends, Path, Query, Request
from sqlalchemy.orm import Session

from genenv.db.engine import ServiceDatabase, session_scope
from genenv.db.repositories import runs
from genenv.experiments.series import DifficultyMemo
from genenv.http.auth import CallerDep
from genenv.queue import make_celery
from genenv.settings import GenEnvSettings
from genenv_control_plane.enqueue import CeleryEnqueuer, Enqueuer, InProcessEnqueuer
from genenv_control_plane.serving import BaseModelCheck

_PING_TIMEOUT_S = 2.0


@dataclass
class ControlPlane:
    """What every request may use: settings, the database, Redis (distributed mode), the enqueuer and the
    experiment series' difficulty memo."""

    settings: GenEnvSettings
    db: ServiceDatabase
    enqueuer: Enqueuer
    redis: redis.Redis[bytes] | None
    base_model_check: BaseModelCheck
    difficulty: DifficultyMemo = field(default_factory=DifficultyMemo)
    """Closed epochs' task difficulty, measured once per process (the experiment page polls the series)."""

    @classmethod
    def build(cls, settings: GenEnvSettings, enqueuer: Enqueuer | None = None) -> ControlPlane:
        """Resources for ``settings``; Celery on Redis unless ``queue.eager``."""
        client = None
        if not settings.queue.eager:
            client = redis.Redis.from_url(
                settings.redis.url, socket_connect_timeout=_PING_TIMEOUT_S, socket_timeout=_PING_TIMEOUT_S
            )
        if enqueuer is None:
            enqueuer = InProcessEnqueuer() if settings.queue.eager else CeleryEnqueuer(make_celery(settings))
        return cls(settings, ServiceDatabase.open(settings.database), enqueuer, client, BaseModelCheck(settings))

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One transaction: commit on success, roll back on error."""
        with session_scope(self.db.sessions) as session:
            yield session

    def ping_redis(self) -> None:
        """Readiness: the broker answers PING."""
        assert self.redis is not None
        self.redis.ping()

    def close(self) -> None:
        """Release pools and connections."""
        self.enqueuer.close()
        if self.redis is not None:
            self.redis.close()
        self.db.close()


async def get_control_plane(request: Request) -> ControlPlane:
    """The app's ControlPlane (built by create_app).

    ``async`` although it awaits nothing: FastAPI runs a sync dependency in the thread pool, one more thread hop
    per request on top of the sync route's own.
    """
    cp: ControlPlane = request.app.state.control_plane
    return cp


ControlPlaneDep = Annotated[ControlPlane, Depends(get_control_plane)]
# Postgres cannot compare text with U+0000; such a filter is a client mistake (422), not a 500.
TextFilter = Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")]

__all__ = ["CallerDep", "ControlPlane", "ControlPlaneDep", "RunId", "TextFilter", "visible_run"]
RunId = Annotated[str, Path(max_length=64, pattern=r"^[^\x00]+$", description="Run id.")]


def visible_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> None:
    """404 (run_not_found) unless the caller may see run ``run_id``: the guard of every router under
    /v1/runs/{run_id} whose routes do not read the run through the tenant filter themselves, so a new route there
    is isolated without remembering to be."""
    with cp.transaction() as session:
        runs.require(session, run_id, caller=caller)
