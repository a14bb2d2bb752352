"""Process-wide resources of the verifier service and the FastAPI dependencies that hand them to routes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Evaluation, Role
from genenv.db.engine import ServiceDatabase, session_scope
from genenv.inference.base import InferenceBackend
from genenv.settings import GenEnvSettings


@dataclass
class VerifierResources:
    """Settings, the database for evaluation rows, and the agent's inference backend (built on first use)."""

    settings: GenEnvSettings
    db: ServiceDatabase
    backend: InferenceBackend | None = None
    owns_backend: bool = field(default=False)
    # Evaluations running in this process, by idempotency key (see single_flight).
    inflight: dict[str, asyncio.Future[Evaluation]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        settings: GenEnvSettings,
        sessions: sessionmaker[Session] | None = None,
        backend: InferenceBackend | None = None,
    ) -> VerifierResources:
        """Use the given session factory / backend (embedded mode, tests) or the configured ones."""
        return cls(settings, ServiceDatabase.open(settings.database, sessions), backend=backend)

    def inference(self) -> InferenceBackend:
        """The agent's backend from settings (vLLM or local), created once per process."""
        if self.backend is None:
            from genenv.inference.factory import build_backend

            self.backend = build_backend(self.settings, Role.AGENT)
            self.owns_backend = True
        return self.backend

    async def single_flight(self, key: str, run: Callable[[], Awaitable[Evaluation]]) -> Evaluation:
        """``run()`` once per key at a time: a caller arriving while it runs gets the same result (or error)."""
        pending = self.inflight.get(key)
        if pending is not None:
            # shield: a waiter that disconnects must not cancel the evaluation the first caller is running.
            return await asyncio.shield(pending)
        future: asyncio.Future[Evaluation] = asyncio.get_running_loop().create_future()
        self.inflight[key] = future
        try:
            result = await run()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so an error nobody else waited for is not logged twice
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self.inflight[key]

    async def close(self) -> None:
        """Release what this service created."""
        if self.owns_backend and self.backend is not None:
            await self.backend.aclose()
        self.db.close()


def get_resources(request: Request) -> VerifierResources:
    """The service's resources."""
    resources: VerifierResources = request.app.state.verifier
    return resources


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the route returns, rolled back when it raises."""
    with session_scope(get_resources(request).db.sessions) as session:
        yield session


ResourcesDep = Annotated[VerifierResources, Depends(get_resources)]
SessionDep = Annotated[Session, Depends(get_session)]
