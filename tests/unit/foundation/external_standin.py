"""A tiny stand-in for the control plane's outside-agent endpoints, for the client's transport tests only; and
two transport helpers the client's tests share with its integration tests (a lost answer, an app on a socket).

It speaks the contracts of genenv.contracts.leases with the real error envelope (genenv.http.make_app), honours
Idempotency-Key, scores replies with the arithmetic domain's checker, and serves ``epochs`` epochs of the same
expressions (task ids ``epoch * 100 + i``), each closing once every task has ATTEMPTS attempts. It is not the
control plane: leasing, expiry and epoch closing here are the simplest that exercise the client.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import uvicorn
from fastapi import APIRouter, FastAPI, Header
from fastapi.responses import JSONResponse

from genenv.clients.external_agent import IDEMPOTENCY_HEADER
from genenv.contracts.epochs import Epoch, EpochPhase, EpochSummary
from genenv.contracts.errors import ConflictError, NotFoundError, UnavailableError
from genenv.contracts.leases import (
    AttemptOrigin,
    AttemptsRecorded,
    AttemptsReport,
    AttemptVerdict,
    Lease,
    LeaseItem,
    LeaseRequest,
)
from genenv.contracts.pagination import Page
from genenv.contracts.runs import Run, RunConfig, RunStatus
from genenv.domains.arithmetic.domain import DOMAIN, make_payload
from genenv.http import make_app
from genenv.settings import GenEnvSettings

TOKEN = "tok"
RUN = "run-1"
OURS = "run-ours"
"""A run whose agent is ours: its leases are a 409 not_external_agent."""
EXPRESSIONS = ["3 + 4", "12 - 7", "6 * 7", "20 + 5 - 3", "9 * 9 + 1", "45 + 17", "100 - 1"]
ATTEMPTS = 2
EMPTY_RETRY_S = 0.25


@dataclass
class Fake:
    """The stand-in run's state."""

    epochs: int = 1
    epoch: int = 0
    recorded: dict[int, list[str]] = field(default_factory=dict)
    successes: dict[int, int] = field(default_factory=dict)
    leases: dict[str, dict[int, int]] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    answers: dict[str, AttemptsRecorded] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    summaries: dict[int, EpochSummary] = field(default_factory=dict)
    unavailable: int = 0
    """The next this many lease/attempts requests answer 503 (with Retry-After: 0)."""
    empty_leases: int = 0
    """The next this many leases find nothing leasable (retry_after_s = EMPTY_RETRY_S)."""
    rollouts: int = 0

    @property
    def tasks(self) -> dict[int, str]:
        """The current epoch's tasks."""
        return {self.epoch * 100 + i + 1: e for i, e in enumerate(EXPRESSIONS)}

    @property
    def finished(self) -> bool:
        return self.epoch >= self.epochs

    def leased(self, task_id: int) -> int:
        return sum(lease.get(task_id, 0) for lid, lease in self.leases.items() if lid not in self.expired)

    def maybe_close_epoch(self) -> None:
        tasks = self.tasks
        if all(len(self.recorded.get(t, [])) >= ATTEMPTS for t in tasks):
            n = sum(len(self.recorded[t]) for t in tasks)
            self.summaries[self.epoch] = EpochSummary(p_hat=sum(self.successes.get(t, 0) for t in tasks) / n)
            self.epoch += 1

    def run(self) -> Run:
        now = datetime.now(UTC)
        status = RunStatus.COMPLETED if self.finished else RunStatus.RUNNING
        return Run(id=RUN, name="stand-in", status=status, config=RunConfig(mode="external_agent"),
                   current_epoch=min(self.epoch, self.epochs - 1), created_at=now, updated_at=now)


def _unavailable() -> JSONResponse:
    return JSONResponse(UnavailableError("db down").envelope().model_dump(), 503, {"Retry-After": "0"})


def app(fake: Fake) -> FastAPI:
    """The stand-in's app (auth on with TOKEN)."""
    router = APIRouter()

    @router.get("/v1/runs/{run_id}")
    def get_run(run_id: str) -> Run:
        if run_id != RUN:
            raise NotFoundError(f"no run {run_id}", param="run_id")
        return fake.run()

    @router.get("/v1/runs/{run_id}/epochs")
    def epochs(run_id: str) -> Page[Epoch]:
        now = datetime.now(UTC)
        return Page[Epoch](items=[
            Epoch(run_id=run_id, index=i, phase=EpochPhase.CLOSED if i in fake.summaries else EpochPhase.ROLLOUT,
                  summary=fake.summaries.get(i), started_at=now)
            for i in range(min(fake.epoch + 1, fake.epochs))
        ])

    @router.post("/v1/runs/{run_id}/leases", response_model=None)
    def lease(run_id: str, body: LeaseRequest, key: str | None = Header(default=None, alias=IDEMPOTENCY_HEADER)
              ) -> Lease | JSONResponse:
        fake.requests.append(("lease", key))
        if fake.unavailable:
            fake.unavailable -= 1
            return _unavailable()
        if run_id == OURS:
            raise ConflictError(f"run {run_id} is a genenv run", param="run_id", code="not_external_agent")
        if run_id != RUN:
            raise NotFoundError(f"no run {run_id}", param="run_id", code="run_not_found")
        if fake.finished:
            raise ConflictError("run is completed, not running", code="run_not_running")
        if fake.empty_leases:
            fake.empty_leases -= 1
            return Lease(lease_id=None, expires_at=None, epoch=fake.epoch, items=[], retry_after_s=EMPTY_RETRY_S)
        items: list[LeaseItem] = []
        held: dict[int, int] = {}
        for task_id, expression in fake.tasks.items():
            open_ = ATTEMPTS - len(fake.recorded.get(task_id, [])) - fake.leased(task_id)
            if open_ > 0 and len(items) < body.limit:
                items.append(LeaseItem(task_id=task_id, domain="arithmetic", attempts=open_,
                                       messages=DOMAIN.agent_messages(make_payload(expression))))
                held[task_id] = open_
        if not items:
            return Lease(lease_id=None, expires_at=None, epoch=fake.epoch, items=[], retry_after_s=EMPTY_RETRY_S)
        lease_id = uuid.uuid4().hex
        fake.leases[lease_id] = held
        return Lease(lease_id=lease_id, expires_at=datetime.now(UTC) + timedelta(seconds=body.lease_s),
                     epoch=fake.epoch, items=items)

    @router.post("/v1/runs/{run_id}/attempts", response_model=None)
    def attempts(run_id: str, body: AttemptsReport,
                 key: str | None = Header(default=None, alias=IDEMPOTENCY_HEADER)) -> AttemptsRecorded | JSONResponse:
        fake.requests.append(("attempts", key))
        if fake.unavailable:
            fake.unavailable -= 1
            return _unavailable()
        if key is not None and key in fake.answers:
            return fake.answers[key]
        held = fake.leases.get(body.lease_id)
        if held is None:
            raise NotFoundError(f"no lease {body.lease_id}", param="lease_id", code="unknown_lease")
        if body.lease_id in fake.expired:
            raise ConflictError("lease expired", param="lease_id", code="lease_expired")
        wanted: dict[int, int] = {}
        for i, attempt in enumerate(body.attempts):
            wanted[attempt.task_id] = wanted.get(attempt.task_id, 0) + 1
            if held.get(attempt.task_id, 0) < wanted[attempt.task_id]:
                raise ConflictError("more attempts than leased", param=f"attempts.{i}.task_id",
                                    code="too_many_attempts")
        verdicts = []
        epoch = fake.epoch
        for attempt in body.attempts:
            held[attempt.task_id] -= 1
            verdict = DOMAIN.verify(make_payload(fake.tasks[attempt.task_id]), attempt.reply or "")
            fake.recorded.setdefault(attempt.task_id, []).append(attempt.reply or "")
            fake.successes[attempt.task_id] = fake.successes.get(attempt.task_id, 0) + verdict.success
            fake.rollouts += 1
            verdicts.append(AttemptVerdict(task_id=attempt.task_id, rollout_id=fake.rollouts, score=verdict.score,
                                           valid=verdict.valid, success=verdict.success, reason=None,
                                           origin=AttemptOrigin.CLIENT_REPLY))
        answer = AttemptsRecorded(recorded=len(verdicts), verdicts=verdicts, epoch=epoch,
                                  lease_open=sum(held.values()))
        fake.maybe_close_epoch()
        if key is not None:
            fake.answers[key] = answer
        return answer

    return make_app("stand-in", GenEnvSettings(auth={"tokens": [TOKEN]}), routers=[router])


class LoseFirstAnswer(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Lets the first ``attempts`` report reach the app, then drops its answer (a read timeout): the report was
    recorded but the client cannot know."""

    def __init__(self, inner: httpx.BaseTransport | httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.lost = 0

    def _lose(self, request: httpx.Request) -> bool:
        if request.url.path.endswith("/attempts") and self.lost == 0:
            self.lost += 1
            return True
        return False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(self.inner, httpx.BaseTransport)
        response = self.inner.handle_request(request)
        if self._lose(request):
            response.read()
            raise httpx.ReadTimeout("answer lost", request=request)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(self.inner, httpx.AsyncBaseTransport)
        response = await self.inner.handle_async_request(request)
        if self._lose(request):
            await response.aread()
            raise httpx.ReadTimeout("answer lost", request=request)
        return response


@contextmanager
def served(asgi: FastAPI) -> Iterator[str]:
    """The app on a real loopback socket (uvicorn in a thread), for the sync client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "stand-in app did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
