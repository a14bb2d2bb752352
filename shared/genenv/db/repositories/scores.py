"""Curriculum scores of seed batches: computed from the ledger with the run's α, β, k_min, λ and stored."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from genenv.contracts.runs import RunConfig
from genenv.contracts.scores import CurriculumScore, ScoreResponse
from genenv.curriculum.scoring import score_batches
from genenv.db.models import CurriculumScoreRow
from genenv.db.repositories import runs
from genenv.db.repositories.ledger import epoch_seed_counts, materialise_epoch_stats
from genenv.db.repositories.upsert import insert_for


def run_config(session: Session, run_id: str) -> RunConfig:
    """The validated configuration of a run; NotFoundError (404) when the run does not exist."""
    return runs.run_config(session, run_id)


def score_epoch(session: Session, run_id: str, epoch: int) -> ScoreResponse:
    """Materialise the epoch's task/seed stats, score its seed batches and upsert curriculum_score rows."""
    config = run_config(session, run_id)
    materialise_epoch_stats(session, run_id, epoch)
    result = score_batches(epoch_seed_counts(session, run_id, epoch), config.curriculum)
    if result.scores:
        ins = insert_for(session, CurriculumScoreRow).values(
            [{"run_id": run_id, "epoch": epoch, **s.model_dump()} for s in result.scores]
        )
        session.execute(
            ins.on_conflict_do_update(
                index_elements=["run_id", "epoch", "seed_id"],
                set_={c: getattr(ins.excluded, c) for c in ("k", "n", "p_hat", "r_env", "weight", "in_band")},
            )
        )
    session.execute(
        delete(CurriculumScoreRow).where(
            CurriculumScoreRow.run_id == run_id,
            CurriculumScoreRow.epoch == epoch,
            CurriculumScoreRow.seed_id.not_in([s.seed_id for s in result.scores]),
        )
    )
    session.flush()
    return result


def stored_scores(session: Session, run_id: str, epoch: int) -> ScoreResponse:
    """The stored scores of one epoch (empty when the epoch was never scored)."""
    run_config(session, run_id)
    rows = session.scalars(
        select(CurriculumScoreRow)
        .where(CurriculumScoreRow.run_id == run_id, CurriculumScoreRow.epoch == epoch)
        .order_by(CurriculumScoreRow.seed_id)
    ).all()
    scores = [CurriculumScore.model_validate(r) for r in rows]
    scored = [s for s in scores if s.p_hat is not None]
    share = sum(s.in_band for s in scored) / len(scored) if scored else None
    return ScoreResponse(scores=scores, in_band_share=share)
