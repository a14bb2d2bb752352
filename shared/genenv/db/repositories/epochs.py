"""Epochs of a run: get, list, and an idempotent upsert of phase and summary. Flush, never commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, Text, cast, select
from sqlalchemy.orm import Session

from genenv.contracts.epochs import Epoch, EpochPhase, EpochSummary
from genenv.contracts.errors import NotFoundError
from genenv.contracts.pagination import Page
from genenv.db.models import EpochRow
from genenv.db.repositories.cache import ValidatedCache
from genenv.db.repositories.common import as_utc, as_utc_opt, keyset_page
from genenv.db.repositories.upsert import insert_for


def find(session: Session, run_id: str, index: int, *, for_update: bool = False) -> EpochRow | None:
    """Epoch ``index`` of run ``run_id`` or None."""
    stmt = select(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == index)
    if for_update:
        stmt = stmt.with_for_update()
    return session.scalars(stmt).one_or_none()


def get(session: Session, run_id: str, index: int) -> EpochRow:
    """Epoch ``index`` of run ``run_id``; NotFoundError (404) if absent."""
    row = find(session, run_id, index)
    if row is None:
        raise NotFoundError(f"epoch {index} of run {run_id!r} not found", param="index", code="epoch_not_found")
    return row


def list_epochs(session: Session, run_id: str, *, cursor: str | None = None, limit: int = 50) -> Page[Epoch]:
    """Epochs of a run in creation order."""
    # Columns, not ORM entities: a page is read-only, and building 50 tracked instances cost more than the query.
    # The summary comes as its JSON text, the key of the validated-summary cache.
    stmt = select(
        EpochRow.id, EpochRow.run_id, EpochRow.index, EpochRow.phase, cast(EpochRow.summary, Text).label("text"),
        EpochRow.started_at, EpochRow.finished_at,
    ).where(EpochRow.run_id == run_id)
    rows, next_cursor = keyset_page(session, stmt, EpochRow.id, cursor=cursor, limit=limit)
    return Page[Epoch](items=[_epoch(r, _summary(r.text)) for r in rows], next_cursor=next_cursor)


# Epoch summaries by their stored JSON text: decoding and validating a page of summaries was most of the CPU of
# ``GET /v1/runs/{id}/epochs``, and the text determines the summary, so a summary updated in place simply gets a
# new entry. Closed epochs never change, so a dashboard polling a run hits the cache for all but the current epoch.
_summaries: ValidatedCache[str, EpochSummary] = ValidatedCache(max_size=2048)


def _summary(text: str | None) -> EpochSummary | None:
    if text is None or text == "null":  # never written, or written as JSON null
        return None
    return _summaries.get_or_build(text, lambda: EpochSummary.model_validate_json(text))


def upsert(
    session: Session,
    run_id: str,
    index: int,
    *,
    phase: EpochPhase | None = None,
    summary: EpochSummary | None = None,
    finished_at: datetime | None = None,
) -> EpochRow:
    """Create epoch ``index`` (phase GENERATE) if missing, then set the given fields. Safe under races."""
    values: dict[str, Any] = {"run_id": run_id, "index": index, "phase": EpochPhase.GENERATE.value}
    # INSERT ... ON CONFLICT DO NOTHING: two workers creating the same epoch both end up with the one row.
    stmt = insert_for(session, EpochRow).values(**values).on_conflict_do_nothing(index_elements=["run_id", "index"])
    session.execute(stmt)
    row = find(session, run_id, index, for_update=True)
    assert row is not None  # just inserted or already there
    if phase is not None:
        row.phase = phase.value
    if summary is not None:
        row.summary = summary.model_dump(mode="json")
    if finished_at is not None:
        row.finished_at = finished_at
    session.flush()
    return row


def to_contract(row: EpochRow) -> Epoch:
    """The wire form of an epoch row."""
    return _epoch(row, EpochSummary.model_validate(row.summary) if row.summary is not None else None)


def _epoch(row: EpochRow | Row[Any], summary: EpochSummary | None) -> Epoch:
    """An epoch row (an entity, or a row of the listed columns) with its validated summary."""
    return Epoch(
        run_id=row.run_id,
        index=row.index,
        phase=EpochPhase(row.phase),
        summary=summary,
        started_at=as_utc(row.started_at),
        finished_at=as_utc_opt(row.finished_at),
    )
