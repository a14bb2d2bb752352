"""Benchmark evaluation rows (written by the verifier's evaluators; listed by the control plane's inspection)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from genenv.contracts.adapters import Evaluation
from genenv.db.models import EvaluationRow
from genenv.db.repositories.common import as_utc


def create_evaluation(
    session: Session,
    *,
    benchmark: str,
    split: str,
    adapter: str | None,
    metrics: dict[str, Any],
    n_items: int,
    run_id: str | None = None,
    epoch: int | None = None,
    idempotency_key: str | None = None,
) -> EvaluationRow:
    """Insert an evaluation; with an idempotency key already stored, return that row instead (nothing written)."""
    if idempotency_key is not None:
        existing = get_by_idempotency_key(session, idempotency_key)
        if existing is not None:
            return existing
    row = EvaluationRow(
        benchmark=benchmark,
        split=split,
        adapter=adapter,
        metrics=metrics,
        n_items=n_items,
        run_id=run_id,
        epoch=epoch,
        idempotency_key=idempotency_key,
    )
    if idempotency_key is None:
        session.add(row)
        session.flush()
        return row
    # A concurrent writer with the same key may win between the lookup and the insert: keep theirs.
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:
        existing = get_by_idempotency_key(session, idempotency_key)
        if existing is None:
            raise
        return existing
    return row


def get_by_idempotency_key(session: Session, key: str) -> EvaluationRow | None:
    """The evaluation stored under an idempotency key, if any."""
    return session.scalars(select(EvaluationRow).where(EvaluationRow.idempotency_key == key)).first()


def get_evaluation(session: Session, evaluation_id: int) -> EvaluationRow | None:
    """One evaluation by id."""
    return session.get(EvaluationRow, evaluation_id)


def latest_base(session: Session, benchmark: str, split: str) -> EvaluationRow | None:
    """The newest evaluation of the base model (no adapter, outside any run) on ``benchmark``'s ``split``: what
    ``genenv bench evaluate`` stores."""
    return session.scalars(
        select(EvaluationRow)
        .where(EvaluationRow.run_id.is_(None), EvaluationRow.adapter.is_(None), EvaluationRow.benchmark == benchmark,
               EvaluationRow.split == split)
        .order_by(EvaluationRow.id.desc())
    ).first()


def to_contract(row: EvaluationRow) -> Evaluation:
    """The wire form of a row (timestamps as aware UTC on both databases)."""
    return Evaluation.model_validate(row).model_copy(update={"created_at": as_utc(row.created_at)})
