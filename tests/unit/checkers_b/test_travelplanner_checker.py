"""TravelPlanner: the 8 commonsense and 5 hard constraints against the local database."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from genenv.checkers.base import run_checker
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains.travel_plan.checker import (
    COMMONSENSE,
    Flight,
    TravelQuery,
    applicable_hard,
    check_plan,
    evaluate_plan,
    with_task_flights,
)
from genenv.domains.travel_plan.domain import TravelPlanDomain, load_database, load_train, load_validation, travel_dir
from tests.benchdata import BenchData, on_subset_and_full


@pytest.fixture(scope="module")
def train(benchmarks_dir: Path) -> list[dict[str, Any]]:
    return load_train(benchmarks_dir)


@pytest.fixture(scope="module")
def db(benchmarks_dir: Path) -> Any:
    return load_database(travel_dir(benchmarks_dir).resolve())


def _result(task: dict[str, Any], plan: list[dict[str, Any]], db: Any) -> Any:
    flights = [Flight(**f) for f in task.get("flights") or []]
    return evaluate_plan(TravelQuery.from_payload(task), plan, with_task_flights(db, flights))


@on_subset_and_full("travelplanner")
def test_every_annotated_train_plan_passes_every_constraint(data: BenchData) -> None:
    train = load_train(data.root)
    db = load_database(travel_dir(data.root).resolve())
    assert len(train) == (45 if data.full else 5)
    for task in train:
        result = _result(task, task["gold_plan"], db)
        assert result.final_pass, (task["idx"], result)
        v = TravelPlanDomain(data.root).verify(task, json.dumps(task["gold_plan"]))
        assert v.valid and v.score == 1.0 and v.success


@on_subset_and_full("travelplanner")
def test_validation_rows_and_hard_denominator(data: BenchData) -> None:
    rows = load_validation(data.root)
    assert {(r["level"], r["days"]) for r in rows} >= {("easy", 3), ("medium", 5), ("hard", 7)}
    if data.full:
        assert len(rows) == 180
        assert sum(applicable_hard(TravelQuery.from_payload(r)) for r in rows) == 420  # upstream's denominator


def _task(train: list[dict[str, Any]], predicate: Any) -> dict[str, Any]:
    return copy.deepcopy(next(t for t in train if predicate(t)))


def test_perturbations_fail_the_right_constraint(train: list[dict[str, Any]], db: Any) -> None:
    task = _task(train, lambda t: t["days"] == 3 and t["people_number"] == 1)
    plan = task["gold_plan"]

    repeated = copy.deepcopy(plan)
    repeated[1]["lunch"] = repeated[1]["breakfast"]
    assert not _result(task, repeated, db).commonsense["Diverse Restaurants"]

    fake_hotel = copy.deepcopy(plan)
    fake_hotel[0]["accommodation"] = "The Imaginary Palace Hotel XYZ, " + fake_hotel[0]["accommodation"].split(", ")[-1]
    r = _result(task, fake_hotel, db)
    assert not r.commonsense["Within Sandbox"] and r.hard is None  # hard constraints need the sandbox

    fake_flight = copy.deepcopy(plan)
    fake_flight[0]["transportation"] = fake_flight[0]["transportation"].replace("Flight Number: F", "Flight Number: X")
    assert not _result(task, fake_flight, db).commonsense["Within Sandbox"]

    poor = copy.deepcopy(task)
    poor["budget"] = 10
    r = _result(poor, plan, db)
    assert r.hard is not None and r.hard["Budget"] is False and r.commonsense_pass and not r.final_pass

    open_loop = copy.deepcopy(plan)
    open_loop[-1]["current_city"] = open_loop[-1]["current_city"].rsplit(" to ", 1)[0] + " to Nowhere City"
    assert not _result(task, open_loop, db).commonsense["Reasonable City Route"]

    missing = copy.deepcopy(plan)
    del missing[1]["dinner"]
    assert not _result(task, missing, db).commonsense["Complete Information"]


def test_local_constraints(train: list[dict[str, Any]], db: Any) -> None:
    task = _task(train, lambda t: t["local_constraint"]["room type"] == "entire room")
    task["local_constraint"]["room type"] = "shared room"
    assert _result(task, task["gold_plan"], db).hard["Room Type"] is False
    task["local_constraint"]["room type"] = None
    assert _result(task, task["gold_plan"], db).hard["Room Type"] is None  # not applicable

    task = _task(train, lambda t: t["local_constraint"]["transportation"] == "no flight")
    task["local_constraint"]["transportation"] = "no self-driving"
    r = _result(task, task["gold_plan"], db)
    uses_car = any("Self-driving" in str(d.get("transportation")) for d in task["gold_plan"])
    assert r.hard["Transportation"] is (not uses_car)

    task = _task(train, lambda t: bool(t["local_constraint"]["cuisine"]))
    task["local_constraint"]["cuisine"] = ["Nonexistent Cuisine"]
    assert _result(task, task["gold_plan"], db).hard["Cuisine"] is False


def test_upstream_quirk_parties_rule_never_fails(train: list[dict[str, Any]], db: Any) -> None:
    # Upstream compares against the misspelt 'parities', so a "parties" rule cannot fail.
    task = _task(train, lambda t: t["local_constraint"]["house rule"] == "smoking")
    hotels = {d["accommodation"] for d in task["gold_plan"] if d.get("accommodation") not in (None, "-")}
    assert hotels
    task["local_constraint"]["house rule"] = "parties"
    assert _result(task, task["gold_plan"], db).hard["Room Rule"] is True


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        ("Day 1: fly to Rockford and relax.", VerdictErrorKind.PARSE_ERROR),
        ('[{"days": 1, "current_city": "from A to B"', VerdictErrorKind.PARSE_ERROR),
        ("[1, 2, 3]", VerdictErrorKind.SCHEMA_ERROR),
        ("[]", VerdictErrorKind.SCHEMA_ERROR),
        ('[{"days": 1, "breakfast": {"name": "x"}}]', VerdictErrorKind.SCHEMA_ERROR),
        ("[" + '{"days": 1},' * 4000 + "{}]", VerdictErrorKind.TOO_LARGE),
    ],
)
def test_malformed_plans_are_wrong_answers_scored_zero(
    train: list[dict[str, Any]], db: Any, response: str, kind: VerdictErrorKind
) -> None:
    v = run_checker(lambda: check_plan(response, train[0], db, 1.0))
    if kind is VerdictErrorKind.TOO_LARGE:  # too large to check is not the agent's wrong answer: invalid
        assert not v.valid and v.score is None and v.error is not None and v.error.kind is kind
    else:  # METHOD.md Eq. 1: a reply that does not parse is a wrong answer, scored 0
        assert v.valid and v.score == 0.0 and not v.success and v.form_error is not None and v.form_error.kind is kind


def test_score_is_share_of_applicable_constraints(train: list[dict[str, Any]], db: Any) -> None:
    task = copy.deepcopy(train[0])
    task["budget"] = 1
    v = check_plan(json.dumps(task["gold_plan"]), task, db, 1.0)
    n = len(COMMONSENSE) + applicable_hard(TravelQuery.from_payload(task))
    assert v.valid and v.score == pytest.approx((n - 1) / n) and not v.success
    assert v.details["commonsense_pass"] and not v.details["final_pass"]
