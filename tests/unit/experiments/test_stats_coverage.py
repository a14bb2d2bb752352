"""Coverage of the report's intervals on simulated NULL data (no effect): a 95 % interval must exclude 0 in at most
5 % of experiments, up to Monte-Carlo error (3 standard errors of the simulated rate).

The designs mirror the experiments: per-member measures paired by replicate (2, 3 or 5 replicates, a shared
seed effect per replicate, normal or binomial noise), seed batches paired by (replicate, epoch, seed) with the
agent's success probabilities spread like SmolLM2's arithmetic levels, and McNemar's test on the in-band flags.
The percentile bootstrap the report used before excluded 0 in ≈ 17 % (n = 2) and ≈ 9 % (n = 3) of such null
experiments; these are the replacements.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from genenv.contracts.experiments import SeedBatch
from genenv.experiments.paired import BatchPair, compare
from genenv.experiments.stats import mcnemar_p, mean_ci, paired_diff_ci, replicate_ci

NOMINAL = 0.05


def _limit(sims: int) -> float:
    return NOMINAL + 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / sims)


def _excludes_zero(low: float, high: float) -> bool:
    return low > 0 or high < 0


@pytest.mark.parametrize("replicates", [2, 3, 5])
@pytest.mark.parametrize("noise", ["normal", "binomial"])
def test_paired_replicate_differences_keep_nominal_coverage(replicates: int, noise: str) -> None:
    rng = np.random.default_rng(1000 + replicates)
    sims = 3000
    misses = 0
    for _ in range(sims):
        seed_effect = rng.normal(0.0, 0.05, replicates)  # replicate r of both modes shares its seeds
        if noise == "normal":
            a = 0.4 + seed_effect + rng.normal(0.0, 0.02, replicates)
            b = 0.4 + seed_effect + rng.normal(0.0, 0.02, replicates)
        else:  # held-out accuracy on 70 items: a binomial proportion around each replicate's level
            p = np.clip(0.4 + seed_effect, 0.01, 0.99)
            a = rng.binomial(70, p) / 70
            b = rng.binomial(70, p) / 70
        iv = paired_diff_ci(a.tolist(), b.tolist())
        misses += _excludes_zero(iv.low, iv.high)
    rate = misses / sims
    assert rate <= _limit(sims), f"{rate:.3f} of null experiments excluded 0 (n = {replicates}, {noise})"


# SmolLM2's arithmetic levels at T = 0.7, roughly (INFRA.md): the seed batches' true success probabilities.
LEVEL_P = [0.9, 0.6, 0.45, 0.25, 0.08, 0.01, 0.005]


def _null_p_hats(rng: np.random.Generator, batches: int = 2 * 4 * 40, attempts: int = 32) -> tuple[
        np.ndarray, np.ndarray]:
    """p̂ of paired seed batches (2 replicates × 4 epochs × 40 seeds by default) under the null: both modes' tasks
    are equally hard for the agent. Each seed has a level and a per-seed probability around it."""
    level = np.array(LEVEL_P)[np.arange(batches) % len(LEVEL_P)]
    p = np.clip(rng.normal(level, 0.05), 0.0, 1.0)
    return rng.binomial(attempts, p) / attempts, rng.binomial(attempts, p) / attempts


def test_seed_batch_intervals_keep_nominal_coverage_on_null_data() -> None:
    rng = np.random.default_rng(7)
    sims = 2000
    misses = {"in_band": 0, "abs_gap": 0, "toward_frontier": 0, "mcnemar": 0}
    alpha, k_min = 0.5, 0.25
    for _ in range(sims):
        pa, pb = _null_p_hats(rng)
        ia = (np.abs(pa - alpha) <= k_min + 1e-9).astype(float)
        ib = (np.abs(pb - alpha) <= k_min + 1e-9).astype(float)
        side = np.sign(alpha - (pa + pb) / 2)
        for key, diffs in (("in_band", ia - ib), ("abs_gap", np.abs(pa - alpha) - np.abs(pb - alpha)),
                           ("toward_frontier", (pa - pb) * side)):
            if np.ptp(diffs) == 0:
                continue
            iv = mean_ci(diffs.tolist())
            misses[key] += _excludes_zero(iv.low, iv.high)
        misses["mcnemar"] += mcnemar_p(int(np.sum(ia > ib)), int(np.sum(ib > ia))) < NOMINAL
    for key, count in misses.items():
        assert count / sims <= _limit(sims), f"{key}: {count / sims:.3f} of null experiments excluded 0"


def test_compare_reports_exactly_the_intervals_simulated_above() -> None:
    # The simulation above uses mean_ci on the differences directly (compare() also runs permutation tests, too
    # slow for thousands of experiments); this pins that compare() computes those very intervals.
    rng = np.random.default_rng(3)
    pa, pb = _null_p_hats(rng, batches=28)

    def batch(i: int, p_hat: float) -> SeedBatch:
        return SeedBatch(epoch=1, seed_id=f"s{i}", k=round(p_hat * 32), n=32, p_hat=float(p_hat),
                         in_band=abs(p_hat - 0.5) <= 0.25)

    pairs = [BatchPair(0, 1, f"s{i}", batch(i, a), batch(i, b)) for i, (a, b) in enumerate(zip(pa, pb, strict=True))]
    c = compare(pairs, "random_simulator", 0.5, 0.25, epochs="≥ 1")
    gap = mean_ci((np.abs(pa - 0.5) - np.abs(pb - 0.5)).tolist())
    frontier = mean_ci(((pa - pb) * np.sign(0.5 - (pa + pb) / 2)).tolist())
    assert c.abs_gap_diff is not None and c.toward_frontier is not None
    assert (c.abs_gap_diff.low, c.abs_gap_diff.high) == pytest.approx((gap.low, gap.high))
    assert (c.toward_frontier.low, c.toward_frontier.high) == pytest.approx((frontier.low, frontier.high))


def _null_training_runs(rng: np.random.Generator, replicates: int, pairs: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """Paired seed-batch differences of a null experiment whose replicates are training runs: each trained
    simulator lands somewhere by chance (a run effect, SD 0.06, mean 0 over runs) and its seed batches differ from
    the baseline's around it (SD 0.25 per pair). Returns (per-replicate means, all pair differences)."""
    run_effect = rng.normal(0.0, 0.06, replicates)
    diffs = run_effect[:, None] + rng.normal(0.0, 0.25, (replicates, pairs))
    return diffs.mean(axis=1), diffs.ravel()


@pytest.mark.parametrize("replicates", [2, 3, 5])
def test_the_interval_over_training_runs_keeps_nominal_coverage(replicates: int) -> None:
    rng = np.random.default_rng(20261128 + replicates)
    sims = 1500
    run_misses = batch_misses = 0
    for _ in range(sims):
        per_rep, pairs = _null_training_runs(rng, replicates)
        iv = replicate_ci(per_rep.tolist())
        assert iv is not None and iv.n == replicates
        run_misses += _excludes_zero(iv.low, iv.high)
        batch = mean_ci(pairs.tolist())
        batch_misses += _excludes_zero(batch.low, batch.high)
    assert run_misses / sims <= _limit(sims), f"{run_misses / sims:.3f} excluded 0 at {replicates} runs"
    # Why the seed-batch interval is only secondary: it treats 80 × runs pairs as independent, so a run effect
    # shared by all of a run's pairs makes it exclude 0 in far more than 5 % of these null experiments.
    assert batch_misses / sims > 0.2, f"seed-batch interval excluded 0 in only {batch_misses / sims:.3f}"


def test_compare_puts_the_interval_over_replicates_first() -> None:
    rng = np.random.default_rng(11)
    pairs: list[BatchPair] = []
    for rep in range(3):
        pa, pb = _null_p_hats(rng, batches=14)
        for i, (a, b) in enumerate(zip(pa, pb, strict=True)):
            pairs.append(BatchPair(rep, 1, f"s{i}", SeedBatch(epoch=1, seed_id=f"s{i}", k=0, n=32, p_hat=float(a),
                                                               in_band=False),
                                   SeedBatch(epoch=1, seed_id=f"s{i}", k=0, n=32, p_hat=float(b), in_band=False)))
    c = compare(pairs, "random_simulator", 0.5, 0.25, epochs="≥ 1")
    for key in ("in_band_diff", "abs_gap_diff", "toward_frontier", "below_alpha"):
        expected = replicate_ci([getattr(r, key) for r in c.per_replicate])
        got = c.replicate_level[key]
        assert got is not None and expected is not None and got.n == 3
        assert (got.estimate, got.low, got.high) == pytest.approx((expected.estimate, expected.low, expected.high))
    assert replicate_ci([0.1]) is None  # one training run states nothing about training runs
