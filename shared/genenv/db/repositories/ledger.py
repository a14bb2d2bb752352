"""The difficulty ledger: valid-verdict success counts per task and per seed, aggregated in the database.

Every number here is a GROUP BY over task ⟕ rollout ⟕ verdict (valid verdicts only: an invalid verdict is an
error, not a failure); verdict rows are never loaded into Python.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Select, and_, case, cast, delete, func, select
from sqlalchemy.orm import Session

from genenv.contracts.pagination import Page
from genenv.contracts.scores import SeedLedgerEntry, TaskLedgerEntry
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import RolloutRow, SeedRow, SeedStatRow, TaskRow, TaskStatRow, VerdictRow
from genenv.db.repositories.common import decode_cursor, encode_cursor
from genenv.db.repositories.upsert import insert_for

_N = func.count(VerdictRow.id)
_K = func.coalesce(func.sum(case((VerdictRow.success.is_(True), 1), else_=0)), 0)
_P_HAT = case((_N > 0, cast(_K, Float) / cast(_N, Float)), else_=None)
_P_BETA = (cast(_K, Float) + 1.0) / (cast(_N, Float) + 2.0)


def _counts(*columns: Any) -> Select[Any]:
    """SELECT columns, n, k, p̂, p_beta over valid tasks with their valid verdicts (n = 0 when none)."""
    return (
        select(*columns, _N.label("n"), _K.label("k"), _P_HAT.label("p_hat"), _P_BETA.label("p_beta"))
        .select_from(TaskRow)
        .outerjoin(RolloutRow, RolloutRow.task_id == TaskRow.id)
        .outerjoin(VerdictRow, and_(VerdictRow.rollout_id == RolloutRow.id, VerdictRow.valid.is_(True)))
        .where(TaskRow.status == TaskStatus.VALID.value)
    )


def task_ledger(
    session: Session,
    run_id: str,
    *,
    epoch: int | None = None,
    seed_id: str | None = None,
    after_task_id: int | None = None,
    limit: int | None = None,
) -> list[TaskLedgerEntry]:
    """Per valid task of a run: n valid verdicts, k successes, k/n and (k+1)/(n+2); ordered by task id."""
    stmt = _counts(TaskRow.id, TaskRow.seed_id, TaskRow.epoch).where(TaskRow.run_id == run_id)
    if epoch is not None:
        stmt = stmt.where(TaskRow.epoch == epoch)
    if seed_id is not None:
        stmt = stmt.where(TaskRow.seed_id == seed_id)
    if after_task_id is not None:
        stmt = stmt.where(TaskRow.id > after_task_id)
    stmt = stmt.group_by(TaskRow.id, TaskRow.seed_id, TaskRow.epoch).order_by(TaskRow.id).limit(limit)
    return [
        TaskLedgerEntry(
            key=str(r.id), task_id=r.id, seed_id=r.seed_id, epoch=r.epoch,
            n=r.n, k=r.k, p_hat=r.p_hat, p_beta=r.p_beta,
        )
        for r in session.execute(stmt)
    ]


def seed_ledger(
    session: Session, run_id: str, *, after_seed_id: str | None = None, limit: int | None = None
) -> list[SeedLedgerEntry]:
    """Per seed of a run, over all epochs: counts, estimates, valid tasks and epochs; ordered by seed id."""
    stmt = _counts(
        TaskRow.seed_id,
        func.count(func.distinct(TaskRow.id)).label("tasks"),
        func.count(func.distinct(TaskRow.epoch)).label("epochs"),
    ).where(TaskRow.run_id == run_id)
    if after_seed_id is not None:
        stmt = stmt.where(TaskRow.seed_id > after_seed_id)
    stmt = stmt.group_by(TaskRow.seed_id).order_by(TaskRow.seed_id).limit(limit)
    return [
        SeedLedgerEntry(
            key=r.seed_id, n=r.n, k=r.k, p_hat=r.p_hat, p_beta=r.p_beta, tasks=r.tasks, epochs=r.epochs
        )
        for r in session.execute(stmt)
    ]


def task_ledger_page(
    session: Session, run_id: str, *, epoch: int | None, seed_id: str | None, cursor: str | None, limit: int
) -> Page[TaskLedgerEntry]:
    """One page of the task ledger (keyset on task id)."""
    after = decode_cursor(cursor, [int])[0] if cursor else None
    rows = task_ledger(session, run_id, epoch=epoch, seed_id=seed_id, after_task_id=after, limit=limit + 1)
    more = len(rows) > limit
    return Page(items=rows[:limit], next_cursor=encode_cursor([rows[limit - 1].task_id]) if more else None)


def seed_ledger_page(session: Session, run_id: str, *, cursor: str | None, limit: int) -> Page[SeedLedgerEntry]:
    """One page of the seed ledger (keyset on seed id)."""
    after = decode_cursor(cursor, [str])[0] if cursor else None
    rows = seed_ledger(session, run_id, after_seed_id=after, limit=limit + 1)
    more = len(rows) > limit
    return Page(items=rows[:limit], next_cursor=encode_cursor([rows[limit - 1].key]) if more else None)


def materialise_epoch_stats(session: Session, run_id: str, epoch: int) -> None:
    """Upsert task_stat and seed_stat of one epoch with INSERT … SELECT … GROUP BY … ON CONFLICT."""
    in_epoch = (TaskRow.run_id == run_id, TaskRow.epoch == epoch)

    per_task = _counts(TaskRow.id).where(*in_epoch).group_by(TaskRow.id)
    ins = insert_for(session, TaskStatRow).from_select(["task_id", "n", "k", "p_hat", "p_beta"], per_task)
    session.execute(
        ins.on_conflict_do_update(
            index_elements=["task_id"],
            set_={c: getattr(ins.excluded, c) for c in ("n", "k", "p_hat", "p_beta")},
        )
    )

    per_seed = _counts(TaskRow.run_id, TaskRow.epoch, TaskRow.seed_id).where(*in_epoch).group_by(
        TaskRow.run_id, TaskRow.epoch, TaskRow.seed_id
    )
    ins = insert_for(session, SeedStatRow).from_select(
        ["run_id", "epoch", "seed_id", "n", "k", "p_hat", "p_beta"], per_seed
    )
    session.execute(
        ins.on_conflict_do_update(
            index_elements=["run_id", "epoch", "seed_id"],
            set_={c: getattr(ins.excluded, c) for c in ("n", "k", "p_hat", "p_beta")},
        )
    )
    # A seed whose tasks were all re-marked invalid since the last scoring must not keep a stale row.
    present = select(TaskRow.seed_id).where(*in_epoch, TaskRow.status == TaskStatus.VALID.value)
    session.execute(
        delete(SeedStatRow).where(
            SeedStatRow.run_id == run_id, SeedStatRow.epoch == epoch, SeedStatRow.seed_id.not_in(present)
        )
    )
    session.flush()


def epoch_seed_counts(session: Session, run_id: str, epoch: int) -> list[tuple[str, int, int]]:
    """(seed id, k, n) of one epoch's seed batches from seed_stat (call materialise_epoch_stats first)."""
    rows = session.execute(
        select(SeedStatRow.seed_id, SeedStatRow.k, SeedStatRow.n)
        .where(SeedStatRow.run_id == run_id, SeedStatRow.epoch == epoch)
        .order_by(SeedStatRow.seed_id)
    )
    return [(r.seed_id, r.k, r.n) for r in rows]


def recent_seed_batches(
    session: Session, run_id: str, first_epoch: int, last_epoch: int
) -> list[tuple[str, dict[str, Any], int, int]]:
    """(seed id, seed payload, k, n) of every scored seed batch of epochs first..last (from seed_stat)."""
    rows = session.execute(
        select(SeedStatRow.seed_id, SeedRow.payload, SeedStatRow.k, SeedStatRow.n)
        .join(SeedRow, and_(SeedRow.run_id == SeedStatRow.run_id, SeedRow.epoch == SeedStatRow.epoch,
                            SeedRow.seed_id == SeedStatRow.seed_id))
        .where(SeedStatRow.run_id == run_id, SeedStatRow.epoch >= first_epoch, SeedStatRow.epoch <= last_epoch)
        .order_by(SeedStatRow.epoch, SeedStatRow.seed_id)
    )
    return [(r.seed_id, r.payload, r.k, r.n) for r in rows]
