"""``domain:NAME`` held-out evaluation: the contract accepts the form, the evaluator asks a domain's eval rows with
the domain's prompt and scores them with its checker (a scripted backend stands in for the model: this tests the
harness's wiring, not a model)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from genenv.benchmarks.base import run_evaluation
from genenv.contracts.runs import RunConfig, heldout_domain
from genenv.domains import REGISTRY
from genenv.domains.evaluators import domain_heldout, get_evaluator
from genenv.inference.base import Completion


class Answers:
    """A backend that replies with ``answer(user message)``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def chat(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        self.asked.append(messages[-1]["content"])
        return Completion(text=str(self.answer(messages[-1]["content"])))


def test_contract_accepts_domain_heldout_form_only() -> None:
    cfg = RunConfig.model_validate({"eval_every": 1, "eval_benchmarks": ["domain:my_tools", "arithmetic"],
                                    "eval_splits": {"domain:my_tools": "eval"}})
    assert [heldout_domain(b) for b in cfg.eval_benchmarks] == ["my_tools", None]
    with pytest.raises(ValidationError, match=r"unknown benchmark\(s\) \['domain:My Tools'\].*domain:NAME"):
        RunConfig.model_validate({"eval_benchmarks": ["domain:My Tools"]})
    with pytest.raises(ValidationError, match=r"domain:my_tools has no split 'test'; choose from \['eval'\]"):
        RunConfig.model_validate({"eval_benchmarks": ["domain:my_tools"], "eval_splits": {"domain:my_tools": "test"}})


def test_builtin_domain_heldout_is_the_benchmarks_eval_split(tmp_path: Path) -> None:
    evaluator = domain_heldout(REGISTRY.get("arithmetic"))
    assert evaluator.name == "domain:arithmetic" and evaluator.splits == ("eval",)
    ours = evaluator.load_items(tmp_path, "eval")
    theirs = get_evaluator("arithmetic").load_items(tmp_path, "eval")
    assert [(i.id, i.category, i.payload) for i in ours] == [(i.id, i.category, i.payload) for i in theirs]
    assert len(ours) > 50


def test_data_domain_heldout_scores_eval_rows_with_the_domains_checker(tmp_path: Path) -> None:
    rows = [{"question": f"What is {a} plus {a}?", "answer": str(2 * a), "split": "eval" if a % 2 else "train"}
            for a in range(1, 9)]
    content = "\n".join(json.dumps(r) for r in rows) + "\n"
    domain = REGISTRY.data_domain("doubling", "exact_answer", content, {"normalize": "number"})
    evaluator = domain_heldout(domain)

    def half_right(question: str) -> int:  # right for 1 and 3, wrong for 5 and 7
        a = int(question.split("What is ")[1].split(" ")[0])
        return 2 * a if a < 5 else 2 * a + 1

    backend = Answers(half_right)
    report = asyncio.run(run_evaluation(evaluator, backend, benchmarks_dir=tmp_path, show_progress=False))  # type: ignore[arg-type]
    assert report.benchmark == "domain:doubling" and report.split == "eval"
    assert sorted(q.split("What is ")[1].split(" ")[0] for q in backend.asked if "What is" in q) == ["1", "3", "5", "7"]
    overall = report.metrics["overall"]
    assert (overall["n"], overall["solved"], overall["accuracy"], overall["invalid"]) == (4, 2, 0.5, 0)
    assert report.metrics["score"] == 0.5
