"""The orchestrator's own reads and writes (repository functions: take a session, flush, never commit)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from genenv.contracts.adapters import Role, adapter_name
from genenv.contracts.epochs import EpochPhase
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import EpochRow, RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import adapters


def get_or_create_epoch(session: Session, run_id: str, index: int) -> EpochRow:
    """The epoch row (created at GENERATE the first time it is needed)."""
    row = session.scalar(select(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == index))
    if row is None:
        row = EpochRow(run_id=run_id, index=index, phase=EpochPhase.GENERATE.value, summary={})
        session.add(row)
        session.flush()
    return row


def latest_adapter_name(session: Session, run_id: str, role: Role) -> str | None:
    """Served name of the newest adapter of a role (None = base model)."""
    row = adapters.latest_adapter(session, run_id, role)
    return None if row is None else adapter_name(run_id, role, row.version)


def seeds_with_tasks(session: Session, run_id: str, epoch: int) -> set[str]:
    """Seed ids that already have task rows in this epoch (GENERATE skips them after a crash)."""
    return set(
        session.scalars(select(TaskRow.seed_id).where(TaskRow.run_id == run_id, TaskRow.epoch == epoch).distinct())
    )


def count_valid_tasks(session: Session, run_id: str, epoch: int) -> int:
    """Number of valid tasks of an epoch."""
    return int(
        session.scalar(
            select(func.count(TaskRow.id)).where(
                TaskRow.run_id == run_id, TaskRow.epoch == epoch, TaskRow.status == TaskStatus.VALID.value
            )
        )
        or 0
    )


def unverified_rollouts(session: Session, run_id: str, epoch: int, limit: int) -> list[tuple[RolloutRow, TaskRow]]:
    """Rollouts of an epoch that have no verdict yet, with their task."""
    stmt = (
        select(RolloutRow, TaskRow)
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .outerjoin(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
        .where(TaskRow.run_id == run_id, TaskRow.epoch == epoch, VerdictRow.id.is_(None))
        .order_by(RolloutRow.id)
        .limit(limit)
    )
    return [(r, t) for r, t in session.execute(stmt).tuples()]


def phase_started(row: EpochRow, phase: EpochPhase) -> float | None:
    """When the epoch's ``phase`` started (Unix seconds, kept in its summary's ``_phase_started``), None if never."""
    started = (row.summary or {}).get("_phase_started", {}).get(phase.value)
    return None if started is None else float(started)


def merge_summary(row: EpochRow, **values: Any) -> None:
    """Update keys of the epoch's JSON summary (reassigned so SQLAlchemy sees the change)."""
    summary = dict(row.summary or {})
    summary.update(values)
    row.summary = summary
