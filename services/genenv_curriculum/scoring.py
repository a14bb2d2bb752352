"""Scoring a stored run epoch: the ledger's counts through the pure curriculum scoring, stored once.

The only place that writes curriculum scores; the routes (POST /v1/score) call it.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from genenv.contracts.scores import ScoreResponse
from genenv.curriculum.scoring import score_batches, scored_response
from genenv.db.repositories import runs, scores
from genenv.db.repositories.ledger import epoch_seed_counts, materialise_epoch_stats


def score_epoch(session: Session, run_id: str, epoch: int) -> ScoreResponse:
    """Materialise the epoch's task/seed stats, score its seed batches with the run's curriculum settings and make
    them the epoch's stored scores (idempotent)."""
    config = runs.run_config(session, run_id)
    materialise_epoch_stats(session, run_id, epoch)
    result = score_batches(epoch_seed_counts(session, run_id, epoch), config.curriculum)
    scores.replace_epoch_scores(session, run_id, epoch, result.scores)
    return result


def stored_scores(session: Session, run_id: str, epoch: int) -> ScoreResponse:
    """The stored scores of one epoch with their in-band share; NotFoundError for an unknown run."""
    runs.run_config(session, run_id)  # NotFoundError for an unknown run
    return scored_response(scores.epoch_scores(session, run_id, epoch))
