"""The rollout job: every valid task of an epoch × G attempts, concurrently, stored as they finish.

A task's missing attempts go out as one request with ``n`` = their number: the server prefills the prompt once
and samples the attempts side by side; choice i becomes the i-th missing attempt, with its own token ids and
sampling log-probs.

``rollout_epoch`` is plain async code; the Celery task wraps it and the embedded mode calls it directly.
Idempotent: attempts already stored are skipped, and the (task, attempt) unique key drops any duplicate a
concurrent worker might write. A Celery delivery (``worker`` given) first claims the epoch's rollout job: a
redelivered message (Redis's visibility timeout) that finds a live delivery's claim exits before it publishes or
generates anything, and a delivery whose claim was taken over (it was presumed dead) stops generating.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from genenv import catalogue
from genenv.contracts.adapters import JobKind, Role, adapter_name
from genenv.contracts.errors import NotFoundError
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import session_scope
from genenv.db.heartbeat import Heartbeat
from genenv.db.models import RunRow
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import rollouts as rollout_repo
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.db.repositories import train_jobs
from genenv.db.repositories.rollouts import NewRollout
from genenv.db.repositories.train_jobs import ClaimOutcome
from genenv.inference.base import InferenceBackend, SamplingParams
from genenv.lifecycle import RUN_FINISHED
from genenv.outages import DependencyAwayError, Outage, classify
from genenv.serving.publisher import AdapterPublisher
from genenv.settings import RolloutSettings, ServiceUrls

log = logging.getLogger(__name__)

DEFAULT_REQUEST_RETRIES = 2
RETRY_BACKOFF_S = 0.5


@dataclass(frozen=True)
class RolloutEpochResult:
    """What one rollout job did."""

    run_id: str
    epoch: int
    agent_adapter: str | None
    tasks: int
    expected: int
    created: int
    skipped: int
    errors: int
    completion_tokens: int
    seconds: float
    outcome: str = "claimed"


@dataclass(frozen=True)
class _Plan:
    config: RunConfig
    adapter: str | None
    # (task id, its missing attempt numbers, the agent prompt or why it cannot be rendered)
    jobs: list[tuple[int, list[int], list[dict[str, Any]] | str]]
    tasks: int
    skipped: int


def _plan(session_factory: sessionmaker[Session], run_id: str, epoch: int) -> _Plan:
    """Read the run, its valid tasks, the current agent adapter and what is already stored."""
    with session_scope(session_factory) as session:
        run = session.get(RunRow, run_id)
        if run is None:
            raise NotFoundError(f"run {run_id!r} not found", param="run_id")
        config = run_repo.config_of(run)
        # A cancelled (or failed) run gets no more attempts (a redelivered or late job does nothing).
        tasks = [] if RunStatus(run.status) in RUN_FINISHED else task_repo.valid_tasks(session, run_id, epoch)
        done = rollout_repo.stored_attempts(session, [t.id for t in tasks])
        latest = adapter_repo.latest_adapter(session, run_id, Role.AGENT)
        adapter = adapter_name(run_id, Role.AGENT, latest.version) if latest is not None else None
        jobs: list[tuple[int, list[int], list[dict[str, Any]] | str]] = []
        for task in tasks:
            missing = [a for a in range(config.rollouts_per_task) if (task.id, a) not in done]
            if not missing:
                continue
            try:
                payload = task.payload or {}
                prompt: list[dict[str, Any]] | str = catalogue.for_task(task.domain, payload).agent_messages(payload)
            except Exception as exc:  # a bad stored task is that task's error, not the batch's
                prompt = f"cannot render the agent prompt: {exc!r}"
            jobs.append((task.id, missing, prompt))
        return _Plan(config, adapter, jobs, len(tasks), len(done))


async def _attempts(
    backend: InferenceBackend,
    plan: _Plan,
    task_id: int,
    attempts: list[int],
    prompt: list[dict[str, Any]] | str,
    request_retries: int,
    services: ServiceUrls,
) -> list[NewRollout] | Outage:
    """A task's missing attempts in one request; a failed request is retried ``request_retries`` times, then
    every attempt it carried is stored as an error — unless the model server did not answer (an outage): then
    nothing is stored and the outage returned, so the attempts stay missing and a later delivery makes them."""
    if isinstance(prompt, str):
        return [NewRollout(task_id=task_id, attempt=a, agent_adapter=plan.adapter, error=prompt) for a in attempts]
    bases = [
        NewRollout(task_id=task_id, attempt=a, agent_adapter=plan.adapter, prompt_messages=prompt) for a in attempts
    ]
    retries = 0
    while True:
        try:
            samples = await backend.chat_many(
                prompt,
                len(attempts),
                sampling=SamplingParams(temperature=plan.config.rollout_temperature,
                                        max_tokens=plan.config.max_response_tokens, logprobs=True),
                adapter=plan.adapter,
            )
        except Exception as exc:  # InferenceError or anything else: bounded retries, then error rows
            if retries >= request_retries:
                outage = classify(exc, services)
                if outage is not None:
                    return outage
                error = f"{type(exc).__name__}: {exc}"[:4000]
                return [replace(b, error=error, retries=retries) for b in bases]
            retries += 1
            await asyncio.sleep(RETRY_BACKOFF_S * retries)
            continue
        return [
            replace(
                base,
                response=c.text,
                token_ids=c.token_ids,
                token_logprobs=c.token_logprobs,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
                latency_s=c.latency_s,
                retries=retries,
            )
            for base, c in zip(bases, samples, strict=True)
        ]


def _cancelled(session_factory: sessionmaker[Session], run_id: str) -> bool:
    with session_scope(session_factory) as session:
        run = session.get(RunRow, run_id)
        return run is None or RunStatus(run.status) in RUN_FINISHED


def _write(session_factory: sessionmaker[Session], batch: Sequence[NewRollout]) -> int:
    with session_scope(session_factory) as session:
        return rollout_repo.insert_rollouts(session, batch)


async def rollout_epoch(
    session_factory: sessionmaker[Session],
    backend: InferenceBackend,
    run_id: str,
    epoch: int,
    *,
    request_retries: int = DEFAULT_REQUEST_RETRIES,
    publisher: AdapterPublisher | None = None,
    storage: RolloutSettings | None = None,
    worker: str | None = None,
    services: ServiceUrls | None = None,
) -> RolloutEpochResult:
    """Generate and store the missing attempts of every valid task of (run, epoch); never aborts on one failure.

    A model server that does not answer is not the tasks' failure: their attempts are left missing (the rest are
    stored) and DependencyAwayError is raised at the end, so the orchestrator waits and dispatches the job again
    (``services`` names the dependency).

    With ``worker`` (a Celery delivery) the job is claimed first; a finished job or one another live delivery
    holds returns at once with nothing done (``outcome`` says which). Without (the embedded mode, whose run lock
    already admits one advancer) nothing is claimed.
    """
    storage = storage or RolloutSettings()
    token: str | None = None
    with session_scope(session_factory) as session:
        if worker is None:
            job_id = train_jobs.create_or_get_job(session, run_id, epoch, JobKind.ROLLOUT).id
        else:
            claim = train_jobs.claim_rollout(session, run_id, epoch, worker=worker, lease_s=storage.lease_s)
            job_id, token = claim.job.id, claim.token
            if claim.outcome is not ClaimOutcome.CLAIMED:
                log.info("rollout %s/%d not run: %s", run_id, epoch, claim.outcome.value)
                return RolloutEpochResult(run_id, epoch, None, 0, 0, 0, 0, 0, 0, 0.0, outcome=claim.outcome.value)

    def beat() -> bool:
        with session_scope(session_factory) as session:
            return train_jobs.beat_rollout(session, job_id, token)

    # Beat while working (a slow batch is not a dead worker), so the orchestrator's stall timeout can be short.
    away: train_jobs.Away | None = None
    try:
        with Heartbeat(beat, storage.heartbeat_s, name=f"rollout {run_id}/{epoch}") as heart:
            return await _rollout_epoch(session_factory, backend, run_id, epoch, request_retries, publisher, storage,
                                        heart, services or ServiceUrls())
    except Exception as exc:
        # A dependency away (the model server mid-job, or already when the adapter was published) is reported on
        # the job: the orchestrator, which learns nothing else of this delivery, waits on it by name.
        outage = classify(exc, services or ServiceUrls())
        if outage is not None:
            away = train_jobs.Away(outage.dependency, outage.error, datetime.now(UTC))
        raise
    finally:
        if token is not None:
            try:
                with session_scope(session_factory) as session:
                    train_jobs.release_claim(session, job_id, token, away)
            except (OperationalError, InterfaceError):  # the database is down: the claim expires by itself
                log.warning("rollout %s/%d: could not release the claim", run_id, epoch, exc_info=True)


async def _rollout_epoch(
    session_factory: sessionmaker[Session],
    backend: InferenceBackend,
    run_id: str,
    epoch: int,
    request_retries: int,
    publisher: AdapterPublisher | None,
    storage: RolloutSettings,
    heart: Heartbeat,
    services: ServiceUrls,
) -> RolloutEpochResult:
    start = time.perf_counter()
    if publisher is not None:
        # A restarted server has forgotten the agent adapter; without this every attempt would be stored as an
        # error (and, being stored, never retried). A failed publish raises: the job fails and is redelivered.
        await publisher.ensure_latest(run_id, Role.AGENT)
    plan = await asyncio.to_thread(_plan, session_factory, run_id, epoch)
    pending = [
        asyncio.create_task(_attempts(backend, plan, tid, attempts, prompt, request_retries, services))
        for tid, attempts, prompt in plan.jobs
    ]
    created = errors = tokens = 0
    batch: list[NewRollout] = []
    writes: list[asyncio.Task[int]] = []
    # Store as results arrive (off the event loop), so progress is visible and a crash loses little work.
    away: Outage | None = None
    for next_done in asyncio.as_completed(pending):
        rollouts = await next_done
        if isinstance(rollouts, Outage):
            away = rollouts
            continue
        errors += sum(r.error is not None for r in rollouts)
        tokens += sum(r.completion_tokens or 0 for r in rollouts)
        batch.extend(rollouts)
        if len(batch) >= storage.write_batch:
            writes.append(asyncio.create_task(asyncio.to_thread(_write, session_factory, batch)))
            batch = []
            if storage.write_delay_s:  # fault injection: lets a crash test kill the worker mid-phase
                await writes[-1]
                await asyncio.sleep(storage.write_delay_s)
            if heart.lost.is_set() or await asyncio.to_thread(_cancelled, session_factory, run_id):
                # Cancel stops in-flight work, and so does a claim taken over by another delivery (this worker was
                # presumed dead): drop the attempts not yet answered (what is done is kept).
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
    if batch:
        writes.append(asyncio.create_task(asyncio.to_thread(_write, session_factory, batch)))
    for count in await asyncio.gather(*writes):
        created += count
    if away is not None:
        log.warning("rollout %s/%d: %d attempts stored, the rest wait on %s: %s",
                    run_id, epoch, created, away.dependency, away.error)
        raise DependencyAwayError(away)
    return RolloutEpochResult(
        run_id=run_id,
        epoch=epoch,
        agent_adapter=plan.adapter,
        tasks=plan.tasks,
        expected=plan.tasks * plan.config.rollouts_per_task,
        created=created,
        skipped=plan.skipped,
        errors=errors,
        completion_tokens=tokens,
        seconds=time.perf_counter() - start,
    )
