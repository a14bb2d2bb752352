"""genenv.experiments.learning: members of several experiments paired by replicate seed, the pre-registered
decisions, the refusals, the manipulation checks and data efficiency (docs/experiments/preregistration-learning.md).
Every expected number is worked out by hand from the members below."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pytest import approx

from genenv.contracts.runs import GrpoBudget, RunStatus, SeedSampling
from genenv.experiments.learning import (
    ARMS,
    FILTER,
    GENENV,
    LEARNING_PROGRESS,
    REGISTERED_SEEDS,
    STATIC,
    EpochPoint,
    HeldOut,
    LearningDesign,
    LearningMember,
    PairingError,
    analyse_learning,
    arm_of,
    attempts_to_reach,
    decide,
    seed_history_share,
)
from genenv.experiments.learning_rendering import learning_json, render_learning
from genenv.experiments.stats import (
    DETECTED_BELOW,
    INCONCLUSIVE,
    REFUTED,
    SUPPORTED,
    Interval,
    classify,
    replicate_ci,
)
from tests.unit.experiments.learning_members import arm_config, finals, member

S = REGISTERED_SEEDS[:3]


def _all_arms(g: list[float], st: list[float], fi: list[float], lp: list[float]) -> list[LearningMember]:
    return [*finals(GENENV, S, g), *finals(STATIC, S, st), *finals(FILTER, S, fi), *finals(LEARNING_PROGRESS, S, lp)]


def test_the_arm_of_a_member_is_read_off_its_config() -> None:
    assert [arm_of(arm_config(a)) for a in ARMS] == list(ARMS)
    plain = arm_config(FILTER).model_copy(update={"agent": arm_config(GENENV).agent})
    assert arm_of(plain) == "random_simulator"
    both = arm_config(LEARNING_PROGRESS).model_copy(
        update={"agent": arm_config(FILTER).agent.model_copy(update={"budget": GrpoBudget.INFORMATIVE})})
    assert both.seed_sampling is SeedSampling.LEARNING_PROGRESS
    with pytest.raises(PairingError, match="neither pre-registered arm"):
        arm_of(both)


def _iv(low: float, high: float, estimate: float | None = None) -> Interval:
    return Interval((low + high) / 2 if estimate is None else estimate, low, high, 5)


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.005, 0.025, DETECTED_BELOW),     # inside (0, 0.03)
    (0.005, 0.03, SUPPORTED),          # above 0 and reaches 0.03
    (0.04, 0.09, SUPPORTED),
    (-0.02, 0.029, REFUTED),           # below 0.03: excludes an advantage of interest
    (-0.08, -0.01, REFUTED),           # below 0: genenv worse
    (-0.01, 0.03, INCONCLUSIVE),       # includes 0 and 0.03
    (0.0, 0.05, INCONCLUSIVE),         # 0 itself is inside
])
def test_the_preregistered_decision_rules(low: float, high: float, expected: str) -> None:
    assert decide(_iv(low, high), 0.03)[0] == expected


def test_decisions_without_a_manipulation_or_a_second_replicate_are_inconclusive() -> None:
    decision, why = decide(_iv(0.04, 0.09), 0.03, manipulated=False)
    assert decision == INCONCLUSIVE and "manipulation check failed" in why
    assert decide(None, 0.03)[0] == INCONCLUSIVE
    assert "genenv was worse" in decide(_iv(-0.08, -0.01), 0.03)[1]


def test_where_the_preregistration_differs_from_stats_classify() -> None:
    # The pre-registration splits "supported" from "detected, below" on the interval (inside (0, 0.03) or not);
    # stats.classify splits them on the estimate and also asks every replicate to agree. Documented, not chosen by
    # a result: this module applies the pre-registration's wording.
    iv = _iv(0.01, 0.04, estimate=0.025)
    assert decide(iv, 0.03)[0] == SUPPORTED
    assert classify(iv, 1.0, 0.03)[0] == DETECTED_BELOW
    assert decide(_iv(0.01, 0.05), 0.03)[0] == SUPPORTED
    assert classify(_iv(0.01, 0.05), 1.0, 0.03, [0.02, -0.001])[0] == INCONCLUSIVE


def test_members_of_several_experiments_pair_by_replicate_seed() -> None:
    result = analyse_learning(_all_arms([0.50, 0.52, 0.55], [0.45, 0.48, 0.49], [0.40, 0.41, 0.47],
                                        [0.44, 0.50, 0.53]))
    assert result.analysed_seeds == list(S) and result.incomplete == [] and result.checks == []
    assert result.planned_attempts_per_epoch == 1280 and result.confidence == approx(1 - 0.05 / 3)
    static, filt, lp = result.contrasts
    assert (static.baseline, filt.baseline, lp.baseline) == (STATIC, FILTER, LEARNING_PROGRESS)
    assert static.differences == approx([0.05, 0.04, 0.06])
    expected = replicate_ci([0.05, 0.04, 0.06], 1 - 0.05 / 3)
    assert static.interval is not None and expected is not None
    assert (static.interval.low, static.interval.high) == approx((expected.low, expected.high))
    assert static.interval.p_value == approx(0.25)  # exact sign flips: 2 of 8 as extreme
    assert static.interval_95 is not None and static.interval_95.high < static.interval.high
    assert lp.differences == approx([0.06, 0.02, 0.02])
    assert {c.decision for c in result.contrasts} <= {SUPPORTED, DETECTED_BELOW, REFUTED, INCONCLUSIVE}
    text = render_learning(result)
    assert "genenv − filter" in text and "seed 70157: 0.500 − 0.450 = +0.050" in text
    assert learning_json(result)["result"]["analysed_seeds"] == list(S)


def test_a_replicate_some_arm_did_not_finish_is_left_out_and_named() -> None:
    members = _all_arms([0.50, 0.52, 0.55], [0.45, 0.48, 0.49], [0.40, 0.41, 0.47], [0.44, 0.50, 0.53])
    members[8] = member(FILTER, S[2], [0.3, 0.31], status=RunStatus.FAILED)  # filter's third replicate failed
    members[1] = member(GENENV, S[1], [0.3, 0.3, 0.3, 0.3, 0.3, None])  # completed, no score after epoch 5
    result = analyse_learning(members)
    assert result.analysed_seeds == [S[0]]
    assert [(i.seed, sorted(i.missing)) for i in result.incomplete] == [(S[1], [GENENV]), (S[2], [FILTER])]
    assert "no held-out score after its last epoch (5)" in result.incomplete[0].missing[GENENV]
    assert "failed after 2 closed epoch(s)" in result.incomplete[1].missing[FILTER]
    assert all(c.interval is None and c.decision == INCONCLUSIVE for c in result.contrasts)


def test_pairing_refuses_seeds_outside_the_registered_list_and_twice_in_one_arm() -> None:
    members = _all_arms([0.5] * 3, [0.5] * 3, [0.5] * 3, [0.5] * 3)
    with pytest.raises(PairingError, match="outside the pre-registered replicate seeds"):
        analyse_learning([*members, member(STATIC, 12345, [0.3] * 6)])
    with pytest.raises(PairingError, match="two members of arm static_augmentation ran with replicate seed 70157"):
        analyse_learning([*members, member(STATIC, S[0], [0.3] * 6, experiment="another")])
    with pytest.raises(PairingError, match="arm\\(s\\) learning_progress have no member"):
        analyse_learning(members[:9])
    only = analyse_learning(members[:6], LearningDesign(arms=(GENENV, STATIC)))  # fewer arms when asked
    assert [c.baseline for c in only.contrasts] == [STATIC] and only.confidence == approx(0.95)


def test_pairing_refuses_other_heldout_items() -> None:
    members = _all_arms([0.5] * 3, [0.5] * 3, [0.5] * 3, [0.5] * 3)
    members[4] = member(STATIC, S[1], [0.3] * 6, heldout=HeldOut("arithmetic", "eval", None, 534))
    with pytest.raises(PairingError, match="held-out measurements differ"):
        analyse_learning(members)
    members[4] = member(STATIC, S[1], [0.3] * 6, heldout=HeldOut("arithmetic", "heldout", None, 70))
    with pytest.raises(PairingError, match="different numbers of items"):
        analyse_learning(members)


def test_pairing_refuses_unequal_agent_attempts_per_epoch() -> None:
    members = _all_arms([0.5] * 3, [0.5] * 3, [0.5] * 3, [0.5] * 3)
    wider = arm_config(FILTER).model_copy(update={"seeds_per_epoch": 40})  # 40 × 8 × 8: twice genenv's attempts
    members[7] = member(FILTER, S[1], [0.3] * 6, config=wider)
    with pytest.raises(PairingError, match=r"unequal agent attempts.*planned agent attempts per epoch differ"):
        analyse_learning(members)
    longer = arm_config(LEARNING_PROGRESS).model_copy(update={"epochs": 7})
    members[7] = member(FILTER, S[1], [0.3] * 6)
    members[9] = member(LEARNING_PROGRESS, S[0], [0.3] * 7, config=longer)
    with pytest.raises(PairingError, match="differ in epochs"):
        analyse_learning(members)


def test_a_genenv_member_whose_simulator_wrote_nothing_makes_every_contrast_inconclusive() -> None:
    members = _all_arms([0.60, 0.62, 0.61], [0.45, 0.48, 0.46], [0.40, 0.41, 0.42], [0.44, 0.43, 0.45])
    assert {c.decision for c in analyse_learning(members).contrasts} == {SUPPORTED}
    members[2] = member(GENENV, S[2], [0.3] * 5 + [0.61], simulator_used=False)
    result = analyse_learning(members)
    assert {c.decision for c in result.contrasts} == {INCONCLUSIVE}
    assert any("no trained simulator wrote tasks" in c for c in result.checks)


def test_realised_attempts_far_from_genenvs_are_named() -> None:
    members = _all_arms([0.5] * 3, [0.5] * 3, [0.5] * 3, [0.5] * 3)
    members[6:9] = [member(FILTER, s, [0.3] * 5 + [0.5], attempts=900) for s in S]  # 900 / 1280 = 0.70
    result = analyse_learning(members)
    summary = next(s for s in result.summaries if s.arm == FILTER)
    assert summary.attempts_ratio == approx(900 / 1280)
    assert result.checks == ["filter: realised agent attempts per epoch 900 are 0.70 × genenv's (outside ±20%)"]


def test_data_efficiency_counts_attempts_to_static_augmentations_mean_final_accuracy() -> None:
    g = [member(GENENV, S[0], [0.30, 0.46, 0.50, 0.5, 0.5, 0.5]),     # reaches 0.46 after epoch 1
         member(GENENV, S[1], [0.30, 0.40, 0.45, 0.5, 0.5, 0.5]),     # after epoch 3
         member(GENENV, S[2], [0.30, 0.40, 0.45, 0.45, 0.45, 0.45])]  # never
    st = finals(STATIC, S, [0.44, 0.46, 0.48])                         # target: mean 0.46
    result = analyse_learning([*g, *st, *finals(FILTER, S, [0.4] * 3), *finals(LEARNING_PROGRESS, S, [0.4] * 3)])
    e = result.efficiency
    assert e.target == approx(0.46)
    genenv = next(r for r in e.rows if r.arm == GENENV)
    assert genenv.per_replicate == {S[0]: 2 * 1280, S[1]: 4 * 1280, S[2]: None}
    assert (genenv.reached, genenv.not_reached) == (2, 1)
    assert genenv.attempts is not None and genenv.attempts.estimate == approx(3 * 1280)
    static = next(r for r in e.rows if r.arm == STATIC)
    assert static.per_replicate == {S[0]: None, S[1]: 6 * 1280, S[2]: 6 * 1280}
    assert next(r for r in e.rows if r.arm == FILTER).reached == 0
    assert attempts_to_reach(g[0], 0.46) == 2560  # an accuracy equal to the target reaches it


def test_seed_history_share_counts_earlier_scored_epochs() -> None:
    batches = [(0, "a", True), (1, "a", True), (2, "a", True),  # a: two earlier p̂ at epoch 2
               (0, "b", True), (2, "b", True),                  # b: one
               (1, "c", False), (0, "c", True), (3, "c", True)]  # c at 3: epoch 0 only (epoch 1 had no p̂)
    assert seed_history_share(batches) == approx(1 / 3)
    assert seed_history_share([(0, "a", True), (1, "a", True)]) is None


def _with_points(m: LearningMember, points: list[EpochPoint]) -> LearningMember:
    return dataclasses.replace(m, epochs=tuple(points))


def test_dynamics_and_levels_are_per_arm_and_epoch_over_the_analysed_replicates() -> None:
    members = _all_arms([0.5, 0.5, 0.5], [0.4, 0.4, 0.4], [0.4, 0.4, 0.4], [0.4, 0.4, 0.4])
    g0, g1 = members[0], members[1]
    last = g0.config.epochs - 1
    members[0] = _with_points(g0, [
        EpochPoint(0, 0.30, 1280, batch_p_hat=0.2, in_band_share=0.1, valid_tasks=160, repeated_tasks=0),
        EpochPoint(last, 0.50, 1200, batch_p_hat=0.4, in_band_share=0.5, valid_tasks=150, repeated_tasks=30,
                   heldout_by_level={"1d-add": 0.9, "2d-3op": 0.1})])
    members[1] = _with_points(g1, [
        EpochPoint(0, 0.32, 1280, batch_p_hat=0.3, in_band_share=0.2, valid_tasks=160, repeated_tasks=0),
        EpochPoint(last, 0.52, 1120, batch_p_hat=0.5, in_band_share=0.6, valid_tasks=140, repeated_tasks=70,
                   heldout_by_level={"1d-add": 0.8})])
    result = analyse_learning(members)
    genenv = {a.epoch: a for a in result.dynamics if a.arm == GENENV}
    assert sorted(genenv) == [0, 1, 2, 3, 4, last]  # the third member's curve closes every epoch
    first, final = genenv[0], genenv[last]
    assert first.heldout_accuracy is not None and first.heldout_accuracy.estimate == approx((0.30 + 0.32 + 0.3) / 3)
    assert final.attempts_so_far == approx((1280 + 1200 + 1280 + 1120 + 6 * 1280) / 3)
    assert final.batch_p_hat is not None and final.batch_p_hat.estimate == approx(0.45)
    assert final.batch_p_hat.n == 2  # the third member stored no p̂: left out, not counted as 0
    assert final.in_band_share is not None and final.in_band_share.estimate == approx(0.55)
    assert final.repeat_share is not None and final.repeat_share.estimate == approx((30 / 150 + 70 / 140) / 2)
    assert first.repeat_share is not None and first.repeat_share.estimate == 0.0
    assert {a.arm for a in result.dynamics} == set(ARMS)
    lv = {(x.arm, x.level): x.final_accuracy for x in result.levels}
    assert set(lv) == {(GENENV, "1d-add"), (GENENV, "2d-3op")}
    assert lv[(GENENV, "1d-add")] is not None and lv[(GENENV, "1d-add")].estimate == approx(0.85)  # type: ignore[union-attr]
    assert lv[(GENENV, "2d-3op")] is not None and lv[(GENENV, "2d-3op")].n == 1  # type: ignore[union-attr]
    text = render_learning(result)
    assert "## Secondary: per epoch" in text and "| genenv | 5 | 0.507 [" in text
    assert "| 1d-add | 0.850 [" in text and "## Secondary: final held-out accuracy per level" in text
    data = learning_json(result)["result"]
    assert data["dynamics"][0]["arm"] == GENENV and data["levels"][0]["level"] == "1d-add"


def test_the_figures_draw_the_contrasts_and_the_dynamics(tmp_path: Path) -> None:
    from genenv.experiments.learning_figures import write_learning_figures

    result = analyse_learning(_all_arms([0.50, 0.52, 0.55], [0.45, 0.48, 0.49], [0.4, 0.41, 0.42], [0.44, 0.5, 0.53]))
    written = write_learning_figures(result, tmp_path / "fig", alpha=0.5, k_min=0.25)
    assert [p.name for p in written] == ["learning-contrasts.png", "learning-dynamics.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000 for p in written)
    empty = dataclasses.replace(result, contrasts=[], dynamics=[])
    assert write_learning_figures(empty, tmp_path / "none") == []  # nothing to draw: no empty figure
