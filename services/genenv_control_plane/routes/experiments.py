"""Experiments: create (with their member runs), list, show, the series for reports, start and cancel."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Path
from starlette.concurrency import run_in_threadpool

from genenv import catalogue
from genenv.contracts.errors import UnavailableError
from genenv.contracts.experiments import Experiment, ExperimentCreate, ExperimentSeries
from genenv.contracts.pagination import DEFAULT_LIMIT, Page
from genenv.db.repositories import experiments, runs
from genenv.experiments.series import build_series
from genenv.http.pagination import Cursor, Limit
from genenv.models.locations import check_model_location, model_roots
from genenv.tenancy import Caller
from genenv_control_plane.deps import CallerDep, ControlPlane, ControlPlaneDep

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/experiments", tags=["experiments"])
ExperimentId = Annotated[str, Path(max_length=64, pattern=r"^[^\x00]+$", description="Experiment id.")]


@router.post("", status_code=201, summary="Create an experiment: modes × replicates of one run config")
def create_experiment(body: ExperimentCreate, cp: ControlPlaneDep, caller: CallerDep) -> Experiment:
    """Store the experiment and its member runs (status 'created', the caller's tenant); nothing runs until it is
    started."""
    check_model_location(body.template.base_model, model_roots(cp.settings.paths), param="template.base_model")
    with cp.transaction() as session:
        catalogue.check_config_domains(session, body.template, param="template")
        row = experiments.create(session, body, tenant=caller.tenant)
        return experiments.to_contract(row, experiments.members(session, row.id))


@router.get("", summary="List experiments, newest first")
def list_experiments(
    cp: ControlPlaneDep, caller: CallerDep, cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT
) -> Page[Experiment]:
    """One page of the caller's tenant's experiments (every tenant's for a service token) with their members."""
    with cp.transaction() as session:
        return experiments.list_experiments(session, cursor=cursor, limit=limit, caller=caller)


@router.get("/{experiment_id}", summary="Show an experiment and its member runs")
def get_experiment(experiment_id: ExperimentId, cp: ControlPlaneDep, caller: CallerDep) -> Experiment:
    """The experiment, its template and every member's status."""
    with cp.transaction() as session:
        return experiments.show(session, experiment_id, caller=caller)


@router.get("/{experiment_id}/series", summary="Per-epoch numbers of every member (what reports are drawn from)")
def get_series(experiment_id: ExperimentId, cp: ControlPlaneDep, caller: CallerDep) -> ExperimentSeries:
    """p̂, in-band share, held-out accuracy, generated tasks, response length and task difficulty per epoch."""
    with cp.transaction() as session:
        template = experiments.spec(experiments.get(session, experiment_id, caller=caller)).template
        domain = catalogue.resolve(session, template.domain)
        recalled = cp.difficulty.recall(experiments.member_ids(session, experiment_id))
        records = experiments.series_records(session, experiment_id, known=recalled.keys())
    # Outside the transaction: the numbers need no database, and the pool gets its connection back sooner.
    return build_series(records, domain, cp.difficulty.resolve(records, domain, recalled))


def _start(cp: ControlPlane, experiment_id: str, caller: Caller) -> list[str]:
    with cp.transaction() as session:
        started = experiments.start(session, experiment_id, caller=caller)
        if caller.limited:  # 429 rolls the whole start back
            runs.check_running_limit(session, caller.tenant, cp.settings.tenants.max_running_runs)
        return started


def _show(cp: ControlPlane, experiment_id: str, caller: Caller) -> Experiment:
    with cp.transaction() as session:
        return experiments.show(session, experiment_id, caller=caller)


@router.post("/{experiment_id}/start", summary="Start a created experiment")
async def start_experiment(experiment_id: ExperimentId, cp: ControlPlaneDep, caller: CallerDep) -> Experiment:
    """created → running: every member at once (concurrent) or the first, the rest one after another."""
    current = await run_in_threadpool(_show, cp, experiment_id, caller)
    await cp.base_model_check.check(current.template.base_model)
    started = await run_in_threadpool(_start, cp, experiment_id, caller)
    # Only after the commit: a worker that receives the message must find the run already 'running'.
    for run_id in started:
        try:
            await cp.enqueuer.advance_run(run_id)
        except Exception as exc:
            log.exception("run %s of experiment %s is running but was not queued", run_id, experiment_id)
            raise UnavailableError(
                f"experiment {experiment_id} started but the orchestrator could not be notified of run {run_id} "
                "(queue unavailable); pause and resume that run once the queue is back",
                code="enqueue_failed",
            ) from exc
    return await run_in_threadpool(_show, cp, experiment_id, caller)


@router.post("/{experiment_id}/cancel", summary="Cancel an experiment and its unfinished member runs")
def cancel_experiment(experiment_id: ExperimentId, cp: ControlPlaneDep, caller: CallerDep) -> Experiment:
    """created | running → cancelled; every member not finished yet is cancelled with it."""
    with cp.transaction() as session:
        experiments.cancel(session, experiment_id, caller=caller)
        return experiments.show(session, experiment_id, caller=caller)
