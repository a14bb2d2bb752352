"""The evaluator framework and the BFCL evaluator, driven by a gold answerer (a reference, not a model).

The gold answerer replies to every prompt with the benchmark's own gold answer, so the whole pipeline — item
loading, prompts, multi-turn gold history and execution, scoring, summaries — must report 100 %. The real
model runs in tests/integration/verifier.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from genenv.benchmarks.base import (
    BenchItem,
    EvaluationReport,
    UnknownSplitError,
    metrics_table,
    run_evaluation,
    take,
)
from genenv.checkers.callparse import Call
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains.evaluators import UnknownBenchmarkError, benchmark_names, get_evaluator
from genenv.domains.function_calling.benchmark import AST_CATEGORIES, EVALUATOR
from genenv.domains.function_calling.domain import DOMAIN, gold_answer, system_prompt
from genenv.domains.function_calling.multiturn import CATEGORY as MULTI_TURN
from genenv.domains.function_calling.multiturn import backends_missing, parse_gold, render_call
from genenv.inference.base import Completion, InferenceError
from tests.benchdata import BenchData, on_subset_and_full


def _keyword_form(call: Call, docs: list[dict[str, Any]]) -> Call:
    """BFCL's decoder drops positional arguments, so a correct model names them (order of the doc)."""
    if not call.positional:
        return call
    doc = next(d for d in docs if d["name"] == call.name)
    return Call(call.name, {**dict(zip(doc["parameters"]["properties"], call.positional, strict=False)), **call.args})


class GoldAnswerer:
    """An InferenceBackend that answers each benchmark prompt with its gold answer."""

    def __init__(self, items: list[BenchItem]) -> None:
        self.answers: dict[tuple[str, str, int], str] = {}
        self.calls = 0
        for item in items:
            p = item.payload
            if p["kind"] == "ast":
                task = p["task"]
                messages = DOMAIN.agent_messages(task)
                answer = gold_answer(task) if task["ground_truth"] else "None of the functions can do that."
                self.answers[(messages[0]["content"], messages[-1]["content"], len(messages))] = answer
            else:
                entry, turn = p["entry"], p["turn"]
                length = (
                    1
                    + len(entry.turns[turn])
                    + sum(len(entry.turns[t]) + (2 if entry.gold[t] else 0) for t in range(turn))
                )
                calls = [_keyword_form(c, p["functions"]) for c in parse_gold(entry.gold[turn])]
                key = (system_prompt(p["functions"]), entry.turns[turn][-1]["content"], length)
                self.answers[key] = "[" + ", ".join(render_call(c) for c in calls) + "]"

    async def chat(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        self.calls += 1
        return Completion(
            text=self.answers.get((messages[0]["content"], messages[-1]["content"], len(messages)), "Done.")
        )

    async def complete(self, prompt: str, **_: Any) -> Completion:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


class FailingBackend(GoldAnswerer):
    """Every request fails, as when the server is down or the prompt exceeds the context."""

    async def chat(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        raise InferenceError("HTTP 400: prompt longer than the context")


def _run(backend: Any, benchmarks_dir: Path, **kw: Any) -> EvaluationReport:
    return asyncio.run(run_evaluation(EVALUATOR, backend, benchmarks_dir=benchmarks_dir, show_progress=False, **kw))


def test_registry_lists_all_five_benchmarks() -> None:
    assert benchmark_names() == ["alfworld", "api_bank", "arithmetic", "bamboogle", "bfcl", "travelplanner"]
    assert get_evaluator("bfcl") is EVALUATOR
    with pytest.raises(UnknownBenchmarkError):
        get_evaluator("mmlu")


def test_take_is_round_robin_over_categories() -> None:
    items = [BenchItem(f"{c}{i}", c, {}) for c in "aab" for i in range(3)]
    assert [i.category for i in take(items, 4)] == ["a", "b", "a", "b"]
    assert take(items, None) == items and take(items, 100) == items


def test_gold_answers_score_one_on_every_category(benchmarks_dir: Path) -> None:
    items = EVALUATOR.load_items(benchmarks_dir, "eval")
    report = _run(GoldAnswerer(items), benchmarks_dir, limit=60)
    categories = report.metrics["categories"]
    expected = set(AST_CATEGORIES) | ({MULTI_TURN} if backends_missing() is None else set())
    assert set(categories) == expected
    assert report.n_items == 60
    assert all(block["accuracy"] == 1.0 and block["invalid"] == 0 for block in categories.values())
    assert report.metrics["score"] == 1.0 and report.metrics["headline"] == "macro_accuracy"


@on_subset_and_full("bfcl")
def test_the_ast_split_is_the_eval_splits_single_turn_items_alone(data: BenchData) -> None:
    eval_items = EVALUATOR.load_items(data.root, "eval")
    ast_items = EVALUATOR.load_items(data.root, "ast")
    assert [i.id for i in ast_items] == [i.id for i in eval_items if i.category != MULTI_TURN]
    assert {i.category for i in ast_items} == set(AST_CATEGORIES)
    if data.full:
        assert len(ast_items) == 878


@on_subset_and_full("bfcl")
def test_every_eval_item_scores_one_with_gold_answers(data: BenchData) -> None:
    items = EVALUATOR.load_items(data.root, "eval")
    report = _run(GoldAnswerer(items), data.root, concurrency=32)
    assert report.n_items == len(items) > (1500 if data.full else 0)
    unsolved = [r.id for r in report.results if not r.solved]
    assert unsolved == []


@pytest.mark.skipif(backends_missing() is not None, reason="bfcl-eval multi-turn backends are not installed")
def test_multi_turn_turn_fails_without_calls_or_with_wrong_state(benchmarks_dir: Path) -> None:
    items = [i for i in EVALUATOR.load_items(benchmarks_dir, "eval") if i.category == MULTI_TURN][:6]

    class Silent(GoldAnswerer):
        async def chat(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
            return Completion(text="I will not call anything.")

    class Wrong(GoldAnswerer):
        async def chat(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
            return Completion(text="[pwd()]" if messages[-1]["content"][:1] != "[" else "Done.")

    for backend, error in ((Silent(items), "empty_turn_model_response"), (Wrong(items), "")):
        results = [asyncio.run(EVALUATOR.run_item(_ctx(backend), item)) for item in items]
        assert all(r.verdict.valid and r.verdict.score == 0.0 for r in results)
        assert all(error in r.verdict.details["error_type"] for r in results)


def _ctx(backend: Any) -> Any:
    from genenv.benchmarks.base import RunContext

    return RunContext(backend=backend, adapter=None)


def test_inference_failures_are_invalid_items_counted_as_unsolved(benchmarks_dir: Path) -> None:
    report = _run(FailingBackend([]), benchmarks_dir, limit=12)
    overall = report.metrics["overall"]
    assert overall["n"] == 12 and overall["solved"] == 0 and overall["rollout_errors"] == 12
    assert all(r.verdict.error.kind is VerdictErrorKind.ROLLOUT_ERROR for r in report.results)


def test_unknown_split_and_bad_limit(benchmarks_dir: Path) -> None:
    with pytest.raises(UnknownSplitError):
        _run(FailingBackend([]), benchmarks_dir, split="test")
    from genenv.contracts.errors import GenEnvError

    with pytest.raises(GenEnvError):
        _run(FailingBackend([]), benchmarks_dir, limit=0)


def test_table_shows_every_category_and_the_headline(benchmarks_dir: Path) -> None:
    items = EVALUATOR.load_items(benchmarks_dir, "eval")
    report = _run(GoldAnswerer(items), benchmarks_dir, limit=12)
    console = Console(record=True, width=160)
    console.print(metrics_table(report.benchmark, report.split, report.adapter, report.metrics))
    text = console.export_text()
    assert "macro_accuracy = 1.000" in text
    for category in report.metrics["categories"]:
        assert category in text
