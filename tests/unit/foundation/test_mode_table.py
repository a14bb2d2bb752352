"""Run modes are one table (genenv.contracts.modes): a mode added to it is picked up by every reader."""

from __future__ import annotations

import pytest

from genenv.contracts import modes
from genenv.contracts.experiments import ExperimentCreate
from genenv.contracts.modes import MODES, SimulatorPool, TaskSource
from genenv.contracts.runs import RunConfig
from genenv.curriculum.pool import PoolCandidate, choose_pool
from genenv.experiments import budget, paired, series
from genenv_orchestrator.phases import _train_kinds


@pytest.fixture
def extra_mode(monkeypatch: pytest.MonkeyPatch) -> str:
    """The table with one more mode: written once at epoch 0, simulator trained on a size-matched random pool."""
    mode = modes.ModePolicy(
        name="test_once_generic", tasks=TaskSource.ONCE, simulator_pool=SimulatorPool.RANDOM_SIZE_MATCHED,
        agent_trains_on=modes.AgentData.GENERATED, attempts=modes.AttemptSource.ROLLOUT_WORKERS,
        label="once + generic", colour="#123456", summary="a test mode", baseline_rank=5,
    )
    monkeypatch.setattr(modes, "MODES", {**MODES, mode.name: mode})
    return mode.name


def test_the_table_holds_the_eight_modes_with_their_behaviour() -> None:
    assert list(MODES) == ["genenv", "random_simulator", "static_augmentation", "agent_only", "generic_rwr",
                           "external_agent", "external_random_simulator", "external_generic_rwr"]
    assert [m.name for m in MODES.values() if m.trains_simulator] == ["genenv", "generic_rwr", "external_agent",
                                                                      "external_generic_rwr"]
    assert [m.name for m in MODES.values() if m.external_agent] == ["external_agent", "external_random_simulator",
                                                                    "external_generic_rwr"]
    assert [m.name for m in MODES.values() if not m.uses_simulator] == ["agent_only"]
    assert modes.baselines() == ["random_simulator", "generic_rwr", "static_augmentation"]
    assert RunConfig(mode="static_augmentation").policy.tasks is TaskSource.ONCE


def test_a_new_mode_is_one_table_entry(extra_mode: str) -> None:
    config = RunConfig(mode=extra_mode, static_variations=3)
    assert config.trains_simulator and config.uses_simulator
    assert [k.value for k in _train_kinds(config)] == ["train_agent", "train_simulator"]  # the orchestrator's TRAIN
    assert budget.tasks_per_seed(config) == 3  # written once: static_variations per seed
    with pytest.raises(ValueError, match="learning_progress"):  # RunConfig's checks read the table too
        RunConfig(mode=extra_mode, seed_sampling="learning_progress")
    assert ExperimentCreate(modes=["genenv", extra_mode]).modes == ["genenv", extra_mode]
    assert modes.colour(extra_mode) == "#123456" and modes.label(extra_mode) == "once + generic"
    assert modes.baselines()[-1] == extra_mode  # compared with genenv in the report's effects table
    members = [type("M", (), {"mode": m})() for m in (extra_mode, "genenv", "random_simulator")]
    assert series.modes_present(members) == ["genenv", "random_simulator", extra_mode]  # type: ignore[arg-type]
    # The trainer's pool: the mode's policy picks the random size-matched pool, weight 1.
    cands = [PoolCandidate(1, 0, True, 2.0), PoolCandidate(2, 0, False, None), PoolCandidate(3, 0, False, 0.5)]
    picks = choose_pool(modes.policy(extra_mode).simulator_pool, cands, max_size=10, seed=0)
    assert len(picks) == 1 and picks[0].weight == 1.0
    assert paired.GENENV == "genenv"


def test_an_unknown_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown mode 'nope'; choose from genenv"):
        RunConfig(mode="nope")
    with pytest.raises(ValueError, match="unknown mode"):
        ExperimentCreate(modes=["genenv", "nope"])


def test_band_pool_keeps_in_band_weighted_newest_first_and_caps() -> None:
    cands = [PoolCandidate(5, 0, True, 1.5), PoolCandidate(2, 1, True, 0.5), PoolCandidate(9, 1, True, None),
             PoolCandidate(1, 1, False, 2.0), PoolCandidate(3, 1, True, 1.0)]
    picks = choose_pool(SimulatorPool.BAND_RWR, cands, max_size=2, seed=0)
    assert [(p.task_id, p.epoch, p.weight) for p in picks] == [(2, 1, 0.5), (3, 1, 1.0)]
    assert choose_pool(SimulatorPool.NONE, cands, max_size=2, seed=0) == []
