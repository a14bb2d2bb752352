"""An epoch under seed_sampling learning_progress draws its seeds from the run's stored p̂ history (the orchestrator's
epoch_seeds on a migrated database; no model: the history is written as the SCORE phase stores it)."""

from __future__ import annotations

from collections import Counter

from curr_helpers import make_run
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.runs import RunConfig, SeedSampling
from genenv.db.engine import session_scope
from genenv.db.models import SeedRow, SeedStatRow
from genenv.domains import get_domain
from genenv_orchestrator.seeds import epoch_seeds, p_hat_history, sample_seeds

POOL = get_domain("arithmetic").load_seeds(None, "train")


def _store_batch(s: Session, run_id: str, epoch: int, index: int, k: int, n: int) -> None:
    seed = POOL[index]
    s.add(SeedRow(run_id=run_id, epoch=epoch, seed_id=seed.id, domain="arithmetic", payload=seed.payload))
    s.add(SeedStatRow(run_id=run_id, epoch=epoch, seed_id=seed.id, n=n, k=k, p_hat=k / n if n else None,
                      p_beta=(k + 1) / (n + 2)))


def test_an_epoch_draws_from_the_stored_p_hat_history(any_sessions: sessionmaker[Session]) -> None:
    settings = {"mode": "random_simulator", "seeds_per_epoch": 6, "random_seed": 5, "epochs": 4,
                "seed_sampling": "learning_progress", "learning_progress": {"floor": 0.2}}
    with session_scope(any_sessions) as s:
        run = make_run(s, **settings)
        # Epochs 0 and 1 as SCORE left them: seed 0 moved 0.125 → 0.75, seeds 1-5 stayed flat, seed 6 had no valid
        # attempt in epoch 1 (n = 0: no p̂, skipped).
        for epoch, p_first in ((0, 4), (1, 24)):
            _store_batch(s, run, epoch, 0, p_first, 32)
            for i in range(1, 6):
                _store_batch(s, run, epoch, i, 16, 32)
        _store_batch(s, run, 0, 6, 8, 32)
        _store_batch(s, run, 1, 6, 0, 0)
    config = RunConfig.model_validate(settings)
    with session_scope(any_sessions) as s:
        history = p_hat_history(s, run, 2)
        assert history[POOL[0].id] == [0.125, 0.75] and history[POOL[1].id] == [0.5, 0.5]
        assert history[POOL[6].id] == [0.25]
        rows = epoch_seeds(s, run, 2, config, None)
    want = sample_seeds(POOL, 6, 5, 2, strategy=SeedSampling.LEARNING_PROGRESS, history=history,
                        progress=config.learning_progress)
    assert [r.seed_id for r in rows] == [w.id for w in want]
    assert POOL[0].id in {r.seed_id for r in rows}  # the seed whose p̂ moved holds 0.8 of the mass
    # Stored once: a second call reads the same seeds (the phase is idempotent).
    with session_scope(any_sessions) as s:
        assert [r.seed_id for r in epoch_seeds(s, run, 2, config, None)] == [r.seed_id for r in rows]
    # Under uniform sampling the same history changes nothing: the moved seed is rarely drawn.
    uniform_hits = Counter(x.id for r in range(200) for x in sample_seeds(POOL, 6, r, 2))
    lp_hits = Counter(x.id for r in range(200) for x in sample_seeds(
        POOL, 6, r, 2, strategy=SeedSampling.LEARNING_PROGRESS, history=history, progress=config.learning_progress))
    assert lp_hits[POOL[0].id] > 180 > 20 > uniform_hits[POOL[0].id]
