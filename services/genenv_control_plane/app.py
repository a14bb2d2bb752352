"""The control-plane app: ``create_app(settings)``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from genenv.http import ReadyCheck, make_app
from genenv.settings import GenEnvSettings, get_settings
from genenv_control_plane.deps import ControlPlane
from genenv_control_plane.enqueue import Enqueuer
from genenv_control_plane.routes import dashboard, domains, experiments, inspection, leases, modes, runs

TITLE = "GenEnv control plane"


def create_app(settings: GenEnvSettings | None = None, *, enqueuer: Enqueuer | None = None) -> FastAPI:
    """The control-plane API. ``enqueuer`` overrides how started runs reach the orchestrator."""
    settings = settings or get_settings()
    cp = ControlPlane.build(settings, enqueuer)
    checks: dict[str, ReadyCheck] = {"database": cp.db.ping}
    if cp.redis is not None:
        checks["redis"] = cp.ping_redis

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        cp.close()

    app = make_app(
        TITLE,
        settings,
        routers=[runs.router, leases.router, experiments.router, inspection.router, domains.router, modes.router,
                 dashboard.router],
        lifespan=lifespan,
        ready_checks=checks,
        public_paths=dashboard.DASHBOARD_PATHS,
        tenants=True,
    )
    # Built eagerly, not in the lifespan: the in-process ASGI transport never sends lifespan events.
    app.state.control_plane = cp
    return app
