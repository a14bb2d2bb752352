"""The curriculum service app: ``create_app(settings)``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from genenv.db.engine import ServiceDatabase
from genenv.http import make_app
from genenv.settings import GenEnvSettings, get_settings
from genenv_curriculum.routes import router

TITLE = "GenEnv curriculum"


def create_app(
    settings: GenEnvSettings | None = None, *, sessions: sessionmaker[Session] | None = None
) -> FastAPI:
    """The curriculum API; ``sessions`` shares an existing database session factory (embedded mode)."""
    settings = settings or get_settings()
    db = ServiceDatabase.open(settings.database, sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        db.close()

    app = make_app(
        TITLE, settings, routers=[router], lifespan=lifespan, ready_checks={"database": db.ping}, tenants=True
    )
    # Built eagerly, not in the lifespan: the in-process ASGI transport never sends lifespan events.
    app.state.curriculum = db
    return app
