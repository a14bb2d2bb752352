"""Run one training job by id: claim it, read its inputs, train, write the adapter version, record the outcome.

Plain functions so the embedded mode calls them directly; the Celery tasks are thin wrappers. Idempotent: a job
whose row is done (or skipped) is not run again, a job held by a live worker is left alone, and the adapter row
and the job's 'done' are committed in one transaction, so a job yields at most one adapter version.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import JobKind, JobStatus, Role, TrainJob
from genenv.contracts.epochs import PHASE_ORDER, EpochPhase
from genenv.contracts.runs import RunStatus
from genenv.db.engine import session_scope
from genenv.db.heartbeat import Heartbeat
from genenv.db.models import EpochRow, RunRow
from genenv.db.repositories import adapters, runs, train_jobs
from genenv.db.repositories.train_jobs import ClaimOutcome
from genenv.json_safe import json_safe
from genenv.lifecycle import RUN_FINISHED
from genenv.queue import worker_identity
from genenv.settings import GenEnvSettings
from genenv_trainer import inputs

log = logging.getLogger(__name__)

ROLE_OF = {JobKind.TRAIN_AGENT: Role.AGENT, JobKind.TRAIN_SIMULATOR: Role.SIMULATOR}


class RunCancelledError(RuntimeError):
    """The run was cancelled while its job trained: stop without writing an adapter."""


class ClaimLostError(RuntimeError):
    """Another worker took the job over (our heartbeat was older than the lease); stop without writing."""


@dataclass(frozen=True)
class JobResult:
    """The job row after this delivery, what the delivery found, and when to retry a busy job."""

    job: TrainJob
    outcome: ClaimOutcome
    retry_after_s: float | None = None


def run_train_job(session_factory: sessionmaker[Session], settings: GenEnvSettings, job_id: int) -> JobResult:
    """Claim and run a train_agent / train_simulator job; a finished or busy job is returned untouched."""
    ts = settings.trainer
    with session_scope(session_factory) as s:
        claim = train_jobs.claim_job(
            s, job_id, worker=worker_identity(settings), lease_s=ts.lease_s, max_attempts=ts.max_attempts
        )
        job = TrainJob.model_validate(claim.job)
    if claim.outcome is not ClaimOutcome.CLAIMED:
        log.info("train job %s not run: %s (status %s)", job_id, claim.outcome.value, job.status.value)
        return JobResult(job, claim.outcome, claim.retry_after_s)
    assert claim.token is not None
    log.info("train job %s (%s, run %s, epoch %s) claimed, attempt %s",
             job_id, job.kind.value, job.run_id, job.epoch, job.attempts)
    try:
        with _keep_claim(session_factory, ts.heartbeat_s, job_id, claim.token) as beat:
            _run_claimed(session_factory, settings, job, claim.token, beat)
    except ClaimLostError:
        log.warning("train job %s was taken over by another worker; this attempt stops", job_id)
        return JobResult(_reload(session_factory, job_id), ClaimOutcome.BUSY, ts.lease_s)
    except (OperationalError, InterfaceError):
        # The database went away (a restart): not the job's fault, so not a failed attempt. The claim is left to
        # expire; the orchestrator sends the job again once it is stale and the next delivery takes it over.
        log.warning("train job %s stopped: the database connection failed", job_id, exc_info=True)
        raise
    except RunCancelledError as exc:
        log.info("train job %s stopped: %s", job_id, exc)
        with session_scope(session_factory) as s:
            train_jobs.finish_job(s, job_id, claim.token, status=JobStatus.SKIPPED, metrics={"reason": str(exc)})
    except Exception as exc:
        with session_scope(session_factory) as s:
            train_jobs.finish_job(s, job_id, claim.token, status=JobStatus.FAILED,
                                  error=f"{type(exc).__name__}: {exc}"[:4000])
        raise
    return JobResult(_reload(session_factory, job_id), ClaimOutcome.CLAIMED)


def _stop_if_cancelled(session_factory: sessionmaker[Session], run_id: str, *, tolerate_outage: bool = False) -> None:
    try:
        with session_scope(session_factory) as s:
            run = s.get(RunRow, run_id)
    except (OperationalError, InterfaceError):
        if not tolerate_outage:
            raise
        # Between optimiser steps: a database blip must not throw away the steps done; the next step asks again.
        log.warning("could not check whether run %s was cancelled (database unavailable); training on", run_id)
        return
    # Cancelled, or failed meanwhile (e.g. its other job failed for good): nothing will use this adapter.
    if run is not None and RunStatus(run.status) in RUN_FINISHED:
        raise RunCancelledError(f"run {run_id} is {run.status}")


class EpochNotScoredError(RuntimeError):
    """A train_simulator job came before its epoch was scored: only the curriculum service scores (the
    orchestrator's SCORE phase, before TRAIN), so this is a job sent out of order, never something to repair here."""


def _require_scores(session: Session, run_id: str, epoch: int) -> None:
    """Fail clearly unless the curriculum service scored the epoch. An epoch past SCORE may have no score rows
    (no seed batch had a valid attempt): its pool is then empty and the job is skipped, as before."""
    if inputs.has_scores(session, run_id, epoch):
        return
    row = session.scalar(select(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == epoch))
    if row is None or PHASE_ORDER.index(EpochPhase(row.phase)) <= PHASE_ORDER.index(EpochPhase.SCORE):
        raise EpochNotScoredError(
            f"epoch {epoch} of run {run_id} has no curriculum scores: the curriculum service scores an epoch at "
            "SCORE, before TRAIN sends train_simulator (the curriculum service's POST /score)")


def _reload(session_factory: sessionmaker[Session], job_id: int) -> TrainJob:
    with session_scope(session_factory) as s:
        return TrainJob.model_validate(train_jobs.get_job(s, job_id))


def _keep_claim(session_factory: sessionmaker[Session], interval_s: float, job_id: int, token: str) -> Heartbeat:
    """Renew the claim every interval_s from a thread, so the lease need not outlast model loading or a step."""

    def beat() -> bool:
        with session_scope(session_factory) as s:
            return train_jobs.heartbeat(s, job_id, token)

    return Heartbeat(beat, interval_s, name=f"train job {job_id}")


def _run_claimed(
    session_factory: sessionmaker[Session], settings: GenEnvSettings, job: TrainJob, token: str, beat: Heartbeat
) -> None:
    from genenv.models.prepare import resolve_model

    role = ROLE_OF[job.kind]
    _stop_if_cancelled(session_factory, job.run_id)
    with session_scope(session_factory) as s:
        config = runs.run_config(s, job.run_id)
        parent = adapters.latest_adapter(s, job.run_id, role)
        parent_version, parent_path = (parent.version, Path(parent.path)) if parent else (None, None)
        version = adapters.next_version(s, job.run_id, role)
        seed = (config.random_seed * 1_000_003 + job.epoch) * 2 + (role is Role.SIMULATOR)
        if role is Role.AGENT:
            fresh = inputs.fresh_groups(s, job.run_id, job.epoch)
            budget = config.agent.batch_size * config.agent.max_steps_per_epoch
            # A group holds ≥ 2 sequences, so this many groups always covers the replay share of the budget.
            replay = inputs.replay_groups(s, job.run_id, job.epoch, rng=random.Random(seed),
                                          max_groups=math.floor(budget * config.curriculum.replay_ratio))
        elif not config.trains_simulator:
            train_jobs.finish_job(s, job.id, token, status=JobStatus.SKIPPED,
                                  metrics={"reason": f"mode {config.mode} does not train the simulator"})
            return
        else:
            _require_scores(s, job.run_id, job.epoch)
            generations = inputs.simulator_pool(
                s, job.run_id, job.epoch, config.policy.simulator_pool, max_size=config.simulator.pool_max_size,
                recent_epochs=config.simulator.pool_recent_epochs, seed=config.random_seed)

    def on_step(step: int, stats: dict[str, float]) -> None:
        if beat.lost.is_set():  # the heartbeat thread found the job taken over: stop before more work is wasted
            raise ClaimLostError(f"lost the claim on job {job.id} at step {step}")
        # Cancel stops in-flight training between steps.
        _stop_if_cancelled(session_factory, job.run_id, tolerate_outage=True)
        log.info("train job %s step %d: %s", job.id, step, {k: round(v, 4) for k, v in stats.items()})

    from genenv_trainer.training import runner
    from genenv_trainer.training.lora import save_adapter

    model_path = resolve_model(config.base_model, settings.paths.model_cache)
    common: dict[str, Any] = {"model_path": model_path, "parent": parent_path, "config": config,
                              "trainer": settings.trainer, "seed": seed, "on_step": on_step}
    if role is Role.AGENT:
        result = runner.train_agent(fresh=fresh, replay=replay, **common)
    else:
        result = runner.train_simulator(generations=generations, epoch=job.epoch, **common)
    metrics = json_safe({**result.metrics, "parent_version": parent_version, "epoch": job.epoch})

    if result.model is None:
        _finish(session_factory, job, token, JobStatus.SKIPPED, metrics=metrics)
        return
    path = save_adapter(result.model, settings.paths.adapter_store.resolve(), job.run_id, role, version,
                        result.optimizer)
    metrics["adapter_path"] = str(path)

    def record(s: Session) -> None:
        adapters.create_adapter(s, run_id=job.run_id, role=role, version=version, path=str(path),
                                parent_version=parent_version, metrics=metrics)

    _finish(session_factory, job, token, JobStatus.DONE, metrics=metrics, version=version, also=record)
    log.info("train job %s wrote %s adapter v%d at %s", job.id, role.value, version, path)


def _finish(
    session_factory: sessionmaker[Session],
    job: TrainJob,
    token: str,
    status: JobStatus,
    *,
    metrics: dict[str, Any],
    version: int | None = None,
    also: Callable[[Session], None] | None = None,
) -> None:
    """Mark the job finished — and run ``also`` (the adapter row) — in one transaction, only if still ours."""
    with session_scope(session_factory) as s:
        if not train_jobs.finish_job(s, job.id, token, status=status, adapter_version=version, metrics=metrics):
            raise ClaimLostError(f"job {job.id} is no longer claimed by {token}")
        if also is not None:
            also(s)


