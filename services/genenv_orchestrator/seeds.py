"""Which seeds an epoch uses, and what the simulator is told about them: stored once per (run, epoch).

Seeds are a deterministic sample of the domain's training split per (random seed, epoch), the same in every mode,
so that the modes of an experiment see the same seeds. Each stored seed carries the agent's recent success
statistics the simulator's prompt will show for it (genenv.curriculum.context).
"""

from __future__ import annotations

import random
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import Seed
from genenv.curriculum.context import RecentBatch, choose_context
from genenv.db.models import SeedRow
from genenv.db.repositories import ledger
from genenv.domains import get_domain


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
    domain = get_domain(config.domain)
    pool = domain.load_seeds(benchmarks_dir, "train")
    chosen = sample_seeds(pool, config.seeds_per_epoch, config.random_seed, epoch)
    context = {}
    if config.uses_simulator and epoch > 0:
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


def sample_seeds(pool: list[Seed], k: int, random_seed: int, epoch: int) -> list[Seed]:
    """k seeds without replacement, reproducible from (random_seed, epoch)."""
    if not pool:
        raise ValueError("the domain's training split has no seeds")
    rng = random.Random(f"{random_seed}:{epoch}")
    return rng.sample(pool, min(k, len(pool)))
