"""The function-calling domain: fixed seed/eval split, seeds, validator, prompts, verify."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from genenv.contracts.rollouts import VerdictErrorKind
from genenv.contracts.tasks import RejectionReason, Seed
from genenv.domains import get_domain
from genenv.domains.base import DataMissingError, TaskRejected
from genenv.domains.function_calling.data import TRAIN_PERCENT, split_of
from genenv.domains.function_calling.domain import TASK_SCHEMA, FunctionCallingDomain, gold_answer
from tests.benchdata import BenchData, on_subset_and_full

DOMAIN = get_domain("function_calling")
assert isinstance(DOMAIN, FunctionCallingDomain)

GENERATED = {
    "question": "What is the weather in Paris in celsius?",
    "functions": [
        {
            "name": "weather.get",
            "description": "Current weather.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "city": {"type": "string", "description": "City name."},
                    "unit": {"type": "string", "description": "celsius or fahrenheit"},
                },
                "required": ["city"],
            },
        }
    ],
    "ground_truth": [{"weather.get": {"city": ["Paris", "Paris, France"], "unit": ["celsius", ""]}}],
}


def test_split_rule_is_fixed_and_documented() -> None:
    # The rule is a pure function of the item id: pinned values guard against accidental changes.
    assert [split_of(i) for i in ("simple_python_0", "simple_python_1", "parallel_7", "live_multiple_63-25-0")] == [
        split_of("simple_python_0"),
        split_of("simple_python_1"),
        split_of("parallel_7"),
        split_of("live_multiple_63-25-0"),
    ]
    ids = [f"simple_python_{i}" for i in range(400)]
    share = sum(split_of(i) == "train" for i in ids) / len(ids)
    assert abs(share - TRAIN_PERCENT / 100) < 0.08


@on_subset_and_full("bfcl")
def test_seeds_and_eval_items_never_overlap(data: BenchData) -> None:
    train = DOMAIN.load_seeds(data.root, "train")
    evaluation = DOMAIN.load_seeds(data.root, "eval")
    assert train and evaluation
    if data.full:
        assert len(train) > 800 and len(evaluation) > 2000
    assert not {s.id for s in train} & {s.id for s in evaluation}
    assert all(split_of(s.id) == "train" for s in train)
    assert all(split_of(s.id) == "eval" for s in evaluation)
    # Every seed is solvable: its own gold answer scores 1.
    for seed in train:
        if seed.payload["ground_truth"]:
            assert DOMAIN.verify(seed.payload, gold_answer(seed.payload)).score == 1.0, seed.id


@on_subset_and_full("bfcl")
def test_benchmark_evaluation_items_are_never_seeds(data: BenchData) -> None:
    from genenv.domains.evaluators import get_evaluator

    seed_ids = {s.id for s in DOMAIN.load_seeds(data.root, "train")}
    items = get_evaluator("bfcl").load_items(data.root, "eval")
    assert items and not seed_ids & {i.id for i in items}


def test_missing_data_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    # Without the folder AND without the bfcl-eval package (which ships the data too).
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataMissingError, match="BFCL data not found"):
        DOMAIN.load_seeds(tmp_path, "train")
    with pytest.raises(DataMissingError):
        DOMAIN.load_seeds(None, "train")


def test_a_good_generation_becomes_a_task_whose_gold_scores_one() -> None:
    payload = DOMAIN.validate_generation(copy.deepcopy(GENERATED), None)
    assert payload["category"] == "simple" and payload["id"].startswith("gen-")
    assert payload["messages"] == [{"role": "user", "content": GENERATED["question"]}]
    assert DOMAIN.verify(payload, gold_answer(payload)).score == 1.0
    assert DOMAIN.verify(payload, "[weather.get(city='paris, france', unit='Celsius')]").score == 1.0
    assert DOMAIN.verify(payload, "[weather.get(city='London')]").score == 0.0


@pytest.mark.parametrize(
    ("edit", "reason", "fragment"),
    [
        (lambda o: o.pop("question"), RejectionReason.SCHEMA, "need question"),
        (lambda o: o.update(question="  "), RejectionReason.EMPTY, "empty question"),
        (lambda o: o.update(question="x" * 5000), RejectionReason.TOO_LONG, "too long"),
        (lambda o: o.update(extra=1), RejectionReason.SCHEMA, "unknown fields"),
        (lambda o: o["functions"][0].update(name="1bad name"), RejectionReason.SCHEMA, "identifier"),
        (lambda o: o["functions"][0]["parameters"].update(type="object"), RejectionReason.SCHEMA, "'dict'"),
        (
            lambda o: o["functions"][0]["parameters"]["properties"]["city"].update(type="number"),
            RejectionReason.INVALID_TASK,
            "type must be one of",
        ),
        (lambda o: o["functions"][0]["parameters"].update(required=["zip"]), RejectionReason.INVALID_TASK, "required"),
        (lambda o: o.update(ground_truth=[{"other": {}}]), RejectionReason.INVALID_TASK, "not one of the functions"),
        (
            lambda o: o.update(ground_truth=[{"weather.get": {"town": ["Paris"]}}]),
            RejectionReason.INVALID_TASK,
            "not in the function's properties",
        ),
        (
            lambda o: o.update(ground_truth=[{"weather.get": {"unit": ["celsius"]}}]),
            RejectionReason.INVALID_TASK,
            "required parameter 'city' has no accepted value",
        ),
        (
            lambda o: o.update(ground_truth=[{"weather.get": {"city": [42]}}]),
            RejectionReason.INVALID_TASK,
            "does not match type 'string'",
        ),
        (
            lambda o: (
                o["functions"][0]["parameters"]["properties"].update(
                    days={"type": "array", "items": {"type": "integer"}, "description": "d"}
                )
                or o.update(ground_truth=[{"weather.get": {"city": ["Paris"], "days": [["mon"]]}}])
            ),
            RejectionReason.INVALID_TASK,
            "does not match type 'integer'",
        ),
        (lambda o: o.update(functions=o["functions"] * 2), RejectionReason.INVALID_TASK, "unique"),
    ],
)
def test_bad_generations_are_rejected_with_reasons(edit: Any, reason: RejectionReason, fragment: str) -> None:
    obj = copy.deepcopy(GENERATED)
    edit(obj)
    with pytest.raises(TaskRejected) as err:
        DOMAIN.validate_generation(obj, None)
    assert err.value.reason is reason
    assert fragment in err.value.detail


def test_a_generation_repeating_its_seed_is_a_duplicate() -> None:
    payload = DOMAIN.validate_generation(copy.deepcopy(GENERATED), None)
    seed = Seed(id="s", domain="function_calling", payload=payload)
    with pytest.raises(TaskRejected) as err:
        DOMAIN.validate_generation(copy.deepcopy(GENERATED), seed)
    assert err.value.reason is RejectionReason.DUPLICATE


def test_categories_follow_the_shape() -> None:
    two_funcs = copy.deepcopy(GENERATED)
    two_funcs["functions"].append({**GENERATED["functions"][0], "name": "weather.forecast"})
    assert DOMAIN.validate_generation(two_funcs, None)["category"] == "multiple"
    parallel = copy.deepcopy(GENERATED)
    parallel["ground_truth"] = [{"weather.get": {"city": ["Paris"]}}, {"weather.get": {"city": ["Rome"]}}]
    assert DOMAIN.validate_generation(parallel, None)["category"] == "parallel"
    none = copy.deepcopy(GENERATED)
    none["ground_truth"] = []
    payload = DOMAIN.validate_generation(none, None)
    assert payload["category"] == "irrelevance"
    assert DOMAIN.verify(payload, "No function can answer that.").score == 1.0


def test_schema_describes_the_generated_shape() -> None:
    assert set(TASK_SCHEMA["required"]) == {"question", "functions", "ground_truth"}
    json.dumps(TASK_SCHEMA)  # serialisable for guided decoding


def test_simulator_prompt_shows_the_seed_and_steers_difficulty(benchmarks_dir: Path) -> None:
    seed = DOMAIN.load_seeds(benchmarks_dir, "train")[0]
    messages = DOMAIN.simulator_messages(seed, 4, target_success=0.5, stats=(8, 8))
    text = messages[-1]["content"]
    assert json.dumps(seed.payload["functions"]) in text and "HARDER" in text
    assert "EASIER" in DOMAIN.simulator_messages(seed, 4, target_success=0.5, stats=(0, 8))[-1]["content"]
    assert DOMAIN.simulator_messages(None, 1, target_success=None, stats=None)[-1]["content"]


def test_agent_prompt_is_bfcls_format(benchmarks_dir: Path) -> None:
    seed = DOMAIN.load_seeds(benchmarks_dir, "train")[0]
    messages = DOMAIN.agent_messages(seed.payload)
    assert messages[0]["role"] == "system" and json.dumps(seed.payload["functions"]) in messages[0]["content"]
    assert "[func_name1(params_name1=params_value1" in messages[0]["content"]
    assert messages[1:] == seed.payload["messages"]
    with_system = dict(seed.payload, messages=[{"role": "system", "content": "Be brief."}, *seed.payload["messages"]])
    merged = DOMAIN.agent_messages(with_system)
    assert merged[0]["content"].endswith("\n\nBe brief.") and len(merged) == len(messages)


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        ("Sorry, no idea.", VerdictErrorKind.PARSE_ERROR),
        ('[{"weather.get": {"city": "Par', VerdictErrorKind.PARSE_ERROR),
        ('{"city": "Paris"}', VerdictErrorKind.SCHEMA_ERROR),
    ],
)
def test_malformed_answers_are_wrong_answers_scored_zero(response: str, kind: VerdictErrorKind) -> None:
    payload = DOMAIN.validate_generation(copy.deepcopy(GENERATED), None)
    verdict = DOMAIN.verify(payload, response)
    # METHOD.md Eq. 1: a reply that does not parse is a wrong answer, counted in p̂ and in the GRPO group.
    assert verdict.valid and verdict.score == 0.0 and not verdict.success and verdict.error is None
    assert verdict.form_error is not None and verdict.form_error.kind is kind


def test_a_reply_too_large_to_check_is_invalid_not_zero() -> None:
    payload = DOMAIN.validate_generation(copy.deepcopy(GENERATED), None)
    verdict = DOMAIN.verify(payload, "[weather.get(city='" + "x" * 40_000 + "')]")
    assert not verdict.valid and verdict.score is None and verdict.error.kind is VerdictErrorKind.TOO_LARGE


def test_success_threshold_is_applied() -> None:
    payload = DOMAIN.validate_generation(copy.deepcopy(GENERATED), None)
    assert DOMAIN.verify(payload, gold_answer(payload), success_threshold=1.0).success
    assert not DOMAIN.verify(payload, "[weather.get(city='Rome')]", success_threshold=0.5).success


def test_a_payload_changed_under_the_same_id_is_recompiled() -> None:
    payload = DOMAIN.validate_generation(copy.deepcopy(GENERATED), None)
    assert DOMAIN.verify(payload, "[weather.get(city='Paris')]").score == 1.0
    changed = copy.deepcopy(payload)
    changed["ground_truth"] = [{"weather.get": {"city": ["Rome"]}}]
    assert DOMAIN.verify(changed, "[weather.get(city='Paris')]").score == 0.0
