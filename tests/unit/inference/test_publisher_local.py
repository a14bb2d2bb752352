"""Adapter publishing into the in-process backend: idempotent, keeps the last K versions, failed loads raise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Role
from genenv.contracts.runs import RunConfig
from genenv.db.engine import session_scope
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import served_adapters
from genenv.inference.base import SamplingParams
from genenv.inference.local import LocalBackend
from genenv.serving.publisher import AdapterPublisher, AdapterPublishError, publish_adapter

MSG = [{"role": "user", "content": "What is 3 + 4?"}]


class CountingLocal(LocalBackend):
    """The real local backend, counting load calls."""

    loads: int = 0

    async def load_adapter(self, name: str, path: str) -> None:
        self.loads += 1
        await super().load_adapter(name, path)


async def test_publish_is_idempotent_and_keeps_last_k(
    sqlite_sessions: sessionmaker[Session], tiny_model_dir: Path, tiny_lora_dir: Path
) -> None:
    backend = CountingLocal(tiny_model_dir, dtype="float32", num_threads=1)
    with session_scope(sqlite_sessions) as s:
        run_id = run_repo.create(s, RunConfig()).id
        rows = [
            adapter_repo.create_adapter(
                s, run_id=run_id, role=Role.AGENT, version=v, path=str(tiny_lora_dir), parent_version=None, metrics={}
            )
            for v in (1, 2, 3)
        ]
    publisher = AdapterPublisher(sqlite_sessions, {Role.AGENT: backend, Role.SIMULATOR: backend}, keep=2)
    try:
        results = [await publisher.publish_row(r) for r in rows]
        again = await publisher.publish_row(rows[2])
        tuned = await backend.chat(MSG, sampling=SamplingParams(max_tokens=6), adapter=f"{run_id}-agent-v3")
    finally:
        await backend.aclose()
    assert [r.loaded for r in results] == [True, True, True]
    assert results[2].unloaded == (f"{run_id}-agent-v1",)
    assert not again.loaded and again.unloaded == ()
    assert backend.loads == 3
    assert tuned.completion_tokens > 0
    with session_scope(sqlite_sessions) as s:
        served = served_adapters.list_served(s, backend.server_id, run_id=run_id)
        assert [(r.name, r.version, r.role) for r in served] == [
            (f"{run_id}-agent-v3", 3, "agent"),
            (f"{run_id}-agent-v2", 2, "agent"),
        ]


async def test_failed_load_raises_and_records_nothing(
    sqlite_sessions: sessionmaker[Session], tiny_model_dir: Path
) -> None:
    backend = LocalBackend(tiny_model_dir, dtype="float32", num_threads=1)
    try:
        with pytest.raises(AdapterPublishError, match="could not load"):
            with session_scope(sqlite_sessions) as s:
                await publish_adapter(
                    backend, s, run_id="r", role="agent", version=1, path=str(tiny_model_dir / "nope"), keep=2
                )
    finally:
        await backend.aclose()
    with session_scope(sqlite_sessions) as s:
        assert served_adapters.list_served(s, backend.server_id) == []


async def test_a_forgotten_adapter_is_loaded_again(
    sqlite_sessions: sessionmaker[Session], tiny_model_dir: Path, tiny_lora_dir: Path
) -> None:
    """The server's own list is the truth: after a restart (here: unload behind our back) publish loads again."""
    backend = CountingLocal(tiny_model_dir, dtype="float32", num_threads=1)
    kw: dict[str, Any] = {"run_id": "r", "role": "simulator", "version": 1, "path": str(tiny_lora_dir), "keep": 2}
    try:
        with session_scope(sqlite_sessions) as s:
            await publish_adapter(backend, s, **kw)
        await backend.unload_adapter("r-simulator-v1")
        with session_scope(sqlite_sessions) as s:
            result = await publish_adapter(backend, s, **kw)
    finally:
        await backend.aclose()
    assert result.loaded and backend.loads == 2


async def test_rollout_job_republishes_the_agent_adapter_on_a_fresh_backend(
    sqlite_sessions: sessionmaker[Session], tiny_model_dir: Path, tiny_lora_dir: Path
) -> None:
    """After a restart the serving side has no adapters; the rollout job publishes the run's latest one first."""
    from genenv.contracts.tasks import GeneratedTask, TaskStatus
    from genenv.db.repositories import rollouts as rollout_repo
    from genenv.db.repositories import tasks as task_repo
    from genenv_rollout.worker import rollout_epoch

    with session_scope(sqlite_sessions) as s:
        run_id = run_repo.create(s, RunConfig(rollouts_per_task=2, max_response_tokens=4)).id
        adapter_repo.create_adapter(
            s, run_id=run_id, role=Role.AGENT, version=4, path=str(tiny_lora_dir), parent_version=3, metrics={}
        )
        task = GeneratedTask(
            seed_id="s", domain="arithmetic", variation=0, payload={"expression": "1 + 1"}, status=TaskStatus.VALID
        )
        task_repo.store_generated(s, run_id, 0, [task])
    backend = CountingLocal(tiny_model_dir, dtype="float32", num_threads=1)  # fresh: knows no adapters
    publisher = AdapterPublisher(sqlite_sessions, {Role.AGENT: backend}, keep=2)
    try:
        result = await rollout_epoch(sqlite_sessions, backend, run_id, 0, publisher=publisher)
    finally:
        await backend.aclose()
    assert (result.agent_adapter, result.created, result.errors) == (f"{run_id}-agent-v4", 2, 0)
    assert backend.loads == 1
    with session_scope(sqlite_sessions) as s:
        assert {r.agent_adapter for r in rollout_repo.epoch_rollouts(s, run_id, 0)} == {f"{run_id}-agent-v4"}
