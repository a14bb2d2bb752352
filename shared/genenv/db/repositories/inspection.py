"""Paginated read queries behind the control plane's inspection endpoints. Read-only."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.contracts.adapters import Adapter, Evaluation, Role
from genenv.contracts.pagination import Page
from genenv.contracts.rollouts import Rollout, Verdict, VerdictError, VerdictErrorKind
from genenv.contracts.scores import RunStat, StatKind
from genenv.contracts.tasks import Task, TaskStatus
from genenv.db.models import (
    AdapterRow,
    CurriculumScoreRow,
    EvaluationRow,
    RolloutRow,
    SeedStatRow,
    TaskRow,
    TaskStatRow,
    VerdictRow,
)
from genenv.db.repositories.common import as_utc, keyset_page


def list_tasks(
    session: Session,
    run_id: str,
    *,
    epoch: int | None = None,
    seed_id: str | None = None,
    status: TaskStatus | None = None,
    domain: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Page[Task]:
    """Tasks of a run, filtered by epoch, seed, status and domain."""
    stmt = select(TaskRow).where(TaskRow.run_id == run_id)
    if epoch is not None:
        stmt = stmt.where(TaskRow.epoch == epoch)
    if seed_id is not None:
        stmt = stmt.where(TaskRow.seed_id == seed_id)
    if status is not None:
        stmt = stmt.where(TaskRow.status == status.value)
    if domain is not None:
        stmt = stmt.where(TaskRow.domain == domain)
    rows, next_cursor = keyset_page(session, stmt, TaskRow.id, cursor=cursor, limit=limit)
    # '' marks a seedless generation in the table (part of a unique key); the wire form says None.
    items = [Task.model_validate(r[0]).model_copy(update={"seed_id": r[0].seed_id or None}) for r in rows]
    return Page[Task](items=items, next_cursor=next_cursor)


def list_rollouts(
    session: Session,
    run_id: str,
    *,
    task_id: int | None = None,
    epoch: int | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Page[Rollout]:
    """Rollouts of a run's tasks, filtered by task and epoch, each with its verdict once it has one."""
    stmt = (
        select(RolloutRow, VerdictRow)
        .join(TaskRow, RolloutRow.task_id == TaskRow.id)
        .outerjoin(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
        .where(TaskRow.run_id == run_id)
    )
    if task_id is not None:
        stmt = stmt.where(RolloutRow.task_id == task_id)
    if epoch is not None:
        stmt = stmt.where(TaskRow.epoch == epoch)
    rows, next_cursor = keyset_page(session, stmt, RolloutRow.id, cursor=cursor, limit=limit)
    items = [Rollout.model_validate(r).model_copy(update={"verdict": _verdict(v)}) for r, v in rows]
    return Page[Rollout](items=items, next_cursor=next_cursor)


def _verdict(row: VerdictRow | None) -> Verdict | None:
    """The wire verdict of a stored one: the table keeps one error kind/message pair, which on a valid verdict is
    the reply's form error (score 0) and on an invalid one the reason it was left out."""
    if row is None:
        return None
    err = None if row.error_kind is None else VerdictError(
        kind=VerdictErrorKind(row.error_kind), message=row.error_message or ""
    )
    return Verdict(
        valid=row.valid, score=row.score, success=row.success, details=row.details,
        error=None if row.valid else err, form_error=err if row.valid else None,
    )


def list_adapters(
    session: Session, run_id: str, *, role: Role | None = None, cursor: str | None = None, limit: int = 50
) -> Page[Adapter]:
    """Adapter versions of a run, optionally of one role."""
    stmt = select(AdapterRow).where(AdapterRow.run_id == run_id)
    if role is not None:
        stmt = stmt.where(AdapterRow.role == role.value)
    rows, next_cursor = keyset_page(session, stmt, AdapterRow.id, cursor=cursor, limit=limit)
    items = [Adapter.model_validate(r[0]).model_copy(update={"created_at": as_utc(r[0].created_at)}) for r in rows]
    return Page[Adapter](items=items, next_cursor=next_cursor)


def list_evaluations(
    session: Session,
    run_id: str,
    *,
    benchmark: str | None = None,
    epoch: int | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Page[Evaluation]:
    """Benchmark evaluations of a run, filtered by benchmark and epoch."""
    stmt = select(EvaluationRow).where(EvaluationRow.run_id == run_id)
    if benchmark is not None:
        stmt = stmt.where(EvaluationRow.benchmark == benchmark)
    if epoch is not None:
        stmt = stmt.where(EvaluationRow.epoch == epoch)
    rows, next_cursor = keyset_page(session, stmt, EvaluationRow.id, cursor=cursor, limit=limit)
    items = [
        Evaluation.model_validate(r[0]).model_copy(update={"created_at": as_utc(r[0].created_at)}) for r in rows
    ]
    return Page[Evaluation](items=items, next_cursor=next_cursor)


def list_stats(
    session: Session,
    run_id: str,
    *,
    kind: StatKind = StatKind.SEED,
    epoch: int | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> Page[RunStat]:
    """Task stats, seed stats or curriculum scores of a run (one kind per page sequence)."""
    if kind is StatKind.TASK:
        task_stmt = (
            select(TaskStatRow, TaskRow.epoch)
            .join(TaskRow, TaskStatRow.task_id == TaskRow.id)
            .where(TaskRow.run_id == run_id)
        )
        if epoch is not None:
            task_stmt = task_stmt.where(TaskRow.epoch == epoch)
        task_rows, next_cursor = keyset_page(session, task_stmt, TaskStatRow.id, cursor=cursor, limit=limit)
        items = [
            RunStat(kind=kind, epoch=ep, key=str(s.task_id), k=s.k, n=s.n, p_hat=s.p_hat, p_beta=s.p_beta)
            for s, ep in task_rows
        ]
    elif kind is StatKind.SEED:
        seed_stmt = select(SeedStatRow).where(SeedStatRow.run_id == run_id)
        if epoch is not None:
            seed_stmt = seed_stmt.where(SeedStatRow.epoch == epoch)
        seed_rows, next_cursor = keyset_page(session, seed_stmt, SeedStatRow.id, cursor=cursor, limit=limit)
        items = [
            RunStat(kind=kind, epoch=s.epoch, key=s.seed_id, k=s.k, n=s.n, p_hat=s.p_hat, p_beta=s.p_beta)
            for (s,) in seed_rows
        ]
    else:
        score_stmt = select(CurriculumScoreRow).where(CurriculumScoreRow.run_id == run_id)
        if epoch is not None:
            score_stmt = score_stmt.where(CurriculumScoreRow.epoch == epoch)
        score_rows, next_cursor = keyset_page(
            session, score_stmt, CurriculumScoreRow.id, cursor=cursor, limit=limit
        )
        items = [
            RunStat(
                kind=kind,
                epoch=c.epoch,
                key=c.seed_id,
                k=c.k,
                n=c.n,
                p_hat=c.p_hat,
                r_env=c.r_env,
                weight=c.weight,
                in_band=c.in_band,
            )
            for (c,) in score_rows
        ]
    return Page[RunStat](items=items, next_cursor=next_cursor)
