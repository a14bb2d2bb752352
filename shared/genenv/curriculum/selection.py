"""Agent batch selection: fresh on-policy GRPO groups mixed with replayed valid groups from earlier epochs."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

G = TypeVar("G")


def select_agent_batch(
    fresh: Sequence[G],
    replay: Sequence[G],
    *,
    budget: int,
    replay_ratio: float,
    size: Callable[[G], int],
    rng: random.Random,
) -> tuple[list[G], list[G]]:
    """Pick whole groups worth at most ``budget`` sequences; replay is at most ``replay_ratio`` of what is picked.

    Returns (fresh groups, replay groups). Groups are never split: their advantages were normalised over the
    whole group, and a group is the unit that makes a GRPO update meaningful. The replay share is a ceiling,
    not a quota: replayed sequences never exceed ratio/(1-ratio) × the fresh ones picked, so when the epoch's
    fresh groups are few the batch is smaller rather than more off-policy.
    """
    if budget < 0:
        raise ValueError(f"budget must be ≥ 0, got {budget}")
    if not 0.0 <= replay_ratio < 1.0:
        raise ValueError(f"replay_ratio must lie in [0, 1), got {replay_ratio}")
    # Fresh data first gets its own share of the budget, then replay is sized against what fresh data filled.
    picked_fresh = _fill(fresh, budget - math.floor(budget * replay_ratio), size, rng)
    fresh_size = sum(size(g) for g in picked_fresh)
    replay_cap = min(budget - fresh_size, math.floor(fresh_size * replay_ratio / (1.0 - replay_ratio) + 1e-9))
    picked_replay = _fill(replay, replay_cap, size, rng)
    # Fresh groups take whatever budget replay left.
    left = budget - fresh_size - sum(size(g) for g in picked_replay)
    chosen = {id(g) for g in picked_fresh}
    picked_fresh += _fill([g for g in fresh if id(g) not in chosen], left, size, rng)
    return picked_fresh, picked_replay


def _fill(groups: Sequence[G], budget: int, size: Callable[[G], int], rng: random.Random) -> list[G]:
    """Random groups, greedily, while they fit in ``budget`` sequences."""
    order = list(groups)
    rng.shuffle(order)
    picked: list[G] = []
    left = budget
    for g in order:
        s = size(g)
        if 0 < s <= left:
            picked.append(g)
            left -= s
    return picked
