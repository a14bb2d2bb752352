"""The simulator service ("live task generator"): ``create_app(settings)``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from genenv.http import make_app
from genenv.inference.base import InferenceBackend
from genenv.settings import GenEnvSettings, get_settings
from genenv_simulator.deps import SimulatorResources
from genenv_simulator.routes import router

TITLE = "GenEnv simulator"


def create_app(
    settings: GenEnvSettings | None = None,
    *,
    backend: InferenceBackend | None = None,
    sessions: sessionmaker[Session] | None = None,
) -> FastAPI:
    """The simulator API; ``backend``/``sessions`` share existing ones (embedded mode, tests)."""
    settings = settings or get_settings()
    resources = SimulatorResources.build(settings, backend=backend, sessions=sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await resources.close()

    app = make_app(
        TITLE, settings, routers=[router], lifespan=lifespan, ready_checks={"database": resources.db.ping},
        tenants=True,
    )
    # Built eagerly, not in the lifespan: the in-process ASGI transport never sends lifespan events.
    app.state.simulator = resources
    return app
