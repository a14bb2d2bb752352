"""A run outlives its dependencies (issue 31): a service that does not answer makes the run wait, never fail.

The orchestrator's own loop (``advance``, the embedded driver's inline path) over a real database, with the verifier
as a real HTTP service on a TCP port: at first nothing listens there (every try is refused), later the verifier
starts on that port. ``max_phase_failures`` is 2, so on the old code the run failed at the second refused try.
No model is loaded: the run is agent_only with its tasks and attempts already stored, so it starts at VERIFY.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.curriculum import CurriculumClient
from genenv.clients.verifier import VerifierClient
from genenv.contracts.adapters import JobKind, JobStatus, Role
from genenv.contracts.runs import RunConfig, RunStatus, WaitingOn
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import EpochRow, RolloutRow, RunRow, TaskRow, VerdictRow
from genenv.db.repositories import runs, train_jobs
from genenv.domains import get_domain
from genenv.inference.base import InferenceBackend
from genenv.inference.factory import build_backend
from genenv.inference.openai_client import OpenAIBackend
from genenv.outages import DependencyAwayError
from genenv.serving.publisher import AdapterPublishError
from genenv.settings import GenEnvSettings, InferenceSettings, ServiceUrls
from genenv_control_plane.app import create_app as control_plane_app
from genenv_control_plane.enqueue import InProcessEnqueuer
from genenv_curriculum.app import create_app as curriculum_app
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.loop import advance
from genenv_orchestrator.runtime import VerifierPortAdapter
from genenv_rollout.worker import rollout_epoch
from genenv_verifier.app import create_app as verifier_app
from tests.conftest import free_port

ATTEMPTS = 4  # rollouts per task: the verdicts the VERIFY phase must store, exactly


class InlineJobs:
    """The inline dispatcher's part the run needs: its train_agent job is skipped (no model here)."""

    inline = True

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    async def rollout(self, run_id: str, epoch: int) -> None:
        raise AssertionError("the attempts are stored already")

    async def train(self, job_id: int, kind: str) -> None:
        with session_scope(self._sessions) as s:
            train_jobs.move_job(s, job_id, JobStatus.RUNNING)
            train_jobs.move_job(s, job_id, JobStatus.SKIPPED, metrics={"reason": "no model in this test"})

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        raise AssertionError("inline: the loop sleeps itself")


class ModelServerPublisher:
    """A publisher in front of a model server at ``url``: like vLLM's, each call asks the server (GET /v1/models)
    and fails as the real publisher does when it is away. Records the calls that reached it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.served: list[tuple[str, Role]] = []

    async def publish(self, adapter: Any) -> None:
        return None

    async def ensure_latest(self, run_id: str, role: Role) -> str | None:
        async with httpx.AsyncClient(base_url=self.url) as client:
            try:
                (await client.get("/v1/models")).raise_for_status()
            except httpx.HTTPError as exc:
                raise AdapterPublishError(f"vLLM at {self.url} unreachable: {exc!r}") from exc
        self.served.append((run_id, role))
        return None


@contextlib.asynccontextmanager
async def serving(app: FastAPI, port: int) -> AsyncIterator[None]:
    """Serve ``app`` on 127.0.0.1:port with uvicorn in this event loop."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        await task


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'genenv.db'}"
    url: str = request.getfixturevalue("new_pg_database")()
    return url


@pytest.fixture
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    upgrade(db_url)
    engine = make_engine(GenEnvSettings.model_validate({"database": {"url": db_url}}).database)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def _settings(db_url: str, **orchestrator: Any) -> GenEnvSettings:
    return GenEnvSettings.model_validate({
        "database": {"url": db_url},
        "queue": {"eager": True},
        "orchestrator": {"max_phase_failures": 2, "poll_interval_s": 0.05, **orchestrator},
    })


def _run_at_verify(sessions: sessionmaker[Session]) -> str:
    """A running agent_only run (1 epoch) whose one task has its 4 attempts stored: it starts at VERIFY."""
    domain = get_domain("arithmetic")
    payload = domain.validate_generation({"expression": "3 + 4"}, None)
    with session_scope(sessions) as s:
        run = runs.create(s, RunConfig.model_validate(
            {"mode": "agent_only", "domain": "arithmetic", "epochs": 1, "rollouts_per_task": ATTEMPTS}))
        runs.move(s, run, RunStatus.RUNNING)
        s.add(EpochRow(run_id=run.id, index=0, phase="verify", summary={}))
        task = TaskRow(run_id=run.id, epoch=0, seed_id="s", domain="arithmetic", variation=0, status="valid",
                       payload=payload, raw_text="{}", prompt_messages=[])
        s.add(task)
        s.flush()
        for attempt, reply in enumerate(["3 + 4 = 7", "7", "8", "The answer is 7."]):
            s.add(RolloutRow(task_id=task.id, attempt=attempt, response=reply,
                             prompt_messages=domain.agent_messages(payload)))
        return run.id


def _context(settings: GenEnvSettings, sessions: sessionmaker[Session], verifier: VerifierClient,
             publisher: Any) -> OrchestratorContext:
    curriculum = CurriculumClient("http://curriculum", transport=httpx.ASGITransport(
        app=curriculum_app(settings, sessions=sessions)))
    return OrchestratorContext(settings=settings, session_factory=sessions, simulator=None,  # type: ignore[arg-type]
                               verifier=VerifierPortAdapter(verifier), curriculum=curriculum,
                               dispatcher=InlineJobs(sessions), publisher=publisher)


def _row(sessions: sessionmaker[Session], run_id: str) -> tuple[str, WaitingOn | None, str | None]:
    with session_scope(sessions) as s:
        run = s.get(RunRow, run_id)
        assert run is not None
        return run.status, None if run.waiting_on is None else WaitingOn.model_validate(run.waiting_on), run.error


async def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _verdicts(sessions: sessionmaker[Session], run_id: str) -> int:
    with session_scope(sessions) as s:
        return int(s.scalar(select(func.count(VerdictRow.id)).join(RolloutRow).join(TaskRow)
                            .where(TaskRow.run_id == run_id)) or 0)


def test_a_verifier_down_longer_than_the_failure_budget_makes_the_run_wait_then_complete(
    db_url: str, sessions: sessionmaker[Session]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = _settings(db_url).model_copy(update={"services": _settings(db_url).services.model_copy(
        update={"verifier": url})})
    run_id = _run_at_verify(sessions)

    async def scenario() -> tuple[str, WaitingOn, dict[str, Any], dict[str, Any]]:
        verifier = VerifierClient(url)
        ctx = _context(settings, sessions, verifier, _NoAdapters())
        api = httpx.AsyncClient(base_url="http://cp", transport=httpx.ASGITransport(
            app=control_plane_app(settings, enqueuer=InProcessEnqueuer())))
        started = datetime.now(UTC)
        driving = asyncio.create_task(advance(ctx, run_id))
        # Twice the failure budget of refused tries, and the run still runs.
        await _until(lambda: driving.done() or ((w := _row(sessions, run_id)[1]) is not None and w.attempts >= 4))
        status, waiting, _ = _row(sessions, run_id)
        assert status == "running" and waiting is not None
        assert not driving.done()
        seen = (await api.get(f"/v1/runs/{run_id}")).json()
        listed = (await api.get("/v1/runs")).json()["items"][0]
        async with serving(verifier_app(settings, sessions=sessions), port):
            outcome = await asyncio.wait_for(driving, 60)
        await verifier.aclose()
        await api.aclose()
        assert waiting.since >= started.replace(microsecond=0)
        return outcome, waiting, seen, listed

    outcome, waiting, seen, listed = asyncio.run(scenario())
    assert outcome == "completed"
    assert (waiting.dependency, waiting.epoch, waiting.phase) == ("verifier", 0, "verify")
    assert "ConnectError" in waiting.last_error and "\n" not in waiting.last_error
    # GET /v1/runs/{id} and the list carry what the run waits on while it waits.
    assert seen["status"] == "running" and seen["waiting_on"]["dependency"] == "verifier"
    assert seen["waiting_on"]["attempts"] >= 4 and seen["waiting_on"]["phase"] == "verify"
    assert listed["id"] == run_id and listed["waiting_on"]["dependency"] == "verifier"
    # Exactly one verdict per attempt, and nothing left waiting once the verifier answered.
    assert _verdicts(sessions, run_id) == ATTEMPTS
    assert _row(sessions, run_id) == ("completed", None, None)


class _NoAdapters:
    async def publish(self, adapter: Any) -> None:
        return None

    async def ensure_latest(self, run_id: str, role: Role) -> str | None:
        return None


def test_an_outage_past_outage_pause_after_s_pauses_the_run_and_resume_completes_it(
    db_url: str, sessions: sessionmaker[Session]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    base = _settings(db_url, outage_pause_after_s=1.0)
    settings = base.model_copy(update={"services": base.services.model_copy(update={"verifier": url})})
    run_id = _run_at_verify(sessions)

    async def scenario() -> tuple[str, str, tuple[str, WaitingOn | None, str | None], str]:
        verifier = VerifierClient(url)
        ctx = _context(settings, sessions, verifier, _NoAdapters())
        paused = await asyncio.wait_for(advance(ctx, run_id), 30)
        at_pause = _row(sessions, run_id)
        with session_scope(sessions) as s:
            resumed = runs.apply_action(s, run_id, "resume").status
        async with serving(verifier_app(settings, sessions=sessions), port):
            outcome = await asyncio.wait_for(advance(ctx, run_id), 60)
        await verifier.aclose()
        return paused, resumed, at_pause, outcome

    paused, resumed, (status, waiting, error), outcome = asyncio.run(scenario())
    assert (paused, status) == ("paused", "paused")  # never failed
    assert error is not None and error.startswith("paused: verify (epoch 0) waited on verifier since ")
    assert "orchestrator.outage_pause_after_s = 1 s" in error and "ConnectError" in error
    assert waiting is not None and waiting.attempts >= 2 and waiting.dependency == "verifier"
    # Resume clears the reason and the wait; the run continues at VERIFY and completes.
    assert resumed == "running" and outcome == "completed"
    assert _verdicts(sessions, run_id) == ATTEMPTS
    assert _row(sessions, run_id) == ("completed", None, None)


def test_a_real_failure_still_fails_the_run_after_its_budget(db_url: str, sessions: sessionmaker[Session]) -> None:
    # The verifier answers, but refuses the orchestrator (a token it does not accept): a 401, not an outage.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    base = _settings(db_url)
    settings = base.model_copy(update={"services": base.services.model_copy(update={"verifier": url})})
    guarded = GenEnvSettings.model_validate({**settings.model_dump(mode="python"), "auth": {"tokens": ["right"]}})
    run_id = _run_at_verify(sessions)

    async def scenario() -> str:
        verifier = VerifierClient(url, token="wrong")
        ctx = _context(settings, sessions, verifier, _NoAdapters())
        async with serving(verifier_app(guarded, sessions=sessions), port):
            outcome = await asyncio.wait_for(advance(ctx, run_id), 30)
        await verifier.aclose()
        return outcome

    assert asyncio.run(scenario()) == "failed"
    status, waiting, error = _row(sessions, run_id)
    assert (status, waiting) == ("failed", None)
    assert error is not None and error.startswith("verify (epoch 0) failed 2 times: ")
    assert "permission_error: bearer token not accepted" in error
    assert _verdicts(sessions, run_id) == 0


def test_when_a_model_server_outage_ends_the_newest_adapters_are_served_before_the_phase_tries_again(
    db_url: str, sessions: sessionmaker[Session]
) -> None:
    # The verifier (in-process) scores with the agent's model server: while that server is away the verifier
    # answers 503, and the run waits on the model server itself.
    port = free_port()
    model_url = f"http://127.0.0.1:{port}"
    base = _settings(db_url)
    settings = base.model_copy(update={"services": base.services.model_copy(update={"vllm_agent": model_url})})
    run_id = _run_at_verify(sessions)
    model = FastAPI()

    @model.get("/v1/models")
    async def models() -> dict[str, list[Any]]:
        return {"data": []}

    class VerifierBehindTheModel(VerifierPortAdapter):
        async def verify(self, request: Any) -> Any:
            async with httpx.AsyncClient(base_url=model_url) as client:
                try:
                    await client.get("/v1/models")
                except httpx.ConnectError as exc:
                    raise AdapterPublishError(f"vLLM at {model_url} unreachable: {exc!r}") from exc
            return await super().verify(request)

    async def scenario() -> tuple[str, list[tuple[str, Role]], WaitingOn]:
        publisher = ModelServerPublisher(model_url)
        verifier = VerifierClient("http://verifier", transport=httpx.ASGITransport(
            app=verifier_app(settings, sessions=sessions)))
        ctx = _context(settings, sessions, verifier, publisher)
        ctx.verifier = VerifierBehindTheModel(verifier)
        driving = asyncio.create_task(advance(ctx, run_id))
        await _until(lambda: driving.done() or ((w := _row(sessions, run_id)[1]) is not None and w.attempts >= 3))
        waiting = _row(sessions, run_id)[1]
        assert not driving.done() and waiting is not None and publisher.served == []
        async with serving(model, port):
            outcome = await asyncio.wait_for(driving, 60)
        await verifier.aclose()
        return outcome, publisher.served, waiting

    outcome, served, waiting = asyncio.run(scenario())
    assert outcome == "completed" and waiting.dependency == "agent_model"
    # Both roles re-published once when the server came back (before VERIFY tried again), then CLOSE's own check.
    assert served == [(run_id, Role.AGENT), (run_id, Role.SIMULATOR)] * 2
    assert _verdicts(sessions, run_id) == ATTEMPTS


class RolloutQueue:
    """The Celery dispatcher's rollout part with the rollout queue's worker behind it, without a broker: each
    dispatched job is one claimed delivery of the real rollout worker (``rollout_epoch(worker=…)``, as the Celery
    task runs it), generating with ``backend`` — whatever answers at the agent's model server's place just then.
    Training jobs are only recorded (this test ends before TRAIN)."""

    inline = False

    def __init__(self, sessions: sessionmaker[Session], backend: InferenceBackend, services: ServiceUrls) -> None:
        self.sessions, self.backend, self.services = sessions, backend, services
        self.deliveries: list[asyncio.Task[str]] = []
        self.trained: list[int] = []

    async def rollout(self, run_id: str, epoch: int) -> None:
        self.deliveries.append(asyncio.create_task(self._deliver(run_id, epoch)))

    async def _deliver(self, run_id: str, epoch: int) -> str:
        try:
            await rollout_epoch(self.sessions, self.backend, run_id, epoch, request_retries=0, worker="rollout-test",
                                services=self.services)
        except DependencyAwayError as exc:  # the Celery task ends failed; nothing else reaches the orchestrator
            return exc.outage.dependency
        return "done"

    async def train(self, job_id: int, kind: str) -> None:
        self.trained.append(job_id)

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        return None  # the test's chain advances again itself


def _run_at_rollout(sessions: sessionmaker[Session]) -> str:
    """A running agent_only run (1 epoch) at ROLLOUT with two valid tasks and no attempt yet."""
    domain = get_domain("arithmetic")
    with session_scope(sessions) as s:
        run = runs.create(s, RunConfig.model_validate(
            {"mode": "agent_only", "domain": "arithmetic", "epochs": 1, "rollouts_per_task": ATTEMPTS,
             "max_response_tokens": 8}))
        runs.move(s, run, RunStatus.RUNNING)
        s.add(EpochRow(run_id=run.id, index=0, phase="rollout", summary={}))
        for i, expression in enumerate(["3 + 4", "5 * 6"]):
            s.add(TaskRow(run_id=run.id, epoch=0, seed_id=f"s{i}", domain="arithmetic", variation=0, status="valid",
                          payload=domain.validate_generation({"expression": expression}, None), raw_text="",
                          prompt_messages=[]))
        return run.id


@pytest.mark.slow
def test_a_model_server_away_from_the_distributed_rollout_worker_is_what_the_run_waits_on(
    db_url: str, sessions: sessionmaker[Session], model_dir: Path
) -> None:
    # The gap this closes: the rollout worker stored no error rows and raised DependencyAwayError, but the
    # orchestrator learned nothing (no waiting_on, the job sent again only after stall_timeout_s). Now the worker
    # reports the outage on its job: the run waits on agent_model by name, and each try sends the job again.
    import torch

    port = free_port()
    model_url = f"http://127.0.0.1:{port}"
    base = _settings(db_url)
    settings = base.model_copy(update={"services": base.services.model_copy(update={"vllm_agent": model_url})})
    local = GenEnvSettings.model_validate({"inference": {"backend": "local", "base_model": model_dir.name},
                                           "paths": {"model_cache": model_dir.parent}})
    run_id = _run_at_rollout(sessions)
    model = FastAPI()

    @model.get("/v1/models")
    async def models() -> dict[str, list[Any]]:
        return {"data": []}

    def epoch_row() -> tuple[str, dict[str, Any]]:
        with session_scope(sessions) as s:
            row = s.scalar(select(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == 0))
            assert row is not None
            return row.phase, dict(row.summary or {})

    async def chain(ctx: OrchestratorContext, stop: Callable[[], bool]) -> None:
        """The run's advance chain as Celery runs it: advance, and again after the poll interval."""
        while not stop():
            await advance(ctx, run_id)
            await asyncio.sleep(ctx.poll_interval_s)

    async def scenario() -> tuple[WaitingOn, list[str], dict[str, Any]]:
        away = OpenAIBackend(model_url, InferenceSettings(connect_retries=0))
        queue = RolloutQueue(sessions, away, settings.services)
        verifier = VerifierClient("http://verifier", transport=httpx.ASGITransport(
            app=verifier_app(settings, sessions=sessions)))
        ctx = _context(settings, sessions, verifier, ModelServerPublisher(model_url))
        ctx.dispatcher = queue
        driving = asyncio.create_task(chain(ctx, lambda: epoch_row()[0] != "rollout"))
        # Twice the failure budget of tries find the model server away, and the run waits on it by name.
        await _until(lambda: driving.done() or ((w := _row(sessions, run_id)[1]) is not None and w.attempts >= 4))
        status, waiting, _ = _row(sessions, run_id)
        assert status == "running" and waiting is not None and not driving.done()
        while_away = epoch_row()[1]
        # The server is back: a real model answers at its place (SmolLM2, in-process on one thread).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        back = build_backend(local, Role.AGENT)
        queue.backend = back
        try:
            async with serving(model, port):
                await asyncio.wait_for(driving, 90)
            outcomes = list(await asyncio.gather(*queue.deliveries))
        finally:
            torch.set_num_threads(threads)
            await back.aclose()
            await away.aclose()
            await verifier.aclose()
        return waiting, outcomes, while_away

    waiting, outcomes, while_away = asyncio.run(scenario())
    assert (waiting.dependency, waiting.epoch, waiting.phase) == ("agent_model", 0, "rollout")
    assert "ConnectError" in waiting.last_error or "cannot connect" in waiting.last_error
    # The job carried the report; no failure was counted toward max_phase_failures.
    assert "_failures" not in while_away
    # Every delivery while the server was away found it away; the last one made the attempts.
    assert outcomes[-1] == "done" and set(outcomes[:-1]) == {"agent_model"} and len(outcomes) >= 2
    with session_scope(sessions) as s:
        assert s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(TaskRow.run_id == run_id)) \
            == 2 * ATTEMPTS
        job = train_jobs.create_or_get_job(s, run_id, 0, JobKind.ROLLOUT)
        assert job.status == "done" and train_jobs.away_of(job) is None
    assert _verdicts(sessions, run_id) == 2 * ATTEMPTS
    status, waiting_after, error = _row(sessions, run_id)
    assert (status, waiting_after, error) == ("running", None, None)  # now at TRAIN: nothing waits
