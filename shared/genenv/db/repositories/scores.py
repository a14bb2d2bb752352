"""Stored curriculum scores of seed batches: rows in, rows out (the scoring itself is genenv.curriculum's)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from genenv.contracts.scores import CurriculumScore
from genenv.db.models import CurriculumScoreRow
from genenv.db.repositories.upsert import insert_for


def replace_epoch_scores(session: Session, run_id: str, epoch: int, scores: Sequence[CurriculumScore]) -> None:
    """Make ``scores`` the epoch's stored scores: upsert each seed's, delete those of seeds no longer scored."""
    if scores:
        ins = insert_for(session, CurriculumScoreRow).values(
            [{"run_id": run_id, "epoch": epoch, **s.model_dump()} for s in scores]
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
            CurriculumScoreRow.seed_id.not_in([s.seed_id for s in scores]),
        )
    )
    session.flush()


def epoch_scores(session: Session, run_id: str, epoch: int) -> list[CurriculumScore]:
    """The stored scores of one epoch by seed id (empty when the epoch was never scored)."""
    rows = session.scalars(
        select(CurriculumScoreRow)
        .where(CurriculumScoreRow.run_id == run_id, CurriculumScoreRow.epoch == epoch)
        .order_by(CurriculumScoreRow.seed_id)
    ).all()
    return [CurriculumScore.model_validate(r) for r in rows]
