"""The learning analysis on simulated NULL data (no arm better than another), as the pre-registration asks before
Part C runs: the level-(1 − 0.05/3) interval over training runs covers 0 at its nominal rate, the three contrasts
together exclude 0 in at most 5 % of experiments (Bonferroni), and the labels are never "supported" or "detected"
more often than that allows.

The simulated experiment mirrors Part C: four arms, replicate r of every arm shares its seed (a shared replicate
level), each arm's training run lands somewhere by chance, and held-out accuracy is a binomial proportion on the 534
items (a replicate's final accuracy then spreads with s ≈ 0.026, a little above the 0.019 the pre-registration's
example sizes from). Three replicates leave almost every contrast inconclusive; twelve exclude an effect of 0.03
about half of the time ("refuted at this scale" is the right answer when there is no effect and the interval is
narrow enough).

As in test_stats_coverage.py, the many simulations use the interval functions directly (analyse_learning also runs
permutation tests); ``test_analyse_learning_states_exactly_these_intervals`` pins that the analysis computes them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from genenv.experiments.learning import (
    DETECTED_BELOW,
    FILTER,
    GENENV,
    INCONCLUSIVE,
    LEARNING_PROGRESS,
    REFUTED,
    REGISTERED_SEEDS,
    STATIC,
    SUPPORTED,
    analyse_learning,
    decide,
)
from genenv.experiments.stats import mean_ci
from tests.unit.experiments.learning_members import finals

LEVEL = 1 - 0.05 / 3
ITEMS = 534
BASELINES = (STATIC, FILTER, LEARNING_PROGRESS)


def _limit(rate: float, sims: int) -> float:
    return rate + 3 * math.sqrt(rate * (1 - rate) / sims)


def _null_finals(rng: np.random.Generator, replicates: int, run_sd: float = 0.015) -> np.ndarray:
    """Final held-out accuracies, arms × replicates, with no true difference between arms."""
    level = 0.41 + rng.normal(0.0, 0.01, replicates)              # what replicate r's seed shares across arms
    p = np.clip(level[None, :] + rng.normal(0.0, run_sd, (4, replicates)), 0.01, 0.99)  # each training run
    return rng.binomial(ITEMS, p) / ITEMS


@pytest.mark.parametrize("replicates", [3, 5, 12])
def test_the_interval_over_training_runs_covers_zero_at_its_level(replicates: int) -> None:
    rng = np.random.default_rng(35_000 + replicates)
    sims = 2000
    misses = any_miss = 0
    labels: dict[str, int] = {SUPPORTED: 0, DETECTED_BELOW: 0, REFUTED: 0, INCONCLUSIVE: 0}
    for _ in range(sims):
        acc = _null_finals(rng, replicates)
        missed = False
        for b in range(1, 4):
            iv = mean_ci((acc[0] - acc[b]).tolist(), LEVEL)
            miss = iv.low > 0 or iv.high < 0
            misses += miss
            missed |= miss
            labels[decide(iv, 0.03)[0]] += 1
        any_miss += missed
    contrasts = 3 * sims
    assert misses / contrasts <= _limit(1 - LEVEL, contrasts), f"{misses / contrasts:.4f} excluded 0"
    assert any_miss / sims <= _limit(0.05, sims), f"the family excluded 0 in {any_miss / sims:.3f}"
    # A label claiming an advantage needs the interval above 0: at most the one-sided half of the miss rate.
    assert (labels[SUPPORTED] + labels[DETECTED_BELOW]) / contrasts <= _limit((1 - LEVEL) / 2, contrasts)
    if replicates == 3:
        assert labels[INCONCLUSIVE] / contrasts > 0.9  # three training runs cannot tell 0 from 0.03
    if replicates == 12:
        assert labels[REFUTED] / contrasts > 0.4  # twelve often exclude an advantage of 0.03 that is not there


def test_analyse_learning_states_exactly_these_intervals() -> None:
    rng = np.random.default_rng(7)
    seeds = REGISTERED_SEEDS[:5]
    for _ in range(5):
        acc = _null_finals(rng, len(seeds))
        members = [m for i, arm in enumerate((GENENV, *BASELINES)) for m in finals(arm, seeds, acc[i].tolist())]
        result = analyse_learning(members)
        assert result.analysed_seeds == list(seeds)
        for b, contrast in enumerate(result.contrasts, start=1):
            expected = mean_ci((acc[0] - acc[b]).tolist(), LEVEL)
            assert contrast.interval is not None
            assert (contrast.interval.low, contrast.interval.high) == pytest.approx((expected.low, expected.high))
            assert contrast.decision == decide(expected, 0.03)[0]
