"""The verifier service app: ``create_app(settings)``."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from genenv.http import make_app
from genenv.inference.base import InferenceBackend
from genenv.settings import GenEnvSettings, get_settings
from genenv_verifier.deps import VerifierResources
from genenv_verifier.routes import router

TITLE = "GenEnv verifier"
GC_GEN0_THRESHOLD = 50_000


def create_app(
    settings: GenEnvSettings | None = None,
    *,
    sessions: sessionmaker[Session] | None = None,
    backend: InferenceBackend | None = None,
) -> FastAPI:
    """The verifier API; ``sessions``/``backend`` share existing ones (embedded mode, tests)."""
    settings = settings or get_settings()
    resources = VerifierResources.build(settings, sessions, backend)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # A verify batch parses ~10^5 JSON containers that live until the batch is answered; with the default
        # gen-0 threshold (700) the collector rescans them ~150 times a batch (measured: 30-40 % of the
        # service's CPU). Served processes collect less often and never rescan what existed at startup.
        previous = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(GC_GEN0_THRESHOLD, previous[1], previous[2])
        try:
            yield
        finally:
            gc.set_threshold(*previous)
            gc.unfreeze()
            await resources.close()

    # A verify batch repeats each task once per response, so this service has its own (larger) body limit.
    app_settings = settings.model_copy(update={"max_body_bytes": settings.verifier.max_body_bytes})
    app = make_app(
        TITLE, app_settings, routers=[router], lifespan=lifespan, ready_checks={"database": resources.db.ping}
    )
    # Built eagerly, not in the lifespan: the in-process ASGI transport never sends lifespan events.
    app.state.verifier = resources
    return app
