"""Typed client of the outside-agent protocol (mode external_agent): lease an epoch's tasks, report the attempts.

Sync (:class:`ExternalAgentClient`, for a training loop that is not async) and async
(:class:`AsyncExternalAgentClient`), with the same calls:

- ``lease(run_id, limit, lease_s)`` → :class:`~genenv.contracts.leases.Lease` (``items`` empty and
  ``retry_after_s`` set when nothing is leasable right now);
- ``report(run_id, lease_id, attempts, idempotency_key=...)`` → the verdicts. Every call sends an
  ``Idempotency-Key`` (a fresh one unless given) and reuses it on each retry, so a report that reached the service
  but whose answer was lost is answered from the first recording, never recorded twice;
- ``prompts(run_id)`` → a :class:`PromptStream`: iterate it for one prompt per leased attempt, ``answer`` each;
  a lease is reported as soon as all its prompts are answered. It waits ``retry_after_s`` while nothing is
  leasable and ends when the run is no longer running (the lease's 409 ``run_not_running``); a report refused
  because its lease expired or its epoch closed is dropped (its tasks went back to the pool) and counted.

Errors are the one envelope as :class:`~genenv.clients.base.ApiError`. Unavailability is retried with backoff:
a connection that never opened, a 503 (the service or a dependency is down) or a 429 (a tenant limit), honouring
``Retry-After``; a report, being idempotent by its key, is also retried after a read timeout or a proxy's 502/504.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from genenv.clients.base import (
    REQUEST_ID_HEADER,
    ApiError,
    M,
    ServiceClient,
    parse_response,
    unreachable_error,
)
from genenv.contracts.leases import AttemptIn, AttemptsRecorded, AttemptsReport, Lease, LeaseRequest
from genenv.contracts.runs import Run
from genenv.contracts.tasks import ChatMessage
from genenv.logging import current_request_id

IDEMPOTENCY_HEADER = "Idempotency-Key"
SERVICE = "control plane"
DEFAULT_LIMIT = 32
DEFAULT_LEASE_S = 600
IDLE_WAIT_S = 5.0
"""Wait before leasing again when an empty lease names no ``retry_after_s``."""
MAX_IDLE_WAIT_S = 60.0
"""Cap on one wait, so a client notices a stopped run within a minute whatever the service suggested."""

RUN_NOT_RUNNING = "run_not_running"
"""The 409's code when the run is not running (paused, finished, failed, cancelled): a stream ends on it."""
GONE = frozenset({"lease_expired", "epoch_closed", RUN_NOT_RUNNING})
"""Codes of a report's 409 that mean its attempts can no longer be taken (the lease expired, its epoch is closed,
or the run stopped): the stream drops them (their tasks went back to the pool) instead of failing."""

_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
# The service (or a dependency behind it) said "not now" before doing anything: repeating is safe for any call.
_UNAVAILABLE = frozenset({429, 503})
# A proxy's answer: the request may have reached the service, so only an idempotent (keyed) call repeats it.
_MAYBE_DONE = frozenset({502, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently unavailability is retried (exponential backoff, capped)."""

    retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based); a server's Retry-After wins when longer."""
        wait = min(self.backoff_s * 2.0**attempt, self.max_backoff_s)
        return min(max(wait, retry_after_s or 0.0), self.max_backoff_s)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _should_retry(outcome: httpx.Response | httpx.TransportError, *, keyed: bool) -> bool:
    """Whether a call may be repeated after this outcome: always when it provably did nothing; when it may have
    done something, only if it carries an idempotency key (the service then answers a repeat from the first)."""
    if isinstance(outcome, httpx.TransportError):
        return keyed or isinstance(outcome, _NEVER_SENT)
    return outcome.status_code in _UNAVAILABLE or (keyed and outcome.status_code in _MAYBE_DONE)


def _seg(value: str) -> str:
    """A path segment with '/', '?' and '#' escaped, so an id can never address another route."""
    return quote(value, safe="")


@dataclass(frozen=True)
class _Call:
    """One logical call: what is sent on every try (the same request id and idempotency key each time)."""

    method: str
    path: str
    body: bytes | None
    headers: dict[str, str]
    keyed: bool

    @classmethod
    def of(cls, method: str, path: str, body: BaseModel | None = None, idempotency_key: str | None = None) -> _Call:
        headers = {REQUEST_ID_HEADER: current_request_id() or uuid.uuid4().hex}
        content = body.model_dump_json().encode() if body is not None else None
        if content is not None:
            headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        # GETs change nothing, so they are as safe to repeat as a keyed call.
        return cls(method, path, content, headers, keyed=idempotency_key is not None or method == "GET")


def _lease_call(run_id: str, limit: int, lease_s: int) -> _Call:
    return _Call.of("POST", f"/v1/runs/{_seg(run_id)}/leases", LeaseRequest(limit=limit, lease_s=lease_s))


def _report_call(run_id: str, lease_id: str, attempts: Sequence[AttemptIn], idempotency_key: str | None) -> _Call:
    body = AttemptsReport(lease_id=lease_id, attempts=list(attempts))
    return _Call.of("POST", f"/v1/runs/{_seg(run_id)}/attempts", body, idempotency_key or new_idempotency_key())


def new_idempotency_key() -> str:
    """A fresh key for one report (random; 32 hex characters)."""
    return uuid.uuid4().hex


class AsyncExternalAgentClient(ServiceClient):
    """Lease tasks of an external_agent run and report attempts, from async code."""

    service = SERVICE

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        super().__init__(base_url, token=token, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s,
                         retries=self.retry.retries, transport=transport)

    async def lease(self, run_id: str, limit: int = DEFAULT_LIMIT, lease_s: int = DEFAULT_LEASE_S) -> Lease:
        """POST /v1/runs/{id}/leases: up to ``limit`` tasks held for ``lease_s`` seconds; 409 if not running."""
        return await self._send(_lease_call(run_id, limit, lease_s), Lease)

    async def report(
        self, run_id: str, lease_id: str, attempts: Sequence[AttemptIn], *, idempotency_key: str | None = None
    ) -> AttemptsRecorded:
        """POST /v1/runs/{id}/attempts with an Idempotency-Key (``idempotency_key`` or a fresh one) reused on
        every retry, so the attempts are recorded at most once."""
        return await self._send(_report_call(run_id, lease_id, attempts, idempotency_key), AttemptsRecorded)

    async def get_run(self, run_id: str) -> Run:
        """GET /v1/runs/{id}."""
        return await self._send(_Call.of("GET", f"/v1/runs/{_seg(run_id)}"), Run)

    def prompts(
        self,
        run_id: str,
        *,
        limit: int = DEFAULT_LIMIT,
        lease_s: int = DEFAULT_LEASE_S,
        on_report: Callable[[AttemptsRecorded], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> AsyncPromptStream:
        """A stream of leased prompts of ``run_id`` (see :class:`AsyncPromptStream`)."""
        return AsyncPromptStream(self, run_id, limit=limit, lease_s=lease_s, on_report=on_report, sleep=sleep)

    async def _send(self, call: _Call, model: type[M]) -> M:
        base_url = str(self._http.base_url)
        for attempt in range(self.retry.retries + 1):
            last = attempt == self.retry.retries
            try:
                response = await self._http.request(call.method, call.path, content=call.body, headers=call.headers)
            except httpx.TransportError as exc:
                if last or not _should_retry(exc, keyed=call.keyed):
                    raise unreachable_error(exc, call.headers[REQUEST_ID_HEADER], service=self.service,
                                            base_url=base_url) from exc
                await asyncio.sleep(self.retry.delay(attempt, None))
                continue
            if last or not _should_retry(response, keyed=call.keyed):
                return parse_response(response, model, service=self.service, base_url=base_url)
            await asyncio.sleep(self.retry.delay(attempt, _retry_after(response)))
        raise AssertionError("unreachable: the last try returns or raises")


class ExternalAgentClient:
    """Lease tasks of an external_agent run and report attempts, from synchronous code (same calls as
    :class:`AsyncExternalAgentClient`). Create one per process and reuse it; close it (or use ``with``)."""

    service = SERVICE

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s), transport=transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def lease(self, run_id: str, limit: int = DEFAULT_LIMIT, lease_s: int = DEFAULT_LEASE_S) -> Lease:
        """POST /v1/runs/{id}/leases: up to ``limit`` tasks held for ``lease_s`` seconds; 409 if not running."""
        return self._send(_lease_call(run_id, limit, lease_s), Lease)

    def report(
        self, run_id: str, lease_id: str, attempts: Sequence[AttemptIn], *, idempotency_key: str | None = None
    ) -> AttemptsRecorded:
        """POST /v1/runs/{id}/attempts with an Idempotency-Key reused on every retry (recorded at most once)."""
        return self._send(_report_call(run_id, lease_id, attempts, idempotency_key), AttemptsRecorded)

    def get_run(self, run_id: str) -> Run:
        """GET /v1/runs/{id}."""
        return self._send(_Call.of("GET", f"/v1/runs/{_seg(run_id)}"), Run)

    def prompts(
        self,
        run_id: str,
        *,
        limit: int = DEFAULT_LIMIT,
        lease_s: int = DEFAULT_LEASE_S,
        on_report: Callable[[AttemptsRecorded], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> PromptStream:
        """A stream of leased prompts of ``run_id`` (see :class:`PromptStream`)."""
        return PromptStream(self, run_id, limit=limit, lease_s=lease_s, on_report=on_report, sleep=sleep)

    def _send(self, call: _Call, model: type[M]) -> M:
        base_url = str(self._http.base_url)
        for attempt in range(self.retry.retries + 1):
            last = attempt == self.retry.retries
            try:
                response = self._http.request(call.method, call.path, content=call.body, headers=call.headers)
            except httpx.TransportError as exc:
                if last or not _should_retry(exc, keyed=call.keyed):
                    raise unreachable_error(exc, call.headers[REQUEST_ID_HEADER], service=self.service,
                                            base_url=base_url) from exc
                time.sleep(self.retry.delay(attempt, None))
                continue
            if last or not _should_retry(response, keyed=call.keyed):
                return parse_response(response, model, service=self.service, base_url=base_url)
            time.sleep(self.retry.delay(attempt, _retry_after(response)))
        raise AssertionError("unreachable: the last try returns or raises")


@dataclass(frozen=True)
class LeasedPrompt:
    """One attempt a lease asks for: the prompt to answer and where its answer goes."""

    run_id: str
    lease_id: str
    epoch: int
    expires_at: datetime | None
    task_id: int
    domain: str
    messages: list[ChatMessage]
    payload: dict[str, Any] | None
    """The task payload (answer included) only with external.scoring: client; None otherwise."""
    attempt: int
    """Which of the task's leased attempts this is (0-based)."""


@dataclass
class StreamStats:
    """What a stream did, and the wall time of its own calls: the protocol's overhead as the client sees it
    (a report's time includes the service scoring the replies)."""

    leases: int = 0
    empty_leases: int = 0
    prompts: int = 0
    reported: int = 0
    """Attempts the service recorded."""
    refused: int = 0
    """Attempts dropped because their lease had expired, their epoch had closed or the run had stopped (409)."""
    lease_s: float = 0.0
    report_s: float = 0.0
    idle_s: float = 0.0
    """Time waited on retry_after_s while nothing was leasable (not overhead: the service had no tasks)."""


@dataclass(frozen=True)
class _Batch:
    """Answers taken out of the buffer to be reported, with the key fixed at the first try: a report retried
    later (after ``flush`` failed) is the same report to the service, so it is recorded at most once."""

    lease_id: str
    attempts: list[AttemptIn]
    idempotency_key: str = field(default_factory=new_idempotency_key)


@dataclass
class _OpenLease:
    """A lease's prompts handed out and not yet reported, and the answers buffered for it."""

    lease_id: str
    unanswered: int
    answers: list[AttemptIn] = field(default_factory=list)


class _Ledger:
    """Bookkeeping shared by the sync and async streams (no IO): leases handed out, answers buffered, batches
    whose report has not succeeded yet."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.open: dict[str, _OpenLease] = {}
        self.unsent: list[_Batch] = []
        self.stopped: ApiError | None = None
        self.expired: list[ApiError] = []
        self.stats = StreamStats()

    def prompts_of(self, lease: Lease) -> list[LeasedPrompt]:
        self.stats.leases += 1
        if lease.lease_id is None or not lease.items:
            self.stats.empty_leases += 1
            return []
        prompts = [
            LeasedPrompt(self.run_id, lease.lease_id, lease.epoch, lease.expires_at, item.task_id, item.domain,
                         item.messages, item.payload, k)
            for item in lease.items for k in range(item.attempts)
        ]
        self.open[lease.lease_id] = _OpenLease(lease.lease_id, len(prompts))
        self.stats.prompts += len(prompts)
        return prompts

    def add(self, prompt: LeasedPrompt, reply: str | None, score: float | None) -> bool:
        """Buffer one answer; True when every prompt of its lease is now answered (time to report)."""
        held = self.open.get(prompt.lease_id)
        if held is None or held.unanswered == 0:
            raise ValueError(f"lease {prompt.lease_id} has no unanswered prompt in this stream")
        held.answers.append(AttemptIn(task_id=prompt.task_id, reply=reply, score=score))
        held.unanswered -= 1
        return held.unanswered == 0

    def take(self, lease_id: str | None = None) -> list[_Batch]:
        """The batches to report: earlier failed ones first (same keys), then the buffered answers (of
        ``lease_id`` only, when given) as new ones."""
        for held in list(self.open.values()):
            if lease_id is not None and held.lease_id != lease_id:
                continue
            if held.answers:
                self.unsent.append(_Batch(held.lease_id, held.answers))
                held.answers = []
            if held.unanswered == 0:
                del self.open[held.lease_id]
        return list(self.unsent)

    def sent(self, batch: _Batch, recorded: AttemptsRecorded) -> None:
        self.unsent.remove(batch)
        self.stats.reported += recorded.recorded

    def failed(self, batch: _Batch, exc: ApiError) -> None:
        """A report failed. A 409 of GONE (lease expired, epoch closed, run stopped): the batch is dropped and noted
        in ``expired``. Unreachable, 5xx or 429 (retries ran out): kept, with its key, for the next flush, and
        raised. Any other 4xx would fail the same way again: dropped and raised."""
        if exc.status_code == 409 and exc.code in GONE:
            self.expired.append(exc)
            self.stats.refused += len(batch.attempts)
            self.unsent.remove(batch)
            self.open.pop(batch.lease_id, None)
            return
        if exc.status_code is not None and exc.status_code < 500 and exc.status_code not in _UNAVAILABLE:
            self.unsent.remove(batch)
        raise exc


def _idle_wait(lease: Lease) -> float:
    return min(lease.retry_after_s if lease.retry_after_s is not None else IDLE_WAIT_S, MAX_IDLE_WAIT_S)


class _Stream:
    """What the sync and async prompt streams share: the lease settings, the ledger and what it reports."""

    def __init__(self, run_id: str, limit: int, lease_s: int,
                 on_report: Callable[[AttemptsRecorded], None] | None) -> None:
        self.limit = limit
        self.lease_s = lease_s
        self.on_report = on_report
        self._ledger = _Ledger(run_id)

    @property
    def stopped(self) -> ApiError | None:
        """The 409 that ended the stream (the run is not running), None while it runs."""
        return self._ledger.stopped

    @property
    def expired(self) -> list[ApiError]:
        """Reports refused with a 409 of GONE (expired lease, closed epoch, stopped run): not recorded."""
        return self._ledger.expired

    @property
    def stats(self) -> StreamStats:
        """Counts and wall time of this stream's calls so far."""
        return self._ledger.stats


class PromptStream(_Stream):
    """Leased prompts of one run, one per attempt::

        stream = client.prompts(run_id)
        for prompt in stream:
            stream.answer(prompt, agent(prompt.messages))

    Iterating leases ``limit`` tasks at a time, waits ``retry_after_s`` while nothing is leasable and ends when
    the run is no longer running (``stopped`` then holds the 409). ``answer`` buffers; a lease is reported when
    every prompt it handed out is answered (``on_report`` sees the verdicts); ``flush`` reports what is buffered
    of incomplete leases (a consumer that skips prompts calls it). Answers may come later than the prompts (a
    trainer that batches): only the count per lease matters.
    """

    def __init__(
        self,
        client: ExternalAgentClient,
        run_id: str,
        *,
        limit: int,
        lease_s: int,
        on_report: Callable[[AttemptsRecorded], None] | None,
        sleep: Callable[[float], None],
    ) -> None:
        super().__init__(run_id, limit, lease_s, on_report)
        self.client = client
        self._sleep = sleep

    def __iter__(self) -> Iterator[LeasedPrompt]:
        while True:
            started = time.perf_counter()
            try:
                lease = self.client.lease(self._ledger.run_id, self.limit, self.lease_s)
            except ApiError as exc:
                if exc.status_code != 409 or exc.code != RUN_NOT_RUNNING:
                    raise  # not_external_agent, 404, 422: the caller's mistake, not the end of a run
                self._ledger.stopped = exc
            finally:
                self._ledger.stats.lease_s += time.perf_counter() - started
            if self._ledger.stopped is not None:
                self.flush()
                return
            prompts = self._ledger.prompts_of(lease)
            if not prompts:
                wait = _idle_wait(lease)
                self._sleep(wait)
                self._ledger.stats.idle_s += wait
                continue
            yield from prompts

    def answer(self, prompt: LeasedPrompt, reply: str | None = None, *, score: float | None = None) -> None:
        """Record the agent's reply to ``prompt`` (or, with client scoring, its score); reports the lease when it
        is complete."""
        if self._ledger.add(prompt, reply, score):
            self._report(self._ledger.take(prompt.lease_id))

    def flush(self) -> None:
        """Report every buffered answer now, complete lease or not. A report that fails (the service stayed
        unreachable through the retries) raises and is kept, with its key, for the next flush."""
        self._report(self._ledger.take())

    def _report(self, batches: list[_Batch]) -> None:
        for batch in batches:
            started = time.perf_counter()
            try:
                recorded = self.client.report(self._ledger.run_id, batch.lease_id, batch.attempts,
                                              idempotency_key=batch.idempotency_key)
            except ApiError as exc:
                self._ledger.failed(batch, exc)  # raises unless the lease is gone (409)
                continue
            finally:
                self._ledger.stats.report_s += time.perf_counter() - started
            self._ledger.sent(batch, recorded)
            if self.on_report is not None:
                self.on_report(recorded)


class AsyncPromptStream(_Stream):
    """:class:`PromptStream` for async code::

        stream = client.prompts(run_id)
        async for prompt in stream:
            await stream.answer(prompt, await agent(prompt.messages))
    """

    def __init__(
        self,
        client: AsyncExternalAgentClient,
        run_id: str,
        *,
        limit: int,
        lease_s: int,
        on_report: Callable[[AttemptsRecorded], None] | None,
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        super().__init__(run_id, limit, lease_s, on_report)
        self.client = client
        self._sleep = sleep

    async def __aiter__(self) -> AsyncIterator[LeasedPrompt]:
        while True:
            started = time.perf_counter()
            try:
                lease = await self.client.lease(self._ledger.run_id, self.limit, self.lease_s)
            except ApiError as exc:
                if exc.status_code != 409 or exc.code != RUN_NOT_RUNNING:
                    raise  # not_external_agent, 404, 422: the caller's mistake, not the end of a run
                self._ledger.stopped = exc
            finally:
                self._ledger.stats.lease_s += time.perf_counter() - started
            if self._ledger.stopped is not None:
                await self.flush()
                return
            prompts = self._ledger.prompts_of(lease)
            if not prompts:
                wait = _idle_wait(lease)
                await self._sleep(wait)
                self._ledger.stats.idle_s += wait
                continue
            for prompt in prompts:
                yield prompt

    async def answer(self, prompt: LeasedPrompt, reply: str | None = None, *, score: float | None = None) -> None:
        """Record the agent's reply to ``prompt`` (or its score); reports the lease when it is complete."""
        if self._ledger.add(prompt, reply, score):
            await self._report(self._ledger.take(prompt.lease_id))

    async def flush(self) -> None:
        """Report every buffered answer now, complete lease or not (a failed report is kept for the next)."""
        await self._report(self._ledger.take())

    async def _report(self, batches: list[_Batch]) -> None:
        for batch in batches:
            started = time.perf_counter()
            try:
                recorded = await self.client.report(self._ledger.run_id, batch.lease_id, batch.attempts,
                                                    idempotency_key=batch.idempotency_key)
            except ApiError as exc:
                self._ledger.failed(batch, exc)  # raises unless the lease is gone (409)
                continue
            finally:
                self._ledger.stats.report_s += time.perf_counter() - started
            self._ledger.sent(batch, recorded)
            if self.on_report is not None:
                self.on_report(recorded)
