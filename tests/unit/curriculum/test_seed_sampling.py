"""Seed sampling: uniform over the split, or stratified by the domain's difficulty group."""

from __future__ import annotations

from collections import Counter

import pytest

from genenv.contracts.runs import RunConfig, SeedSampling
from genenv.contracts.tasks import Seed
from genenv.domains import get_domain
from genenv_orchestrator.seeds import sample_seeds

ARITH = get_domain("arithmetic")


def _groups(seeds: list[Seed]) -> Counter[str | None]:
    return Counter(ARITH.difficulty_group(s.payload) for s in seeds)


def test_stratified_draws_equally_from_every_level() -> None:
    pool = ARITH.load_seeds(None, "train")
    chosen = sample_seeds(pool, 42, 5, 1, strategy=SeedSampling.STRATIFIED, group_of=ARITH.difficulty_group)
    assert len(chosen) == 42 == len({s.id for s in chosen})
    assert set(_groups(chosen).values()) == {6}  # 7 levels × 6
    # The remainder goes to randomly chosen groups, one extra each.
    odd = sample_seeds(pool, 40, 5, 1, strategy=SeedSampling.STRATIFIED, group_of=ARITH.difficulty_group)
    assert sorted(_groups(odd).values()) == [5, 5, 6, 6, 6, 6, 6]


def test_uniform_follows_the_pools_level_sizes_and_both_are_reproducible() -> None:
    pool = ARITH.load_seeds(None, "train")
    a = sample_seeds(pool, 30, 9, 2)
    assert a == sample_seeds(pool, 30, 9, 2) and a != sample_seeds(pool, 30, 9, 3)
    s = sample_seeds(pool, 30, 9, 2, strategy=SeedSampling.STRATIFIED, group_of=ARITH.difficulty_group)
    assert s == sample_seeds(pool, 30, 9, 2, strategy=SeedSampling.STRATIFIED, group_of=ARITH.difficulty_group)


def test_a_small_group_gives_all_it_has_and_the_others_make_up_the_difference() -> None:
    def seed(i: int, group: str) -> Seed:
        return Seed(id=f"{group}{i}", domain="arithmetic", payload={"level": group})

    pool = [seed(0, "a"), *(seed(i, "b") for i in range(10)), *(seed(i, "c") for i in range(10))]
    chosen = sample_seeds(pool, 9, 0, 0, strategy=SeedSampling.STRATIFIED, group_of=lambda p: p["level"])
    counts = Counter(s.payload["level"] for s in chosen)
    assert counts["a"] == 1 and counts["b"] + counts["c"] == 8 and abs(counts["b"] - counts["c"]) <= 1
    everything = sample_seeds(pool, 50, 0, 0, strategy=SeedSampling.STRATIFIED, group_of=lambda p: p["level"])
    assert len(everything) == 21


def test_design_controls_validate() -> None:
    cfg = RunConfig.model_validate({"seed_sampling": "stratified", "agent": {"train": False, "budget": "informative"},
                                    "curriculum": {"prompt_stats": False}})
    assert cfg.seed_sampling is SeedSampling.STRATIFIED and not cfg.agent.train and not cfg.curriculum.prompt_stats
    with pytest.raises(ValueError, match=r"agent_only with agent\.train = false"):
        RunConfig.model_validate({"mode": "agent_only", "agent": {"train": False}})
    with pytest.raises(ValueError):
        RunConfig.model_validate({"agent": {"budget": "sequences"}})
