"""genenv.clients.external_agent, transport behaviour only: the lease/attempts protocol played by the sync client
(over a real socket, uvicorn in a thread) and the async client (ASGI) against a tiny stand-in app that speaks the
contracts of genenv.contracts.leases with the real error envelope and honours Idempotency-Key. Retries, key reuse,
empty leases, expired leases and the stop on 409 are checked here; the real control plane's endpoints are tested
in tests/integration (issue 33)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from genenv.clients.base import ApiError, ServiceUnreachableError
from genenv.clients.external_agent import (
    AsyncExternalAgentClient,
    ExternalAgentClient,
    LeasedPrompt,
    RetryPolicy,
)
from genenv.contracts.leases import AttemptIn, AttemptsRecorded
from genenv.domains.arithmetic.domain import DOMAIN, make_payload
from genenv.domains.arithmetic.scripted_agent import ScriptedAgent
from tests.unit.foundation.external_standin import (
    ATTEMPTS,
    EMPTY_RETRY_S,
    EXPRESSIONS,
    OURS,
    RUN,
    TOKEN,
    Fake,
    LoseFirstAnswer,
    app,
    served,
)

FAST = RetryPolicy(retries=3, backoff_s=0.0)
EVERY_TASK_ONCE = {i + 1: ATTEMPTS for i in range(len(EXPRESSIONS))}
"""Each task of the stand-in's one epoch with exactly its ATTEMPTS attempts recorded."""


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
    with served(app(fake)) as url, ExternalAgentClient(url, token=TOKEN, retry=FAST) as client:
        reports, waits = _play_sync(client)
    assert waits == [EMPTY_RETRY_S, EMPTY_RETRY_S]  # the empty leases' retry_after_s, honoured
    assert {t: len(r) for t, r in fake.recorded.items()} == EVERY_TASK_ONCE
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
                                        transport=httpx.ASGITransport(app=app(fake))) as client:
        stream = client.prompts(RUN, limit=4, on_report=reports.append, sleep=sleep)
        async for prompt in stream:
            await stream.answer(prompt, agent.reply(prompt.messages))
    assert stream.stopped is not None and stream.stopped.code == "run_not_running"
    assert waits == [EMPTY_RETRY_S]
    stats = stream.stats
    # An empty lease, one of 4 tasks, one of 3; then the 409.
    assert (stats.leases, stats.empty_leases, stats.prompts, stats.reported) == (3, 1, 14, 14)
    assert stats.idle_s == EMPTY_RETRY_S and stats.lease_s > 0 and stats.report_s > 0
    assert {t: len(r) for t, r in fake.recorded.items()} == EVERY_TASK_ONCE
    # The verdicts are the domain checker's: the service scored what the agent replied.
    successes = sum(v.success for r in reports for v in r.verdicts)
    assert 0 < successes <= ATTEMPTS * len(EXPRESSIONS)


def test_sync_report_whose_answer_was_lost_is_retried_with_the_same_key_and_recorded_once() -> None:
    fake = Fake()
    with served(app(fake)) as url:
        transport = LoseFirstAnswer(httpx.HTTPTransport())
        with ExternalAgentClient(url, token=TOKEN, retry=FAST, transport=transport) as client:
            _play_sync(client, limit=len(EXPRESSIONS))
    assert transport.lost == 1
    keys = [k for kind, k in fake.requests if kind == "attempts"]
    assert keys[0] == keys[1]  # the retry is the same report
    assert {t: len(r) for t, r in fake.recorded.items()} == EVERY_TASK_ONCE  # never twice


async def test_async_report_whose_answer_was_lost_is_recorded_once() -> None:
    fake = Fake()
    transport = LoseFirstAnswer(httpx.ASGITransport(app=app(fake)))
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
    transport = httpx.ASGITransport(app=app(fake))
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
                                        transport=httpx.ASGITransport(app=app(fake))) as client:
        stream = client.prompts(RUN, limit=1)
        seen: list[LeasedPrompt] = []
        async for prompt in stream:
            if not seen:
                fake.expired.add(prompt.lease_id)  # the lease runs out before the agent answers
            seen.append(prompt)
            await stream.answer(prompt, "0")
    assert len(stream.expired) == 1 and stream.expired[0].code == "lease_expired"
    assert stream.stats.refused == ATTEMPTS
    # The expired lease's task went back to the pool and was leased again.
    assert {t: len(r) for t, r in fake.recorded.items()} == EVERY_TASK_ONCE
    assert len(seen) == ATTEMPTS * len(EXPRESSIONS) + ATTEMPTS


async def test_a_report_that_failed_is_kept_and_sent_again_with_its_key() -> None:
    fake = Fake()
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=RetryPolicy(retries=0),
                                        transport=httpx.ASGITransport(app=app(fake))) as client:
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
                                        transport=httpx.ASGITransport(app=app(fake))) as client:
        with pytest.raises(ApiError) as info:
            await client.lease("other-run")
        assert (info.value.status_code, info.value.param) == (404, "run_id")
        lease = await client.lease(RUN, limit=1)
        assert lease.lease_id is not None
        too_many = [AttemptIn(task_id=lease.items[0].task_id, reply="1")] * (ATTEMPTS + 1)
        with pytest.raises(ApiError) as info:
            await client.report(RUN, lease.lease_id, too_many)
        assert (info.value.code, info.value.param) == ("too_many_attempts", f"attempts.{ATTEMPTS}.task_id")
    assert len([r for r in fake.requests if r[0] == "attempts"]) == 1


async def test_a_stream_on_a_run_whose_agent_is_ours_raises_instead_of_ending() -> None:
    async with AsyncExternalAgentClient("http://cp", token=TOKEN, retry=FAST,
                                        transport=httpx.ASGITransport(app=app(Fake()))) as client:
        stream = client.prompts(OURS)
        with pytest.raises(ApiError) as info:
            async for _ in stream:
                pass
    assert info.value.code == "not_external_agent" and stream.stopped is None


def test_prompts_carry_the_domain_prompt_and_one_per_leased_attempt() -> None:
    fake = Fake()

    async def lease_once() -> list[LeasedPrompt]:
        async with AsyncExternalAgentClient("http://cp", token=TOKEN,
                                            transport=httpx.ASGITransport(app=app(fake))) as client:
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
