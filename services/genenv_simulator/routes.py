"""POST /v1/tasks:generate — thin: resolve seeds, generate, store when a run is named."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from genenv.contracts.adapters import adapter_run_id
from genenv.contracts.errors import GenEnvError, NotFoundError, UnavailableError
from genenv.contracts.tasks import (
    GeneratedTask,
    GenerateRequest,
    GenerateResponse,
    RejectionReason,
    Seed,
    TaskStatus,
)
from genenv.db.engine import session_scope
from genenv.db.models import RunRow
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.http.auth import caller_of
from genenv.tenancy import Caller
from genenv_simulator.deps import SimulatorResources
from genenv_simulator.generation import earlier_keys, generate_tasks, payload_key, rejection_counts

router = APIRouter(prefix="/v1", tags=["simulator"])


def _stored(
    resources: SimulatorResources, run_id: str, epoch: int, seed_keys: list[str]
) -> tuple[list[GeneratedTask], list[dict[str, Any]] | None]:
    """The epoch's stored tasks of these seeds, and — when the run rejects repeats — the payloads of its valid
    tasks of earlier epochs (None when it does not)."""
    with session_scope(resources.db.sessions) as session:
        run = session.get(RunRow, run_id)
        if run is None:
            raise NotFoundError(f"run {run_id!r} not found", param="run_id")
        rows = task_repo.epoch_tasks(session, run_id, epoch, seed_ids=seed_keys)
        rejects = run_repo.config_of(run).simulator.reject_repeats
        earlier = task_repo.earlier_valid_payloads(session, run_id, epoch) if rejects else None
        return [task_repo.to_generated(r) for r in rows], earlier


def _check_tenant(resources: SimulatorResources, caller: Caller, body: GenerateRequest) -> None:
    """A tenant token may name only its tenant's run and adapters: another tenant's is a 404, as an unknown one."""
    if caller.all_tenants or (body.run_id is None and body.adapter is None):
        return
    with session_scope(resources.db.sessions) as session:
        if body.run_id is not None:
            run_repo.require(session, body.run_id, caller=caller)
        if body.adapter is not None:
            owner = adapter_run_id(body.adapter)
            try:
                if owner is None:
                    raise NotFoundError("not an adapter name")
                run_repo.require(session, owner, caller=caller)
            except NotFoundError:
                raise NotFoundError(
                    f"adapter {body.adapter!r} not found; name one of your runs' adapters "
                    "(GET /v1/runs/{id}/adapters) or omit adapter for the base model",
                    param="adapter", code="adapter_not_found",
                ) from None


def _store(resources: SimulatorResources, run_id: str, epoch: int, tasks: list[GeneratedTask]) -> None:
    with session_scope(resources.db.sessions) as session:
        task_repo.store_generated(session, run_id, epoch, tasks)


class GenerationBudgetError(GenEnvError):
    """A request asks for more generated tokens than one request may (simulator.max_request_tokens)."""

    status_code = 422


def _check_budget(body: GenerateRequest, limit: int) -> None:
    # Checked before any work: the fields are bounded one by one, but their product is what costs model time.
    seeds = max(1, len(body.seed_ids) + len(body.seeds))
    asked = seeds * body.n * body.max_tokens
    if asked > limit:
        raise GenerationBudgetError(
            f"{seeds} seed(s) × n={body.n} × max_tokens={body.max_tokens} = {asked} tokens exceeds this simulator's "
            f"per-request budget of {limit} (simulator.max_request_tokens); send fewer seeds per request or lower "
            "n or max_tokens",
            param="max_tokens",
            code="generation_budget_exceeded",
        )


@router.post(
    "/tasks:generate",
    response_model=GenerateResponse,
    summary="Write n task variations per seed with the simulator model and validate them",
)
async def generate(body: GenerateRequest, request: Request) -> GenerateResponse:
    """Accepted and rejected tasks with reasons; with run_id and epoch they are stored (idempotently)."""
    # Variations already stored for (run, epoch, seed) are returned as stored and not generated again.
    resources: SimulatorResources = request.app.state.simulator
    _check_budget(body, resources.settings.simulator.max_request_tokens)
    await run_in_threadpool(_check_tenant, resources, caller_of(request), body)
    domain = await run_in_threadpool(resources.domain, body.domain)
    if (body.run_id is None) != (body.epoch is None):
        raise GenEnvError("run_id and epoch go together: give both to store, or neither", param="run_id")
    seeds: list[Seed | None] = [resources.train_seed(domain, sid) for sid in body.seed_ids]
    seeds += [Seed(id=s.id, domain=domain.name, payload=s.payload) for s in body.seeds]
    ids = [s.id for s in seeds if s is not None]
    if len(set(ids)) != len(ids):
        raise GenEnvError("a seed id appears twice in the request", param="seeds", code="duplicate_seed")
    if not seeds:
        seeds = [None]
    existing: list[GeneratedTask] = []
    earlier: set[str] = set()
    if body.run_id is not None and body.epoch is not None:
        keys = [s.id if s is not None else task_repo.SEEDLESS for s in seeds]
        existing, earlier_payloads = await run_in_threadpool(_stored, resources, body.run_id, body.epoch, keys)
        if earlier_payloads:
            earlier = await run_in_threadpool(earlier_keys, domain, earlier_payloads)
    known: dict[str | None, set[str]] = {}
    for t in existing:
        if t.status is TaskStatus.VALID and t.payload is not None:
            known.setdefault(t.seed_id, set()).add(payload_key(t.payload))
    new = await generate_tasks(
        resources.backend,
        domain,
        body,
        seeds,
        guided=resources.settings.inference.guided_decoding,
        skip={(t.seed_id, t.variation) for t in existing},
        known=known,
        earlier=earlier,
    )
    failed = [t for t in new if t.rejection_reason is RejectionReason.GENERATION_ERROR]
    if new and len(failed) == len(new) and not existing:
        # Not one request reached the model: an outage, not a verdict on the simulator. 503 lets the caller retry.
        raise UnavailableError(f"simulator model unavailable: {failed[0].rejection_detail}", code="generation_failed")
    if body.run_id is not None and body.epoch is not None:
        # Failed requests are reported but not stored, so calling again generates exactly those variations.
        keep = [t for t in new if t.rejection_reason is not RejectionReason.GENERATION_ERROR]
        if keep:
            await run_in_threadpool(_store, resources, body.run_id, body.epoch, keep)
    everything = existing + new
    return GenerateResponse(
        accepted=[t for t in everything if t.status is TaskStatus.VALID],
        rejected=[t for t in everything if t.status is TaskStatus.REJECTED],
        rejection_counts=rejection_counts(everything),
    )
