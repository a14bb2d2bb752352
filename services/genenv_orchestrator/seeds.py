"""Which seeds an epoch uses: a deterministic sample of the domain's training split, stored once."""

from __future__ import annotations

import random
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.contracts.runs import RunConfig, RunMode
from genenv.contracts.tasks import Seed
from genenv.db.models import SeedRow
from genenv.domains import get_domain


def epoch_seeds(
    session: Session, run_id: str, epoch: int, config: RunConfig, benchmarks_dir: Path | None
) -> list[SeedRow]:
    """The seeds of (run, epoch): read if stored, else sampled and stored (idempotent across crashes)."""
    stored = list(
        session.scalars(
            select(SeedRow).where(SeedRow.run_id == run_id, SeedRow.epoch == epoch).order_by(SeedRow.id)
        )
    )
    if stored:
        return stored
    if config.mode is RunMode.STATIC_AUGMENTATION and epoch > 0:
        # The static baseline trains on one fixed set built from epoch 0's seeds.
        return epoch_seeds(session, run_id, 0, config, benchmarks_dir)
    pool = get_domain(config.domain).load_seeds(benchmarks_dir, "train")
    chosen = sample_seeds(pool, config.seeds_per_epoch, config.random_seed, epoch)
    rows = [
        SeedRow(run_id=run_id, epoch=epoch, seed_id=s.id, domain=config.domain, payload=s.payload) for s in chosen
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
