"""The simulator-mechanism analysis (genenv.experiments.mechanism): prompt outcomes, arm summaries, paired
contrasts, manipulation checks, the calibration's dose choice and the pre-registered decision rules."""

from __future__ import annotations

import pytest

from genenv.experiments.mechanism import (
    CalibrationRow,
    Contrast,
    Criterion,
    ManipulationCheck,
    PromptOutcome,
    TaskOutcome,
    abs_gap,
    choose_dose,
    contrast,
    decide,
    manipulation_check,
    summarise_arm,
    task_in_band_share,
)
from genenv.experiments.stats import Interval


def _prompt(pid: str, ks: list[int], n: int = 4, samples: int = 4, keys: list[str] | None = None) -> PromptOutcome:
    keys = keys or [f"{pid}-{i}" for i in range(len(ks))]
    return PromptOutcome(pid, "1d-add", samples, [TaskOutcome(k_, k, n, {"digits": 1.0 + i})
                                                  for i, (k, k_) in enumerate(zip(ks, keys, strict=True))])


def test_prompt_outcome_pools_attempts_over_its_valid_tasks() -> None:
    p = _prompt("a", [4, 0, 2], keys=["x", "x", "y"])
    assert p.p_hat == pytest.approx(6 / 12) and p.valid_share == 0.75 and p.distinct_share == pytest.approx(2 / 3)
    assert abs_gap(p, 0.5) == pytest.approx(0.0)
    assert task_in_band_share(p, 0.5, 0.1) == pytest.approx(1 / 3)  # only the 2-of-4 task
    empty = PromptOutcome("b", None, 4, [])
    assert empty.p_hat is None and empty.distinct_share is None and abs_gap(empty, 0.5) is None


def test_contrast_pairs_by_replicate_and_prompt_and_drops_prompts_without_tasks() -> None:
    runs = {
        1: {"A": {"p1": _prompt("p1", [2, 2]), "p2": _prompt("p2", [1, 1]), "p3": PromptOutcome("p3", None, 4, [])},
            "C": {"p1": _prompt("p1", [0, 0]), "p2": _prompt("p2", [0, 1]), "p3": _prompt("p3", [1, 1])}},
        2: {"A": {"q1": _prompt("q1", [3, 1])}, "C": {"q1": _prompt("q1", [4, 4])}},
    }
    c = contrast("E1", runs, "A", "C", "abs_gap", -1, 0.5)
    # |p̂ − α|: p1 0 vs 0.5, p2 0.25 vs 0.375, q1 0 vs 0.5 → differences −0.5, −0.125, −0.5; p3 dropped.
    assert c.difference is not None and c.difference.estimate == pytest.approx((-0.5 - 0.125 - 0.5) / 3)
    assert c.difference.n == 3 and c.pairs_dropped == 1
    assert c.per_replicate == {1: pytest.approx(-0.3125), 2: pytest.approx(-0.5)}


def _c(low: float, high: float, reps: dict[int, float], predicted: int = -1) -> Contrast:
    return Contrast("E", "A", "C", "abs_gap", predicted, Interval((low + high) / 2, low, high, 200), reps, 0)  # type: ignore[arg-type]


OK = ManipulationCheck(True, [])


def test_decision_rules() -> None:
    assert decide(_c(-0.05, -0.01, {1: -0.03, 2: -0.02}), OK, 0.02)[0] == "supported"
    # The pooled interval lies below 0 but one replicate goes the other way: not supported.
    assert decide(_c(-0.05, -0.01, {1: -0.05, 2: 0.01}), OK, 0.02)[0] == "inconclusive"
    # An effect of 0.02 in the predicted direction (−0.02) lies outside [−0.015, +0.03]: refuted at this scale.
    assert decide(_c(-0.015, 0.03, {1: 0.0}), OK, 0.02)[0] == "refuted at this scale"
    assert decide(_c(-0.04, 0.01, {1: -0.01}), OK, 0.02)[0] == "inconclusive"
    positive = _c(0.01, 0.05, {1: 0.02, 2: 0.03}, predicted=1)
    assert decide(positive, OK, 0.02)[0] == "supported"
    failed = ManipulationCheck(False, ["A trained on 3 generations (< 32)"])
    verdict, why = decide(positive, failed, 0.02)
    assert verdict == "inconclusive" and "manipulation check failed: A trained on 3" in why


def test_an_effect_detected_but_below_the_smallest_effect_of_interest_has_its_own_label() -> None:
    # Exp 1's E1 as measured: −0.0172 [−0.0315, −0.0030], r8201 −0.0254, r8202 −0.0091, smallest effect 0.02.
    e1 = Contrast("E1", "A", "C", "abs_gap", -1, Interval(-0.0172, -0.0315, -0.0030, 448), {8201: -0.0254,
                                                                                          8202: -0.0091}, 0)
    verdict, why = decide(e1, OK, 0.02)
    assert verdict == "detected, below the smallest effect of interest", why
    assert "smaller than the smallest effect of interest (0.02)" in why
    # An interval touching 0 is not a detection; an estimate beyond the smallest effect of interest is supported.
    assert decide(_c(-0.04, 0.0, {1: -0.03}), OK, 0.02)[0] == "inconclusive"
    assert decide(_c(-0.044, -0.004, {1: -0.03}), OK, 0.02)[0] == "supported"


def test_manipulation_check_names_every_failure() -> None:
    base = summarise_arm("base", [_prompt("p", [1, 2, 3, 0]), _prompt("q", [0, 0, 1, 1])], 0.5, 0.1)
    same = summarise_arm("A", [_prompt("p", [1, 2, 3, 0]), _prompt("q", [0, 0, 1, 1])], 0.5, 0.1)
    worse = summarise_arm("C", [_prompt("p", [1], samples=4, keys=["z"]), _prompt("q", [1, 1], keys=["z", "z"])],
                          0.5, 0.1)
    kwargs = {"min_train": 32, "max_kl_ratio": 2.0, "max_valid_drop": 0.10, "max_distinct_drop": 0.15}
    ok = manipulation_check(["A", "A"], {"A": 40}, {"A": 0.1}, {"A": same}, base, **kwargs)
    assert ok.passed and not ok.failures
    bad = manipulation_check(["A", "C"], {"A": 40, "C": 10}, {"A": 0.1, "C": 0.5}, {"A": same, "C": worse}, base,
                             **kwargs)
    text = "; ".join(bad.failures)
    assert not bad.passed
    assert "C trained on 10" in text and "C validity" in text and "C distinct share" in text and "KL" in text


def test_choose_dose_takes_the_fewest_steps_then_the_lowest_rate() -> None:
    base = CalibrationRow(0.0, 0, marker_share=0.1, valid_share=0.9, distinct_share=0.9)
    rows = [
        CalibrationRow(1e-3, 4, 0.60, 0.90, 0.85),  # closes 56 %: passes
        CalibrationRow(5e-4, 4, 0.56, 0.88, 0.90),  # closes 51 %: passes, lower rate
        CalibrationRow(2e-4, 8, 0.70, 0.90, 0.90),  # passes, more steps
        CalibrationRow(1e-3, 2, 0.90, 0.70, 0.90),  # validity collapsed
        CalibrationRow(1e-3, 16, 0.99, 0.92, 0.60),  # diversity collapsed
        CalibrationRow(1e-4, 2, 0.30, 0.90, 0.90),  # closes 22 %
    ]
    chosen, reason = choose_dose(rows, base)
    assert chosen == rows[1] and "lr 0.0005 × 4 steps" in reason and "51%" in reason
    crit = Criterion()
    assert not crit.passes(rows[3], base) and not crit.passes(rows[4], base) and not crit.passes(rows[5], base)
    assert choose_dose(rows[3:], base) == (None, "no dose met the criterion")
