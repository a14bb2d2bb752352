"""The rollout job: every valid task of an epoch × G attempts, concurrently, stored as they finish.

A task's missing attempts go out as one request with ``n`` = their number: the server prefills the prompt once
and samples the attempts side by side; choice i becomes the i-th missing attempt, with its own token ids and
sampling log-probs.

``rollout_epoch`` is plain async code; the Celery task wraps it and the embedded mode calls it directly.
Idempotent: attempts already stored are skipped, and the (task, attempt) unique key drops any duplicate a
concurrent worker might write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Role, adapter_name
from genenv.contracts.errors import NotFoundError
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import session_scope
from genenv.db.heartbeat import Heartbeat
from genenv.db.models import RunRow
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import rollouts as rollout_repo
from genenv.db.repositories import tasks as task_repo
from genenv.db.repositories import train_jobs
from genenv.db.repositories.rollouts import NewRollout
from genenv.domains import get_domain
from genenv.inference.base import InferenceBackend
from genenv.inference.publisher import AdapterPublisher
from genenv.settings import RolloutSettings

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
        config = RunConfig.model_validate(run.config)
        # A cancelled run gets no more attempts (a redelivered or late job does nothing).
        tasks = [] if run.status == RunStatus.CANCELLED.value else task_repo.valid_tasks(session, run_id, epoch)
        done = rollout_repo.stored_attempts(session, [t.id for t in tasks])
        latest = adapter_repo.latest_adapter(session, run_id, Role.AGENT)
        adapter = adapter_name(run_id, Role.AGENT, latest.version) if latest is not None else None
        jobs: list[tuple[int, list[int], list[dict[str, Any]] | str]] = []
        for task in tasks:
            missing = [a for a in range(config.rollouts_per_task) if (task.id, a) not in done]
            if not missing:
                continue
            try:
                prompt: list[dict[str, Any]] | str = get_domain(task.domain).agent_messages(task.payload or {})
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
) -> list[NewRollout]:
    """A task's missing attempts in one request; a failed request is retried ``request_retries`` times, then
    every attempt it carried is stored as an error."""
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
                adapter=plan.adapter,
                temperature=plan.config.rollout_temperature,
                max_tokens=plan.config.max_response_tokens,
                logprobs=True,
            )
        except Exception as exc:  # InferenceError or anything else: bounded retries, then error rows
            if retries >= request_retries:
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
        return run is None or run.status == RunStatus.CANCELLED.value


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
) -> RolloutEpochResult:
    """Generate and store the missing attempts of every valid task of (run, epoch); never aborts on one failure."""
    storage = storage or RolloutSettings()

    def beat() -> bool:
        with session_scope(session_factory) as session:
            train_jobs.beat_rollout_job(session, run_id, epoch)
        return True

    # Beat while working (a slow batch is not a dead worker), so the orchestrator's stall timeout can be short.
    with Heartbeat(beat, storage.heartbeat_s, name=f"rollout {run_id}/{epoch}"):
        return await _rollout_epoch(session_factory, backend, run_id, epoch, request_retries, publisher, storage)


async def _rollout_epoch(
    session_factory: sessionmaker[Session],
    backend: InferenceBackend,
    run_id: str,
    epoch: int,
    request_retries: int,
    publisher: AdapterPublisher | None,
    storage: RolloutSettings,
) -> RolloutEpochResult:
    start = time.perf_counter()
    if publisher is not None:
        # A restarted server has forgotten the agent adapter; without this every attempt would be stored as an
        # error (and, being stored, never retried). A failed publish raises: the job fails and is redelivered.
        await publisher.ensure_latest(run_id, Role.AGENT)
    plan = await asyncio.to_thread(_plan, session_factory, run_id, epoch)
    pending = [
        asyncio.create_task(_attempts(backend, plan, tid, attempts, prompt, request_retries))
        for tid, attempts, prompt in plan.jobs
    ]
    created = errors = tokens = 0
    batch: list[NewRollout] = []
    writes: list[asyncio.Task[int]] = []
    # Store as results arrive (off the event loop), so progress is visible and a crash loses little work.
    for next_done in asyncio.as_completed(pending):
        rollouts = await next_done
        errors += sum(r.error is not None for r in rollouts)
        tokens += sum(r.completion_tokens or 0 for r in rollouts)
        batch.extend(rollouts)
        if len(batch) >= storage.write_batch:
            writes.append(asyncio.create_task(asyncio.to_thread(_write, session_factory, batch)))
            batch = []
            if storage.write_delay_s:  # fault injection: lets a crash test kill the worker mid-phase
                await writes[-1]
                await asyncio.sleep(storage.write_delay_s)
            if await asyncio.to_thread(_cancelled, session_factory, run_id):
                # Cancel stops in-flight work: drop the attempts not yet answered (what is done is kept).
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
    if batch:
        writes.append(asyncio.create_task(asyncio.to_thread(_write, session_factory, batch)))
    for count in await asyncio.gather(*writes):
        created += count
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
