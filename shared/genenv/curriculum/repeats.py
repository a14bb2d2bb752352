"""Repeats: a valid task that restates, word for word, a valid task of an earlier epoch of the same run.

Why they matter: a trained simulator can write again the tasks it was rewarded for (in Exp 2, 30 % of genenv's
valid tasks repeated an earlier epoch's, and half of the in-band effect came from them), so every in-loop endpoint
is also reported on non-repeated tasks, and a run can refuse repeats (``simulator.reject_repeats``). Two tasks are
the same when their canonical forms (``Domain.canonical_task``: what the agent is asked) agree after whitespace is
normalised. Pure: callers bring the canonical forms.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def repeat_key(canonical: str) -> str:
    """The canonical form with every run of whitespace collapsed to one space and the ends stripped."""
    return " ".join(canonical.split())


def is_repeat(canonical: str, earlier: Collection[str]) -> bool:
    """Whether a task repeats one of ``earlier`` (repeat keys of the run's valid tasks of earlier epochs)."""
    return repeat_key(canonical) in earlier


def repeat_flags(tasks: Sequence[tuple[K, int, str]]) -> list[bool]:
    """For valid tasks given as (run, epoch, canonical form): whether each repeats a valid task of an earlier epoch
    of the same run. Tasks of one epoch never count as repeats of each other (that is the duplicate rule's)."""
    seen: dict[tuple[K, int], set[str]] = {}
    for run, epoch, canonical in tasks:
        seen.setdefault((run, epoch), set()).add(repeat_key(canonical))
    earlier: dict[tuple[K, int], set[str]] = {}
    for run in {r for r, _ in seen}:
        acc: set[str] = set()
        for epoch in sorted(e for r, e in seen if r == run):
            earlier[(run, epoch)] = set(acc)
            acc |= seen[(run, epoch)]
    return [repeat_key(c) in earlier[(run, epoch)] for run, epoch, c in tasks]


def repeat_share(flags: Iterable[bool]) -> float | None:
    """Share of repeats among the flagged tasks (None without tasks)."""
    values = list(flags)
    return sum(values) / len(values) if values else None
