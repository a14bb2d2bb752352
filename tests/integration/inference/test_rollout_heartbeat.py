"""A running rollout job beats its job row, so the orchestrator tells a slow rollout from a dead worker."""

from __future__ import annotations

import asyncio
from datetime import datetime

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import JobKind
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GeneratedTask, TaskStatus
from genenv.db.engine import session_scope
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.db.repositories import train_jobs
from genenv.domains import get_domain
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import InferenceSettings, RolloutSettings
from genenv_rollout.worker import rollout_epoch

pytestmark = [pytest.mark.postgres]


async def test_a_running_rollout_renews_its_heartbeat(pg_sessions: sessionmaker[Session]) -> None:
    domain = get_domain("arithmetic")
    with session_scope(pg_sessions) as s:
        run_id = run_repo.create(s, RunConfig(rollouts_per_task=2, max_response_tokens=16)).id
        task_repo.store_generated(s, run_id, 0, [
            GeneratedTask(seed_id=f"seed-{i}", domain="arithmetic", variation=0, status=TaskStatus.VALID,
                          payload=domain.validate_generation({"expression": f"{i} + 1"}, None))
            for i in range(3)
        ])
        job_id = train_jobs.create_or_get_job(s, run_id, 0, JobKind.ROLLOUT).id
    # The agent server refuses every request (HTTP 400): each attempt fails at once and is stored as an error, one
    # per write, with a pause after each write, so the job runs for a few seconds without a model. (A server that
    # does not answer at all is an outage: nothing would be stored; tests/integration/inference/test_rollout_outage.)
    refuse = httpx.MockTransport(lambda request: httpx.Response(400, json={"error": {"message": "refused"}}))
    backend = OpenAIBackend("http://agent:8000", InferenceSettings(request_timeout_s=5.0, connect_retries=0),
                            transport=refuse)
    storage = RolloutSettings(write_batch=1, write_delay_s=0.5, heartbeat_s=0.2)
    beats: set[datetime] = set()

    def read_beat() -> None:
        with session_scope(pg_sessions) as s:
            beat = train_jobs.get_job(s, job_id).heartbeat_at
            if beat is not None:
                beats.add(beat)

    try:
        job = asyncio.create_task(rollout_epoch(pg_sessions, backend, run_id, 0, request_retries=0, storage=storage))
        while not job.done():
            await asyncio.to_thread(read_beat)
            await asyncio.sleep(0.1)
        result = await job
    finally:
        await backend.aclose()
    assert result.created == 6 and result.errors == 6
    assert len(beats) >= 5, f"the rollout job's heartbeat moved {len(beats)} times in a 3 s job"
