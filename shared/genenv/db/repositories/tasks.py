"""Generated tasks of a run epoch: valid ones and rejected ones (kept with their reason). Flush, never commit."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.contracts.tasks import GeneratedTask, RejectionReason, TaskStatus
from genenv.db.models import TaskRow
from genenv.db.repositories.upsert import insert_for

SEEDLESS = ""
"""seed_id stored for a generation without a seed (the unique key needs a non-NULL value)."""


def epoch_tasks(session: Session, run_id: str, epoch: int, *, seed_ids: Collection[str] | None = None) -> list[TaskRow]:
    """Every stored task of an epoch (optionally of some seeds), in (seed, variation) order."""
    stmt = select(TaskRow).where(TaskRow.run_id == run_id, TaskRow.epoch == epoch)
    if seed_ids is not None:
        stmt = stmt.where(TaskRow.seed_id.in_(list(seed_ids)))
    return list(session.scalars(stmt.order_by(TaskRow.seed_id, TaskRow.variation)))


def valid_tasks(session: Session, run_id: str, epoch: int) -> list[TaskRow]:
    """The valid tasks of an epoch, by id (the rollout worker's input)."""
    stmt = select(TaskRow).where(
        TaskRow.run_id == run_id, TaskRow.epoch == epoch, TaskRow.status == TaskStatus.VALID.value
    )
    return list(session.scalars(stmt.order_by(TaskRow.id)))


def earlier_valid_payloads(session: Session, run_id: str, epoch: int) -> list[dict[str, Any]]:
    """Payloads of the run's valid tasks of epochs before ``epoch`` (what simulator.reject_repeats compares with)."""
    rows = session.scalars(select(TaskRow.payload).where(
        TaskRow.run_id == run_id, TaskRow.epoch < epoch, TaskRow.status == TaskStatus.VALID.value
    ).order_by(TaskRow.id))
    return [p for p in rows if isinstance(p, dict)]


def store_generated(session: Session, run_id: str, epoch: int, tasks: Sequence[GeneratedTask]) -> int:
    """Insert tasks unless their (run, epoch, seed, variation) is already stored; how many were inserted."""
    # Rejected generations are stored too (status 'rejected' + reason, no payload) for the epoch summary and the
    # simulator update; they never get rollouts because the rollout worker reads valid tasks only.
    if not tasks:
        return 0
    rows = [
        {
            "run_id": run_id,
            "epoch": epoch,
            "seed_id": t.seed_id if t.seed_id is not None else SEEDLESS,
            "domain": t.domain,
            "variation": t.variation,
            "status": t.status.value,
            "payload": t.payload if t.status is TaskStatus.VALID else None,
            "rejection_reason": t.rejection_reason.value if t.rejection_reason else None,
            "rejection_detail": t.rejection_detail,
            "raw_text": t.raw_text,
            "prompt_messages": t.prompt_messages,
            "generator_adapter": t.generator_adapter,
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
        }
        for t in tasks
    ]
    stmt = insert_for(session, TaskRow).values(rows)
    stmt = stmt.on_conflict_do_nothing(index_elements=["run_id", "epoch", "seed_id", "variation"])
    # RETURNING counts what was really inserted (rowcount is -1 for this statement on psycopg).
    inserted = len(session.execute(stmt.returning(TaskRow.id)).all())
    session.flush()
    return inserted


def to_generated(row: TaskRow) -> GeneratedTask:
    """A stored task in the simulator service's wire form."""
    return GeneratedTask(
        seed_id=row.seed_id or None,
        domain=row.domain,
        variation=row.variation,
        payload=row.payload,
        status=TaskStatus(row.status),
        rejection_reason=RejectionReason(row.rejection_reason) if row.rejection_reason else None,
        rejection_detail=row.rejection_detail,
        raw_text=row.raw_text,
        prompt_messages=row.prompt_messages,
        generator_adapter=row.generator_adapter,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
    )
