"""Run-config validation: bad hyperparameters fail with messages that say where and how to fix them."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from genenv.contracts.runs import RunConfig, RunCreate


def _error(**config: object) -> tuple[tuple[object, ...], str]:
    with pytest.raises(ValidationError) as info:
        RunConfig.model_validate(config)
    first = info.value.errors()[0]
    return first["loc"], str(first["msg"])


@pytest.mark.parametrize("alpha", [0.0, 1.0, 1.5, -0.1])
def test_alpha_outside_open_unit_interval_is_rejected(alpha: float) -> None:
    loc, msg = _error(curriculum={"alpha": alpha})
    assert loc == ("curriculum", "alpha")
    assert "greater than 0" in msg or "less than 1" in msg


@pytest.mark.parametrize("beta", [0.0, -1.0])
def test_beta_must_be_positive(beta: float) -> None:
    loc, msg = _error(curriculum={"beta": beta})
    assert loc == ("curriculum", "beta")
    assert "greater than 0" in msg


@pytest.mark.parametrize("g", [0, 1])
def test_group_size_below_two_is_rejected(g: int) -> None:
    loc, msg = _error(rollouts_per_task=g)
    assert loc == ("rollouts_per_task",)
    assert "greater than or equal to 2" in msg


@pytest.mark.parametrize("block", ["agent", "simulator"])
def test_micro_batch_larger_than_batch_says_how_to_fix(block: str) -> None:
    _, msg = _error(**{block: {"batch_size": 4, "micro_batch_size": 8}})
    assert f"{block}.micro_batch_size (8) exceeds {block}.batch_size (4)" in msg
    assert "lower micro_batch_size or raise batch_size" in msg


def test_k_min_above_half_is_rejected() -> None:
    loc, msg = _error(curriculum={"k_min": 0.6})
    assert loc == ("curriculum", "k_min")
    assert "less than or equal to 0.5" in msg


def test_eval_cadence_needs_benchmarks() -> None:
    _, msg = _error(eval_every=2)
    assert "eval_every > 0 needs eval_benchmarks" in msg


def test_unknown_benchmark_lists_the_known_ones() -> None:
    loc, msg = _error(eval_benchmarks=["mmlu"])
    assert loc == ("eval_benchmarks",)
    assert "unknown benchmark(s) ['mmlu']" in msg and "bfcl" in msg


def test_unknown_field_is_a_client_mistake() -> None:
    loc, msg = _error(alpah=0.3)
    assert loc == ("alpah",)
    assert "Extra inputs are not permitted" in msg


def test_lora_rank_bounds() -> None:
    loc, _ = _error(lora={"rank": 0})
    assert loc == ("lora", "rank")


def test_defaults_are_valid_and_round_trip_through_json() -> None:
    config = RunConfig()
    again = RunConfig.model_validate_json(config.model_dump_json())
    assert again == config
    assert RunCreate.model_validate({}).config == config


def test_every_hyperparameter_has_a_description() -> None:
    blocks = {"curriculum", "lora", "agent", "simulator"}
    models: list[type[BaseModel]] = [RunConfig, *(type(getattr(RunConfig(), b)) for b in blocks)]
    for model in models:
        missing = [n for n, f in model.model_fields.items() if not f.description and n not in blocks]
        assert missing == [], f"{model.__name__} fields without description"


def test_the_contracts_benchmark_splits_are_the_evaluators() -> None:
    from genenv.contracts.runs import BENCHMARK_SPLITS
    from genenv.domains.evaluators import get_evaluator

    assert {name: get_evaluator(name).splits for name in BENCHMARK_SPLITS} == BENCHMARK_SPLITS


def test_eval_splits_name_a_listed_benchmark_and_one_of_its_splits() -> None:
    ok = RunConfig.model_validate({"eval_every": 1, "eval_benchmarks": ["bfcl"], "eval_splits": {"bfcl": "ast"}})
    assert ok.eval_splits == {"bfcl": "ast"}
    _, msg = _error(eval_every=1, eval_benchmarks=["bfcl"], eval_splits={"bfcl": "valid_seen"})
    assert "bfcl has no split 'valid_seen'; choose from ['eval', 'ast', 'all']" in msg
    _, msg = _error(eval_every=1, eval_benchmarks=["bfcl"], eval_splits={"arithmetic": "eval"})
    assert "eval_splits names 'arithmetic', which is not in eval_benchmarks ['bfcl']" in msg
