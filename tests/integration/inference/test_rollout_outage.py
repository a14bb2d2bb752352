"""The rollout worker stores no error rows for a model server that does not answer (issue 31): the attempts stay
missing for the next delivery, and the job ends with DependencyAwayError (an outage, so the run waits). A server
that answers with a real error still gets its attempts stored as errors (left out of p̂ as before)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GeneratedTask, TaskStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import RolloutRow
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.domains import get_domain
from genenv.inference.openai_client import OpenAIBackend
from genenv.outages import DependencyAwayError, classify
from genenv.settings import DatabaseSettings, InferenceSettings, ServiceUrls
from genenv_rollout.worker import rollout_epoch
from tests.conftest import free_port


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    url = f"sqlite:///{tmp_path / 'genenv.db'}"
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def _run(sessions: sessionmaker[Session]) -> str:
    domain = get_domain("arithmetic")
    with session_scope(sessions) as s:
        run_id = run_repo.create(s, RunConfig(rollouts_per_task=2, max_response_tokens=8)).id
        task_repo.store_generated(s, run_id, 0, [
            GeneratedTask(seed_id=f"seed-{i}", domain="arithmetic", variation=0, status=TaskStatus.VALID,
                          payload=domain.validate_generation({"expression": e}, None))
            for i, e in enumerate(["3 + 4", "5 * 6"])
        ])
    return run_id


def _stored(sessions: sessionmaker[Session]) -> list[str | None]:
    with session_scope(sessions) as s:
        return list(s.scalars(select(RolloutRow.error)))


async def test_a_model_server_away_leaves_the_attempts_missing_and_says_so(sessions: sessionmaker[Session]) -> None:
    run_id = _run(sessions)
    url = f"http://127.0.0.1:{free_port()}"
    backend = OpenAIBackend(url, InferenceSettings(connect_retries=0))
    try:
        with pytest.raises(DependencyAwayError) as info:
            await rollout_epoch(sessions, backend, run_id, 0, request_retries=1,
                                services=ServiceUrls(vllm_agent=url))
    finally:
        await backend.aclose()
    assert info.value.outage.dependency == "agent_model" and "cannot connect" in info.value.outage.error
    assert _stored(sessions) == []  # nothing stored: the next delivery makes all 4 attempts
    outage = classify(info.value, ServiceUrls(vllm_agent=url))
    assert outage is not None and outage.dependency == "agent_model"
    copy = pickle.loads(pickle.dumps(info.value))  # Celery pickles a task's exception
    assert copy.outage == info.value.outage


async def test_a_server_that_refuses_the_request_still_gets_error_rows(sessions: sessionmaker[Session]) -> None:
    run_id = _run(sessions)
    refuse = httpx.MockTransport(lambda request: httpx.Response(400, json={"error": {"message": "bad adapter"}}))
    backend = OpenAIBackend("http://vllm:8000", InferenceSettings(), transport=refuse)
    try:
        result = await rollout_epoch(sessions, backend, run_id, 0, request_retries=0,
                                     services=ServiceUrls(vllm_agent="http://vllm:8000"))
    finally:
        await backend.aclose()
    assert (result.created, result.errors) == (4, 4)
    assert all(e is not None and "HTTP 400" in e for e in _stored(sessions))
