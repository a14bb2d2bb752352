"""Seed sampling by learning progress: the cheap curriculum a trained simulator must beat (issue 35). Pure.

The formula is that of the Syllabus library's ``LearningProgress`` curriculum
(github.com/RyanNavillus/Syllabus, syllabus/curricula/learning_progress.py), which implements Kanitscheider et al.
2021, "Multi-task curriculum learning in a complex, visual, hard-exploration domain: Minecraft" (arXiv 2106.14876):

- per task, a fast EMA of its success rate, fast ← a·p + (1 − a)·fast, and a slow EMA that follows the fast one,
  slow ← a·fast + (1 − a)·slow;
- both reweighted by r(p) = p(1 − θ) / (p + θ(1 − 2p)), θ = 0.1, and the learning progress is |r(fast) − r(slow)|;
- the sampling distribution: the tasks with progress > 0 get sigmoid(z-score of their progress), normalised, the
  others 0; when no task has progress > 0, every task gets the same weight.

It is written here by hand because Syllabus cannot be a dependency of the pure package (it pulls gymnasium, its
multiprocessing task-space machinery and more), and the formula is a dozen lines. Here a task is a seed and an
observation is its seed batch's p̂ in one epoch. Three choices differ from the library, each for a reason of this
setting, not of the formula:

1. The EMAs start at a seed's first p̂, not at 0. Seeds are observed once an epoch at most, often once in a run;
   starting at 0 would make a seed's first p̂ look like progress (larger the easier the seed), so a seed seen once
   at p̂ = 0.6 would outrank one that went 0.2 → 0.6. Started at the first observation, progress is change only.
2. A p̂ of 0 is an observation. (Syllabus skips a progress of 0 in ``update_task_progress``; for a seed batch of
   n × G attempts a p̂ of 0 is a measurement, and a seed that falls to 0 has moved.)
3. The training split is too large to evaluate every seed first (Kanitscheider et al. evaluate every task), so the
   distribution is over the seeds drawn so far, and a ``floor`` share of the mass is spread uniformly over the whole
   split: every seed stays reachable, and about floor × k of an epoch's k seeds are new.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


def reweight(p: float, theta: float) -> float:
    """Kanitscheider et al.'s reweighting r(p) = p(1 − θ) / (p + θ(1 − 2p)): r(0) = 0, r(1) = 1, r(θ) = ½."""
    return p * (1.0 - theta) / (p + theta * (1.0 - 2.0 * p))


def learning_progress(history: Sequence[float], rate: float, theta: float) -> float:
    """|r(fast) − r(slow)| after the p̂ values of ``history`` (oldest first); 0 for fewer than two."""
    if not history:
        return 0.0
    fast = slow = history[0]
    for p in history[1:]:
        fast = rate * p + (1.0 - rate) * fast
        slow = rate * fast + (1.0 - rate) * slow
    return abs(reweight(fast, theta) - reweight(slow, theta))


def progress_distribution(progress: Mapping[str, float]) -> dict[str, float]:
    """Syllabus' ``_sample_distribution``: sigmoid of the z-scored progress over the seeds with progress > 0
    (normalised; the others 0), or uniform when none has any. Empty in, empty out."""
    if not progress:
        return {}
    positive = {sid: lp for sid, lp in progress.items() if lp > 0.0}
    if not positive:
        return {sid: 1.0 / len(progress) for sid in progress}
    values = list(positive.values())
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))  # population SD, as numpy's np.std
    sig = {sid: 1.0 / (1.0 + math.exp(-(lp - mean) / (std or 1.0))) for sid, lp in positive.items()}
    total = sum(sig.values())
    return {sid: sig.get(sid, 0.0) / total for sid in progress}


def seed_weights(
    pool_ids: Sequence[str], history: Mapping[str, Sequence[float]], *, rate: float, theta: float, floor: float
) -> list[float]:
    """Sampling probability of each pool seed (in ``pool_ids`` order, summing to 1): floor/|pool| each, plus
    (1 − floor) × the progress distribution over the pool seeds that have a history (all of it uniform when none
    has)."""
    if not pool_ids:
        return []
    if not 0.0 < floor <= 1.0:
        raise ValueError("floor must lie in (0, 1]")
    seen = {sid: learning_progress(history[sid], rate, theta) for sid in dict.fromkeys(pool_ids) if history.get(sid)}
    dist = progress_distribution(seen)
    share = 1.0 if not dist else floor
    return [share / len(pool_ids) + (1.0 - share) * dist.get(sid, 0.0) for sid in pool_ids]


def weighted_sample(items: Sequence[T], weights: Sequence[float], k: int, rng: random.Random) -> list[T]:
    """k items without replacement, each draw ∝ weight among those left (Efraimidis & Spirakis 2006: the k largest
    keys u^(1/w)); every weight must be > 0. Reproducible from ``rng``."""
    if len(items) != len(weights):
        raise ValueError("items and weights differ in length")
    if any(w <= 0.0 for w in weights):
        raise ValueError("every weight must be > 0")
    # log(u)/w orders as u^(1/w) and does not underflow for tiny weights.
    keys = [math.log(1.0 - rng.random()) / w for w in weights]
    order = sorted(range(len(items)), key=lambda i: keys[i], reverse=True)
    return [items[i] for i in order[: min(k, len(items))]]
