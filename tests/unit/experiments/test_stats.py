"""The report's statistics: t intervals, paired differences, the paired permutation test, McNemar, power."""

from __future__ import annotations

import itertools
import math

import pytest
from scipy import stats as scipy_stats

from genenv.experiments.stats import (
    Interval,
    mcnemar_p,
    mean_ci,
    ols_slope,
    paired_diff_ci,
    sign_flip_p,
    smallest_detectable,
)


def test_mean_ci_is_the_student_t_interval() -> None:
    values = [0.2, 0.5, 0.4, 0.9, 0.35]
    n, mean = 5, sum(values) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = scipy_stats.t.ppf(0.95, n - 1) * sd / math.sqrt(n)  # 90 % two-sided
    got = mean_ci(values, confidence=0.9)
    assert got.estimate == pytest.approx(mean)
    assert (got.low, got.high) == pytest.approx((mean - half, mean + half))
    assert got.n == 5 and not got.degenerate


def test_two_replicates_give_the_honest_wide_interval() -> None:
    # t(0.975, 1) = 12.706: two replicates 0.1 apart give ±0.635 around their mean — not [min, max].
    iv = mean_ci([0.4, 0.5])
    assert (iv.low, iv.high) == pytest.approx((0.45 - 12.7062 * 0.05, 0.45 + 12.7062 * 0.05), abs=1e-4)


def test_degenerate_and_bad_input() -> None:
    assert mean_ci([0.4, 0.4, 0.4]) == Interval(0.4, 0.4, 0.4, 3, degenerate=True)
    assert mean_ci([0.7]) == Interval(0.7, 0.7, 0.7, 1, degenerate=True)
    for bad in ([], [0.1, float("nan")]):
        with pytest.raises(ValueError):
            mean_ci(bad)
    with pytest.raises(ValueError, match="equal length"):
        paired_diff_ci([0.1, 0.2], [0.3])
    with pytest.raises(ValueError):
        mean_ci([0.1, 0.2], confidence=1.0)


def test_paired_difference_removes_the_shared_part() -> None:
    # Large between-pair spread, constant within-pair difference: the paired interval is the difference itself.
    a, b = [1.0, 0.5, 0.75], [0.75, 0.25, 0.5]  # binary fractions: the differences are exactly 0.25
    d = paired_diff_ci(a, b)
    assert d.estimate == 0.25 and d.degenerate  # no spread in the differences
    d2 = paired_diff_ci([0.9, 0.25, 0.55], [0.8, 0.1, 0.45])
    diffs = [0.1, 0.15, 0.1]
    assert d2 == paired_diff_ci(diffs, [0.0, 0.0, 0.0])
    assert d2.estimate == pytest.approx(sum(diffs) / 3)


def test_sign_flip_p_is_exact_for_small_samples() -> None:
    diffs = [0.3, 0.1, 0.2, -0.05]
    observed = abs(sum(diffs) / 4)
    flips = [sum(s * d for s, d in zip(signs, diffs, strict=True)) / 4
             for signs in itertools.product((1, -1), repeat=4)]
    expected = sum(abs(f) >= observed - 1e-12 for f in flips) / len(flips)
    assert sign_flip_p(diffs) == pytest.approx(expected)
    assert sign_flip_p([0.0, 0.0]) == 1.0
    assert paired_diff_ci([0.5, 0.6, 0.7], [0.1, 0.1, 0.1]).p_value == pytest.approx(0.25)  # 2 of 8 flips


def test_one_pair_has_the_exact_p_of_its_two_flips() -> None:
    """A subset such as "pairs below α" can hold a single pair; scipy refuses n = 1, the exact answer is 1."""
    assert sign_flip_p([0.3]) == 1.0
    one = paired_diff_ci([0.7], [0.4])
    assert one.estimate == pytest.approx(0.3) and one.degenerate and one.p_value == 1.0


def test_mcnemar_is_the_binomial_test_on_discordant_pairs() -> None:
    assert mcnemar_p(9, 1) == pytest.approx(scipy_stats.binomtest(9, 10, 0.5).pvalue)
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(3, 3) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        mcnemar_p(-1, 2)


def test_smallest_detectable_matches_the_power_formula() -> None:
    # The probe: SD 0.12 of per-prompt paired differences; 0.02 needs ≈ 283 prompts at 80 % power.
    d = smallest_detectable(0.12, 283)
    assert d == pytest.approx(0.02, abs=0.0005)
    assert smallest_detectable(0.12, 1) is None
    assert smallest_detectable(0.1, 2) is not None and smallest_detectable(0.1, 2) > smallest_detectable(0.1, 20)


def test_ols_slope() -> None:
    assert ols_slope([0, 1, 2], [1.0, 1.5, 2.0]) == pytest.approx(0.5)
    assert ols_slope([3], [1.0]) is None
