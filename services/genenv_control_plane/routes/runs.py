"""Runs: create, list, show, and the user actions start/pause/resume/cancel."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from genenv import catalogue
from genenv.contracts.errors import UnavailableError
from genenv.contracts.pagination import DEFAULT_LIMIT, Page
from genenv.contracts.runs import Run, RunAction, RunCreate, RunStatus
from genenv.db.repositories import experiments, runs
from genenv.http.pagination import Cursor, Limit
from genenv.models.locations import check_model_location, model_roots
from genenv.tenancy import Caller
from genenv_control_plane.deps import CallerDep, ControlPlane, ControlPlaneDep, RunId

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/runs", tags=["runs"])
__all__ = ["RunId", "router"]


@router.post("", status_code=201, summary="Create a run from a run config")
def create_run(body: RunCreate, cp: ControlPlaneDep, caller: CallerDep) -> Run:
    """Validate and store a run config; the run starts in status 'created' and belongs to the caller's tenant."""
    check_model_location(body.config.base_model, model_roots(cp.settings.paths))
    with cp.transaction() as session:
        catalogue.check_config_domains(session, body.config, param="config")  # 404 for a name nobody registered
        row = runs.create(session, body.config, tenant=caller.tenant)
    return runs.to_contract(row)


@router.get("", summary="List runs, newest first")
def list_runs(
    cp: ControlPlaneDep,
    caller: CallerDep,
    status: RunStatus | None = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Page[Run]:
    """One page of the caller's tenant's runs (every tenant's for a service token), optionally of one status."""
    with cp.transaction() as session:
        return runs.list_runs(session, status=status, cursor=cursor, limit=limit, caller=caller)


@router.get("/{run_id}", summary="Show a run")
def get_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> Run:
    """The run and its config."""
    with cp.transaction() as session:
        return runs.to_contract(runs.get(session, run_id, caller=caller))


@router.delete("/{run_id}", status_code=204, summary="Delete a run that is not running, with all its rows")
def delete_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> Response:
    """Remove the run and its epochs, tasks, rollouts, verdicts, stats, scores, adapters rows and evaluations.

    A running run is a 409: pause or cancel it first, so no worker writes under a run that is gone.
    Adapter files in the adapter store are left on disk.
    """
    with cp.transaction() as session:
        runs.delete(session, run_id, caller=caller)
    return Response(status_code=204)


def _apply(cp: ControlPlane, run_id: str, action: RunAction, caller: Caller) -> tuple[Run, str | None]:
    """The action, and the next member run it starts when it cancels a member of a sequential experiment."""
    with cp.transaction() as session:
        row = runs.apply_action(session, run_id, action, caller=caller)
        if caller.limited and row.status == RunStatus.RUNNING.value:  # 429 rolls the start back
            runs.check_running_limit(session, caller.tenant, cp.settings.tenants.max_running_runs)
        following = experiments.start_next_member(session, run_id) if action == "cancel" else None
        return runs.to_contract(row), following


def _get(cp: ControlPlane, run_id: str, caller: Caller) -> Run:
    with cp.transaction() as session:
        return runs.to_contract(runs.get(session, run_id, caller=caller))


async def _act(cp: ControlPlane, run_id: str, action: RunAction, caller: Caller) -> Run:
    if action in ("start", "resume"):
        # Before the transition: a run whose adapters the servers cannot serve correctly never starts.
        current = await run_in_threadpool(_get, cp, run_id, caller)
        await cp.base_model_check.check(current.config.base_model)
    run, following = await run_in_threadpool(_apply, cp, run_id, action, caller)
    # Only after the commit: a worker that receives the message must find the run already 'running'.
    for started in ([run.id] if run.status is RunStatus.RUNNING else []) + ([following] if following else []):
        try:
            await cp.enqueuer.advance_run(started)
        except Exception as exc:
            log.exception("run %s is running but its advance message was not queued", started)
            raise UnavailableError(
                f"run {started} is running but the orchestrator could not be notified (queue unavailable); "
                "pause and resume the run once the queue is back",
                code="enqueue_failed",
            ) from exc
    return run


@router.post("/{run_id}/start", summary="Start a created run")
async def start_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> Run:
    """created → running, then hand the run to the orchestrator."""
    return await _act(cp, run_id, "start", caller)


@router.post("/{run_id}/pause", summary="Pause a running run")
async def pause_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> Run:
    """running → paused (the orchestrator stops after the current phase)."""
    return await _act(cp, run_id, "pause", caller)


@router.post("/{run_id}/resume", summary="Resume a paused run")
async def resume_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> Run:
    """paused → running, then hand the run to the orchestrator."""
    return await _act(cp, run_id, "resume", caller)


@router.post("/{run_id}/cancel", summary="Cancel a run that has not finished")
async def cancel_run(run_id: RunId, cp: ControlPlaneDep, caller: CallerDep) -> Run:
    """created | running | paused → cancelled."""
    return await _act(cp, run_id, "cancel", caller)
