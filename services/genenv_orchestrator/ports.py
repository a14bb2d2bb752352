"""What the orchestrator needs from the other processes. Typed clients (HTTP or in-process ASGI) satisfy these."""

from __future__ import annotations

from typing import Protocol

from genenv.contracts.adapters import Evaluation, Role
from genenv.contracts.rollouts import VerifyRequest, VerifyResponse
from genenv.contracts.scores import ScoreRequest, ScoreResponse
from genenv.contracts.tasks import GenerateRequest, GenerateResponse
from genenv.db.models import AdapterRow


class SimulatorPort(Protocol):
    """The live task generator."""

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        """Write (and, with run_id/epoch, store) tasks."""
        ...


class VerifierPort(Protocol):
    """R_agent and benchmark evaluation."""

    async def verify(self, request: VerifyRequest) -> VerifyResponse:
        """Verdicts in request order."""
        ...

    async def evaluate(
        self, benchmark: str, *, adapter: str | None, split: str | None, limit: int | None, run_id: str, epoch: int
    ) -> Evaluation:
        """Run one benchmark with the agent adapter and store the result (idempotent per run/epoch/benchmark)."""
        ...


class CurriculumPort(Protocol):
    """α-curriculum scoring."""

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """Score a run epoch's seed batches and store the scores."""
        ...


class Dispatcher(Protocol):
    """Hands work to the rollout and trainer workers (Celery) or runs it inline (embedded default)."""

    inline: bool

    async def rollout(self, run_id: str, epoch: int) -> None:
        """Run or enqueue the rollout job of an epoch."""
        ...

    async def train(self, job_id: int, kind: str) -> None:
        """Run or enqueue one training job."""
        ...

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        """Schedule another advance of the run carrying the chain ``token`` (distributed mode polls while workers
        run)."""
        ...


class PublisherPort(Protocol):
    """Hot-loads adapters into whatever serves each role."""

    async def publish(self, adapter: AdapterRow) -> None:
        """Make the adapter servable under genenv.contracts.adapters.adapter_name(...)."""
        ...

    async def ensure_latest(self, run_id: str, role: Role) -> str | None:
        """Publish the run's newest adapter of a role unless already served (a restarted server forgets)."""
        ...
