"""The generic_rwr control's pool: per epoch a random selection of the run's own valid generations, as many as the
band selected from that epoch, weight 1 (the weight is the trainer's: tests/integration/trainer)."""

from __future__ import annotations

from collections import Counter

import pytest

from genenv.curriculum.generic import size_matched_random

# (task id, epoch): 10 valid generations in epoch 0, 6 in epoch 1, 4 in epoch 2.
CANDIDATES = [(i, 0) for i in range(10)] + [(100 + i, 1) for i in range(6)] + [(200 + i, 2) for i in range(4)]


def _pick(matched: dict[int, int], seed: int = 7, candidates: list[tuple[int, int]] = CANDIDATES) -> list[
        tuple[int, int]]:
    return size_matched_random(candidates, matched=matched, epoch_of=lambda c: c[1], key_of=lambda c: c[0],
                               seed=seed)


def test_each_epoch_contributes_as_many_as_the_band_selected_from_it() -> None:
    chosen = _pick({0: 3, 1: 2, 2: 9})  # epoch 2 has only 4 candidates: all of them, never more
    assert Counter(e for _, e in chosen) == {0: 3, 1: 2, 2: 4}
    assert [e for _, e in chosen] == sorted((e for _, e in chosen), reverse=True)  # newest first, like D_env
    assert len(set(chosen)) == len(chosen) and set(chosen) <= set(CANDIDATES)
    assert _pick({}) == [] and _pick({0: 0}) == []


def test_the_draw_is_reproducible_and_keeps_earlier_epochs_picks() -> None:
    assert _pick({0: 3, 1: 2}) == _pick({0: 3, 1: 2})
    early = [c for c in _pick({0: 3}, candidates=[c for c in CANDIDATES if c[1] == 0]) if c[1] == 0]
    later = [c for c in _pick({0: 3, 1: 2, 2: 1}) if c[1] == 0]
    assert early == later  # the pool at a later epoch holds the same epoch-0 picks (as D_env keeps them)
    assert _pick({0: 3}, candidates=list(reversed(CANDIDATES))) == _pick({0: 3})  # input order does not matter


def test_the_selection_is_uniform_not_the_first_or_the_band() -> None:
    counts: Counter[int] = Counter()
    draws = 4000
    for seed in range(draws):
        counts.update(i for i, _ in _pick({0: 3}, seed=seed))
    # Each of the 10 candidates of epoch 0 is picked with probability 3/10: 1,200 of 4,000 (SD ≈ 29).
    assert all(abs(counts[i] - 1200) < 150 for i in range(10)), counts


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="≥ 0"):
        _pick({0: -1})


def test_generic_rwr_is_a_mode_that_trains_its_simulator() -> None:
    from genenv.contracts.runs import RunConfig

    assert RunConfig(mode="generic_rwr").trains_simulator
    assert RunConfig(mode="genenv").trains_simulator
    assert not RunConfig(mode="random_simulator").trains_simulator
