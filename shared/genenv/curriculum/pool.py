"""The simulator's training pool D_env: which of the run's valid generations the simulator is trained on, and with
what weight. The agent's batch policy is its neighbour, genenv.curriculum.selection.

Pure: the trainer fetches the candidates (every valid generation of the window with its seed batch's score, read
from the database) and this module chooses; the run mode's ``simulator_pool`` (genenv.contracts.modes) says how.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from genenv.contracts.modes import SimulatorPool
from genenv.curriculum.generic import size_matched_random


@dataclass(frozen=True)
class PoolCandidate:
    """A valid generation of the run: its task id, epoch, and its seed batch's band flag and RWR weight (None when
    the batch was not scored or has no weight)."""

    task_id: int
    epoch: int
    in_band: bool | None
    weight: float | None


@dataclass(frozen=True)
class PoolPick:
    """A generation chosen for D_env and the weight it is trained with."""

    task_id: int
    epoch: int
    weight: float


def first_epoch(epoch: int, recent_epochs: int) -> int:
    """The oldest epoch whose generations may enter the pool at ``epoch`` (recency: 0 = every epoch)."""
    return epoch - recent_epochs + 1 if recent_epochs > 0 else 0


def _newest_first(c: PoolCandidate) -> tuple[int, int]:
    return -c.epoch, c.task_id


def band_pool(candidates: Sequence[PoolCandidate], *, max_size: int) -> list[PoolPick]:
    """Generations of in-band seed batches with a weight, each with its own batch's RWR weight (paper Algorithm 1);
    newest epoch first (task id within an epoch), at most ``max_size``."""
    banded = sorted((c for c in candidates if c.in_band and c.weight is not None), key=_newest_first)
    return [PoolPick(c.task_id, c.epoch, float(c.weight or 0.0)) for c in banded[:max_size]]


def random_size_matched_pool(candidates: Sequence[PoolCandidate], *, max_size: int, seed: int) -> list[PoolPick]:
    """Per epoch, a random selection of its candidates as large as what ``band_pool`` takes from that epoch
    (genenv.curriculum.generic.size_matched_random), weight 1; newest first, at most ``max_size``."""
    matched = Counter(c.epoch for c in candidates if c.in_band and c.weight is not None)
    chosen = size_matched_random(list(candidates), matched=matched, epoch_of=lambda c: c.epoch,
                                 key_of=lambda c: c.task_id, seed=seed)
    return [PoolPick(c.task_id, c.epoch, 1.0) for c in chosen[:max_size]]


def choose_pool(
    kind: SimulatorPool, candidates: Sequence[PoolCandidate], *, max_size: int, seed: int
) -> list[PoolPick]:
    """D_env by the mode's pool policy; empty for SimulatorPool.NONE (the simulator is not trained)."""
    if kind is SimulatorPool.BAND_RWR:
        return band_pool(candidates, max_size=max_size)
    if kind is SimulatorPool.RANDOM_SIZE_MATCHED:
        return random_size_matched_pool(candidates, max_size=max_size, seed=seed)
    return []
