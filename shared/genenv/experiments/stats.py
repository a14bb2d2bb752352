"""Bootstrap confidence intervals over replicates, the only uncertainty an experiment report states.

Replicates are few (typically 2–5 per mode), so every interval says how many observations it rests on, and the
cases scipy cannot bootstrap (one observation, no spread) are answered explicitly instead of crashing or warning.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from scipy import stats as scipy_stats

# Percentile, not BCa: BCa's acceleration comes from a jackknife that, with 2–5 replicates, is unstable and is
# undefined whenever the jackknife values coincide (scipy then divides by zero and warns, which the test suite turns
# into errors). The percentile interval is defined for every sample with n ≥ 2 and is easy to explain in a paper;
# its known cost — too narrow with very few replicates — is stated in the report next to n.
METHOD: Final = "percentile"
DEFAULT_CONFIDENCE: Final = 0.95
DEFAULT_RESAMPLES: Final = 9999
DEFAULT_SEED: Final = 0


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval.

    ``estimate`` is the sample mean (or, for a difference, mean(a) − mean(b)); ``n`` the number of observations
    (of ``a`` for a difference; ``n_baseline`` is then that of ``b``). ``degenerate`` is True when the interval is
    zero-width by construction — a single observation, or no spread at all — so it states no uncertainty, not
    certainty.
    """

    estimate: float
    low: float
    high: float
    n: int
    n_baseline: int | None = None
    degenerate: bool = False


def _as_array(values: Sequence[float], name: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain finite numbers only")
    return arr


def _percentile_ci(
    data: tuple[np.ndarray[Any, np.dtype[np.float64]], ...],
    statistic: Any,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float]:
    """scipy's percentile bootstrap; ``rng`` (scipy ≥ 1.15) or ``random_state`` (older) carry the seed."""
    result = scipy_stats.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        vectorized=True,
        paired=False,
        confidence_level=confidence,
        method=METHOD,
        **_seed_kwargs(seed),
    )
    ci = result.confidence_interval
    return float(ci.low), float(ci.high)


# scipy ≥ 1.15 takes the generator as ``rng``; 1.11–1.14 only know ``random_state`` (which newer versions deprecate).
_SEED_ARG: Final = "rng" if "rng" in inspect.signature(scipy_stats.bootstrap).parameters else "random_state"


def _seed_kwargs(seed: int) -> dict[str, Any]:
    return {_SEED_ARG: np.random.default_rng(seed)}


def _mean(x: np.ndarray[Any, np.dtype[np.float64]], axis: int = -1) -> Any:
    return np.mean(x, axis=axis)


def _diff_of_means(
    a: np.ndarray[Any, np.dtype[np.float64]], b: np.ndarray[Any, np.dtype[np.float64]], axis: int = -1
) -> Any:
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def _check(confidence: float, n_resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    if n_resamples < 1:
        raise ValueError("n_resamples must be ≥ 1")


def bootstrap_mean_ci(
    values: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile bootstrap interval of the mean; deterministic given ``seed``.

    n = 1 or all values equal → (mean, mean) with ``degenerate=True`` (scipy refuses n = 1, and a sample with no
    spread has a point-mass bootstrap distribution). Raises ValueError for an empty or non-finite sample.
    """
    _check(confidence, n_resamples)
    arr = _as_array(values, "values")
    if float(np.ptp(arr)) == 0.0:  # one value, or no spread: the value itself (np.mean could be off by an ulp)
        value = float(arr[0])
        return Interval(value, value, value, int(arr.size), degenerate=True)
    estimate = float(np.mean(arr))
    low, high = _percentile_ci((arr,), _mean, confidence, n_resamples, seed)
    return Interval(estimate, low, high, int(arr.size))


def bootstrap_diff_ci(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile bootstrap interval of mean(a) − mean(b) for two independent samples (genenv − baseline).

    Each sample is resampled on its own (``paired=False``): replicate r of two modes shares a seed, but the runs
    are independent draws, and pairing would drop members whose partner failed. A side with one observation (or
    no spread) is held fixed — resampling it could only return itself — and the other side is bootstrapped; when
    neither side has spread the interval is (diff, diff) with ``degenerate=True``.
    """
    _check(confidence, n_resamples)
    xa = _as_array(a, "a")
    xb = _as_array(b, "b")
    a_varies = float(np.ptp(xa)) > 0.0  # a single observation has no spread either
    b_varies = float(np.ptp(xb)) > 0.0
    mean_a = float(np.mean(xa)) if a_varies else float(xa[0])
    mean_b = float(np.mean(xb)) if b_varies else float(xb[0])
    estimate = mean_a - mean_b
    n_a, n_b = int(xa.size), int(xb.size)
    if not a_varies and not b_varies:
        return Interval(estimate, estimate, estimate, n_a, n_b, degenerate=True)
    if a_varies and b_varies:
        low, high = _percentile_ci((xa, xb), _diff_of_means, confidence, n_resamples, seed)
    elif a_varies:
        low, high = _percentile_ci((xa,), _mean, confidence, n_resamples, seed)
        low, high = low - mean_b, high - mean_b
    else:
        low, high = _percentile_ci((xb,), _mean, confidence, n_resamples, seed)
        low, high = mean_a - high, mean_a - low
    return Interval(estimate, low, high, n_a, n_b)


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
