"""Agent rollouts: one row per (task, attempt), inserted idempotently. Flush, never commit."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from genenv.db.models import RolloutRow, TaskRow
from genenv.db.repositories.upsert import insert_for


@dataclass(frozen=True)
class NewRollout:
    """One finished attempt (a response, or an error after the allowed retries)."""

    task_id: int
    attempt: int
    agent_adapter: str | None
    prompt_messages: list[dict[str, Any]] = field(default_factory=list)
    response: str | None = None
    token_ids: list[int] | None = None
    token_logprobs: list[float] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    error: str | None = None
    retries: int = 0


def stored_attempts(session: Session, task_ids: Collection[int]) -> set[tuple[int, int]]:
    """(task id, attempt) pairs already stored for these tasks."""
    if not task_ids:
        return set()
    rows = session.execute(select(RolloutRow.task_id, RolloutRow.attempt).where(RolloutRow.task_id.in_(list(task_ids))))
    return {(int(t), int(a)) for t, a in rows}


def insert_rollouts(session: Session, rollouts: Sequence[NewRollout]) -> int:
    """Insert rollouts, skipping (task, attempt) pairs that exist (a concurrent or re-run worker); rows inserted."""
    if not rollouts:
        return 0
    stmt = insert_for(session, RolloutRow).values([asdict(r) for r in rollouts])
    stmt = stmt.on_conflict_do_nothing(index_elements=["task_id", "attempt"]).returning(RolloutRow.id)
    # RETURNING counts what was really inserted (rowcount is -1 for this statement on psycopg).
    inserted = len(session.execute(stmt).all())
    session.flush()
    return inserted


def epoch_rollouts(session: Session, run_id: str, epoch: int) -> list[RolloutRow]:
    """All rollouts of a run epoch, by (task, attempt)."""
    stmt = (
        select(RolloutRow)
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .where(TaskRow.run_id == run_id, TaskRow.epoch == epoch)
        .order_by(RolloutRow.task_id, RolloutRow.attempt)
    )
    return list(session.scalars(stmt))


def count_epoch_rollouts(session: Session, run_id: str, epoch: int) -> int:
    """How many rollouts a run epoch has."""
    stmt = (
        select(func.count(RolloutRow.id))
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .where(TaskRow.run_id == run_id, TaskRow.epoch == epoch)
    )
    return int(session.scalar(stmt) or 0)
