"""genenv.clients.external_agent, transport behaviour only: the lease/attempts protocol played by the sync client
(over a real socket, uvicorn in a thread) and the async client (ASGI) against a tiny stand-in app that speaks the
contracts of genenv.contracts.leases with the real error envelope and honours Idempotency-Key. Retries, key reuse,
empty leases, expired leases and the stop on 409 are checked here; the real control plane's endpoints are tested
in tests/integration (issue 33)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from fastapi import APIRouter, FastAPI, Header
from fastapi.responses import JSONResponse

from genenv.clients.base import ApiError, ServiceUnreachableError
from genenv.clients.external_agent import (
    IDEMPOTENCY_HEADER,
    AsyncExternalAgentClient,
    ExternalAgentClient,
    LeasedPrompt,
    RetryPolicy,
)
from genenv.contracts.errors import ConflictError, NotFoundError, UnavailableError, UnprocessableError
from genenv.contracts.leases import (
    AttemptIn,
    AttemptOrigin,
    AttemptsRecorded,
    AttemptsReport,
    AttemptVerdict,
    Lease,
    LeaseItem,
    LeaseRequest,
)
from genenv.domains.arithmetic.domain import DOMAIN, make_payload
from genenv.domains.arithmetic.scripted_agent import ScriptedAgent
from genenv.http import make_app
from genenv.settings import GenEnvSettings

TOKEN = "tok"
RUN = "run-1"
EXPRESSIONS = ["3 + 4", "12 - 7", "6 * 7", "20 + 5 - 3", "9 * 9 + 1", "45 + 17", "100 - 1"]
ATTEMPTS = 2
FAST = RetryPolicy(retries=3, backoff_s=0.0)


@dataclass
class Fake:
    """The stand-in run: tasks needing ATTEMPTS attempts each, leases, recorded attempts, idempotent answers."""

    tasks: dict[int, str] = field(default_factory=lambda: {i + 1: e for i, e in enumerate(EXPRESSIONS)})
    recorded: dict[int, list[str]] = field(default_factory=dict)
    leases: dict[str, dict[int, int]] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    answers: dict[str, AttemptsRecorded] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    unavailable: int = 0
    """The next this many requests answer 503 (with Retry-After: 0)."""
    empty_leases: int = 0
    """The next this many leases find nothing leasable (retry_after_s = 0.25)."""
    rollouts: int = 0

    def leased(self, task_id: int) -> int:
        return sum(lease.get(task_id, 0) for lid, lease in self.leases.items() if lid not in self.expired)

    @property
    def finished(self) -> bool:
        return all(len(self.recorded.get(t, [])) >= ATTEMPTS for t in self.tasks)


def _app(fake: Fake) -> FastAPI:
    router = APIRouter()

    @router.post("/v1/runs/{run_id}/leases", response_model=None)
    def lease(run_id: str, body: LeaseRequest, key: str | None = Header(default=None, alias=IDEMPOTENCY_HEADER)
              ) -> Lease | JSONResponse:
        fake.requests.append(("lease", key))
        if fake.unavailable:
            fake.unavailable -= 1
            return JSONResponse(UnavailableError("db down").envelope().model_dump(), 503, {"Retry-After": "0"})
        if run_id != RUN:
            raise NotFoundError(f"no run {run_id}", param="run_id")
        if fake.finished:
            raise ConflictError("run is completed, not running", code="run_not_running")
        if fake.empty_leases:
            fake.empty_leases -= 1
            return Lease(lease_id=None, expires_at=None, epoch=0, items=[], retry_after_s=0.25)
        items: list[LeaseItem] = []
        held: dict[int, int] = {}
        for task_id, expression in fake.tasks.items():
            open_ = ATTEMPTS - len(fake.recorded.get(task_id, [])) - fake.leased(task_id)
            if open_ > 0 and len(items) < body.limit:
                items.append(LeaseItem(task_id=task_id, domain="arithmetic", attempts=open_,
                                       messages=DOMAIN.agent_messages(make_payload(expression))))
                held[task_id] = open_
        if not items:
            return Lease(lease_id=None, expires_at=None, epoch=0, items=[], retry_after_s=0.25)
        lease_id = uuid.uuid4().hex
        fake.leases[lease_id] = held
        return Lease(lease_id=lease_id, expires_at=datetime.now(UTC) + timedelta(seconds=body.lease_s), epoch=0,
                     items=items)

    @router.post("/v1/runs/{run_id}/attempts", response_model=None)
    def attempts(run_id: str, body: AttemptsReport,
                 key: str | None = Header(default=None, alias=IDEMPOTENCY_HEADER)) -> AttemptsRecorded | JSONResponse:
        fake.requests.append(("attempts", key))
        if fake.unavailable:
            fake.unavailable -= 1
            return JSONResponse(UnavailableError("db down").envelope().model_dump(), 503)
        if key is not None and key in fake.answers:
            return fake.answers[key]
        held = fake.leases.get(body.lease_id)
        if held is None:
            raise NotFoundError(f"no lease {body.lease_id}", param="lease_id")
        if body.lease_id in fake.expired:
            raise ConflictError("lease expired", param="lease_id", code="lease_expired")
        wanted: dict[int, int] = {}
        for i, attempt in enumerate(body.attempts):
            wanted[attempt.task_id] = wanted.get(attempt.task_id, 0) + 1
            if held.get(attempt.task_id, 0) < wanted[attempt.task_id]:
                raise UnprocessableError("more attempts than leased", param=f"attempts[{i}].task_id")
        verdicts = []
        for attempt in body.attempts:
            held[attempt.task_id] -= 1
            expression = fake.tasks[attempt.task_id]
            verdict = DOMAIN.verify(make_payload(expression), attempt.reply or "")
            fake.recorded.setdefault(attempt.task_id, []).append(attempt.reply or "")
            fake.rollouts += 1
            verdicts.append(AttemptVerdict(task_id=attempt.task_id, rollout_id=fake.rollouts, score=verdict.score,
                                           valid=verdict.valid, success=verdict.success, reason=None,
                                           origin=AttemptOrigin.CLIENT_REPLY))
        answer = AttemptsRecorded(recorded=len(verdicts), verdicts=verdicts, epoch=0, lease_open=sum(held.values()))
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
def served(app: FastAPI) -> Iterator[str]:
    """The app on a real loopback socket (uvicorn in a thread), for the sync client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
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


def _play_sync(client: ExternalAgentClient, *, limit: int = 3) -> tuple[list[AttemptsRecorded], list[float]]:
    agent = ScriptedAgent("strong", seed=0)
    reports: list[AttemptsRecorded] = []
    waits: list[float] = []
    stream = client.prompts(RUN, limit=limit, on_report=reports.append, sleep=waits.append)
    for prompt in stream:
        stream.answer(prompt, agent.reply(prompt.messages))
    assert stream.stopped is not None and stream.stopped.status_code == 409
    return reports, waits


def test_sync_stream_plays_a_run_to_its_end_over_a_socket() -> None:
    fake = Fake(empty_leases=2)
    with served(_app(fake)) as url, ExternalAgentClient(url, token=TOKEN, retry=FAST) as client:
        reports, waits = _play_sync(client)
    assert waits == [0.25, 0.25]  # the empty leases' retry_after_s, honoured
    assert {t: len(r) for t, r in fake.recorded.items()} == {t: ATTEMPTS for t in fake.tasks}
    assert sum(r.recorded for r in reports) == ATTEMPTS * len(EXPRESSIONS)
    # Every report carried a key, each a different one.
    keys = [k for kind, k in fake.requests if kind == "attempts"]
    assert all(keys) and len(set(keys)) == len(keys)


async def test_async_stream_plays_a_run_to_its_end() -> None:
    fake = Fake(empty_leases=1)
    reports: list[AttemptsRecorded] = []
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    agent = ScriptedAgent("weak", seed=0)
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST,
                                        transport=httpx.ASGITransport(app=_app(fake))) as client:
        stream = client.prompts(RUN, limit=4, on_report=reports.append, sleep=sleep)
        async for prompt in stream:
            await stream.answer(prompt, agent.reply(prompt.messages))
    assert stream.stopped is not None and stream.stopped.code == "run_not_running"
    assert waits == [0.25]
    assert {t: len(r) for t, r in fake.recorded.items()} == {t: ATTEMPTS for t in fake.tasks}
    # The verdicts are the domain checker's: the service scored what the agent replied.
    successes = sum(v.success for r in reports for v in r.verdicts)
    assert 0 < successes <= ATTEMPTS * len(EXPRESSIONS)


def test_sync_report_whose_answer_was_lost_is_retried_with_the_same_key_and_recorded_once() -> None:
    fake = Fake()
    with served(_app(fake)) as url:
        transport = LoseFirstAnswer(httpx.HTTPTransport())
        with ExternalAgentClient(url, token=TOKEN, retry=FAST, transport=transport) as client:
            _play_sync(client, limit=len(EXPRESSIONS))
    assert transport.lost == 1
    keys = [k for kind, k in fake.requests if kind == "attempts"]
    assert keys[0] == keys[1]  # the retry is the same report
    assert {t: len(r) for t, r in fake.recorded.items()} == {t: ATTEMPTS for t in fake.tasks}  # never twice


async def test_async_report_whose_answer_was_lost_is_recorded_once() -> None:
    fake = Fake()
    transport = LoseFirstAnswer(httpx.ASGITransport(app=_app(fake)))
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST, transport=transport) as client:
        lease = await client.lease(RUN, limit=2)
        assert lease.lease_id is not None
        attempts = [AttemptIn(task_id=item.task_id, reply="7") for item in lease.items for _ in range(item.attempts)]
        first = await client.report(RUN, lease.lease_id, attempts, idempotency_key="k-1")
        again = await client.report(RUN, lease.lease_id, attempts, idempotency_key="k-1")
    assert transport.lost == 1 and first == again
    assert [k for kind, k in fake.requests if kind == "attempts"] == ["k-1", "k-1", "k-1"]
    assert sum(len(r) for r in fake.recorded.values()) == len(attempts)


async def test_unavailable_is_retried_with_backoff_and_gives_up_after_the_policy() -> None:
    fake = Fake(unavailable=2)
    transport = httpx.ASGITransport(app=_app(fake))
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST, transport=transport) as client:
        lease = await client.lease(RUN)
        assert lease.items
        fake.unavailable = 10
        with pytest.raises(ApiError) as info:
            await client.lease(RUN)
    assert info.value.status_code == 503 and info.value.type == "service_unavailable_error"
    assert fake.unavailable == 10 - (FAST.retries + 1)


def test_a_lease_is_not_repeated_after_a_read_timeout() -> None:
    # The lease may have been made; without a key a repeat would hold a second set of tasks.
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ReadTimeout("slow", request=request)

    with ExternalAgentClient("http://cp", retry=FAST, transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(ServiceUnreachableError) as info:
            client.lease(RUN)
        assert info.value.type == "timeout_error" and len(calls) == 1
        with pytest.raises(ServiceUnreachableError):
            client.report(RUN, "l", [AttemptIn(task_id=1, reply="1")])
    assert len(calls) == 1 + FAST.retries + 1  # the keyed report is retried


def test_connection_refused_is_retried_for_a_lease() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"lease_id": None, "expires_at": None, "epoch": 0, "items": [],
                                         "retry_after_s": 1.0})

    with ExternalAgentClient("http://cp", retry=FAST, transport=httpx.MockTransport(handler)) as client:
        assert client.lease(RUN).retry_after_s == 1.0
    assert len(calls) == 3


async def test_an_expired_lease_is_dropped_and_the_stream_goes_on() -> None:
    fake = Fake()
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST,
                                        transport=httpx.ASGITransport(app=_app(fake))) as client:
        stream = client.prompts(RUN, limit=1)
        seen: list[LeasedPrompt] = []
        async for prompt in stream:
            if not seen:
                fake.expired.add(prompt.lease_id)  # the lease runs out before the agent answers
            seen.append(prompt)
            await stream.answer(prompt, "0")
    assert len(stream.expired) == 1 and stream.expired[0].code == "lease_expired"
    # The expired lease's task went back to the pool and was leased again.
    assert {t: len(r) for t, r in fake.recorded.items()} == {t: ATTEMPTS for t in fake.tasks}
    assert len(seen) == ATTEMPTS * len(EXPRESSIONS) + ATTEMPTS


async def test_a_report_that_failed_is_kept_and_sent_again_with_its_key() -> None:
    fake = Fake()
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=RetryPolicy(retries=0),
                                        transport=httpx.ASGITransport(app=_app(fake))) as client:
        stream = client.prompts(RUN, limit=1)
        prompts = aiter(stream)
        first = await anext(prompts)
        await stream.answer(first, "7")  # one of the two attempts; not reported yet
        fake.unavailable = 1
        with pytest.raises(ApiError):
            await stream.flush()
        await stream.flush()
        keys = [k for kind, k in fake.requests if kind == "attempts"]
        assert len(keys) == 2 and keys[0] == keys[1]
        assert fake.recorded == {first.task_id: ["7"]}
        # The lease's other prompt is still open: answering it reports it with a new key.
        second = await anext(prompts)
        assert second.lease_id == first.lease_id
        await stream.answer(second, "7")
        keys = [k for kind, k in fake.requests if kind == "attempts"]
        assert len(keys) == 3 and keys[2] != keys[0]
        assert len(fake.recorded[first.task_id]) == ATTEMPTS


async def test_other_client_errors_are_raised_and_not_retried() -> None:
    fake = Fake()
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST,
                                        transport=httpx.ASGITransport(app=_app(fake))) as client:
        with pytest.raises(ApiError) as info:
            await client.lease("other-run")
        assert (info.value.status_code, info.value.param) == (404, "run_id")
        lease = await client.lease(RUN, limit=1)
        assert lease.lease_id is not None
        too_many = [AttemptIn(task_id=lease.items[0].task_id, reply="1")] * (ATTEMPTS + 1)
        with pytest.raises(ApiError) as info:
            await client.report(RUN, lease.lease_id, too_many)
        assert info.value.status_code == 422 and info.value.param == f"attempts[{ATTEMPTS}].task_id"
    assert len([r for r in fake.requests if r[0] == "attempts"]) == 1


def test_prompts_carry_the_domain_prompt_and_one_per_leased_attempt() -> None:
    fake = Fake()

    async def lease_once() -> list[LeasedPrompt]:
        async with AsyncExternalAgentClient("http://cp", token=TOKEN,
                                            transport=httpx.ASGITransport(app=_app(fake))) as client:
            stream = client.prompts(RUN, limit=2)
            out: list[LeasedPrompt] = []
            async for prompt in stream:
                out.append(prompt)
                if len(out) == 2 * ATTEMPTS:
                    break
            return out

    prompts = asyncio.run(lease_once())
    assert [(p.task_id, p.attempt) for p in prompts] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert prompts[0].messages == DOMAIN.agent_messages(make_payload(EXPRESSIONS[0]))
    assert prompts[0].payload is None and prompts[0].domain == "arithmetic"
