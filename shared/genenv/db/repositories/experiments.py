"""Experiments: create with their member runs, read, list, start, cancel, and chain sequential members.

Flush, never commit. An experiment stores only 'created', 'running' or 'cancelled'; once running, whether it is
completed or failed is read off its members (a member's status is the truth, so the two can never disagree). ``_move``
is the only writer of the stored status (edges: genenv.lifecycle.EXPERIMENT); members move through runs.move.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from genenv.contracts.adapters import JobKind, Role, adapter_name
from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.errors import GenEnvError, NotFoundError
from genenv.contracts.experiments import (
    Experiment,
    ExperimentCreate,
    ExperimentMember,
    ExperimentSeries,
    ExperimentStatus,
    MemberEpoch,
    MemberSeries,
    SeedBatch,
    TrainJobSummary,
)
from genenv.contracts.pagination import Page
from genenv.contracts.runs import RunConfig, RunMode, RunStatus
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import (
    CurriculumScoreRow,
    EpochRow,
    EvaluationRow,
    ExperimentRow,
    RunRow,
    SeedRow,
    TaskRow,
    TrainJobRow,
    utcnow,
)
from genenv.db.repositories import runs
from genenv.db.repositories.common import as_utc, decode_cursor, encode_cursor, one_or_raise
from genenv.lifecycle import EXPERIMENT, RUN_FINISHED, RUN_LIVE

if TYPE_CHECKING:
    from genenv.domains.base import Domain

ROLE_OF_JOB = {JobKind.TRAIN_AGENT: Role.AGENT, JobKind.TRAIN_SIMULATOR: Role.SIMULATOR}


def _not_found(experiment_id: str) -> NotFoundError:
    return NotFoundError(
        f"experiment {experiment_id!r} not found", param="experiment_id", code="experiment_not_found"
    )


def create(session: Session, body: ExperimentCreate) -> ExperimentRow:
    """Store the experiment and one run per (replicate, mode), all in status ``created``.

    Members are created replicate by replicate (every mode of replicate 0, then of replicate 1, …), so one after
    another they finish whole replicates first: a stopped experiment still has comparable modes.
    """
    stored = body.model_dump(mode="json")
    if runs.has_nul(stored):  # Postgres text and JSONB cannot hold U+0000: a 422 here, not a failed INSERT
        raise GenEnvError("text fields must not contain NUL (\\u0000) characters", param="body")
    row = ExperimentRow(
        id=uuid.uuid4().hex, name=body.name, status=ExperimentStatus.CREATED.value, spec=stored,
    )
    session.add(row)
    session.flush()
    base = body.template.model_dump(mode="json")
    for replicate, seed in enumerate(body.seeds()):
        for mode in body.modes:
            config = RunConfig.model_validate(
                {**base, "mode": mode.value, "random_seed": seed, "name": f"{body.name}/{mode.value}/r{replicate}"}
            )
            member = runs.create(session, config)
            member.experiment_id = row.id
            member.replicate = replicate
    session.flush()
    return row


def get(session: Session, experiment_id: str, *, for_update: bool = False) -> ExperimentRow:
    """The experiment (row-locked on Postgres when ``for_update``); NotFoundError (404) if absent."""
    return one_or_raise(
        session, select(ExperimentRow).where(ExperimentRow.id == experiment_id),
        lambda: _not_found(experiment_id), for_update=for_update,
    )


def spec(row: ExperimentRow) -> ExperimentCreate:
    """The body the experiment was created from."""
    return ExperimentCreate.model_validate(row.spec, strict=False)


def _in_run_order(rows: list[RunRow], modes: list[RunMode]) -> list[RunRow]:
    """By replicate, then in the experiment's mode order (the order sequential members run in)."""
    order = {m: i for i, m in enumerate(modes)}
    return sorted(rows, key=lambda r: (r.replicate or 0, order.get(RunMode(r.config["mode"]), len(order)), r.id))


def members(session: Session, experiment_id: str) -> list[RunRow]:
    """Member runs in their run order."""
    rows = list(session.scalars(select(RunRow).where(RunRow.experiment_id == experiment_id)))
    return _in_run_order(rows, spec(get(session, experiment_id)).modes) if rows else []


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
                run_id=m.id, mode=RunMode(m.config["mode"]), replicate=m.replicate or 0,
                random_seed=int(m.config.get("random_seed", 0)), status=RunStatus(m.status),
                current_epoch=m.current_epoch, error=m.error,
            )
            for m in member_rows
        ],
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )


def show(session: Session, experiment_id: str) -> Experiment:
    """The experiment with its members; 404 if absent."""
    row = get(session, experiment_id)
    return to_contract(row, members(session, experiment_id))


def list_experiments(session: Session, *, cursor: str | None = None, limit: int = 50) -> Page[Experiment]:
    """Experiments newest first; keyset over (created_at, id)."""
    stmt = select(ExperimentRow)
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


def start(session: Session, experiment_id: str) -> list[str]:
    """created → running: start every member (concurrent) or the first one. Returns the run ids to hand to the
    orchestrator once this transaction commits; ConflictError (409) unless the experiment is created."""
    row = get(session, experiment_id, for_update=True)
    _move(row, EXPERIMENT.action_target(ExperimentStatus(row.status), "start"))
    member_rows = members(session, experiment_id)
    chosen = member_rows if spec(row).concurrent else member_rows[:1]
    for member in chosen:
        runs.apply_action(session, member.id, "start")
    session.flush()
    return [m.id for m in chosen]


def cancel(session: Session, experiment_id: str) -> None:
    """Cancel the experiment and every member not finished yet; ConflictError (409) once it has finished."""
    row = get(session, experiment_id, for_update=True)
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


def series(session: Session, experiment_id: str) -> ExperimentSeries:
    """Every closed epoch of every member: the summary's curves, the held-out evaluation and the mean difficulty
    of the epoch's valid tasks (the domain's measures)."""
    from genenv.db.repositories import domains  # imported here so listing experiments never loads domains

    row = get(session, experiment_id)
    body = spec(row)
    template = body.template
    domain = domains.resolve(session, template.domain)
    heldout = template.eval_benchmarks[0] if template.eval_benchmarks else None
    member_rows = members(session, experiment_id)
    out: list[MemberSeries] = []
    for member in member_rows:
        epochs = session.execute(
            select(EpochRow.index, EpochRow.summary)
            .where(EpochRow.run_id == member.id, EpochRow.phase == EpochPhase.CLOSED.value)
            .order_by(EpochRow.index)
        ).all()
        evals: dict[int, dict[str, Any]] = {}
        if heldout is not None:
            for epoch, metrics in session.execute(
                select(EvaluationRow.epoch, EvaluationRow.metrics)
                .where(EvaluationRow.run_id == member.id, EvaluationRow.benchmark == heldout)
            ):
                if epoch is not None:
                    evals[int(epoch)] = dict(metrics)
        sums: dict[int, dict[str, float]] = {}
        counts: dict[int, int] = {}
        batch_sums: dict[tuple[int, str], dict[str, float]] = {}
        batch_counts: dict[tuple[int, str], int] = {}
        for epoch, seed_id, payload in session.execute(
            select(TaskRow.epoch, TaskRow.seed_id, TaskRow.payload)
            .where(TaskRow.run_id == member.id, TaskRow.status == TaskStatus.VALID.value)
        ):
            if not isinstance(payload, dict):
                continue
            acc = sums.setdefault(int(epoch), {})
            per_batch = batch_sums.setdefault((int(epoch), str(seed_id)), {})
            for name, value in domain.difficulty(payload).items():
                acc[name] = acc.get(name, 0.0) + value
                per_batch[name] = per_batch.get(name, 0.0) + value
            counts[int(epoch)] = counts.get(int(epoch), 0) + 1
            batch_counts[(int(epoch), str(seed_id))] = batch_counts.get((int(epoch), str(seed_id)), 0) + 1
        points = []
        for index, stored in epochs:
            summary = EpochSummary.model_validate(stored or {})
            metrics = evals.get(int(index), {})
            overall = metrics.get("overall", {})
            categories = metrics.get("categories", {})
            n_tasks = counts.get(int(index), 0)
            points.append(MemberEpoch(
                epoch=int(index),
                p_hat=summary.p_hat,
                in_band_share=summary.in_band_share,
                heldout_accuracy=overall.get("accuracy") if isinstance(overall, dict) else None,
                heldout_by_category={
                    str(c): float(b["accuracy"]) for c, b in categories.items()
                    if isinstance(b, dict) and isinstance(b.get("accuracy"), int | float)
                } if isinstance(categories, dict) else {},
                generated_tasks_so_far=summary.generated_tasks_so_far,
                mean_response_tokens=summary.mean_response_tokens,
                difficulty={k: v / n_tasks for k, v in sums.get(int(index), {}).items()} if n_tasks else {},
            ))
        out.append(MemberSeries(
            run_id=member.id, mode=RunMode(member.config["mode"]), replicate=member.replicate or 0,
            status=RunStatus(member.status), epochs=points,
            seed_batches=_seed_batches(session, member.id, domain, batch_sums, batch_counts),
            train_jobs=_train_jobs(session, member.id),
        ))
    return ExperimentSeries(
        experiment_id=row.id,
        name=row.name,
        status=derived_status(row.status, [RunStatus(m.status) for m in member_rows]),
        domain=template.domain,
        alpha=template.curriculum.alpha,
        k_min=template.curriculum.k_min,
        epochs=template.epochs,
        agent_trains=template.agent.train,
        heldout_benchmark=heldout,
        difficulty_measures=dict(domain.difficulty_measures),
        members=out,
    )


def _seed_batches(
    session: Session, run_id: str, domain: Domain, sums: dict[tuple[int, str], dict[str, float]],
    counts: dict[tuple[int, str], int],
) -> list[SeedBatch]:
    """Every scored seed batch of a run with its seed's difficulty group and its tasks' mean difficulty."""
    groups = {(int(e), str(sid)): domain.difficulty_group(payload or {}) for e, sid, payload in session.execute(
        select(SeedRow.epoch, SeedRow.seed_id, SeedRow.payload).where(SeedRow.run_id == run_id))}
    out: list[SeedBatch] = []
    for r in session.scalars(select(CurriculumScoreRow).where(CurriculumScoreRow.run_id == run_id)
                             .order_by(CurriculumScoreRow.epoch, CurriculumScoreRow.seed_id)):
        key = (int(r.epoch), str(r.seed_id))
        n_tasks = counts.get(key, 0)
        out.append(SeedBatch(
            epoch=r.epoch, seed_id=r.seed_id, group=groups.get(key), k=r.k, n=r.n, p_hat=r.p_hat,
            in_band=r.in_band, valid_tasks=n_tasks,
            difficulty={k: v / n_tasks for k, v in sums.get(key, {}).items()} if n_tasks else {},
        ))
    return out


def _train_jobs(session: Session, run_id: str) -> list[TrainJobSummary]:
    """A run's training jobs with their dose, and how many tasks each simulator adapter generated afterwards."""
    written = dict(session.execute(
        select(TaskRow.generator_adapter, func.count(TaskRow.id))
        .where(TaskRow.run_id == run_id, TaskRow.generator_adapter.is_not(None))
        .group_by(TaskRow.generator_adapter)
    ).tuples().all())
    out: list[TrainJobSummary] = []
    for job in session.scalars(select(TrainJobRow).where(
            TrainJobRow.run_id == run_id, TrainJobRow.kind.in_([JobKind.TRAIN_AGENT.value,
                                                                JobKind.TRAIN_SIMULATOR.value]))
            .order_by(TrainJobRow.epoch, TrainJobRow.kind)):
        m = job.metrics or {}
        per_step = m.get("per_step") or []
        last_kl = per_step[-1].get("kl") if per_step and isinstance(per_step[-1], dict) else None
        role = ROLE_OF_JOB[JobKind(job.kind)]
        out.append(TrainJobSummary(
            epoch=job.epoch, kind=job.kind, status=job.status, adapter_version=job.adapter_version,
            pool_size=m.get("pool_size"), steps=int(m.get("steps") or 0),
            examples_seen=int(m.get("examples_seen") or 0),
            kl_to_base=float(last_kl) if isinstance(last_kl, int | float) else None,
            early_stopped=bool(m.get("early_stopped", False)),
            tasks_written=0 if job.adapter_version is None else
            int(written.get(adapter_name(run_id, role, job.adapter_version), 0)),
        ))
    return out
