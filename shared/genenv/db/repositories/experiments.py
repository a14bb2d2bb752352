"""Experiments: create with their member runs, read, list, start, cancel, and chain sequential members.

Flush, never commit. An experiment stores only 'created', 'running' or 'cancelled'; once running, whether it is
completed or failed is read off its members (a member's status is the truth, so the two can never disagree). ``_move``
is the only writer of the stored status (edges: genenv.lifecycle.EXPERIMENT); members move through runs.move.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, literal, or_, select
from sqlalchemy.orm import Session

from genenv.contracts.adapters import JobKind
from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.errors import GenEnvError, NotFoundError
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.contracts.experiment_records import (
    ClosedEpochRecord,
    EvaluationRecord,
    ExperimentRecords,
    MemberRecord,
    PayloadRecord,
    ScoreRecord,
    TrainJobRecord,
)
from genenv.contracts.experiments import (
    Experiment,
    ExperimentCreate,
    ExperimentMember,
    ExperimentStatus,
)
from genenv.contracts.pagination import Page
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import (
    CurriculumScoreRow,
    EpochRow,
    EvaluationRow,
    ExperimentRow,
    RunRow,
    SeedRow,
    TaskRow,
    TaskStatRow,
    TrainJobRow,
    utcnow,
)
from genenv.db.repositories import runs
from genenv.db.repositories.common import as_utc, decode_cursor, encode_cursor, one_or_raise, visible_to
from genenv.lifecycle import EXPERIMENT, RUN_FINISHED, RUN_LIVE
from genenv.tenancy import DEFAULT_TENANT, SERVICE, Caller


def _not_found(experiment_id: str) -> NotFoundError:
    return NotFoundError(
        f"experiment {experiment_id!r} not found", param="experiment_id", code="experiment_not_found"
    )


def create(session: Session, body: ExperimentCreate, *, tenant: str = DEFAULT_TENANT) -> ExperimentRow:
    """Store the experiment of ``tenant`` and one run per (replicate, mode), all in status ``created`` and of the
    same tenant.

    Members are created replicate by replicate (every mode of replicate 0, then of replicate 1, …), so one after
    another they finish whole replicates first: a stopped experiment still has comparable modes.
    """
    stored = body.model_dump(mode="json")
    if runs.has_nul(stored):  # Postgres text and JSONB cannot hold U+0000: a 422 here, not a failed INSERT
        raise GenEnvError("text fields must not contain NUL (\\u0000) characters", param="body")
    row = ExperimentRow(
        id=uuid.uuid4().hex, name=body.name, status=ExperimentStatus.CREATED.value, spec=stored, tenant=tenant,
    )
    session.add(row)
    session.flush()
    base = body.template.model_dump(mode="json")
    for replicate, seed in enumerate(body.seeds()):
        for mode in body.modes:
            config = RunConfig.model_validate(
                {**base, "mode": mode, "random_seed": seed, "name": f"{body.name}/{mode}/r{replicate}"}
            )
            member = runs.create(session, config, tenant=tenant)
            member.experiment_id = row.id
            member.replicate = replicate
    session.flush()
    return row


def get(
    session: Session, experiment_id: str, *, for_update: bool = False, caller: Caller = SERVICE
) -> ExperimentRow:
    """The experiment (row-locked on Postgres when ``for_update``); NotFoundError (404) if absent or not visible to
    ``caller`` (the default, SERVICE, is for the processes' own reads)."""
    stmt = visible_to(select(ExperimentRow).where(ExperimentRow.id == experiment_id), ExperimentRow.tenant, caller)
    return one_or_raise(session, stmt, lambda: _not_found(experiment_id), for_update=for_update)


def spec(row: ExperimentRow) -> ExperimentCreate:
    """The body the experiment was created from."""
    return ExperimentCreate.model_validate(row.spec, strict=False)


def _in_run_order(rows: list[RunRow], modes: list[str]) -> list[RunRow]:
    """By replicate, then in the experiment's mode order (the order sequential members run in)."""
    order = {m: i for i, m in enumerate(modes)}
    return sorted(rows, key=lambda r: (r.replicate or 0, order.get(r.config["mode"], len(order)), r.id))


def members(session: Session, experiment_id: str) -> list[RunRow]:
    """Member runs in their run order."""
    rows = list(session.scalars(select(RunRow).where(RunRow.experiment_id == experiment_id)))
    return _in_run_order(rows, spec(get(session, experiment_id)).modes) if rows else []


def member_ids(session: Session, experiment_id: str) -> list[str]:
    """Ids of the member runs (any order)."""
    return list(session.scalars(select(RunRow.id).where(RunRow.experiment_id == experiment_id)))


def derived_status(stored: str, statuses: list[RunStatus]) -> ExperimentStatus:
    """The experiment's status from its stored one and its members' (pure).

    running: some member still runs or waits its turn; completed: every member completed; failed: every member
    finished and at least one did not complete.
    """
    if stored != ExperimentStatus.RUNNING.value:
        return ExperimentStatus(stored)
    if not statuses or any(s not in RUN_FINISHED for s in statuses):
        return ExperimentStatus.RUNNING
    if all(s is RunStatus.COMPLETED for s in statuses):
        return ExperimentStatus.COMPLETED
    return ExperimentStatus.FAILED


def to_contract(row: ExperimentRow, member_rows: list[RunRow]) -> Experiment:
    """The wire form of an experiment and its members."""
    body = spec(row)
    statuses = [RunStatus(m.status) for m in member_rows]
    return Experiment(
        id=row.id,
        name=row.name,
        status=derived_status(row.status, statuses),
        template=body.template,
        modes=body.modes,
        replicates=body.replicates,
        concurrent=body.concurrent,
        members=[
            ExperimentMember(
                run_id=m.id, mode=m.config["mode"], replicate=m.replicate or 0,
                random_seed=int(m.config.get("random_seed", 0)), status=RunStatus(m.status),
                current_epoch=m.current_epoch, error=m.error,
            )
            for m in member_rows
        ],
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )


def show(session: Session, experiment_id: str, *, caller: Caller = SERVICE) -> Experiment:
    """The experiment with its members; 404 if absent or not visible to ``caller``."""
    row = get(session, experiment_id, caller=caller)
    return to_contract(row, members(session, experiment_id))


def list_experiments(
    session: Session, *, cursor: str | None = None, limit: int = 50, caller: Caller = SERVICE
) -> Page[Experiment]:
    """Experiments ``caller`` may see, newest first; keyset over (created_at, id)."""
    stmt = visible_to(select(ExperimentRow), ExperimentRow.tenant, caller)
    if cursor is not None:
        created, last_id = decode_cursor(cursor, [datetime, str])
        stmt = stmt.where(
            or_(ExperimentRow.created_at < created,
                and_(ExperimentRow.created_at == created, ExperimentRow.id < last_id))
        )
    rows = list(session.scalars(
        stmt.order_by(ExperimentRow.created_at.desc(), ExperimentRow.id.desc()).limit(limit + 1)
    ))
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor([rows[-1].created_at.isoformat(), rows[-1].id])
    by_experiment: dict[str, list[RunRow]] = {r.id: [] for r in rows}
    if rows:
        for member in session.scalars(select(RunRow).where(RunRow.experiment_id.in_(list(by_experiment)))):
            by_experiment[str(member.experiment_id)].append(member)
    items = [to_contract(row, _in_run_order(by_experiment[row.id], spec(row).modes)) for row in rows]
    return Page[Experiment](items=items, next_cursor=next_cursor)


def start(session: Session, experiment_id: str, *, caller: Caller = SERVICE) -> list[str]:
    """created → running: start every member (concurrent) or the first one. Returns the run ids to hand to the
    orchestrator once this transaction commits; ConflictError (409) unless the experiment is created."""
    row = get(session, experiment_id, for_update=True, caller=caller)
    _move(row, EXPERIMENT.action_target(ExperimentStatus(row.status), "start"))
    member_rows = members(session, experiment_id)
    chosen = member_rows if spec(row).concurrent else member_rows[:1]
    for member in chosen:
        runs.apply_action(session, member.id, "start")
    session.flush()
    return [m.id for m in chosen]


def cancel(session: Session, experiment_id: str, *, caller: Caller = SERVICE) -> None:
    """Cancel the experiment and every member not finished yet; ConflictError (409) once it has finished."""
    row = get(session, experiment_id, for_update=True, caller=caller)
    member_rows = members(session, experiment_id)
    # Judged on the derived status: a running experiment whose members all finished has completed or failed.
    current = derived_status(row.status, [RunStatus(m.status) for m in member_rows])
    EXPERIMENT.action_target(current, "cancel")
    _move(row, ExperimentStatus.CANCELLED)
    for member in member_rows:
        if RunStatus(member.status) not in RUN_FINISHED:
            runs.apply_action(session, member.id, "cancel")
    session.flush()


def _move(row: ExperimentRow, target: ExperimentStatus) -> None:
    """The one door for an experiment's stored status: a legal edge of lifecycle.EXPERIMENT on a row read with
    ``for_update`` (the row lock holds concurrent starts and cancels off on Postgres)."""
    EXPERIMENT.check(ExperimentStatus(row.status), target)
    row.status = target.value
    row.updated_at = utcnow()


def start_next_member(session: Session, run_id: str) -> str | None:
    """After member ``run_id`` finished: in a running sequential experiment with no member live, start the next
    created member and return its id (for the caller to hand to the orchestrator after commit), else None.

    Idempotent: a second call finds the started member live and returns None.
    """
    run = session.get(RunRow, run_id)
    if run is None or run.experiment_id is None:
        return None
    row = get(session, run.experiment_id, for_update=True)
    if row.status != ExperimentStatus.RUNNING.value or spec(row).concurrent:
        return None
    member_rows = members(session, row.id)
    if any(RunStatus(m.status) in RUN_LIVE for m in member_rows):
        return None
    waiting = [m for m in member_rows if m.status == RunStatus.CREATED.value]
    if not waiting:
        return None
    runs.apply_action(session, waiting[0].id, "start")
    session.flush()
    return waiting[0].id


def series_records(
    session: Session, experiment_id: str, *, known: Collection[tuple[str, int]] = ()
) -> ExperimentRecords:
    """The stored rows of an experiment's series (genenv.experiments.series computes the numbers from them).

    ``known``: (run id, epoch) pairs whose task and seed payloads the caller has already measured; they are not
    read again (a closed epoch's tasks never change, and the dashboard polls this every few seconds).
    """
    row = get(session, experiment_id)
    body = spec(row)
    member_rows = members(session, experiment_id)
    ids = [m.id for m in member_rows]
    return ExperimentRecords(
        experiment_id=row.id, name=row.name,
        status=derived_status(row.status, [RunStatus(m.status) for m in member_rows]), spec=body,
        members=[MemberRecord(m.id, m.config["mode"], m.replicate or 0, RunStatus(m.status))
                 for m in member_rows],
        # Epochs before payloads: an epoch read as closed has every task and seed written (closing is its last
        # phase), so the payloads read below are final for it, and a caller may keep what it measures from them.
        epochs=_closed_epochs(session, ids),
        evaluations=_evaluations(session, ids, body.template.eval_benchmarks[:1]),
        tasks=_payloads(session, TaskRow, ids, known, TaskRow.status == TaskStatus.VALID.value),
        seeds=_payloads(session, SeedRow, ids, known),
        scores=[ScoreRecord(r.run_id, r.epoch, r.seed_id, r.k, r.n, r.p_hat, r.in_band)
                for r in session.scalars(select(CurriculumScoreRow).where(CurriculumScoreRow.run_id.in_(ids))
                                         .order_by(CurriculumScoreRow.epoch, CurriculumScoreRow.seed_id))],
        train_jobs=_train_jobs(session, ids),
        written=_written(session, ids),
    )


def _closed_epochs(session: Session, ids: list[str]) -> list[ClosedEpochRecord]:
    rows = session.execute(
        select(EpochRow.run_id, EpochRow.index, EpochRow.summary)
        .where(EpochRow.run_id.in_(ids), EpochRow.phase == EpochPhase.CLOSED.value)
        .order_by(EpochRow.index)
    )
    return [ClosedEpochRecord(run_id, int(index), EpochSummary.model_validate(summary or {}))
            for run_id, index, summary in rows]


def _evaluations(session: Session, ids: list[str], benchmarks: list[str]) -> list[EvaluationRecord]:
    """The held-out benchmark's evaluations after epochs, oldest first (a later one of the same epoch wins)."""
    if not benchmarks:
        return []
    rows = session.execute(
        select(EvaluationRow.run_id, EvaluationRow.epoch, EvaluationRow.metrics)
        .where(EvaluationRow.run_id.in_(ids), EvaluationRow.benchmark == benchmarks[0],
               EvaluationRow.epoch.is_not(None))
        .order_by(EvaluationRow.id)
    )
    return [EvaluationRecord(str(run_id), int(epoch), EvaluationMetrics.parse(metrics))
            for run_id, epoch, metrics in rows]


def _payloads(
    session: Session, table: type[TaskRow] | type[SeedRow], ids: list[str], known: Collection[tuple[str, int]],
    *where: ColumnElement[bool],
) -> list[PayloadRecord]:
    """Payloads of tasks or seeds of the members' epochs not in ``known``; a payload that is not an object is
    left out for tasks and read as {} for seeds (what their measures did with them before)."""
    skip: dict[str, list[int]] = {}
    for run_id, epoch in known:
        skip.setdefault(run_id, []).append(epoch)
    per_run = [and_(table.run_id == i, table.epoch.not_in(skip[i])) if i in skip else table.run_id == i
               for i in ids]
    if not per_run:
        return []
    tasks = table is TaskRow
    if tasks:  # a task's own counts (task_stat), for the report's endpoints on non-repeated tasks
        stmt = (select(table.run_id, table.epoch, table.seed_id, table.payload, TaskStatRow.k, TaskStatRow.n)
                .outerjoin(TaskStatRow, TaskStatRow.task_id == TaskRow.id))
    else:
        stmt = select(table.run_id, table.epoch, table.seed_id, table.payload, literal(0), literal(0))
    rows = session.execute(stmt.where(or_(*per_run), *where).order_by(table.id))
    return [PayloadRecord(run_id, int(epoch), str(seed_id), payload if isinstance(payload, dict) else {},
                          int(k or 0), int(n or 0))
            for run_id, epoch, seed_id, payload, k, n in rows if isinstance(payload, dict) or not tasks]


def _train_jobs(session: Session, ids: list[str]) -> list[TrainJobRecord]:
    kinds = [JobKind.TRAIN_AGENT.value, JobKind.TRAIN_SIMULATOR.value]
    return [TrainJobRecord(j.run_id, j.epoch, j.kind, j.status, j.adapter_version, dict(j.metrics or {}))
            for j in session.scalars(select(TrainJobRow).where(TrainJobRow.run_id.in_(ids), TrainJobRow.kind.in_(kinds))
                                     .order_by(TrainJobRow.epoch, TrainJobRow.kind))]


def _written(session: Session, ids: list[str]) -> dict[str, dict[str, int]]:
    """Tasks (valid or rejected) generated per simulator adapter name, per run."""
    out: dict[str, dict[str, int]] = {}
    for run_id, adapter, count in session.execute(
        select(TaskRow.run_id, TaskRow.generator_adapter, func.count(TaskRow.id))
        .where(TaskRow.run_id.in_(ids), TaskRow.generator_adapter.is_not(None))
        .group_by(TaskRow.run_id, TaskRow.generator_adapter)
    ):
        out.setdefault(run_id, {})[str(adapter)] = int(count)
    return out
