"""Concurrent evaluations with one idempotency key run the benchmark once (issue 14, item 8), on real Postgres."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.base import ApiError
from genenv.clients.verifier import VerifierClient
from genenv.contracts.adapters import EvaluateRequest
from genenv.db.models import EvaluationRow
from genenv.inference.base import Completion
from tests.integration.verifier.verifier_support import verifier_settings

pytestmark = pytest.mark.postgres


class SlowModel:
    """A stand-in agent model that answers every item after a delay and counts the requests it served."""

    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, messages: list[dict[str, Any]], **kw: Any) -> Completion:
        self.calls += 1
        await asyncio.sleep(0.3)
        return Completion(text="[]", prompt_tokens=10, completion_tokens=1, finish_reason="stop")

    async def complete(self, prompt: str, **kw: Any) -> Completion:
        return await self.chat([{"role": "user", "content": prompt}])

    async def aclose(self) -> None:
        return None


async def test_same_key_concurrently_runs_the_benchmark_once(
    verifier_pg: sessionmaker[Session], benchmarks_dir: Path
) -> None:
    from genenv_verifier.app import create_app

    model = SlowModel()
    app = create_app(verifier_settings(benchmarks_dir), sessions=verifier_pg, backend=model)
    key = f"dedupe-{time.time_ns()}"
    async with VerifierClient("http://v", transport=httpx.ASGITransport(app)) as client:
        first, second = await asyncio.gather(
            client.evaluate("bfcl", EvaluateRequest(limit=3, idempotency_key=key)),
            client.evaluate("bfcl", EvaluateRequest(limit=3, idempotency_key=key)),
        )
        assert first.id == second.id and first.n_items == 3
        served = model.calls
        assert 3 <= served < 6  # one benchmark run's requests (multi-turn items may take more than one)
        third = await client.evaluate("bfcl", EvaluateRequest(limit=3, idempotency_key=key))
        assert third.id == first.id and model.calls == served
        # Without a key every request is its own evaluation.
        other = await client.evaluate("bfcl", EvaluateRequest(limit=3))
        assert other.id != first.id and model.calls > served
    with verifier_pg() as s:
        assert s.scalar(select(func.count()).where(EvaluationRow.idempotency_key == key)) == 1


async def test_unknown_run_is_404_before_any_model_request(
    verifier_pg: sessionmaker[Session], benchmarks_dir: Path
) -> None:
    from genenv_verifier.app import create_app

    model = SlowModel()
    app = create_app(verifier_settings(benchmarks_dir), sessions=verifier_pg, backend=model)
    async with VerifierClient("http://v", transport=httpx.ASGITransport(app)) as client:
        with pytest.raises(ApiError) as err:
            await client.evaluate("bfcl", EvaluateRequest(limit=3, run_id="no-such-run", epoch=0))
    assert err.value.status_code == 404 and err.value.param == "run_id" and model.calls == 0
