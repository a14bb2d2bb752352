"""Structured task generation through the simulator service, driving the real vLLM server."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.simulator import SimulatorClient
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GenerateRequest, SeedStats, TaskStatus
from genenv.db.engine import session_scope
from genenv.db.models import TaskRow
from genenv.db.repositories import runs as run_repo
from genenv.domains import get_domain
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import GenEnvSettings, InferenceSettings
from genenv_simulator.app import create_app

pytestmark = [pytest.mark.vllm, pytest.mark.postgres]

SEEDS = ["arith-1d-add-0000", "arith-2d-add-0000", "arith-1d-mul-0002"]


async def test_structured_generation_is_validated_and_stored(
    vllm_url: str, pg_url: str, pg_sessions: sessionmaker[Session], inference_settings: InferenceSettings
) -> None:
    domain = get_domain("arithmetic")
    train_ids = {s.id for s in domain.load_seeds(None, "train")}
    assert set(SEEDS) <= train_ids
    settings = GenEnvSettings.model_validate({"database": {"url": pg_url}})
    assert settings.inference.guided_decoding
    backend = OpenAIBackend(vllm_url, inference_settings)
    app = create_app(settings, backend=backend, sessions=pg_sessions)
    client = SimulatorClient("http://simulator", transport=httpx.ASGITransport(app=app), timeout_s=300)
    with session_scope(pg_sessions) as s:
        run_id = run_repo.create(s, RunConfig()).id
    request = GenerateRequest(
        domain="arithmetic",
        seed_ids=SEEDS,
        n=3,
        target_success=0.5,
        temperature=1.0,
        max_tokens=64,
        run_id=run_id,
        epoch=0,
        seed_stats={SEEDS[0]: SeedStats(k=8, n=8)},
    )
    try:
        resp = await client.generate(request)
        again = await client.generate(request)
    finally:
        await client.aclose()
        await backend.aclose()
    tasks = resp.accepted + resp.rejected
    assert len(tasks) == 9
    assert sum(resp.rejection_counts.values()) == len(resp.rejected)
    assert resp.accepted, "guided decoding should give at least one valid arithmetic task out of 9"
    for t in resp.accepted:
        assert t.payload is not None
        assert t.payload == domain.validate_generation(json.loads(t.raw_text), None)  # answer from the safe evaluator
        assert t.completion_tokens and t.prompt_tokens
    for t in tasks:
        if t.rejection_reason is None or t.rejection_reason.value != "too_long":
            assert isinstance(json.loads(t.raw_text), dict)  # guided decoding: always one JSON object
    harder_prompt = next(t for t in tasks if t.seed_id == SEEDS[0]).prompt_messages[-1]["content"]
    assert "8 of 8" in harder_prompt and "HARDER" in harder_prompt
    assert sorted((t.seed_id, t.variation) for t in again.accepted + again.rejected) == sorted(
        (t.seed_id, t.variation) for t in tasks
    )
    with session_scope(pg_sessions) as s:
        rows = list(s.scalars(select(TaskRow).where(TaskRow.run_id == run_id)))
    assert len(rows) == 9
    assert sum(r.status == TaskStatus.VALID.value for r in rows) == len(resp.accepted)
