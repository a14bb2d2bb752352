"""Agent batch selection: budget, replay share, whole groups, determinism."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from genenv.curriculum import select_agent_batch

groups = st.lists(st.integers(min_value=1, max_value=8), max_size=30)


@given(fresh=groups, replay=groups, budget=st.integers(0, 80), ratio=st.floats(0.0, 0.9), seed=st.integers(0, 9))
def test_selection_respects_budget_and_replay_share(
    fresh: list[int], replay: list[int], budget: int, ratio: float, seed: int
) -> None:
    fresh_groups = [("f", i, s) for i, s in enumerate(fresh)]
    replay_groups = [("r", i, s) for i, s in enumerate(replay)]
    got_f, got_r = select_agent_batch(
        fresh_groups, replay_groups, budget=budget, replay_ratio=ratio, size=lambda g: g[2], rng=random.Random(seed)
    )
    assert set(got_f) <= set(fresh_groups) and len(set(got_f)) == len(got_f)
    assert set(got_r) <= set(replay_groups) and len(set(got_r)) == len(got_r)
    used_f, used_r = sum(g[2] for g in got_f), sum(g[2] for g in got_r)
    assert used_f + used_r <= budget
    assert used_r <= math.floor(budget * ratio)
    # Replay never outweighs its share of what was actually picked: used_r / (used_f + used_r) ≤ ratio.
    assert used_r <= used_f * ratio / (1.0 - ratio) + 1e-9
    # Greedy fill: every fresh group left out would not have fitted in the fresh share.
    for g in set(fresh_groups) - set(got_f):
        assert g[2] > budget - used_r - used_f


def test_no_replay_at_ratio_zero_and_full_fresh_batch() -> None:
    fresh = [("f", i, 8) for i in range(10)]
    replay = [("r", i, 8) for i in range(10)]
    f, r = select_agent_batch(fresh, replay, budget=32, replay_ratio=0.0, size=lambda g: g[2], rng=random.Random(1))
    assert r == [] and len(f) == 4


def test_replay_share_and_determinism() -> None:
    fresh = [("f", i, 4) for i in range(10)]
    replay = [("r", i, 4) for i in range(10)]
    a = select_agent_batch(fresh, replay, budget=40, replay_ratio=0.25, size=lambda g: g[2], rng=random.Random(3))
    b = select_agent_batch(fresh, replay, budget=40, replay_ratio=0.25, size=lambda g: g[2], rng=random.Random(3))
    assert a == b
    f, r = a
    assert len(r) == 2 and len(f) == 8  # floor(40·0.25)=10 → two groups of 4; the rest fresh


def test_replay_is_a_ceiling_not_a_quota() -> None:
    f, r = select_agent_batch([("f", 0, 4)], [("r", i, 4) for i in range(10)], budget=40, replay_ratio=0.5,
                              size=lambda g: g[2], rng=random.Random(0))
    # One fresh group of 4 at ratio 0.5 admits at most 4 replayed sequences, however much budget is left.
    assert len(f) == 1 and sum(g[2] for g in r) == 4


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        select_agent_batch([], [], budget=-1, replay_ratio=0.0, size=len, rng=random.Random(0))
    with pytest.raises(ValueError):
        select_agent_batch([], [], budget=4, replay_ratio=1.0, size=len, rng=random.Random(0))
