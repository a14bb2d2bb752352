"""The uncertainty an experiment report states: t intervals of means and of paired differences, and paired tests.

Why not the percentile bootstrap the report used before: with the 2–5 replicates an experiment has, it is far too
narrow (at n = 3 a single mode's interval is exactly [min, max], and on null data a difference interval excluded 0
in ≈ 17 % of experiments at n = 2 and ≈ 9 % at n = 3 against a nominal 5 %). A t interval has nominal coverage for
normal data at every n ≥ 2, and wide intervals at n = 2 are the truth about two replicates. Replicate r of every
mode draws the same seeds, so differences are paired (by replicate, or by (replicate, epoch, seed) for seed
batches), which removes the seed-to-seed spread from the comparison. tests/unit/experiments/test_stats_coverage.py
checks the coverage of every interval here on simulated null data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from scipy import stats as scipy_stats

METHOD: Final = "t"
DEFAULT_CONFIDENCE: Final = 0.95
PERMUTATIONS: Final = 9999
"""Sign flips drawn by the paired permutation test when 2^n exceeds it (below, every flip is enumerated)."""
DEFAULT_SEED: Final = 0

Decision = Literal[
    "supported", "detected, below the smallest effect of interest", "refuted at this scale", "inconclusive"
]
SUPPORTED: Final = "supported"
DETECTED_BELOW: Final = "detected, below the smallest effect of interest"
REFUTED: Final = "refuted at this scale"
INCONCLUSIVE: Final = "inconclusive"


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval.

    ``estimate`` is the sample mean (of the paired differences, for a difference); ``n`` the number of
    observations (pairs, for a paired difference); ``n_baseline`` the baseline's count for an unpaired one.
    ``degenerate`` is True when the interval is zero-width by construction — a single observation, or no spread
    at all — so it states no uncertainty, not certainty. ``p_value`` is the two-sided test of a zero mean where
    one was made.
    """

    estimate: float
    low: float
    high: float
    n: int
    n_baseline: int | None = None
    degenerate: bool = False
    p_value: float | None = None


def _as_array(values: Sequence[float], name: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain finite numbers only")
    return arr


def _check(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")


def mean_ci(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Student-t interval of the mean (df = n − 1).

    n = 1 or all values equal → (mean, mean) with ``degenerate=True``: no spread was observed, so the data state
    no uncertainty (not a certainty). Raises ValueError for an empty or non-finite sample.
    """
    _check(confidence)
    arr = _as_array(values, "values")
    if float(np.ptp(arr)) == 0.0:  # one value, or no spread: the value itself (np.mean could be off by an ulp)
        value = float(arr[0])
        return Interval(value, value, value, int(arr.size), degenerate=True)
    n = int(arr.size)
    mean = float(np.mean(arr))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * float(np.std(arr, ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def paired_diff_ci(
    a: Sequence[float], b: Sequence[float], confidence: float = DEFAULT_CONFIDENCE, seed: int = DEFAULT_SEED
) -> Interval:
    """mean(a − b) over pairs (a[i], b[i]) with its t interval and the paired permutation test's p-value.

    The p-value flips the sign of each difference (the pairs are exchangeable under the null of no difference):
    exact over all 2^n flips when that is at most PERMUTATIONS, else PERMUTATIONS random flips from ``seed``.
    """
    xa, xb = _as_array(a, "a"), _as_array(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"paired samples must have equal length, got {xa.size} and {xb.size}")
    diffs = xa - xb
    iv = mean_ci(diffs.tolist(), confidence)
    return Interval(iv.estimate, iv.low, iv.high, iv.n, None, iv.degenerate, sign_flip_p(diffs.tolist(), seed))


def sign_flip_p(diffs: Sequence[float], seed: int = DEFAULT_SEED) -> float:
    """Two-sided p-value of the paired (sign-flip) permutation test of mean(diffs) = 0 (scipy)."""
    arr = _as_array(diffs, "diffs")
    # One difference: its two sign flips have the same |mean|, so the exact p is 1 (scipy refuses n = 1; a subset
    # such as "pairs below α" can hold one pair, which crashed Exp 2's report).
    if not np.any(arr) or arr.size < 2:
        return 1.0
    result = scipy_stats.permutation_test(
        (arr,), np.mean, permutation_type="samples", vectorized=True, n_resamples=PERMUTATIONS,
        alternative="two-sided", rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def mcnemar_p(a_only: int, b_only: int) -> float:
    """Exact McNemar test for paired binary outcomes: of the discordant pairs, how surprising is it that
    ``a_only`` had the outcome only under A and ``b_only`` only under B if each side were equally likely."""
    if a_only < 0 or b_only < 0:
        raise ValueError("discordant counts must be ≥ 0")
    if a_only + b_only == 0:
        return 1.0
    return float(scipy_stats.binomtest(a_only, a_only + b_only, 0.5).pvalue)


def smallest_detectable(sd: float, n: int, confidence: float = DEFAULT_CONFIDENCE, power: float = 0.8) -> float | None:
    """The smallest true mean difference a two-sided paired t test of n pairs with this SD detects with ``power``
    (normal approximation with the t critical value); None for n < 2."""
    if n < 2 or sd < 0:
        return None
    t_crit = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1))
    return (t_crit + float(scipy_stats.norm.ppf(power))) * sd / math.sqrt(n)


def ols_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of ys on xs; None with fewer than two distinct xs (no slope is defined)."""
    if len(xs) != len(ys):
        raise ValueError("xs and ys must have the same length")
    if len(set(xs)) < 2:
        return None
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    dx = x - x.mean()
    slope = float(np.sum(dx * (y - y.mean())) / np.sum(dx * dx))
    return slope if math.isfinite(slope) else None


def replicate_ci(
    per_replicate: Sequence[float], confidence: float = DEFAULT_CONFIDENCE, seed: int = DEFAULT_SEED
) -> Interval | None:
    """The interval at the unit that was randomised: a t interval over per-replicate paired differences.

    Each replicate is one training run (one trained simulator), and replicate r of both modes shares its seeds, so
    each replicate's own estimate (its mean paired difference over seed batches) is one paired observation; the
    spread between them carries the training randomness that seed-batch intervals leave out. None with fewer than
    two replicates: one training run cannot carry a claim about training runs. Its p is the sign-flip test's.
    """
    if len(per_replicate) < 2:
        return None
    iv = mean_ci(per_replicate, confidence)
    return Interval(iv.estimate, iv.low, iv.high, iv.n, None, iv.degenerate, sign_flip_p(per_replicate, seed))


def classify(
    iv: Interval, predicted: float, smallest_effect: float, per_replicate: Sequence[float] = ()
) -> tuple[Decision, str]:
    """The pre-registered decision on an interval of an effect predicted to have the sign of ``predicted``.

    supported: the interval lies on the predicted side of 0, every replicate's estimate has the predicted sign
    and the estimate is at least ``smallest_effect``; detected, below the smallest effect of interest: the same,
    but the estimate is smaller than ``smallest_effect`` (an effect exists, smaller than what matters); refuted at
    this scale: the interval excludes an effect of ``smallest_effect`` in the predicted direction; inconclusive
    otherwise. Returns the decision and why (for the report's reason text).
    """
    s = 1.0 if predicted > 0 else -1.0
    lo, hi = (iv.low, iv.high) if s > 0 else (-iv.high, -iv.low)  # in the predicted direction: positive = as predicted
    if lo > 0 and all(v * s > 0 for v in per_replicate):
        if iv.estimate * s < smallest_effect:
            return DETECTED_BELOW, (f"the interval excludes 0 but the estimate is smaller than the smallest effect "
                                    f"of interest ({smallest_effect})")
        return SUPPORTED, "the interval excludes 0 on the predicted side and every replicate agrees"
    if hi < smallest_effect:
        return REFUTED, f"an effect of {smallest_effect} in the predicted direction lies outside the interval"
    return INCONCLUSIVE, "the interval contains 0" if lo <= 0 else "a replicate goes the other way"
