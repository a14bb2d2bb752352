"""An outside agent's side of an external_agent run: lease the current epoch's tasks, report the attempts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request

from genenv import catalogue
from genenv.contracts.leases import AttemptsRecorded, AttemptsReport, Lease, LeaseRequest
from genenv.db.repositories import leases
from genenv_control_plane.attempts import AttemptVerifier, report_attempts
from genenv_control_plane.deps import CallerDep, ControlPlaneDep, RunId, visible_run

# visible_run: another tenant's run is a 404 here, as an unknown one (its leases and tasks with it).
router = APIRouter(prefix="/v1/runs", tags=["external agent"], dependencies=[Depends(visible_run)])

IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$",
           description="Any printable ASCII string up to 200 characters: the same request with the same key gets "
           "the same answer and records nothing new."),
]


@router.post("/{run_id}/leases", summary="Lease tasks of an external_agent run's current epoch")
def lease_tasks(run_id: RunId, body: LeaseRequest, cp: ControlPlaneDep, caller: CallerDep) -> Lease:
    """Up to ``limit`` tasks with their open attempts, held for ``lease_s`` seconds; an empty lease with
    ``retry_after_s`` when nothing is leasable now. 429 when the tenant holds tenants.max_open_leases already."""
    now = datetime.now(UTC)
    with cp.transaction() as session:
        if caller.limited:
            leases.check_open_leases(session, caller.tenant, cp.settings.tenants.max_open_leases, now)
        return leases.take_lease(session, run_id, body, now, _agent_messages)


def _verifier(request: Request, cp: ControlPlaneDep) -> AttemptVerifier:
    verifier: AttemptVerifier | None = getattr(request.app.state, "attempt_verifier", None)
    if verifier is None:
        verifier = request.app.state.attempt_verifier = AttemptVerifier(cp.settings, cp)
    return verifier


@router.post("/{run_id}/attempts", summary="Report attempts at leased tasks")
async def post_attempts(
    run_id: RunId, body: AttemptsReport, request: Request, cp: ControlPlaneDep, idempotency_key: IdempotencyKey = None
) -> AttemptsRecorded:
    """Record each attempt as a rollout with its verdict (the domain's checker, via the verifier, or the client's
    score with external.scoring: client)."""
    return await report_attempts(cp, _verifier(request, cp), run_id, body, idempotency_key)


def _agent_messages(domain: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    return catalogue.for_task(domain, payload).agent_messages(payload)
