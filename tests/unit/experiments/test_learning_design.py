"""The learning experiment's design helpers (issue 35): equal agent attempts for the filter baseline, and the
agent-dose calibration rule with the sizing it feeds."""

from __future__ import annotations

import pytest

from genenv.contracts.experiments import ExperimentCreate
from genenv.contracts.runs import GrpoBudget, RunConfig
from genenv.experiments.agent_calibration import (
    BaseOutcome,
    CalibrationRule,
    DoseOutcome,
    calibration_grid,
    choose_agent_dose,
    difference_sd,
    replicates_needed,
)
from genenv.experiments.budget import (
    check_equal_attempts,
    filter_arm,
    planned_agent_attempts,
    realised_agent_attempts,
)
from genenv.experiments.stats import smallest_detectable

GENENV = RunConfig.model_validate({"mode": "genenv", "seeds_per_epoch": 12, "variations_per_seed": 4,
                                   "rollouts_per_task": 8, "static_variations": 4})


def test_attempts_per_epoch_are_seeds_times_tasks_per_seed_times_g() -> None:
    assert planned_agent_attempts(GENENV) == 12 * 4 * 8
    static5 = GENENV.model_copy(update={"mode": "static_augmentation", "static_variations": 5})
    assert planned_agent_attempts(static5) == 12 * 5 * 8  # static writes static_variations per seed
    assert planned_agent_attempts(GENENV.model_copy(update={"mode": "agent_only"})) == 12 * 8
    assert realised_agent_attempts(41, GENENV) == 41 * 8  # only valid tasks are attempted
    with pytest.raises(ValueError):
        realised_agent_attempts(-1, GENENV)


def test_filter_arm_matches_genenvs_attempts_with_more_variations_on_fewer_seeds() -> None:
    arm = filter_arm(GENENV, 8)
    assert (arm.mode, arm.agent.budget, arm.variations_per_seed, arm.seeds_per_epoch) == (
        "random_simulator", GrpoBudget.INFORMATIVE, 8, 6)
    assert planned_agent_attempts(arm) == planned_agent_attempts(GENENV) == 384
    assert arm.rollouts_per_task == GENENV.rollouts_per_task and arm.agent.learning_rate == GENENV.agent.learning_rate
    assert GENENV.agent.budget is GrpoBudget.TASKS  # the original is not changed
    assert planned_agent_attempts(filter_arm(GENENV, 16)) == 384 and filter_arm(GENENV, 16).seeds_per_epoch == 3
    with pytest.raises(ValueError, match="whole number"):
        filter_arm(GENENV, 10)  # 48 tasks are not a multiple of 10
    with pytest.raises(ValueError, match="more variations"):
        filter_arm(GENENV, 4)


def test_check_equal_attempts_names_the_arms_that_differ() -> None:
    static4 = GENENV.model_copy(update={"mode": "static_augmentation"})
    arms = {"genenv": GENENV, "static": static4, "filter": filter_arm(GENENV, 8)}
    assert check_equal_attempts(arms) == 384
    with pytest.raises(ValueError, match="'static': 480"):
        check_equal_attempts({**arms, "static": static4.model_copy(update={"static_variations": 5})})
    with pytest.raises(ValueError, match="rollouts_per_task"):
        check_equal_attempts({"a": GENENV, "b": GENENV.model_copy(update={"rollouts_per_task": 4,
                                                                          "seeds_per_epoch": 24})})
    with pytest.raises(ValueError, match="epochs"):
        check_equal_attempts({"a": GENENV, "b": GENENV.model_copy(update={"epochs": 9})})


BASE = BaseOutcome(accuracy=0.30, valid_share=0.95)


def _runs(lr: float, steps: int, accs: list[float], valid: float = 0.95) -> list[DoseOutcome]:
    return [DoseOutcome(lr, steps, 100 + i, a, valid) for i, a in enumerate(accs)]


def test_the_rule_picks_the_smallest_qualifying_dose() -> None:
    outcomes = [
        *_runs(1e-4, 2, [0.32, 0.33, 0.34]),          # gain 0.03: too small
        *_runs(2e-4, 2, [0.35, 0.36, 0.34]),          # gain 0.05: qualifies (fewest steps, lower rate wins)
        *_runs(5e-4, 2, [0.40, 0.41, 0.42]),          # qualifies, but a higher rate at the same steps
        *_runs(1e-4, 4, [0.45, 0.46, 0.44]),          # qualifies, but more steps
    ]
    d = choose_agent_dose(outcomes, BASE)
    assert d.criterion_met and d.chosen is not None
    assert (d.chosen.learning_rate, d.chosen.steps) == (2e-4, 2)
    assert d.chosen.mean_gain == pytest.approx(0.05) and d.chosen.accuracy_sd == pytest.approx(0.01)
    assert "criterion met" in d.reason and len(d.doses) == 4
    # Deterministic: the order of the outcomes does not matter.
    assert choose_agent_dose(list(reversed(outcomes)), BASE).chosen == d.chosen


def test_the_rule_rejects_a_dose_that_collapses_reply_validity() -> None:
    outcomes = [
        *_runs(5e-4, 2, [0.40, 0.41, 0.42]),
        DoseOutcome(5e-4, 2, 103, 0.41, 0.80),         # one replicate below 0.9 × 0.95 = 0.855: collapsed
        *_runs(1e-4, 4, [0.36, 0.35, 0.37], valid=0.86),  # just above the line: kept
    ]
    d = choose_agent_dose(outcomes, BASE)
    collapsed = next(x for x in d.doses if x.steps == 2)
    assert collapsed.collapsed and not collapsed.qualifies
    assert d.criterion_met and d.chosen is not None and (d.chosen.learning_rate, d.chosen.steps) == (1e-4, 4)
    assert choose_agent_dose(outcomes, BASE, CalibrationRule(min_gain=0.05, collapse_ratio=0.95)).chosen is not None


def test_when_no_dose_qualifies_the_decision_says_so() -> None:
    outcomes = [*_runs(1e-4, 2, [0.31, 0.32]), *_runs(2e-4, 2, [0.33, 0.34]), *_runs(1e-3, 8, [0.5, 0.5], 0.5)]
    d = choose_agent_dose(outcomes, BASE)
    assert not d.criterion_met and "no dose lifted" in d.reason
    assert d.chosen is not None and (d.chosen.learning_rate, d.chosen.steps) == (2e-4, 2)  # largest kept gain
    every = choose_agent_dose(_runs(1e-3, 8, [0.5], 0.1) + _runs(1e-3, 4, [0.5], 0.1), BASE)
    assert not every.criterion_met and "every dose collapsed" in every.reason
    assert every.chosen is not None and every.chosen.steps == 4
    empty = choose_agent_dose([], BASE)
    assert empty.chosen is None and not empty.criterion_met


def test_calibration_grid_sets_only_the_dose() -> None:
    template = ExperimentCreate.model_validate({"name": "cal", "modes": ["static_augmentation"], "replicates": 2,
                                               "random_seeds": [11, 12], "template": {"mode": "static_augmentation"}})
    grid = calibration_grid(template, [1e-4, 2e-4], [2, 4, 8])
    assert len(grid) == 6
    assert [(g.template.agent.learning_rate, g.template.agent.max_steps_per_epoch) for g in grid][:3] == [
        (1e-4, 2), (1e-4, 4), (1e-4, 8)]
    assert all(g.seeds() == [11, 12] and g.modes == ["static_augmentation"] for g in grid)
    assert grid[0].name == "cal-lr0.0001-s2" == grid[0].template.name
    assert grid[0].template.agent.batch_size == template.template.agent.batch_size


def test_sizing_is_the_smallest_n_whose_detectable_effect_reaches_the_target() -> None:
    sd = difference_sd(0.019)
    assert sd == pytest.approx(0.02687, abs=1e-4)
    n = replicates_needed(sd, 0.03)
    assert n is not None
    below = smallest_detectable(sd, n - 1)
    at = smallest_detectable(sd, n)
    assert below is not None and at is not None and below > 0.03 >= at
    strict = replicates_needed(sd, 0.03, confidence=1 - 0.05 / 3)
    assert strict is not None and strict > n
    assert replicates_needed(1.0, 0.001, max_replicates=50) is None
