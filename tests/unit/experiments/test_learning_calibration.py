"""genenv.experiments.learning_calibration: stored calibration runs → the pre-registered dose rule and Part B's
sizing (docs/experiments/preregistration-learning.md). Numbers worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pytest import approx

from genenv.cli.experiments import load_experiment
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.experiments.agent_calibration import BaseOutcome, calibration_grid
from genenv.experiments.learning import REGISTERED_SEEDS, EpochPoint, HeldOut, LearningMember, PairingError
from genenv.experiments.learning_calibration import CALIBRATION_SEEDS, calibrate, calibration_outcomes, size
from genenv.experiments.learning_rendering import calibration_json, render_calibration
from genenv.experiments.stats import smallest_detectable
from tests.unit.experiments.learning_members import EXAMPLES, HELDOUT

BASE = BaseOutcome(accuracy=0.30, valid_share=0.95)


def _doses() -> dict[tuple[float, int], RunConfig]:
    body = load_experiment(EXAMPLES / "experiment-cpu-learning-calibration.yaml")
    grid = calibration_grid(body, [5e-5, 1e-4], [1, 2])
    return {(e.template.agent.learning_rate, e.template.agent.max_steps_per_epoch): e.template for e in grid}


def _run(lr: float, steps: int, seed: int, acc: float, valid: float = 0.95, wall: float = 1200.0,
         status: RunStatus = RunStatus.COMPLETED, heldout: HeldOut = HELDOUT) -> LearningMember:
    cfg = _doses()[(lr, steps)].model_copy(update={"random_seed": seed, "mode": "static_augmentation"})
    return LearningMember(f"cal-{lr:g}-{steps}", f"r-{lr:g}-{steps}-{seed}", seed, cfg, status,
                          tuple(EpochPoint(e, acc, 1280) for e in range(6)), heldout, final_valid_share=valid,
                          wall_s=wall)


def _grid(gains: dict[tuple[float, int], tuple[float, float, float]]) -> list[LearningMember]:
    return [_run(lr, steps, seed, BASE.accuracy + g) for (lr, steps), gs in gains.items()
            for seed, g in zip(CALIBRATION_SEEDS, gs, strict=True)]


def test_the_smallest_qualifying_dose_is_chosen_and_sizes_part_c() -> None:
    members = _grid({(5e-5, 1): (0.01, 0.02, 0.03), (1e-4, 1): (0.04, 0.06, 0.08),
                     (5e-5, 2): (0.06, 0.07, 0.08), (1e-4, 2): (0.10, 0.11, 0.12)})
    result = calibrate(members, BASE)
    d = result.decision
    assert d.criterion_met and d.chosen is not None
    assert (d.chosen.learning_rate, d.chosen.steps) == (1e-4, 1)  # fewest steps first, then the lowest rate
    z = result.sizing
    assert z.s == approx(0.02) and z.sigma_d == approx(math.sqrt(2) * 0.02)
    assert z.run_wall_s == approx(1200.0) and z.replicate_wall_s == approx(4 * 1200 * 1.2)
    assert z.replicates_needed == 12  # (t_{1−0.05/6, n−1} + z_0.8) · 0.0283 / √n ≤ 0.03 first at n = 12
    detectable = smallest_detectable(math.sqrt(2) * 0.02, 12, 1 - 0.05 / 3)
    assert z.n_run == 12 and not z.budget_exceeded and z.smallest_detectable == approx(detectable)
    assert z.seeds == list(REGISTERED_SEEDS[:12])
    text = render_calibration(result)
    assert "**Chosen dose: lr 0.0001 × 1 steps per epoch** (criterion met)" in text
    assert "- lr 0.0001 × 1, seed 80132: 0.360, 0.950" in text  # every run's value, per replicate
    data = calibration_json(result)
    assert data["sizing"]["n_run"] == 12 and len(data["outcomes"]) == 12 and data["rule"]["min_gain"] == 0.05


def test_the_calibration_figure_draws_every_dose(tmp_path: Path) -> None:
    from genenv.experiments.learning_figures import write_calibration_figure

    members = _grid({(5e-5, 1): (0.01, 0.02, 0.03), (1e-4, 1): (0.04, 0.06, 0.08)})
    [png] = write_calibration_figure(calibrate(members, BASE), tmp_path)
    assert png.name == "calibration.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_budget_caps_the_replicates_and_never_below_three() -> None:
    members = _grid({(1e-4, 1): (0.04, 0.06, 0.08)})
    slow = [_run(m.config.agent.learning_rate, 1, m.seed, m.final_accuracy() or 0, wall=3 * 3600.0) for m in members]
    z = calibrate(slow, BASE).sizing
    assert z.n_run == 5 and not z.budget_exceeded  # W = 4 × 3 h × 1.2 = 14.4 h; ⌊72 / 14.4⌋ = 5
    slower = [_run(m.config.agent.learning_rate, 1, m.seed, m.final_accuracy() or 0, wall=6 * 3600.0) for m in members]
    z = calibrate(slower, BASE).sizing
    assert z.n_run == 3 and z.budget_exceeded  # ⌊72 / 28.8⌋ = 2 < 3: 3 run and the report says so


def test_unfinished_runs_are_left_out_and_named() -> None:
    members = _grid({(1e-4, 1): (0.04, 0.06, 0.08)})
    members[2] = _run(1e-4, 1, CALIBRATION_SEEDS[2], 0.9, status=RunStatus.FAILED)
    result = calibrate(members, BASE)
    assert result.decision.chosen is not None and result.decision.chosen.replicates == 2
    assert len(result.skipped) == 1 and "failed" in result.skipped[0]


def test_collapsed_validity_falls_back_as_preregistered() -> None:
    members = [_run(1e-4, 1, s, 0.40, valid=0.80) for s in CALIBRATION_SEEDS]  # 0.80 < 0.9 × 0.95
    members += [_run(5e-5, 2, s, 0.32) for s in CALIBRATION_SEEDS]
    d = calibrate(members, BASE).decision
    assert not d.criterion_met and d.chosen is not None and (d.chosen.learning_rate, d.chosen.steps) == (5e-5, 2)


def test_calibration_inputs_are_refused_when_they_are_not_calibration_runs() -> None:
    ok = _grid({(1e-4, 1): (0.04, 0.06, 0.08)})
    genenv = ok[0].config.model_copy(update={"mode": "genenv"})
    with pytest.raises(PairingError, match="static_augmentation only"):
        calibration_outcomes([*ok[1:], LearningMember("x", "g", ok[0].seed, genenv, RunStatus.COMPLETED, (), HELDOUT)])
    with pytest.raises(PairingError, match="outside the calibration's"):
        calibration_outcomes([*ok, _run(1e-4, 2, 70157, 0.4)])
    with pytest.raises(PairingError, match="one run per dose and seed"):
        calibration_outcomes([*ok, _run(1e-4, 1, CALIBRATION_SEEDS[0], 0.4)])
    with pytest.raises(PairingError, match="held-out measurements differ"):
        calibration_outcomes([*ok, _run(1e-4, 2, CALIBRATION_SEEDS[0], 0.4,
                                        heldout=HeldOut("arithmetic", "eval", None, 534))])


def test_sizing_without_a_chosen_dose_or_wall_times() -> None:
    members = _grid({(1e-4, 1): (0.04, 0.06, 0.08)})
    result = calibrate(members, BASE)
    z = size(result.decision, [])
    assert z.replicate_wall_s is None and z.n_run == 12  # the budget cannot be applied without W
