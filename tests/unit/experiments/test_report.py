"""Experiment report: bootstrap intervals, the per-epoch/per-member numbers, effects, H1–H4 verdicts, the writer.

Every expected number below is computed by hand from the synthetic series in this file.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from genenv.contracts.experiments import ExperimentSeries, ExperimentStatus, MemberEpoch, MemberSeries
from genenv.contracts.runs import RunMode, RunStatus
from genenv.experiments.report import ExperimentResult, Settings, analyse, render_markdown
from genenv.experiments.stats import Interval, bootstrap_diff_ci, bootstrap_mean_ci, ols_slope
from genenv.experiments.writer import write_report

PACKAGE = Path(__file__).resolve().parents[3] / "shared" / "genenv" / "experiments"

# ------------------------------------------------------------------------------------------------ bootstrap stats


def test_mean_ci_matches_scipy_reference() -> None:
    values = [0.2, 0.5, 0.4, 0.9, 0.35]
    ref = scipy_stats.bootstrap(
        (np.asarray(values),),
        np.mean,
        n_resamples=2000,
        confidence_level=0.9,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(7),
    ).confidence_interval
    got = bootstrap_mean_ci(values, confidence=0.9, n_resamples=2000, seed=7)
    assert got.estimate == pytest.approx(np.mean(values))
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high))
    assert got.n == 5 and not got.degenerate


def test_diff_ci_matches_scipy_reference() -> None:
    a, b = [0.5, 0.6, 0.7], [0.1, 0.3, 0.2, 0.25]

    def diff(x: Any, y: Any, axis: int = -1) -> Any:
        return np.mean(x, axis=axis) - np.mean(y, axis=axis)

    ref = scipy_stats.bootstrap(
        (np.asarray(a), np.asarray(b)),
        diff,
        n_resamples=3000,
        paired=False,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(3),
    ).confidence_interval
    got = bootstrap_diff_ci(a, b, n_resamples=3000, seed=3)
    assert got.estimate == pytest.approx(0.6 - 0.2125)
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high))
    assert (got.n, got.n_baseline) == (3, 4)


def test_constant_values_give_zero_width_interval() -> None:
    assert bootstrap_mean_ci([0.4, 0.4, 0.4]) == Interval(0.4, 0.4, 0.4, 3, degenerate=True)
    d = bootstrap_diff_ci([0.7, 0.7], [0.2, 0.2])
    assert (d.estimate, d.low, d.high, d.degenerate) == (
        pytest.approx(0.5),
        pytest.approx(0.5),
        pytest.approx(0.5),
        True,
    )


def test_two_value_sample_percentile_interval_is_the_range() -> None:
    # Resample means of {0, 1} are 0 (p = 1/4), 0.5 (1/2), 1 (1/4): the 2.5 % and 97.5 % percentiles are 0 and 1.
    iv = bootstrap_mean_ci([0.0, 1.0])
    assert (iv.estimate, iv.low, iv.high) == (0.5, 0.0, 1.0)


def test_single_observation_is_flagged_not_crashed() -> None:
    assert bootstrap_mean_ci([0.7]) == Interval(0.7, 0.7, 0.7, 1, degenerate=True)
    # One side fixed, the other bootstrapped: means of {0.1, 0.3} span [0.1, 0.3], so 0.5 − that is [0.2, 0.4].
    d = bootstrap_diff_ci([0.5], [0.1, 0.3])
    assert (d.estimate, d.low, d.high) == (pytest.approx(0.3), pytest.approx(0.2), pytest.approx(0.4))
    assert not d.degenerate
    assert bootstrap_diff_ci([0.5], [0.2]).degenerate


def test_bootstrap_is_deterministic_and_rejects_bad_input() -> None:
    values = [0.1, 0.4, 0.35, 0.8]
    assert bootstrap_mean_ci(values, seed=11) == bootstrap_mean_ci(values, seed=11)
    with pytest.raises(ValueError):
        bootstrap_mean_ci([])
    with pytest.raises(ValueError):
        bootstrap_mean_ci([0.1, float("nan")])


def test_ols_slope() -> None:
    assert ols_slope([0, 1, 2], [1.0, 1.5, 2.0]) == pytest.approx(0.5)
    assert ols_slope([3], [1.0]) is None


# ---------------------------------------------------------------------------------------------- synthetic series

Row = dict[str, Any]


def _series(spec: dict[RunMode, list[list[Row]]], alpha: float = 0.5, k_min: float = 0.1) -> ExperimentSeries:
    members = [
        MemberSeries(
            run_id=f"{mode.value}-{r}",
            mode=mode,
            replicate=r,
            status=RunStatus.COMPLETED,
            epochs=[MemberEpoch(epoch=i, **row) for i, row in enumerate(rows)],
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


FAST = Settings(n_resamples=2000)


def _base() -> ExperimentSeries:
    return _series({RunMode.GENENV: _genenv(), RunMode.RANDOM_SIMULATOR: _random()})


def _verdict(result: ExperimentResult, h: str) -> bool | None:
    return next(v for v in result.verdicts if v.hypothesis == h).holds


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
    assert (heldout.low, heldout.high) == pytest.approx((0.60, 0.62))
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


def test_effect_equals_hand_difference() -> None:
    result = analyse(_base(), FAST)
    eff = {(e.baseline, e.measure): e for e in result.effects}
    assert set(eff) == {
        ("random_simulator", m) for m in ("mean_in_band_share", "mean_abs_gap", "final_heldout_accuracy")
    }
    share = eff[("random_simulator", "mean_in_band_share")].difference
    assert share is not None
    assert share.estimate == pytest.approx(1.6 / 3 - 0.15)
    assert 0 < share.low <= share.estimate <= share.high
    final = eff[("random_simulator", "final_heldout_accuracy")].difference
    assert final is not None and final.estimate == pytest.approx((0.60 + 0.62 + 0.48) / 3 - 0.49)


def test_h1_h2_h4_hold_on_base_series_and_h3_is_not_measured() -> None:
    result = analyse(_base(), FAST)
    assert _verdict(result, "H1") is True
    assert "entered [0.400, 0.600] at epoch 1" in _reason(result, "H1")
    assert _verdict(result, "H2") is True
    assert _verdict(result, "H3") is None and _reason(result, "H3").startswith("not measured")
    assert _verdict(result, "H4") is True
    slope = result.difficulty_slopes["operand_digits"]
    assert slope.estimate == pytest.approx((0.5 + 0.4 + 0.4) / 3)


def test_h1_flips_when_genenv_never_enters_or_leaves_the_band() -> None:
    never = analyse(_series({RunMode.GENENV: _genenv([[0.1, 0.15, 0.2]] * 3)}), FAST)
    assert _verdict(never, "H1") is False and "never entered" in _reason(never, "H1")
    assert _verdict(never, "H4") is False  # difficulty rises, but p̂ is never in the band
    left = analyse(_series({RunMode.GENENV: _genenv([[0.5, 0.5, 0.8]] * 3)}), FAST)
    assert _verdict(left, "H1") is False and "left at epoch 2" in _reason(left, "H1")


def test_h2_flips_when_random_simulator_is_as_often_in_band() -> None:
    series = _series({RunMode.GENENV: _genenv(), RunMode.RANDOM_SIMULATOR: _random(([0.6, 0.7, 0.8], [0.5, 0.6, 0.7]))})
    result = analyse(series, FAST)
    assert _verdict(result, "H2") is False
    assert "does not lie above 0" in _reason(result, "H2")


def test_h3_and_data_efficiency() -> None:
    series = _series(
        {RunMode.GENENV: _genenv(), RunMode.RANDOM_SIMULATOR: _random(), RunMode.STATIC_AUGMENTATION: _static()}
    )
    result = analyse(series, FAST)
    de = result.data_efficiency
    assert de.target == pytest.approx(0.54)
    rows = {r.mode: r for r in de.rows}
    assert (rows["genenv"].epoch, rows["genenv"].generated_tasks) == (2, pytest.approx(300))
    assert (rows["static_augmentation"].epoch, rows["static_augmentation"].generated_tasks) == (2, pytest.approx(500))
    assert rows["random_simulator"].epoch is None and rows["random_simulator"].generated_tasks is None
    assert _verdict(result, "H3") is True
    assert {e.baseline for e in result.effects} == {"random_simulator", "static_augmentation"}

    better_static = _series(
        {
            RunMode.GENENV: _genenv(),
            RunMode.RANDOM_SIMULATOR: _random(),
            RunMode.STATIC_AUGMENTATION: _static((0.7, 0.7)),
        }
    )
    flipped = analyse(better_static, FAST)
    assert _verdict(flipped, "H3") is False
    assert "order broken" in _reason(flipped, "H3")


def test_missing_modes_and_data_give_none_not_a_crash(tmp_path: Path) -> None:
    empty_rows: list[Row] = [{}, {}]
    series = _series({RunMode.AGENT_ONLY: [empty_rows, empty_rows[:1]]})
    result = analyse(series, FAST)
    assert result.effects == []
    assert result.data_efficiency.target is None
    assert all(v.holds is None and v.reason.startswith("not measured") for v in result.verdicts)
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


def test_one_replicate_per_mode_leaves_h2_unmeasured() -> None:
    series = _series({RunMode.GENENV: _genenv()[:1], RunMode.RANDOM_SIMULATOR: _random()[:1]})
    result = analyse(series, FAST)
    assert _verdict(result, "H2") is None and "≥ 2 replicates" in _reason(result, "H2")


def test_write_report_writes_markdown_json_and_figures(tmp_path: Path) -> None:
    series = _series(
        {RunMode.GENENV: _genenv(), RunMode.RANDOM_SIMULATOR: _random(), RunMode.STATIC_AUGMENTATION: _static()}
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
    assert "0.610 [0.600, 0.620] (n = 2)" in md  # held-out at epoch 2, one replicate missing
    assert "+0.383 [" in md  # genenv − random_simulator mean in-band share
    assert "α = 0.500, k_min = 0.100" in md and "percentile bootstrap" in md and "n = replicates" in md
    assert "](p_hat.png)" in md and "mean \\|p̂ − α\\|" in md  # pipes escaped inside table cells
    for h in ("H1", "H2", "H3", "H4"):
        assert f"| {h} |" in md

    report = json.loads((out / "report.json").read_text())
    assert report["experiment"]["alpha"] == 0.5
    result = report["result"]
    assert result["per_epoch"]["genenv"][1]["metrics"]["p_hat"]["estimate"] == pytest.approx(0.48)
    assert [v["holds"] for v in result["verdicts"]] == [True, True, True, True]
    assert result["settings"]["method"] == "percentile"
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
