"""Seed sampling by learning progress (Syllabus' LearningProgress formula, Kanitscheider et al. 2021)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from genenv.contracts.runs import LearningProgressConfig, RunConfig, SeedSampling
from genenv.contracts.tasks import Seed
from genenv.curriculum.learning_progress import (
    learning_progress,
    progress_distribution,
    reweight,
    seed_weights,
    weighted_sample,
)
from genenv_orchestrator.seeds import sample_seeds

RATE, THETA = 0.5, 0.1


def _pool(n: int) -> list[Seed]:
    return [Seed(id=f"s{i:02d}", domain="arithmetic", payload={"expression": f"{i} + 1"}) for i in range(n)]


def test_reweight_is_kanitscheiders() -> None:
    assert reweight(0.0, THETA) == 0.0 and reweight(1.0, THETA) == pytest.approx(1.0)
    assert reweight(THETA, THETA) == pytest.approx(0.5)  # θ maps to ½: differences near 0 are stretched
    assert reweight(0.3, THETA) == pytest.approx(0.3 * 0.9 / (0.3 + 0.1 * 0.4))


def test_progress_is_the_gap_of_a_fast_and_a_slow_ema_started_at_the_first_observation() -> None:
    # By hand, as Syllabus updates: fast ← a·p + (1−a)·fast, then slow ← a·fast + (1−a)·slow.
    fast, slow = 0.2, 0.2
    for p in (0.6, 0.6):
        fast = RATE * p + (1 - RATE) * fast
        slow = RATE * fast + (1 - RATE) * slow
    want = abs(reweight(fast, THETA) - reweight(slow, THETA))
    assert learning_progress([0.2, 0.6, 0.6], RATE, THETA) == pytest.approx(want) and want > 0.02
    assert learning_progress([], RATE, THETA) == 0.0
    assert learning_progress([0.6], RATE, THETA) == 0.0  # one p̂ is a level, not a change
    assert learning_progress([0.6, 0.6, 0.6], RATE, THETA) == 0.0  # flat: no progress however easy
    assert learning_progress([0.6, 0.1], RATE, THETA) > 0.0  # forgetting counts too (|fast − slow|)
    assert learning_progress([0.3, 0.0], RATE, THETA) > 0.0  # a p̂ of 0 is an observation


def test_distribution_is_syllabus_z_score_sigmoid_over_positive_progress() -> None:
    dist = progress_distribution({"a": 0.1, "b": 0.3, "c": 0.0})
    assert dist["c"] == 0.0 and dist["b"] > dist["a"] > 0.0 and sum(dist.values()) == pytest.approx(1.0)
    # Two positive values z-score to ±1: the weights are sigmoid(±1), normalised.
    assert dist["b"] / dist["a"] == pytest.approx((1 / (1 + 2.718281828459045 ** -1)) / (1 / (1 + 2.718281828459045)))
    assert progress_distribution({"a": 0.0, "b": 0.0}) == {"a": 0.5, "b": 0.5}
    assert progress_distribution({}) == {}


def test_a_seed_whose_p_hat_moved_outranks_a_flat_one_and_every_seed_keeps_the_floor() -> None:
    ids = [s.id for s in _pool(10)]
    history = {"s00": [0.2, 0.6], "s01": [0.6, 0.6], "s02": [0.1, 0.15]}
    w = dict(zip(ids, seed_weights(ids, history, rate=RATE, theta=THETA, floor=0.2), strict=True))
    assert sum(w.values()) == pytest.approx(1.0)
    assert w["s00"] > w["s02"] > w["s01"]
    assert min(w.values()) >= 0.2 / 10 - 1e-12  # the floor: every seed of the split stays reachable
    assert w["s01"] == pytest.approx(w["s09"])  # flat and never-drawn both get only the floor
    # Seen seeds without progress (epoch 1: each seen once) share the non-floor mass uniformly: they are replayed.
    w1 = dict(zip(ids, seed_weights(ids, {"s00": [0.2], "s01": [0.7]}, rate=RATE, theta=THETA, floor=0.2),
                  strict=True))
    assert w1["s00"] == pytest.approx(w1["s01"]) == pytest.approx(0.02 + 0.4)
    # No history at all: uniform.
    assert seed_weights(ids, {}, rate=RATE, theta=THETA, floor=0.2) == pytest.approx([0.1] * 10)
    with pytest.raises(ValueError, match="floor"):
        seed_weights(ids, history, rate=RATE, theta=THETA, floor=0.0)


def test_weighted_sample_draws_in_proportion_without_replacement() -> None:
    rng = random.Random(3)
    counts: Counter[str] = Counter()
    for _ in range(4000):
        pick = weighted_sample(["a", "b", "c"], [0.6, 0.3, 0.1], 1, rng)
        counts[pick[0]] += 1
    assert counts["a"] / 4000 == pytest.approx(0.6, abs=0.03) and counts["c"] / 4000 == pytest.approx(0.1, abs=0.02)
    two = weighted_sample(["a", "b", "c"], [0.6, 0.3, 0.1], 2, rng)
    assert len(set(two)) == 2
    assert weighted_sample(["a"], [1.0], 5, rng) == ["a"]
    with pytest.raises(ValueError):
        weighted_sample(["a", "b"], [1.0, 0.0], 1, rng)


def test_sample_seeds_learning_progress_is_deterministic_and_follows_the_history() -> None:
    pool = _pool(40)
    history = {"s00": [0.1, 0.5], "s01": [0.5, 0.5], "s02": [0.5, 0.5], "s03": [0.0, 0.0]}
    cfg = LearningProgressConfig(ema_rate=RATE, reweight_theta=THETA, floor=0.25)

    def draw(random_seed: int, epoch: int, k: int = 4) -> list[Seed]:
        return sample_seeds(pool, k, random_seed, epoch, strategy=SeedSampling.LEARNING_PROGRESS, history=history,
                            progress=cfg)

    assert draw(7, 2) == draw(7, 2) and draw(7, 2) != draw(7, 3)
    hits: Counter[str] = Counter(s.id for r in range(300) for s in draw(r, 2))
    assert hits["s00"] >= 290  # the only seed with progress holds 3/4 of the mass (and draws go on after it)
    assert hits["s00"] > 3 * max(hits["s01"], hits["s02"], hits["s03"])
    # Every seed of the split is drawn at some (random seed, epoch): the floor keeps all reachable.
    assert set(hits) | {s.id for r in range(300) for s in draw(r, 5)} == {s.id for s in pool}
    # Without history (epoch 0) it is a uniform draw of k distinct seeds.
    first = sample_seeds(pool, 10, 1, 0, strategy=SeedSampling.LEARNING_PROGRESS)
    assert len({s.id for s in first}) == 10


def test_learning_progress_config_validates() -> None:
    cfg = RunConfig.model_validate({"mode": "random_simulator", "seed_sampling": "learning_progress",
                                    "learning_progress": {"ema_rate": 0.3, "floor": 0.5}})
    assert cfg.seed_sampling is SeedSampling.LEARNING_PROGRESS and cfg.learning_progress.ema_rate == 0.3
    with pytest.raises(ValueError, match="static_augmentation"):
        RunConfig.model_validate({"mode": "static_augmentation", "seed_sampling": "learning_progress"})
    with pytest.raises(ValueError):
        RunConfig.model_validate({"learning_progress": {"floor": 0.0}})
