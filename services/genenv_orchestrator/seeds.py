"""Which seeds an epoch uses, and what the simulator is told about them: stored once per (run, epoch).

Seeds are a deterministic sample of the domain's training split per (random seed, epoch), the same in every mode,
so that the modes of an experiment see the same seeds (learning_progress: deterministic per (random seed, epoch)
given the run's stored p̂ of earlier epochs, so from epoch 1 on its seeds follow its own agent). Each stored seed
carries the agent's recent success statistics the simulator's prompt will show for it (genenv.curriculum.context).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv import catalogue
from genenv.contracts.runs import LearningProgressConfig, RunConfig, SeedSampling
from genenv.contracts.tasks import Seed
from genenv.curriculum.context import RecentBatch, choose_context
from genenv.curriculum.learning_progress import seed_weights, weighted_sample
from genenv.db.models import SeedRow
from genenv.db.repositories import ledger


def epoch_seeds(
    session: Session, run_id: str, epoch: int, config: RunConfig, benchmarks_dir: Path | None
) -> list[SeedRow]:
    """The seeds of (run, epoch): read if stored, else sampled and stored with their context (idempotent)."""
    stored = list(
        session.scalars(
            select(SeedRow).where(SeedRow.run_id == run_id, SeedRow.epoch == epoch).order_by(SeedRow.id)
        )
    )
    if stored:
        return stored
    domain = catalogue.resolve(session, config.domain)
    pool = domain.load_seeds(benchmarks_dir, "train")
    history = (p_hat_history(session, run_id, epoch, beta_prior=config.curriculum.use_beta_prior)
               if config.seed_sampling is SeedSampling.LEARNING_PROGRESS else None)
    chosen = sample_seeds(pool, config.seeds_per_epoch, config.random_seed, epoch, strategy=config.seed_sampling,
                          group_of=domain.difficulty_group, history=history, progress=config.learning_progress)
    context = {}
    if config.uses_simulator and epoch > 0 and config.curriculum.prompt_stats:
        first = max(0, epoch - config.curriculum.stats_window_epochs)
        recent = [RecentBatch(sid, domain.difficulty_group(payload), k, n)
                  for sid, payload, k, n in ledger.recent_seed_batches(session, run_id, first, epoch - 1)]
        context = choose_context({s.id: domain.difficulty_group(s.payload) for s in chosen}, recent)
    rows = [
        SeedRow(run_id=run_id, epoch=epoch, seed_id=s.id, domain=config.domain, payload=s.payload,
                context=None if s.id not in context else {"k": context[s.id].k, "n": context[s.id].n,
                                                          "scope": context[s.id].scope})
        for s in chosen
    ]
    session.add_all(rows)
    session.flush()
    return rows


def p_hat_history(session: Session, run_id: str, epoch: int, *, beta_prior: bool = False) -> dict[str, list[float]]:
    """Each seed's p̂ in the scored epochs before ``epoch``, oldest first (batches without a valid attempt have no
    p̂ and are skipped); k/n, or (k+1)/(n+2) with the Beta prior, as the run scores its batches."""
    out: dict[str, list[float]] = {}
    for sid, _, k, n in ledger.recent_seed_batches(session, run_id, 0, epoch - 1):  # ordered by epoch
        if n > 0:
            out.setdefault(sid, []).append((k + 1) / (n + 2) if beta_prior else k / n)
    return out


def sample_seeds(
    pool: list[Seed],
    k: int,
    random_seed: int,
    epoch: int,
    *,
    strategy: SeedSampling = SeedSampling.UNIFORM,
    group_of: Callable[[dict[str, Any]], str | None] | None = None,
    history: Mapping[str, Sequence[float]] | None = None,
    progress: LearningProgressConfig | None = None,
) -> list[Seed]:
    """k seeds without replacement, reproducible from (random_seed, epoch) (and, for learning_progress, ``history``).

    stratified: k // groups from every difficulty group (``group_of`` on the payload), the remainder from groups
    drawn at random; a group with too few seeds gives all it has and the others make up the difference.
    learning_progress: each draw ∝ genenv.curriculum.learning_progress.seed_weights of the seeds' p̂ ``history``
    (seed id → p̂ per earlier epoch, oldest first; none: uniform).
    """
    if not pool:
        raise ValueError("the domain's training split has no seeds")
    rng = random.Random(f"{random_seed}:{epoch}")
    if strategy is SeedSampling.LEARNING_PROGRESS:
        lp = progress or LearningProgressConfig()
        weights = seed_weights([s.id for s in pool], history or {}, rate=lp.ema_rate, theta=lp.reweight_theta,
                               floor=lp.floor)
        return weighted_sample(pool, weights, k, rng)
    if strategy is SeedSampling.UNIFORM or group_of is None:
        return rng.sample(pool, min(k, len(pool)))
    groups: dict[str, list[Seed]] = {}
    for seed in pool:
        groups.setdefault(str(group_of(seed.payload)), []).append(seed)
    queues = [rng.sample(members, len(members)) for _, members in sorted(groups.items())]
    chosen: list[Seed] = []
    # Round-robin in a random group order per round: equal shares, and the remainder lands on random groups.
    while len(chosen) < min(k, len(pool)):
        order = [q for q in queues if q]
        rng.shuffle(order)
        for q in order[: min(k, len(pool)) - len(chosen)]:
            chosen.append(q.pop())
    return chosen
