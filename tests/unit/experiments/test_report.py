"""Experiment report: the per-epoch/per-member numbers, paired effects, doses, H1–H4 verdicts, the writer.

Every expected number below is computed by hand from the synthetic series in this file.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as scipy_stats

from genenv.contracts.experiments import (
    ExperimentSeries,
    ExperimentStatus,
    MemberEpoch,
    MemberSeries,
    SeedBatch,
    TrainJobSummary,
)
from genenv.contracts.runs import RunStatus
from genenv.experiments.analysis import ExperimentResult, Settings, analyse
from genenv.experiments.paired import dose_line
from genenv.experiments.rendering import render_markdown
from genenv.experiments.stats import Interval
from genenv.experiments.writer import write_report

PACKAGE = Path(__file__).resolve().parents[3] / "shared" / "genenv" / "experiments"

# ---------------------------------------------------------------------------------------------- synthetic series

Row = dict[str, Any]


SEED_P = [0.05, 0.1, 0.2, 0.3, 0.45, 0.55, 0.7, 0.8, 0.9, 0.95]
"""random_simulator's p̂ per seed (the same in every replicate and epoch, for hand computation)."""


def _batches(mode: str, pull: float) -> list[SeedBatch]:
    """Seed batches of 3 epochs × 10 seeds. genenv's p̂ moves ``pull`` of the way to α = 0.5 from epoch 1 on
    (negative: away from it)
    (epoch 0: the same as random_simulator's, as in a real run)."""
    out = []
    for epoch in range(3):
        for i, p in enumerate(SEED_P):
            moved = p + pull * (0.5 - p) if mode == "genenv" and epoch >= 1 else p
            out.append(SeedBatch(epoch=epoch, seed_id=f"s{i}", k=round(moved * 40), n=40, p_hat=moved,
                                 in_band=abs(moved - 0.5) <= 0.1 + 1e-9, valid_tasks=4,
                                 difficulty={"operand_digits": 3.0 - 2 * moved}))
    return out


def _jobs(run_id: str, dosed: bool) -> list[TrainJobSummary]:
    if not dosed:
        return []
    return [TrainJobSummary(epoch=e, kind="train_simulator", status="done", adapter_version=e + 1,
                            pool_size=8 * (e + 1), steps=2, examples_seen=32, kl_to_base=0.01 * (e + 1),
                            tasks_written=40 if e < 2 else 0)
            for e in range(3)]


def _series(spec: dict[str, list[list[Row]]], alpha: float = 0.5, k_min: float = 0.1, *,
            pull: float | list[float] = 0.5, dosed: bool = True, agent_trains: bool = True) -> ExperimentSeries:
    pulls = [*pull, *[pull[-1]] * 5] if isinstance(pull, list) else [pull] * 5  # per replicate
    members = [
        MemberSeries(
            run_id=f"{mode}-{r}",
            mode=mode,
            replicate=r,
            status=RunStatus.COMPLETED,
            epochs=[MemberEpoch(epoch=i, **row) for i, row in enumerate(rows)],
            seed_batches=_batches(mode, pulls[r]) if mode in ("genenv", "random_simulator") else [],
            train_jobs=_jobs(f"{mode}-{r}", dosed and mode == "genenv"),
        )
        for mode, replicates in spec.items()
        for r, rows in enumerate(replicates)
    ]
    return ExperimentSeries(
        experiment_id="exp-1",
        name="synthetic",
        status=ExperimentStatus.COMPLETED,
        domain="arithmetic",
        alpha=alpha,
        k_min=k_min,
        epochs=3,
        agent_trains=agent_trains,
        heldout_benchmark="arithmetic-heldout",
        difficulty_measures={"operand_digits": "mean digits per operand"},
        members=members,
    )


def _rows(p: list[float], share: list[float], heldout: list[float | None], **extra: list[Any]) -> list[Row]:
    out: list[Row] = []
    for i in range(len(p)):
        row: Row = {"p_hat": p[i], "in_band_share": share[i], "heldout_accuracy": heldout[i]}
        row["generated_tasks_so_far"] = extra.get("tasks", [100, 200, 300])[i]
        if "tokens" in extra:
            row["mean_response_tokens"] = extra["tokens"][i]
        if "digits" in extra:
            row["difficulty"] = {"operand_digits": extra["digits"][i]}
        if "cats" in extra:
            row["heldout_by_category"] = extra["cats"][i]
        out.append(row)
    return out


def _genenv(p: list[list[float]] | None = None) -> list[list[Row]]:
    p = p or [[0.30, 0.45, 0.50], [0.34, 0.47, 0.55], [0.32, 0.52, 0.48]]
    return [
        _rows(
            p[0],
            [0.2, 0.6, 0.8],
            [0.40, 0.50, 0.60],
            tokens=[50, 60, 70],
            digits=[1.0, 1.5, 2.0],
            cats=[{"1d-add": 0.9}, {"1d-add": 0.95}, {"1d-add": 1.0}],
        ),
        _rows(p[1], [0.1, 0.7, 0.9], [0.42, 0.52, 0.62], tokens=[50, 60, 70], digits=[1.0, 1.4, 1.8]),
        _rows(p[2], [0.3, 0.5, 0.7], [0.38, 0.48, None], tokens=[50, 60, 70], digits=[1.2, 1.6, 2.0]),
    ]


def _random(share: tuple[list[float], list[float]] = ([0.1, 0.2, 0.3], [0.0, 0.1, 0.2])) -> list[list[Row]]:
    return [
        _rows([0.2, 0.25, 0.3], share[0], [0.40, 0.45, 0.50]),
        _rows([0.2, 0.22, 0.24], share[1], [0.40, 0.44, 0.48]),
    ]


def _static(final: tuple[float, float] = (0.55, 0.53)) -> list[list[Row]]:
    return [
        _rows([0.6, 0.7, 0.8], [0.3, 0.3, 0.3], [0.45, 0.50, final[0]], tasks=[500, 500, 500]),
        _rows([0.6, 0.7, 0.8], [0.3, 0.3, 0.3], [0.45, 0.50, final[1]], tasks=[500, 500, 500]),
    ]


FAST = Settings()


def _base() -> ExperimentSeries:
    return _series({"genenv": _genenv(), "random_simulator": _random()})


def _verdict(result: ExperimentResult, h: str) -> bool | None:
    return next(v for v in result.verdicts if v.hypothesis == h).holds


def _status(result: ExperimentResult, h: str) -> str:
    return next(v for v in result.verdicts if v.hypothesis == h).status


def _reason(result: ExperimentResult, h: str) -> str:
    return next(v for v in result.verdicts if v.hypothesis == h).reason


# ----------------------------------------------------------------------------------------------------- the report


def test_per_epoch_means_match_hand_computation() -> None:
    result = analyse(_base(), FAST)
    assert result.modes == ["genenv", "random_simulator"]
    assert result.replicates == {"genenv": 3, "random_simulator": 2}
    g = result.per_epoch["genenv"]
    assert [st.epoch for st in g] == [0, 1, 2]
    p = [st.metrics["p_hat"] for st in g]
    assert [iv.estimate for iv in p if iv] == pytest.approx([0.32, 0.48, 0.51])
    heldout = g[2].metrics["heldout_accuracy"]
    assert heldout is not None and heldout.estimate == pytest.approx(0.61) and heldout.n == 2  # replicate 2 missing
    half = scipy_stats.t.ppf(0.975, 1) * 0.01  # sd of {0.60, 0.62} is 0.01·√2, over √2
    assert (heldout.low, heldout.high) == pytest.approx((0.61 - half, 0.61 + half))
    digits = g[1].difficulty["operand_digits"]
    assert digits is not None and digits.estimate == pytest.approx(1.5)
    tokens = g[0].metrics["mean_response_tokens"]
    assert tokens == Interval(50.0, 50.0, 50.0, 3, degenerate=True)
    assert g[2].heldout_by_category["1d-add"] == Interval(1.0, 1.0, 1.0, 1, degenerate=True)
    r = result.per_epoch["random_simulator"]
    assert r[1].metrics["mean_response_tokens"] is None  # no replicate has it: None, not 0
    assert r[1].metrics["in_band_share"] is not None and r[1].metrics["in_band_share"].estimate == pytest.approx(0.15)


def test_member_summaries() -> None:
    result = analyse(_base(), FAST)
    g0, g1, g2 = (m for m in result.members if m.mode == "genenv")
    assert g0.mean_in_band_share == pytest.approx(1.6 / 3)
    assert g0.mean_abs_gap == pytest.approx((0.20 + 0.05 + 0.0) / 3)
    assert (g0.final_heldout_accuracy, g0.final_heldout_epoch) == (0.60, 2)
    assert (g2.final_heldout_accuracy, g2.final_heldout_epoch) == (0.48, 1)  # last epoch with a value
    assert (g0.first_in_band_epoch, g0.stayed_in_band) == (1, True)
    assert (g1.first_in_band_epoch, g1.stayed_in_band) == (1, True)  # 0.55 sits inside [0.4, 0.6]
    r0 = next(m for m in result.members if m.mode == "random_simulator")
    assert (r0.first_in_band_epoch, r0.stayed_in_band) == (None, False)


def test_effects_are_paired_by_replicate() -> None:
    result = analyse(_base(), FAST)
    eff = {(e.baseline, e.measure): e for e in result.effects}
    assert set(eff) == {
        ("random_simulator", m) for m in ("mean_in_band_share", "mean_abs_gap", "final_heldout_accuracy")
    }
    # genenv has 3 replicates, random_simulator 2: only replicates 0 and 1 have a partner.
    share = eff[("random_simulator", "mean_in_band_share")].difference
    assert share is not None and share.n == 2
    diffs = [1.6 / 3 - 0.2, 1.7 / 3 - 0.1]
    assert share.estimate == pytest.approx(sum(diffs) / 2)
    half = scipy_stats.t.ppf(0.975, 1) * abs(diffs[0] - diffs[1]) / 2
    assert (share.low, share.high) == pytest.approx((share.estimate - half, share.estimate + half))
    final = eff[("random_simulator", "final_heldout_accuracy")]
    assert final.difference is not None and final.difference.estimate == pytest.approx((0.10 + 0.14) / 2)
    assert final.detectable is not None and final.detectable > final.difference.estimate  # two replicates: weak


def test_paired_seed_batches_support_h1_h2_h4_when_genenv_pulls_toward_alpha() -> None:
    result = analyse(_base(), FAST)
    (c,) = result.paired
    assert (c.baseline, c.epochs, c.pairs) == ("random_simulator", "≥ 1", 2 * 2 * 10)  # 2 paired replicates
    # Seeds 0.45 and 0.55 are in band under both; pulled half-way, 0.3 → 0.4 and 0.7 → 0.6 join them.
    assert (c.in_band_genenv, c.in_band_baseline) == (pytest.approx(0.4), pytest.approx(0.2))
    assert (c.genenv_only_in_band, c.baseline_only_in_band) == (8, 0)
    gap = sum(abs(p + 0.5 * (0.5 - p) - 0.5) - abs(p - 0.5) for p in SEED_P) / 10
    assert c.abs_gap_diff is not None and c.abs_gap_diff.estimate == pytest.approx(gap)
    assert c.below_alpha is not None and c.below_alpha.estimate > 0
    assert c.above_alpha is not None and c.above_alpha.estimate < 0
    assert [r.replicate for r in c.per_replicate] == [0, 1]
    (check,) = result.aa_checks  # epoch 0: the same process, no difference at all
    assert check.epochs == "0" and check.abs_gap_diff is not None and check.abs_gap_diff.estimate == 0.0
    for h in ("H1", "H2", "H4"):
        assert _status(result, h) == "supported" and _verdict(result, h) is True, _reason(result, h)
    assert "per replicate r0" in _reason(result, "H1")
    assert "McNemar" in next(v.statement for v in result.verdicts if v.hypothesis == "H2")


def test_pulling_away_from_alpha_refutes_and_no_difference_is_inconclusive() -> None:
    away = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, pull=-0.5), FAST)
    assert _status(away, "H1") == "refuted at this scale" and _verdict(away, "H1") is False
    assert _status(away, "H4") == "refuted at this scale" and "0.02 in the predicted direction" in _reason(away, "H4")
    same = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, pull=0.0), FAST)
    assert _status(same, "H1") == "refuted at this scale"  # exactly no difference excludes an effect of 0.02
    split = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, pull=[0.5, -0.4]),
                    FAST)  # the replicates disagree: neither supported nor refuted
    assert _status(split, "H1") == "inconclusive", _reason(split, "H1")
    weak = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, pull=[0.5, 0.0]),
                   FAST)  # pooled interval may lie below 0, but replicate 1 shows nothing
    assert _status(weak, "H1") != "supported"


def _three(pull: list[float]) -> ExperimentSeries:
    """genenv and random_simulator with three replicates each, genenv pulled ``pull[r]`` of the way to α."""
    extra = _rows([0.2, 0.21, 0.22], [0.1, 0.1, 0.1], [0.40, 0.41, 0.42])
    return _series({"genenv": _genenv(), "random_simulator": [*_random(), extra]}, pull=pull)


def test_the_primary_interval_is_over_training_runs_not_seed_batches() -> None:
    # Two replicates pulled 0.5 and 0.05 of the way to α: every seed-batch interval lies far below 0 and both
    # replicates agree in sign, but two training runs this far apart do not carry the claim.
    result = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, pull=[0.5, 0.05]),
                     FAST)
    (c,) = result.paired
    assert c.abs_gap_diff is not None and c.abs_gap_diff.high < 0  # the secondary, seed-batch interval
    primary = c.replicate_level["abs_gap_diff"]
    assert primary is not None and primary.n == 2 and primary.low < 0 < primary.high
    assert primary.estimate == pytest.approx(sum(r.abs_gap_diff for r in c.per_replicate) / 2)
    assert _status(result, "H1") == "inconclusive", _reason(result, "H1")
    assert "over 2 replicates" in _reason(result, "H1") and "seed batches (secondary)" in _reason(result, "H1")


def test_a_small_but_consistent_effect_is_detected_below_the_smallest_effect_of_interest() -> None:
    # Pulled 4–5 % of the way to α: |p̂ − α| shrinks by ≈ 0.011–0.014 in every replicate; the interval over the
    # three runs excludes 0, the estimate is below H1's smallest effect of interest (0.02).
    result = analyse(_three([0.04, 0.05, 0.045]), FAST)
    primary = result.paired[0].replicate_level["abs_gap_diff"]
    assert primary is not None and primary.high < 0 and -0.02 < primary.estimate
    assert _status(result, "H1") == "detected, below the smallest effect of interest", _reason(result, "H1")
    assert _verdict(result, "H1") is None
    assert _status(analyse(_three([0.5, 0.45, 0.55]), FAST), "H1") == "supported"


def test_one_replicate_cannot_carry_a_claim() -> None:
    one = _series({"genenv": _genenv()[:1], "random_simulator": _random()[:1]})
    result = analyse(one, FAST)
    assert _status(result, "H2") == "inconclusive" and "one training run" in _reason(result, "H2")


def test_without_a_dose_the_comparison_is_inconclusive_whatever_it_shows() -> None:
    result = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, dosed=False), FAST)
    for h in ("H1", "H2", "H4"):
        assert _status(result, h) == "inconclusive" and "no trained simulator wrote tasks" in _reason(result, h)
    assert "genenv was the random simulator here" in dose_line(result.doses[0])


def test_dose_counts_only_updates_whose_adapters_wrote_tasks() -> None:
    result = analyse(_base(), FAST)
    d = result.doses[0]
    # Versions 1 and 2 wrote tasks (epochs 1 and 2); version 3, trained after the last epoch, never did.
    assert (d.updates, d.used_updates, d.used_steps, d.used_examples) == (3, 2, 4, 64)
    assert d.pool_sizes == [8, 16] and d.kl_to_base == pytest.approx(0.02)
    assert (d.trained_tasks, d.total_tasks) == (80, 300)
    line = dose_line(d)
    assert "4 RWR step(s) on 64 examples in 2 update(s)" in line and "80 of 300 tasks" in line
    assert "1 update(s) never used" in line


def test_h3_is_descriptive_with_a_detectable_effect_and_not_measured_for_a_frozen_agent() -> None:
    series = _series(
        {"genenv": _genenv(), "random_simulator": _random(), "static_augmentation": _static()}
    )
    result = analyse(series, FAST)
    de = result.data_efficiency
    assert de.target == pytest.approx(0.54)
    rows = {r.mode: r for r in de.rows}
    assert (rows["genenv"].epoch, rows["genenv"].generated_tasks) == (2, pytest.approx(300))
    assert (rows["static_augmentation"].epoch, rows["static_augmentation"].generated_tasks) == (2, pytest.approx(500))
    assert rows["random_simulator"].epoch is None and rows["random_simulator"].generated_tasks is None
    assert _status(result, "H3") == "descriptive" and _verdict(result, "H3") is None
    assert "genenv − static_augmentation" in _reason(result, "H3") and "detectable ≈" in _reason(result, "H3")
    assert {e.baseline for e in result.effects} == {"random_simulator", "static_augmentation"}
    frozen = analyse(_series({"genenv": _genenv(), "random_simulator": _random()}, agent_trains=False),
                     FAST)
    assert _status(frozen, "H3") == "not measured" and "frozen" in _reason(frozen, "H3")


def test_missing_modes_and_data_give_none_not_a_crash(tmp_path: Path) -> None:
    empty_rows: list[Row] = [{}, {}]
    series = _series({"agent_only": [empty_rows, empty_rows[:1]]})
    result = analyse(series, FAST)
    assert result.effects == []
    assert result.data_efficiency.target is None
    assert all(v.holds is None and v.status == "not measured" for v in result.verdicts)
    member = result.members[0]
    assert (member.mean_in_band_share, member.final_heldout_accuracy, member.stayed_in_band) == (None, None, None)
    md = write_report(series, tmp_path, FAST)
    assert md.exists()
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["figures"] == []  # nothing to draw: every figure skipped
    assert not list(tmp_path.glob("*.png"))

    nothing = _series({})
    assert analyse(nothing, FAST).modes == []
    assert "# Experiment report" in render_markdown(nothing, analyse(nothing, FAST), [])


def test_write_report_writes_markdown_json_and_figures(tmp_path: Path) -> None:
    series = _series(
        {"genenv": _genenv(), "random_simulator": _random(), "static_augmentation": _static()}
    )
    md_path = write_report(series, tmp_path / "out", FAST)
    out = tmp_path / "out"
    assert md_path == out / "report.md"
    names = {
        "p_hat.png",
        "in_band_share.png",
        "heldout_accuracy.png",
        "data_efficiency.png",
        "difficulty.png",
        "response_length.png",
    }
    assert {p.name for p in out.glob("*.png")} == names
    for name in names:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    md = md_path.read_text()
    assert "| 0 | 0.320 [" in md and "| 1 | 0.480 [" in md and "| 2 | 0.510 [" in md  # genenv mean p̂ per epoch
    assert "0.610 [0.483, 0.737] (n = 2)" in md  # held-out at epoch 2, one replicate missing
    assert "+0.400 [" in md  # genenv − random_simulator mean in-band share, paired by replicate
    assert "α = 0.500, k_min = 0.100" in md and "Student-t" in md and "n = replicates" in md
    assert "## Paired seed batches" in md and "A/A check" in md and "## Dose" in md
    assert "](p_hat.png)" in md and "mean \\|p̂ − α\\|" in md  # pipes escaped inside table cells
    for h in ("H1", "H2", "H3", "H4"):
        assert f"| {h} |" in md

    report = json.loads((out / "report.json").read_text())
    assert report["experiment"]["alpha"] == 0.5
    result = report["result"]
    assert result["per_epoch"]["genenv"][1]["metrics"]["p_hat"]["estimate"] == pytest.approx(0.48)
    assert [v["status"] for v in result["verdicts"]] == ["supported", "supported", "descriptive", "supported"]
    assert result["settings"]["method"] == "t"
    assert result["paired"][0]["pairs"] == 40 and result["doses"][0]["used_updates"] == 2
    member = report["members"][0]
    assert member["seed_batches"][0] == {"epoch": 0, "seed_id": "s0", "group": None, "k": 2, "n": 40, "p_hat": 0.05,
                                         "in_band": False, "valid_tasks": 4, "difficulty": {"operand_digits": 2.9},
                                         "repeated_tasks": 0, "fresh_k": 0, "fresh_n": 0}
    assert member["train_jobs"][0]["tasks_written"] == 40
    assert set(report["figures"]) == names


def test_package_imports_only_pure_dependencies() -> None:
    forbidden = ("genenv.db", "genenv.clients", "sqlalchemy", "genenv_", "matplotlib.pyplot")
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(forbidden), f"{path.name} imports {name}"


def _two_sided(shift: list[float], *, from_repeats: bool = False) -> ExperimentSeries:
    """genenv vs random_simulator, 3 replicates × 3 epochs × 8 seeds: 4 'easy' seeds (p̂ 0.7, pre-registered above
    α = 0.5) and 4 'hard' (p̂ 0.2, below). From epoch 1 genenv's p̂ moves ``shift[r]`` toward α on both sides. With
    ``from_repeats`` the move comes only from tasks repeating an earlier epoch: its non-repeated tasks score as
    random_simulator's."""
    members = []
    for mode in ("genenv", "random_simulator"):
        for r, d in enumerate(shift):
            batches = []
            for epoch in range(3):
                for i in range(8):
                    group, base = ("easy", 0.7) if i < 4 else ("hard", 0.2)
                    moved = mode == "genenv" and epoch >= 1
                    p = base + (d if group == "hard" else -d) if moved else base
                    k = round(p * 32)
                    fresh_k, fresh_n, repeated = (round(base * 16), 16, 2) if moved and from_repeats else (k, 32, 0)
                    batches.append(SeedBatch(epoch=epoch, seed_id=f"s{i}", group=group, k=k, n=32, p_hat=k / 32,
                                             in_band=abs(k / 32 - 0.5) <= 0.25, valid_tasks=4, repeated_tasks=repeated,
                                             fresh_k=fresh_k, fresh_n=fresh_n))
            members.append(MemberSeries(
                run_id=f"{mode}-{r}", mode=mode, replicate=r, status=RunStatus.COMPLETED,
                epochs=[MemberEpoch(epoch=e, p_hat=0.45, in_band_share=0.5, valid_tasks=32,
                                    repeated_tasks=(8 if from_repeats and mode == "genenv" and e else 0))
                        for e in range(3)],
                seed_batches=batches, train_jobs=_jobs(f"{mode}-{r}", mode == "genenv")))
    return ExperimentSeries(experiment_id="two", name="two-sided", status=ExperimentStatus.COMPLETED,
                            domain="arithmetic", alpha=0.5, k_min=0.25, epochs=3, agent_trains=False,
                            members=members, level_sides={"easy": "above", "hard": "below"})


def test_two_sided_endpoints_use_the_pre_registered_sides_on_non_repeated_tasks() -> None:
    result = analyse(_two_sided([0.10, 0.125, 0.15]), FAST)
    assert _status(result, "D-above") == "supported" and _status(result, "D-below") == "supported", (
        _reason(result, "D-above"), _reason(result, "D-below"))
    above = next(s for s in result.sides if s.baseline == "random_simulator" and s.side == "above"
                 and s.tasks == "non-repeated")
    assert above.pairs == 3 * 2 * 4 and above.replicate_level is not None and above.replicate_level.n == 3
    expected = sum(round((0.7 - d) * 32) - round(0.7 * 32) for d in (0.10, 0.125, 0.15)) / 32 / 3
    assert above.replicate_level.estimate == pytest.approx(expected) and expected < 0
    # A move of 0.0625 on one replicate only, 0 on the others: below the smallest effect of interest, not detected.
    weak = analyse(_two_sided([0.0, 0.0, 0.0625]), FAST)
    assert _status(weak, "D-below") == "inconclusive"


def test_an_effect_made_of_repeats_shows_on_all_tasks_but_not_on_non_repeated_ones() -> None:
    result = analyse(_two_sided([0.10, 0.125, 0.15], from_repeats=True), FAST)
    every = next(s for s in result.sides if s.side == "below" and s.tasks == "all")
    assert every.replicate_level is not None and every.replicate_level.low > 0
    assert _status(result, "D-below") == "refuted at this scale", _reason(result, "D-below")
    (fresh,) = result.paired_fresh
    assert fresh.pairs == 3 * 2 * 8 and fresh.abs_gap_diff is not None and fresh.abs_gap_diff.estimate == 0.0
    shares = result.mode_measures["genenv"]["repeat_share"]
    assert shares is not None and shares.estimate == pytest.approx(16 / 64)
    assert result.mode_measures["random_simulator"]["repeat_share"].estimate == 0.0  # type: ignore[union-attr]
    per_1000 = result.mode_measures["random_simulator"]["in_band_per_1000_attempts"]
    # random_simulator: 0.7 and 0.2 are both inside [0.25, 0.75]? 0.7 is, 0.2 is not: 4 of 8 batches × 4 tasks per
    # 8 × 32 attempts.
    assert per_1000 is not None and per_1000.estimate == pytest.approx(1000 * 16 / 256)
