"""genenv.experiments.mechanism_pools: each arm's training set from a cached pool (the band on the seed batch for
A, size-matched random C, task-level bands for D and E), and the ``genenv experiment mechanism`` command line."""

from __future__ import annotations

import math
from typing import Any

import pytest
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.curriculum.reward import alpha_reward
from genenv.experiments.mechanism_pools import Sizes, arm_sets, batch_p_hat, pool_p_hat_by_group, task_key


def _gen(expr: str, k: int, n: int) -> dict[str, Any]:
    return {"raw_text": expr, "payload": {"expression": expr}, "k": k, "n": n}


def _pool() -> list[dict[str, Any]]:
    # s1: batch p̂ 0.5 (in A's band), its tasks at 0.25 and 0.75; s2: batch p̂ 0.3 (in D's band only), tasks 0.3
    # and 0.3; s3: a rejected generation and no attempts.
    return [
        {"seed_id": "s1", "group": "easy", "prompt": [{"role": "user", "content": "1"}],
         "generations": [_gen("1+1", 1, 4), _gen("2*3", 3, 4)]},
        {"seed_id": "s2", "group": "hard", "prompt": [{"role": "user", "content": "2"}],
         "generations": [_gen("9*9", 3, 10), _gen("8*8", 3, 10)]},
        {"seed_id": "s3", "group": "hard", "prompt": [], "generations": [{"raw_text": "x", "payload": None}]},
    ]


def test_arm_sets_select_on_the_seed_batch_for_a_and_on_the_task_for_d_and_e() -> None:
    pool = _pool()
    sets, info = arm_sets(pool, 0.1, Sizes(), cap=256, seed=3)
    assert sorted(it.key for it in sets["A"]) == [task_key({"expression": "1+1"}), task_key({"expression": "2*3"})]
    assert all(it.weight == pytest.approx(math.exp(alpha_reward(0.5, alpha=0.5, beta=20.0))) for it in sets["A"])
    assert len(sets["C"]) == len(sets["A"]) == 2  # C: random valid generations, size-matched to A
    # D (0.3 ± 0.1) holds s2's two tasks and s1's 0.25 task; E (0.7 ± 0.1) holds s1's 0.75 task: size-matched to
    # the smaller, 1 each.
    assert info["available"] == {"A": 2, "D": 3, "E": 1} and info["matched"] == {"A, C": 2, "D, E": 1}
    assert [it.key for it in sets["E"]] == [task_key({"expression": "2*3"})]
    assert sets["D"][0].key in {task_key({"expression": e}) for e in ("1+1", "9*9", "8*8")}
    assert info["scored_batches"] == 2 and info["valid_generations"] == 4
    assert info["batches_in_band"] == {"A": 1, "D": 1, "E": 0}
    assert sum(info["task_p_hat_deciles"]) == 4 and info["task_p_hat_deciles"][2] == 1


def test_pool_p_hat_pools_every_attempt_of_a_seed_batch() -> None:
    pool = _pool()
    assert batch_p_hat(pool[1]) == pytest.approx(0.3) and batch_p_hat(pool[2]) is None
    assert pool_p_hat_by_group(pool) == {"easy": pytest.approx(0.5), "hard": pytest.approx(0.3)}


def test_the_cap_bounds_every_arm() -> None:
    sets, info = arm_sets(_pool(), 0.1, Sizes(), cap=1, seed=3)
    assert {arm: len(v) for arm, v in sets.items()} == {"A": 1, "C": 1, "D": 1, "E": 1}
    assert info["matched"] == {"A, C": 1, "D, E": 1} and info["available"]["D"] == 3


def test_mechanism_commands_are_an_experiment_sub_group() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["experiment", "mechanism", "--help"])
    assert listed.exit_code == 0
    for command in ("calibrate", "offline", "pool", "smoke", "shift"):
        assert command in listed.output
    assert runner.invoke(app, ["experiment", "sizing", "--help"]).exit_code == 0
    # offline needs the dose calibrate chose
    assert runner.invoke(app, ["experiment", "mechanism", "offline", "--steps", "4"]).exit_code == 2
    bad = runner.invoke(app, ["experiment", "mechanism", "pool", "--backend", "tpu"])
    assert bad.exit_code == 2
