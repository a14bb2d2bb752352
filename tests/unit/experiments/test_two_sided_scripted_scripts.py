"""Design (c)'s scripts beside its pre-registration (docs/experiments/two-sided-scripted/): the presets follow from
the pilot by the pre-registered rule, the driver's plan and run configs are what the pre-registration says, and the
report reads back the runs the driver names."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from _common import load_file

from genenv.contracts.modes import policy
from genenv.contracts.runs import RunConfig
from genenv.domains.arithmetic.scripted_agent import PRESETS

HERE = Path(__file__).resolve().parents[3] / "docs" / "experiments" / "two-sided-scripted"


@pytest.fixture(scope="module")
def scripts() -> dict[str, ModuleType]:
    sys.path.insert(0, str(HERE))  # report.py imports run.py from beside it, as `python report.py` does
    try:
        return {name: load_file(HERE / f"{name}.py") for name in ("run", "report", "pilot")}
    finally:
        sys.path.remove(str(HERE))


def test_the_pilot_rule_chooses_the_committed_presets(scripts: dict[str, ModuleType]) -> None:
    pilot = scripts["pilot"]
    cells = pilot.pilot_cells()
    assert sum(cells.values()) == 1067  # design (a)'s epoch-0 tasks, all by the untrained simulator
    for name, target in pilot.TARGETS.items():
        p = PRESETS[name]
        assert pilot.choose(cells, target) == (p.bias, p.digit_weight, p.operator_weight)
        mean, band = pilot.measures(p, cells)
        assert abs(mean - target) <= 0.02 and 0.15 <= band <= 0.35


def test_the_plan_is_replicate_by_replicate_with_the_registered_seeds(scripts: dict[str, ModuleType]) -> None:
    run = scripts["run"]
    order = run.plan(8)
    assert len(order) == 48 and len(set(run.SEEDS)) == 8
    assert [r for r, *_ in order] == sorted(r for r, *_ in order)  # whole replicates first
    assert order[:6] == [(1, run.SEEDS[0], agent, arm) for agent in ("capable", "struggling") for arm in run.ARMS]
    assert all(policy(arm).external_agent for arm in run.ARMS)
    assert [policy(arm).trains_simulator for arm in run.ARMS] == [True, True, False]


def test_the_run_config_is_the_registered_one_and_smoke_only_shrinks(scripts: dict[str, ModuleType]) -> None:
    run = scripts["run"]
    full = RunConfig.model_validate({**run.run_template(False), "name": "x", "mode": "external_agent",
                                     "random_seed": run.SEEDS[0]})
    assert (full.epochs, full.seeds_per_epoch, full.variations_per_seed, full.rollouts_per_task) == (5, 28, 4, 8)
    assert (full.curriculum.alpha, full.curriculum.k_min, full.curriculum.prompt_stats) == (0.5, 0.25, False)
    assert (full.simulator.learning_rate, full.simulator.max_steps_per_epoch, full.simulator.passes_per_epoch,
            full.simulator.kl_cap) == (1e-3, 4, 4, 1000.0)
    smoke = RunConfig.model_validate({**run.run_template(True), "name": "x", "mode": "external_agent"})
    assert smoke.epochs == 2 and smoke.simulator.learning_rate == full.simulator.learning_rate  # merged, not replaced


def test_report_reads_back_the_names_the_driver_gives(scripts: dict[str, ModuleType]) -> None:
    run, report = scripts["run"], scripts["report"]
    for replicate, seed, agent, arm in run.plan(8):
        assert report.parse_name(run.run_name(agent, arm, replicate)) == (agent, arm, seed)
    assert report.parse_name("capable-external_agent-r9") is None
    assert report.parse_name("experiment-cpu-learning/static_augmentation/r0") is None


def test_start_before_reads_a_utc_clock_time_today(scripts: dict[str, ModuleType]) -> None:
    from datetime import UTC, datetime

    at = scripts["run"]._utc_time("21:05")
    assert (at.hour, at.minute, at.second, at.tzinfo) == (21, 5, 0, UTC)
    assert at.date() == datetime.now(UTC).date()
