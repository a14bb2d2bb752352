"""The generic-RWR control's pool (run mode generic_rwr): a random selection of the simulator's own valid
generations, size-matched to what the α band selects, weight 1.

Why: training a simulator on any of its own samples moves it (Exp 1's control arm drifted away from α on its own),
so "training on the band does X" needs a control trained at the same dose on the same amount of its own output,
chosen without looking at p̂. Pure: the trainer reads the candidates and the band's counts from the database and
calls this.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

G = TypeVar("G")


def size_matched_random(
    candidates: Sequence[G],
    *,
    matched: Mapping[int, int],
    epoch_of: Callable[[G], int],
    key_of: Callable[[G], int],
    seed: int,
) -> list[G]:
    """Per epoch e, ``matched[e]`` of that epoch's candidates drawn uniformly without replacement (all of them when
    there are fewer; none for an epoch not in ``matched``), newest epoch first, each epoch's picks in key order.

    ``matched[e]`` is how many generations the band rule selects from the same run's epoch e, so each epoch adds as
    many generations to this pool as genenv's band adds to D_env. The draw of epoch e depends only on (``seed``, e)
    and that epoch's candidates (sorted by ``key_of``), so a later epoch's pool keeps the same picks from earlier
    epochs, as D_env keeps earlier epochs' in-band generations.
    """
    by_epoch: dict[int, list[G]] = {}
    for c in candidates:
        by_epoch.setdefault(epoch_of(c), []).append(c)
    out: list[G] = []
    for epoch in sorted(by_epoch, reverse=True):
        want = matched.get(epoch, 0)
        if want < 0:
            raise ValueError(f"matched size of epoch {epoch} must be ≥ 0, got {want}")
        pool = sorted(by_epoch[epoch], key=key_of)
        rng = random.Random(f"generic_rwr:{seed}:{epoch}")
        picked = rng.sample(pool, min(want, len(pool)))
        out += sorted(picked, key=key_of)
    return out
