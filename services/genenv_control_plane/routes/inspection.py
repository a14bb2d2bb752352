"""Read-only inspection of what a run produced: epochs, tasks, rollouts, stats, adapters, evaluations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from genenv.contracts.adapters import Adapter, Evaluation, Role
from genenv.contracts.epochs import Epoch
from genenv.contracts.pagination import DEFAULT_LIMIT, Page
from genenv.contracts.rollouts import Rollout
from genenv.contracts.scores import RunStat, StatKind
from genenv.contracts.tasks import Task, TaskStatus
from genenv.db.repositories import epochs, inspection, runs
from genenv.http.pagination import Cursor, Limit
from genenv_control_plane.deps import ControlPlaneDep, RunId, TextFilter, visible_run

# visible_run: another tenant's run is a 404 here, as an unknown one.
router = APIRouter(prefix="/v1/runs/{run_id}", tags=["inspection"], dependencies=[Depends(visible_run)])
EpochFilter = Annotated[int | None, Query(ge=0, le=1_000_000, description="Only this epoch.")]


@router.get("/epochs", summary="Epochs of a run with their phase and summary")
def list_epochs(run_id: RunId, cp: ControlPlaneDep, cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT) -> Page[Epoch]:
    """Epochs in order."""
    with cp.transaction() as session:
        runs.require(session, run_id)
        return epochs.list_epochs(session, run_id, cursor=cursor, limit=limit)


@router.get("/tasks", summary="Tasks of a run")
def list_tasks(
    run_id: RunId,
    cp: ControlPlaneDep,
    epoch: EpochFilter = None,
    seed_id: TextFilter = None,
    status: TaskStatus | None = None,
    domain: TextFilter = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Page[Task]:
    """Generated (valid and rejected) tasks, filtered by epoch, seed, status and domain."""
    with cp.transaction() as session:
        runs.require(session, run_id)
        return inspection.list_tasks(
            session, run_id, epoch=epoch, seed_id=seed_id, status=status, domain=domain, cursor=cursor, limit=limit
        )


@router.get("/rollouts", summary="Agent rollouts of a run")
def list_rollouts(
    run_id: RunId,
    cp: ControlPlaneDep,
    # Task ids are 32-bit INTEGER columns (SQLite and Postgres): a larger filter is a 422, not a database error.
    task_id: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="Only this task.")] = None,
    epoch: EpochFilter = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Page[Rollout]:
    """Rollouts, filtered by task and epoch."""
    with cp.transaction() as session:
        runs.require(session, run_id)
        return inspection.list_rollouts(session, run_id, task_id=task_id, epoch=epoch, cursor=cursor, limit=limit)


@router.get("/stats", summary="Task stats, seed stats or curriculum scores of a run")
def list_stats(
    run_id: RunId,
    cp: ControlPlaneDep,
    kind: StatKind = StatKind.SEED,
    epoch: EpochFilter = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Page[RunStat]:
    """One kind of statistics row, optionally of one epoch."""
    with cp.transaction() as session:
        runs.require(session, run_id)
        return inspection.list_stats(session, run_id, kind=kind, epoch=epoch, cursor=cursor, limit=limit)


@router.get("/adapters", summary="LoRA adapter versions of a run")
def list_adapters(
    run_id: RunId, cp: ControlPlaneDep, role: Role | None = None, cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT
) -> Page[Adapter]:
    """Adapters, optionally of one role."""
    with cp.transaction() as session:
        runs.require(session, run_id)
        return inspection.list_adapters(session, run_id, role=role, cursor=cursor, limit=limit)


@router.get("/evaluations", summary="Benchmark evaluations of a run")
def list_evaluations(
    run_id: RunId,
    cp: ControlPlaneDep,
    benchmark: TextFilter = None,
    epoch: EpochFilter = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Page[Evaluation]:
    """Evaluations, filtered by benchmark and epoch."""
    with cp.transaction() as session:
        runs.require(session, run_id)
        return inspection.list_evaluations(
            session, run_id, benchmark=benchmark, epoch=epoch, cursor=cursor, limit=limit
        )
