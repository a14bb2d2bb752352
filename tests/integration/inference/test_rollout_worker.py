"""The rollout worker against real Postgres and the real vLLM server."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Role
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import ChatMessage, GeneratedTask, TaskStatus
from genenv.db.engine import session_scope
from genenv.db.models import RolloutRow, TaskRow
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import rollouts as rollout_repo
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.domains import get_domain
from genenv.inference.base import Completion
from genenv.inference.openai_client import OpenAIBackend
from genenv.queue import TASK_ROLLOUT_EPOCH
from genenv.settings import GenEnvSettings, InferenceSettings
from genenv_rollout.worker import rollout_epoch

pytestmark = [pytest.mark.vllm, pytest.mark.postgres]

G = 3


def _make_run(sessions: sessionmaker[Session], expressions: list[str]) -> str:
    """A run with valid tasks for ``expressions`` in epoch 0, plus one rejected generation."""
    domain = get_domain("arithmetic")
    with session_scope(sessions) as s:
        run_id = run_repo.create(s, RunConfig(rollouts_per_task=G, max_response_tokens=16, rollout_temperature=0.7)).id
        tasks = [
            GeneratedTask(
                seed_id=f"seed-{i}",
                domain="arithmetic",
                variation=0,
                payload=domain.validate_generation({"expression": e}, None),
                status=TaskStatus.VALID,
            )
            for i, e in enumerate(expressions)
        ]
        tasks.append(
            GeneratedTask(
                seed_id="seed-0",
                domain="arithmetic",
                variation=1,
                status=TaskStatus.REJECTED,
                rejection_reason="not_json",
                raw_text="nope",
            )
        )
        task_repo.store_generated(s, run_id, 0, tasks)
    return run_id


async def test_g_rollouts_per_task_with_logprobs_and_rerun_adds_nothing(
    vllm_url: str, pg_sessions: sessionmaker[Session], inference_settings: InferenceSettings
) -> None:
    run_id = _make_run(pg_sessions, ["3 + 4", "12 + 9", "7 * 8", "5 - 9"])
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        first = await rollout_epoch(pg_sessions, backend, run_id, 0)
        second = await rollout_epoch(pg_sessions, backend, run_id, 0)
    finally:
        await backend.aclose()
    assert (first.tasks, first.expected, first.created, first.errors, first.skipped) == (4, 12, 12, 0, 0)
    assert first.agent_adapter is None and first.completion_tokens > 0
    assert (second.created, second.skipped, second.errors) == (0, 12, 0)
    with session_scope(pg_sessions) as s:
        rows = rollout_repo.epoch_rollouts(s, run_id, 0)
        statuses = {t.id: t.status for t in s.scalars(select(TaskRow).where(TaskRow.run_id == run_id))}
        assert len(rows) == 12
        by_task: dict[int, list[int]] = {}
        for r in rows:
            by_task.setdefault(r.task_id, []).append(r.attempt)
            assert r.error is None and r.response is not None and r.retries == 0
            assert r.token_ids and r.token_logprobs and len(r.token_ids) == len(r.token_logprobs)
            assert r.completion_tokens == len(r.token_ids) and r.prompt_tokens and r.prompt_tokens > 40
            assert r.latency_s is not None and r.latency_s > 0
            assert r.prompt_messages[0]["content"].startswith("What is ")
        assert all(sorted(a) == list(range(G)) for a in by_task.values())
        assert all(statuses[t] == TaskStatus.VALID.value for t in by_task)


class RecordingBackend(OpenAIBackend):
    """The real client, recording how many samples each request asked for."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.requests: list[int] = []

    async def chat_many(self, messages: list[ChatMessage], n: int, **kw: Any) -> list[Completion]:
        self.requests.append(n)
        return await super().chat_many(messages, n, **kw)


async def test_one_request_per_task_and_a_rerun_samples_only_the_missing_attempts(
    vllm_url: str, pg_sessions: sessionmaker[Session], inference_settings: InferenceSettings
) -> None:
    run_id = _make_run(pg_sessions, ["3 + 4", "12 + 9"])
    backend = RecordingBackend(vllm_url, inference_settings)
    try:
        first = await rollout_epoch(pg_sessions, backend, run_id, 0)
        assert backend.requests == [G, G]  # the G attempts of a task share one request (one prefill)
        with session_scope(pg_sessions) as s:  # what a crash between two writes leaves: some attempts missing
            rows = rollout_repo.epoch_rollouts(s, run_id, 0)
            kept = {(r.task_id, r.attempt): list(r.token_ids or []) for r in rows}
            gone = sorted(kept)[0], sorted(kept)[-1]
            for r in rows:
                if (r.task_id, r.attempt) in gone:
                    s.delete(s.get(RolloutRow, r.id))
        backend.requests.clear()
        second = await rollout_epoch(pg_sessions, backend, run_id, 0)
    finally:
        await backend.aclose()
    assert first.created == 2 * G and (second.created, second.skipped) == (2, 2 * G - 2)
    assert sorted(backend.requests) == [1, 1]
    with session_scope(pg_sessions) as s:
        after = {(r.task_id, r.attempt): r for r in rollout_repo.epoch_rollouts(s, run_id, 0)}
        assert sorted(after) == sorted(kept)
        for key, row in after.items():
            assert row.token_ids and len(row.token_ids) == len(row.token_logprobs or [])
            if key not in gone:
                assert list(row.token_ids) == kept[key]  # stored attempts are left alone


async def test_failed_requests_are_stored_as_errors(
    vllm_url: str, pg_sessions: sessionmaker[Session], inference_settings: InferenceSettings
) -> None:
    """The run's agent adapter was never published, so vLLM answers 404: each attempt retries, then is an error."""
    run_id = _make_run(pg_sessions, ["1 + 1", "2 + 2"])
    with session_scope(pg_sessions) as s:
        adapter_repo.create_adapter(
            s, run_id=run_id, role=Role.AGENT, version=1, path="/nowhere", parent_version=None, metrics={}
        )
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        result = await rollout_epoch(pg_sessions, backend, run_id, 0, request_retries=1)
    finally:
        await backend.aclose()
    assert (result.created, result.errors, result.agent_adapter) == (2 * G, 2 * G, f"{run_id}-agent-v1")
    with session_scope(pg_sessions) as s:
        rows = rollout_repo.epoch_rollouts(s, run_id, 0)
    assert len(rows) == 2 * G
    for r in rows:
        assert r.response is None and r.token_ids is None and r.retries == 1
        assert r.error is not None and "404" in r.error


def test_celery_task_wraps_the_same_job(
    vllm_url: str, pg_url: str, pg_sessions: sessionmaker[Session], real_lora_dirs: list[Path]
) -> None:
    """The Celery task (eager here) builds its backend from settings, publishes the run's agent adapter the server
    does not hold yet, and is idempotent by (run, epoch)."""
    from genenv.serving.publisher import VLLMAdapterServer
    from genenv_rollout.tasks import create_celery

    run_id = _make_run(pg_sessions, ["4 + 4"])
    with session_scope(pg_sessions) as s:
        adapter_repo.create_adapter(
            s, run_id=run_id, role=Role.AGENT, version=2, path=str(real_lora_dirs[1]), parent_version=1, metrics={}
        )
    settings = GenEnvSettings.model_validate(
        {
            "database": {"url": pg_url},
            "queue": {"eager": True},
            "inference": {"backend": "vllm"},
            "services": {"vllm_agent": vllm_url},
            "worker_id": f"test-{uuid.uuid4().hex[:6]}",
        }
    )
    app = create_celery(settings)

    async def cleanup() -> None:  # the dev server is shared: leave no adapter behind
        server = VLLMAdapterServer(vllm_url)
        await server.unload_adapter(f"{run_id}-agent-v2")
        await server.aclose()

    try:
        first = app.tasks[TASK_ROLLOUT_EPOCH].apply(args=[run_id, 0]).get()
        second = app.tasks[TASK_ROLLOUT_EPOCH].apply(args=[run_id, 0]).get()
    finally:
        asyncio.run(cleanup())
    assert (first["created"], first["errors"], first["agent_adapter"]) == (G, 0, f"{run_id}-agent-v2")
    assert (second["created"], second["skipped"]) == (0, G)
    with session_scope(pg_sessions) as s:
        assert len(list(s.scalars(select(RolloutRow).join(TaskRow).where(TaskRow.run_id == run_id)))) == G


@pytest.mark.redis
@pytest.mark.slow
def test_genenv_worker_rollout_consumes_the_queue(
    vllm_url: str, pg_url: str, redis_url: str, pg_sessions: sessionmaker[Session]
) -> None:
    """`genenv worker rollout` started as a process takes a message from Redis and stores the rollouts."""
    import os
    import subprocess
    import sys

    from genenv.queue import make_celery

    run_id = _make_run(pg_sessions, ["6 + 1"])
    env = {
        **os.environ,
        "GENENV_DATABASE__URL": pg_url,
        "GENENV_REDIS__URL": redis_url,
        "GENENV_QUEUE__EAGER": "false",
        "GENENV_INFERENCE__BACKEND": "vllm",
        "GENENV_SERVICES__VLLM_AGENT": vllm_url,
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "genenv.cli.main", "worker", "rollout", "--loglevel", "WARNING"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        settings = GenEnvSettings.model_validate({"redis": {"url": redis_url}, "queue": {"eager": False}})
        sender = make_celery(settings)
        result = sender.send_task(TASK_ROLLOUT_EPOCH, args=[run_id, 0]).get(timeout=240)
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=60)
    assert (result["created"], result["errors"]) == (G, 0), err.decode()[-2000:]
    with session_scope(pg_sessions) as s:
        assert len(rollout_repo.epoch_rollouts(s, run_id, 0)) == G


async def test_a_cancelled_run_gets_no_attempts(
    vllm_url: str, pg_sessions: sessionmaker[Session], inference_settings: InferenceSettings
) -> None:
    from genenv.contracts.runs import RunStatus
    from genenv.db.models import RunRow

    run_id = _make_run(pg_sessions, ["3 + 4", "12 + 9"])
    with session_scope(pg_sessions) as s:
        row = s.get(RunRow, run_id)
        assert row is not None
        row.status = RunStatus.CANCELLED.value
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        result = await rollout_epoch(pg_sessions, backend, run_id, 0)
    finally:
        await backend.aclose()
    assert (result.tasks, result.created) == (0, 0)
    with session_scope(pg_sessions) as s:
        assert rollout_repo.epoch_rollouts(s, run_id, 0) == []
