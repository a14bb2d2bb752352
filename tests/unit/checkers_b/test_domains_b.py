"""The qa, api_bank, alfworld_step and travel_plan domain plug-ins: splits, simulator contract, validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from genenv.contracts.tasks import RejectionReason, Seed
from genenv.domains import get_domain
from genenv.domains.alfworld_step.domain import AlfworldStepDomain
from genenv.domains.base import DataMissingError, TaskRejected
from genenv.domains.qa.domain import is_seed_item, load_bamboogle
from genenv.domains.travel_plan.domain import TravelPlanDomain
from tests.benchdata import BenchData, on_subset_and_full


@pytest.mark.parametrize("name", ["qa", "api_bank", "alfworld_step", "travel_plan"])
def test_contract_shapes(name: str, benchmarks_dir: Path, tmp_path: Path) -> None:
    domain = {
        "alfworld_step": AlfworldStepDomain(cache_dir=tmp_path),
        "travel_plan": TravelPlanDomain(benchmarks_dir),  # its database from the subset, not from the settings
    }.get(name) or get_domain(name)
    jsonschema.Draft202012Validator.check_schema(domain.task_json_schema())
    seeds = domain.load_seeds(benchmarks_dir, "train")
    assert seeds and len({s.id for s in seeds}) == len(seeds)
    for seed in (None, seeds[0]):
        messages = domain.simulator_messages(seed, 4, target_success=0.5, stats=(3, 8))
        assert messages and all(m["role"] in {"system", "user"} and m["content"] for m in messages)
    agent = domain.agent_messages(seeds[0].payload)
    assert agent[-1]["role"] == "user" and agent[-1]["content"]
    empty = domain.verify(seeds[0].payload, "")  # an empty reply is a wrong answer (METHOD.md Eq. 1), not an error
    assert empty.valid and empty.score == 0.0 and not empty.success and empty.form_error is not None


@on_subset_and_full("bamboogle", "api_bank", "travelplanner")
@pytest.mark.parametrize(
    ("name", "train", "eval_"),
    [("qa", None, None), ("api_bank", 245, 534), ("travel_plan", 45, 180)],
)
def test_seed_and_eval_splits_are_disjoint(name: str, train: int | None, eval_: int | None, data: BenchData) -> None:
    domain = get_domain(name)
    seeds = domain.load_seeds(data.root, "train")
    evals = domain.load_seeds(data.root, "eval")
    assert seeds and evals
    if train is not None and data.full:
        assert (len(seeds), len(evals)) == (train, eval_)
    assert not {s.id for s in seeds} & {s.id for s in evals}
    key = {"qa": "question", "api_bank": "dialogue", "travel_plan": "query"}[name]
    assert not {str(s.payload[key]) for s in seeds} & {str(s.payload[key]) for s in evals}
    with pytest.raises(ValueError):
        domain.load_seeds(data.root, "dev")


@on_subset_and_full("bamboogle")
def test_qa_split_is_the_fixed_fifth(data: BenchData) -> None:
    domain = get_domain("qa")
    seeds, evals = domain.load_seeds(data.root, "train"), domain.load_seeds(data.root, "eval")
    assert len(seeds) + len(evals) == len(load_bamboogle(data.root)) == (125 if data.full else 15)
    assert all(is_seed_item(s.payload["id"]) for s in seeds)


@on_subset_and_full("alfworld")
def test_alfworld_splits_without_replay_cache(data: BenchData, tmp_path: Path) -> None:
    domain = AlfworldStepDomain(cache_dir=tmp_path)
    train, evals = domain.load_seeds(data.root, "train"), domain.load_seeds(data.root, "eval")
    if data.full:
        assert (len(train), len(evals)) == (812, 788)  # valid_seen / valid_unseen expert steps
    assert {s.payload["split"] for s in train} == {"valid_seen"} and {s.payload["split"] for s in evals} == {
        "valid_unseen"
    }
    step = evals[3].payload
    assert step["protocol"] == "walkthrough_only" and step["goal"] and step["admissible_commands"] is None


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    for name in ("qa", "api_bank", "travel_plan"):
        with pytest.raises(DataMissingError):
            get_domain(name).load_seeds(tmp_path, "train")
    with pytest.raises(DataMissingError):
        AlfworldStepDomain(cache_dir=tmp_path).load_seeds(tmp_path, "train")


def _reject(name: str, obj: Any, seed: Seed | None) -> RejectionReason:
    with pytest.raises(TaskRejected) as info:
        get_domain(name).validate_generation(obj, seed)
    return info.value.reason


def test_qa_validation() -> None:
    payload = get_domain("qa").validate_generation(
        {"question": "Who founded the city where X was born?", "answer": "Y Z"}, None
    )
    assert payload == {"question": "Who founded the city where X was born?", "golden_answers": ["Y Z"]}
    assert get_domain("qa").verify(payload, "Answer: y z").score == 1.0
    assert _reject("qa", {"question": "Is it?"}, None) is RejectionReason.SCHEMA
    assert (
        _reject("qa", {"question": "What is the capital of France?", "answer": "France"}, None)
        is RejectionReason.INVALID_TASK
    )
    assert _reject("qa", {"question": "Who?", "answer": "a b c d e f g h i j"}, None) is RejectionReason.TOO_LONG


def test_api_bank_validation() -> None:
    apis = [
        {
            "name": "QueryStock",
            "description": "Stock price.",
            "input_parameters": {"stock_code": {"type": "str"}, "date": {"type": "str"}},
        }
    ]
    obj = {
        "apis": apis,
        "dialogue": "User: What was AAPL on 2022-03-01?",
        "api_request": "[QueryStock(stock_code='AAPL', date='2022-03-01')]",
    }
    payload = get_domain("api_bank").validate_generation(obj, None)
    assert "QueryStock" in payload["instruction"] and payload["dialogue"].endswith("Generate API Request:\n")
    domain = get_domain("api_bank")
    assert domain.verify(payload, "API-Request: [QueryStock(stock_code='aapl', date='2022-3-1')]").score == 1.0
    assert domain.verify(payload, "[QueryStock(stock_code='MSFT', date='2022-03-01')]").score == 0.0
    assert _reject("api_bank", {**obj, "api_request": "[Other(x='1')]"}, None) is RejectionReason.INVALID_TASK
    assert (
        _reject("api_bank", {**obj, "api_request": "[QueryStock(stock_code='AAPL')]"}, None)
        is RejectionReason.INVALID_TASK
    )
    assert _reject("api_bank", {**obj, "api_request": "QueryStock"}, None) is RejectionReason.INVALID_TASK
    assert _reject("api_bank", {**obj, "apis": []}, None) is RejectionReason.SCHEMA


def test_alfworld_validation() -> None:
    obj = {
        "goal": "put a mug in the coffeemachine",
        "observation": "You are in the kitchen.",
        "admissible_commands": ["go to countertop 1", "Go to cabinet 1", "look"],
        "expert_action": "go to cabinet 1",
    }
    payload = get_domain("alfworld_step").validate_generation(obj, None)
    assert payload["expert_action"] == "go to cabinet 1" and "go to cabinet 1" in payload["admissible_commands"]
    assert get_domain("alfworld_step").verify(payload, "go to cabinet 1").score == 1.0
    assert _reject("alfworld_step", {**obj, "expert_action": "go to fridge 1"}, None) is RejectionReason.INVALID_TASK
    assert (
        _reject("alfworld_step", {**obj, "admissible_commands": ["dance wildly"]}, None) is RejectionReason.INVALID_TASK
    )
    assert _reject("alfworld_step", {**obj, "goal": 3}, None) is RejectionReason.SCHEMA


def test_travel_plan_validation(benchmarks_dir: Path) -> None:
    domain = TravelPlanDomain(benchmarks_dir)
    seed = domain.load_seeds(benchmarks_dir, "train")[0]
    lc = {"house rule": None, "cuisine": ["Chinese"], "room type": "entire room", "transportation": None}
    payload = domain.validate_generation(
        {"query": "Plan it for 3 of us.", "people_number": 3, "budget": 5000, "local_constraint": lc}, seed
    )
    assert payload["people_number"] == 3 and payload["local_constraint"]["cuisine"] == ["Chinese"]
    assert "gold_plan" not in payload and payload["reference_information"] == seed.payload["reference_information"]
    v = domain.verify(payload, json.dumps(seed.payload["gold_plan"]))
    assert v.valid and v.details["commonsense_pass"]
    bad = {"query": "x" * 20, "people_number": 3, "budget": 5000, "local_constraint": {**lc, "room type": "castle"}}
    assert _reject("travel_plan", bad, seed) is RejectionReason.INVALID_TASK
    assert _reject("travel_plan", {**bad, "people_number": 0}, seed) is RejectionReason.SCHEMA
    assert _reject("travel_plan", bad, None) is RejectionReason.INVALID_TASK
