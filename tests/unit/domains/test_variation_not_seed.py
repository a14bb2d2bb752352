"""A variation is never its seed: every family rejects a generation equal to its seed in canonical form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from genenv.contracts.tasks import RejectionReason, Seed
from genenv.domains import get_domain
from genenv.domains.base import Domain, TaskRejected
from genenv.domains.travel_plan.domain import TravelPlanDomain


def _reason(domain: Domain, obj: dict[str, Any], seed: Seed | None) -> RejectionReason | None:
    try:
        domain.validate_generation(obj, seed)
    except TaskRejected as exc:
        return exc.reason
    return None


def _seed(domain: Domain, obj: dict[str, Any]) -> Seed:
    return Seed(id="s-1", domain=domain.name, payload=domain.validate_generation(obj, None))


def test_arithmetic_rejects_its_seed_in_any_spelling() -> None:
    domain = get_domain("arithmetic")
    seed = Seed(id="arith-1d-add-0001", domain="arithmetic", payload={"expression": "7 + 8", "answer": 15,
                                                                         "level": "1d-add"})
    with pytest.raises(TaskRejected) as err:
        domain.validate_generation({"expression": "7 + 8"}, seed)
    assert err.value.reason is RejectionReason.DUPLICATE and "repeats its seed" in err.value.detail
    assert _reason(domain, {"expression": "7+8"}, seed) is RejectionReason.DUPLICATE
    assert _reason(domain, {"expression": "(7) + 8"}, seed) is RejectionReason.DUPLICATE
    assert domain.validate_generation({"expression": "8 + 7"}, seed)["answer"] == 15
    assert domain.validate_generation({"expression": "7 + 8"}, None)["answer"] == 15


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "qa": ({"question": "Who founded the city of Rome?", "answer": "Romulus"},
           {"question": "who founded the city of rome", "answer": "Remus"}),
    "alfworld_step": (
        {"goal": "put a mug in the coffeemachine", "observation": "You are in the kitchen.",
         "admissible_commands": ["go to countertop 1", "go to cabinet 1"], "expert_action": "go to cabinet 1"},
        {"goal": "Put a mug in the coffeemachine.", "observation": "You are in  the kitchen.",
         "admissible_commands": ["go to cabinet 1", "look"], "expert_action": "Go to cabinet 1"},
    ),
    "api_bank": (
        {"apis": [{"name": "QueryStock", "description": "Stock price.",
                   "input_parameters": {"stock_code": {"type": "str"}}}],
         "dialogue": "User: What is AAPL at?", "api_request": "[QueryStock(stock_code='AAPL')]"},
        {"apis": [{"name": "QueryStock", "description": "The price of a stock.",
                   "input_parameters": {"stock_code": {"type": "str", "description": "ticker"}}}],
         "dialogue": "User:  What is AAPL at?", "api_request": "[QueryStock(stock_code='AAPL')]"},
    ),
    "function_calling": (
        {"question": "Weather in Paris?", "functions": [{"name": "weather", "description": "Weather.", "parameters": {
            "type": "dict", "properties": {"city": {"type": "string", "description": "City"}}, "required": ["city"]}}],
         "ground_truth": [{"weather": {"city": ["Paris"]}}]},
        {"question": " Weather in Paris?", "functions": [{"name": "weather", "description": "Forecast.", "parameters": {
            "type": "dict", "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"]}}],
         "ground_truth": [{"weather": {"city": ["Paris"]}}]},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_family_rejects_a_repeat_of_its_seed(name: str) -> None:
    domain = get_domain(name)
    original, same_in_canonical_form = CASES[name]
    seed = _seed(domain, original)
    assert _reason(domain, original, seed) is RejectionReason.DUPLICATE
    assert _reason(domain, same_in_canonical_form, seed) is RejectionReason.DUPLICATE
    assert _reason(domain, same_in_canonical_form, None) is None  # the same text without that seed is a task


def test_travel_plan_rejects_its_seed_request(benchmarks_dir: Path) -> None:
    domain = TravelPlanDomain(benchmarks_dir)
    seed = domain.load_seeds(benchmarks_dir, "train")[0]
    request = {k: seed.payload[k] for k in ("query", "people_number", "budget", "local_constraint")}
    request["local_constraint"] = {k: v for k, v in request["local_constraint"].items()}
    request["budget"] = int(request["budget"])
    assert _reason(domain, request, seed) is RejectionReason.DUPLICATE
    assert _reason(domain, {**request, "budget": int(request["budget"]) + 100}, seed) is None
