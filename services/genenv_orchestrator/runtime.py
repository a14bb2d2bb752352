"""Build the orchestrator's context: in-process (embedded default) or against the distributed services."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.control_plane import ControlPlaneClient
from genenv.clients.curriculum import CurriculumClient
from genenv.clients.simulator import SimulatorClient
from genenv.clients.verifier import VerifierClient
from genenv.contracts.adapters import EvaluateRequest, Evaluation, Role
from genenv.contracts.rollouts import VerifyRequest, VerifyResponse
from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory
from genenv.inference.base import InferenceBackend
from genenv.inference.factory import build_backends
from genenv.serving.publisher import AdapterPublisher, build_adapter_servers
from genenv.settings import GenEnvSettings
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.dispatch import CeleryDispatcher, InlineDispatcher

INPROCESS = "inprocess"
# Generation and benchmark runs take minutes on CPU; the clients must not give up before the work does.
LONG_TIMEOUT_S = 3600.0


class VerifierPortAdapter:
    """Shapes the verifier client to the orchestrator's port."""

    def __init__(self, client: VerifierClient) -> None:
        self._client = client

    async def verify(self, request: VerifyRequest) -> VerifyResponse:
        """Verdicts in request order."""
        return await self._client.verify(request)

    async def evaluate(
        self, benchmark: str, *, adapter: str | None, split: str | None, limit: int | None, run_id: str, epoch: int
    ) -> Evaluation:
        """One benchmark run stored under the run and epoch."""
        return await self._client.evaluate(
            benchmark,
            EvaluateRequest(adapter=adapter, split=split, limit=limit, run_id=run_id, epoch=epoch,
                            idempotency_key=f"{run_id}:{epoch}:{benchmark}"),
        )


def _client_kwargs(settings: GenEnvSettings) -> dict[str, Any]:
    token = settings.auth.client_token
    return {"token": None if token is None else token.get_secret_value(), "timeout_s": LONG_TIMEOUT_S}


@dataclass
class EmbeddedStack:
    """One process holding every service (the laptop default): same clients, ASGI transport instead of TCP."""

    settings: GenEnvSettings
    engine: Engine
    sessions: sessionmaker[Session]
    backends: dict[Role, InferenceBackend]
    control_plane: ControlPlaneClient
    context: OrchestratorContext


@contextlib.asynccontextmanager
async def embedded_stack(settings: GenEnvSettings) -> AsyncIterator[EmbeddedStack]:
    """Migrate the database, load the model once, mount every service in-process and yield the stack."""
    from genenv_control_plane.app import create_app as control_plane_app
    from genenv_control_plane.enqueue import InProcessEnqueuer
    from genenv_curriculum.app import create_app as curriculum_app
    from genenv_rollout.worker import rollout_epoch
    from genenv_simulator.app import create_app as simulator_app
    from genenv_trainer.jobs import run_train_job
    from genenv_verifier.app import create_app as verifier_app

    migrate.upgrade(settings.database.url)
    engine = make_engine(settings.database)
    sessions = make_session_factory(engine)
    backends = build_backends(settings)
    agent = backends[Role.AGENT]

    async def _noop_runner(_run_id: str) -> None:
        # The embedded driver (genenv quickstart / genenv runs drive) advances the run in the foreground.
        return None

    kwargs = _client_kwargs(settings)

    def asgi(app: Any) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=app)

    cp = ControlPlaneClient("http://control-plane", transport=asgi(
        control_plane_app(settings, enqueuer=InProcessEnqueuer(_noop_runner))), **kwargs)
    sim = SimulatorClient("http://simulator", transport=asgi(
        simulator_app(settings, backend=backends[Role.SIMULATOR], sessions=sessions)), **kwargs)
    ver = VerifierClient("http://verifier", transport=asgi(
        verifier_app(settings, sessions=sessions, backend=agent)), **kwargs)
    cur = CurriculumClient("http://curriculum", transport=asgi(curriculum_app(settings, sessions=sessions)), **kwargs)

    publisher = AdapterPublisher(
        sessions, build_adapter_servers(settings, backends), settings.inference.keep_adapter_versions
    )

    async def _rollout(run_id: str, epoch: int) -> None:
        # The publisher re-loads the agent adapter into a fresh backend (a resumed run after a crash).
        await rollout_epoch(sessions, agent, run_id, epoch, publisher=publisher, storage=settings.rollout,
                            services=settings.services)

    ctx = OrchestratorContext(
        settings=settings,
        session_factory=sessions,
        simulator=sim,
        verifier=VerifierPortAdapter(ver),
        curriculum=cur,
        dispatcher=InlineDispatcher(_rollout, lambda job_id: run_train_job(sessions, settings, job_id)),
        publisher=publisher,
        benchmarks_dir=settings.paths.benchmarks,
    )
    try:
        yield EmbeddedStack(settings, engine, sessions, backends, cp, ctx)
    finally:
        for client in (cp, sim, ver, cur):
            await client.aclose()
        for backend in {id(b): b for b in backends.values()}.values():
            await backend.aclose()
        engine.dispose()


@contextlib.asynccontextmanager
async def distributed_context(
    settings: GenEnvSettings, celery_app: Any, sessions: sessionmaker[Session]
) -> AsyncIterator[OrchestratorContext]:
    """The orchestrator worker's context for one advance: services over HTTP, workers over Celery, adapters to
    vLLM. Clients live for one event loop (each Celery task runs its own), the database pool for the process."""
    urls = settings.services
    for name in ("simulator", "verifier", "curriculum"):
        if getattr(urls, name) == INPROCESS:
            raise ValueError(
                f"services.{name} is '{INPROCESS}' but the orchestrator worker runs distributed; "
                f"set GENENV_SERVICES__{name.upper()} to the service URL"
            )
    kwargs = _client_kwargs(settings)
    backends = build_backends(settings)
    sim = SimulatorClient(urls.simulator, **kwargs)
    ver = VerifierClient(urls.verifier, **kwargs)
    cur = CurriculumClient(urls.curriculum, **kwargs)
    try:
        yield OrchestratorContext(
            settings=settings,
            session_factory=sessions,
            simulator=sim,
            verifier=VerifierPortAdapter(ver),
            curriculum=cur,
            dispatcher=CeleryDispatcher(celery_app),
            publisher=AdapterPublisher(
                sessions, build_adapter_servers(settings, backends), settings.inference.keep_adapter_versions
            ),
            benchmarks_dir=settings.paths.benchmarks,
        )
    finally:
        for client in (sim, ver, cur):
            await client.aclose()
        for backend in {id(b): b for b in backends.values()}.values():
            await backend.aclose()
