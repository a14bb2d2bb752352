"""Thin routes: batch verification and benchmark evaluation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from genenv import catalogue
from genenv.benchmarks.base import Evaluator, run_evaluation
from genenv.contracts.adapters import EvaluateRequest, Evaluation
from genenv.contracts.errors import GenEnvError
from genenv.contracts.rollouts import VerifyResponse
from genenv.contracts.runs import heldout_domain
from genenv.db.engine import session_scope
from genenv.db.repositories import evaluations, runs
from genenv.domains.evaluators import domain_heldout, get_evaluator
from genenv.settings import VerifierSettings
from genenv_verifier.deps import ResourcesDep, VerifierResources
from genenv_verifier.parsing import parse_verify_request, request_body_doc
from genenv_verifier.verification import verify_items

router = APIRouter(prefix="/v1", tags=["verifier"])

BenchmarkName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^(domain:)?[a-z0-9_]+$",
                                    description="A benchmark, or domain:NAME for a domain's own eval rows.")]


class TooManyItemsError(GenEnvError):
    """The batch is larger than this service accepts."""

    status_code = 422


@router.post("/verify", response_model=VerifyResponse, openapi_extra=request_body_doc())
async def verify(request: Request, resources: ResourcesDep) -> Response:
    """Verdicts for a batch of (task, response) items (a VerifyRequest), in request order."""
    body = await request.body()
    # Parsing and checking are CPU-bound: run them in the thread pool, off the event loop.
    return await run_in_threadpool(_verify, body, resources.settings.verifier)


def _verify(body: bytes, limits: VerifierSettings) -> Response:
    items, success_threshold = parse_verify_request(body)
    if len(items) > limits.max_items:
        raise TooManyItemsError(
            f"{len(items)} items exceed the limit of {limits.max_items}; split the batch",
            param="items",
            code="too_many_items",
        )
    verdicts = verify_items(items, success_threshold, limits.item_time_limit_s)
    # The verdicts are already validated models: serialise once, straight to JSON bytes (no re-validation).
    return Response(VerifyResponse(verdicts=verdicts).model_dump_json(), media_type="application/json")


@router.post("/benchmarks/{name}/evaluate", response_model=Evaluation)
async def evaluate(name: BenchmarkName, body: EvaluateRequest, resources: ResourcesDep) -> Evaluation:
    """Run a benchmark with the configured inference backend, store the evaluation and return it.

    Everything that can refuse the request (benchmark, split, run) is checked before the benchmark runs. With an
    idempotency key, a stored evaluation is returned, and a request arriving while the same key is being evaluated
    in this process waits for that evaluation instead of running the benchmark again.
    """
    with session_scope(resources.db.sessions) as session:
        evaluator = _evaluator(session, name)
        split = body.split or evaluator.default_split
        evaluator.check_split(split)
        if body.run_id is not None:
            runs.get(session, body.run_id)
        if body.idempotency_key is not None:
            existing = evaluations.get_by_idempotency_key(session, body.idempotency_key)
            if existing is not None:
                return evaluations.to_contract(existing)
    if body.idempotency_key is None:
        return await _evaluate(evaluator, name, body, split, resources)
    return await resources.single_flight(body.idempotency_key,
                                         lambda: _evaluate(evaluator, name, body, split, resources))


def _evaluator(session: Session, name: str) -> Evaluator:
    """The benchmark's evaluator, or for domain:NAME one built on that domain (which may be data-defined, hence
    resolved here, where the database is)."""
    domain_name = heldout_domain(name)
    return get_evaluator(name) if domain_name is None else domain_heldout(catalogue.resolve(session, domain_name,
                                                                                            param="name"))


async def _evaluate(
    evaluator: Evaluator, name: str, body: EvaluateRequest, split: str, resources: VerifierResources
) -> Evaluation:
    report = await run_evaluation(
        evaluator,
        resources.inference(),
        benchmarks_dir=resources.settings.paths.benchmarks,
        adapter=body.adapter,
        split=split,
        limit=body.limit,
        concurrency=resources.settings.verifier.eval_concurrency,
        show_progress=False,
    )
    # Committed here, before single-flight waiters are answered: a later request then finds the stored row.
    with session_scope(resources.db.sessions) as session:
        row = evaluations.create_evaluation(
            session,
            benchmark=name,
            split=report.split,
            adapter=body.adapter,
            metrics=report.metrics,
            n_items=report.n_items,
            run_id=body.run_id,
            epoch=body.epoch,
            idempotency_key=body.idempotency_key,
        )
        return evaluations.to_contract(row)
