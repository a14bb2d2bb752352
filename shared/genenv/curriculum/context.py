"""Which success statistics the simulator's prompt carries for a seed (paper §3: the simulator is conditioned on
the agent's recent performance). Pure: the caller gathers the counts.

Seeds are drawn afresh each epoch, so a seed rarely has history of its own; the statistics then come from the
seed's difficulty group (as the domain defines it), else from the whole run, over the same recent epochs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Scope = Literal["seed", "group", "run"]


@dataclass(frozen=True)
class Counts:
    """k successes out of n valid attempts."""

    k: int
    n: int


@dataclass(frozen=True)
class RecentBatch:
    """One earlier seed batch in the window: its seed, the seed's difficulty group, its counts."""

    seed_id: str
    group: str | None
    k: int
    n: int


@dataclass(frozen=True)
class ContextStats:
    """The counts a prompt carries and what they cover."""

    k: int
    n: int
    scope: Scope


def _add(into: dict[str | None, Counts], key: str | None, k: int, n: int) -> None:
    old = into.get(key, Counts(0, 0))
    into[key] = Counts(old.k + k, old.n + n)


def choose_context(
    seeds: Mapping[str, str | None], recent: Iterable[RecentBatch]
) -> dict[str, ContextStats]:
    """For each seed (id → difficulty group), its own recent counts when it has any, else its group's, else the
    run's; a seed is left out only when the window holds no valid attempt at all."""
    per_seed: dict[str | None, Counts] = {}
    per_group: dict[str | None, Counts] = {}
    total: dict[str | None, Counts] = {}
    for b in recent:
        if b.n <= 0:
            continue
        _add(per_seed, b.seed_id, b.k, b.n)
        if b.group is not None:
            _add(per_group, b.group, b.k, b.n)
        _add(total, None, b.k, b.n)
    out: dict[str, ContextStats] = {}
    for seed_id, group in seeds.items():
        if (c := per_seed.get(seed_id)) is not None:
            out[seed_id] = ContextStats(c.k, c.n, "seed")
        elif group is not None and (c := per_group.get(group)) is not None:
            out[seed_id] = ContextStats(c.k, c.n, "group")
        elif (c := total.get(None)) is not None:
            out[seed_id] = ContextStats(c.k, c.n, "run")
    return out
