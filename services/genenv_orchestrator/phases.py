"""One function per epoch phase. Each is idempotent: run it again after a crash and it only finishes the rest."""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from genenv.contracts.adapters import JobKind, JobStatus, Role
from genenv.contracts.epochs import EpochPhase
from genenv.contracts.modes import TaskSource
from genenv.contracts.rollouts import Verdict, VerdictErrorKind, VerifyItem, VerifyRequest
from genenv.contracts.runs import RunConfig
from genenv.contracts.scores import ScoreRequest
from genenv.contracts.tasks import GenerateRequest, InlineSeed, SeedStats, TaskStatus
from genenv.db.engine import session_scope
from genenv.db.models import AdapterRow, EvaluationRow, TaskRow, TrainJobRow, VerdictRow
from genenv.db.repositories import adapters, leases, rollouts, train_jobs
from genenv.lifecycle import JOB_FINISHED
from genenv.outages import DependencyAwayError, Outage
from genenv_orchestrator import queries as q
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.seeds import epoch_seeds


class PhaseResult(enum.Enum):
    """DONE: record the phase and go on. WAITING: a worker is busy; poll again later."""

    DONE = "done"
    WAITING = "waiting"


class PhaseFailedError(RuntimeError):
    """The phase cannot complete (e.g. a training job failed for good); the run fails."""


@dataclass(frozen=True)
class RunView:
    """What phases read of a run."""

    id: str
    config: RunConfig


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(ts: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes for timezone-aware columns.
    return None if ts is None else (ts if ts.tzinfo else ts.replace(tzinfo=UTC))


async def generate(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """Store the epoch's seeds and n simulator variations per seed (or the seeds themselves: tasks ``seeds``).

    A mode whose tasks are written ``once`` (static_augmentation) writes its whole fixed set before training, at
    epoch 0: static_variations per seed for the seeds of every epoch (the same seeds the other modes draw), each
    epoch's tasks stored under that epoch.
    """
    cfg = run.config
    static = cfg.policy.tasks is TaskSource.ONCE
    if static and epoch > 0:
        return PhaseResult.DONE  # generated at epoch 0, before any training
    epochs = range(cfg.epochs) if static else range(epoch, epoch + 1)
    with session_scope(ctx.session_factory) as s:
        todo: list[tuple[int, list[tuple[str, dict[str, Any], SeedStats | None]]]] = []
        for e in epochs:
            seeds = epoch_seeds(s, run.id, e, cfg, ctx.benchmarks_dir)
            done = q.seeds_with_tasks(s, run.id, e)
            todo.append((e, [(r.seed_id, r.payload, None if r.context is None else SeedStats(**r.context))
                             for r in seeds if r.seed_id not in done]))
        sim_adapter = q.latest_adapter_name(s, run.id, Role.SIMULATOR) if cfg.trains_simulator else None
        if not cfg.uses_simulator:
            for sid, payload, _ in todo[0][1]:
                s.add(TaskRow(run_id=run.id, epoch=epoch, seed_id=sid, domain=cfg.domain, variation=0,
                              status=TaskStatus.VALID.value, payload=payload, raw_text="", prompt_messages=[]))
            return PhaseResult.DONE
    if sim_adapter is not None and any(missing for _, missing in todo):
        # A restarted vLLM server (or a fresh in-process backend) has forgotten the simulator's adapter.
        await ctx.publisher.ensure_latest(run.id, Role.SIMULATOR)
    n = cfg.static_variations if static else cfg.variations_per_seed
    for e, missing in todo:
        for start in range(0, len(missing), ctx.generate_chunk):
            chunk = missing[start : start + ctx.generate_chunk]
            await ctx.simulator.generate(
                GenerateRequest(
                    domain=cfg.domain,
                    seeds=[InlineSeed(id=sid, payload=payload) for sid, payload, _ in chunk],
                    n=n,
                    target_success=cfg.curriculum.alpha,
                    adapter=sim_adapter,
                    temperature=cfg.simulator_temperature,
                    max_tokens=cfg.max_task_tokens,
                    run_id=run.id,
                    epoch=e,
                    seed_stats={sid: stats for sid, _, stats in chunk if stats is not None},
                )
            )
    return PhaseResult.DONE


async def rollout(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """G attempts per valid task by the rollout worker; distributed: dispatch, watch progress, re-dispatch on stall.
    An outside agent's run (external_agent) dispatches nothing and waits for its attempts instead."""
    if run.config.policy.external_agent:
        return _external_attempts(ctx, run, epoch)
    g = run.config.rollouts_per_task
    with session_scope(ctx.session_factory) as s:
        expected = q.count_valid_tasks(s, run.id, epoch) * g
        have = rollouts.count_epoch_rollouts(s, run.id, epoch)
        job = train_jobs.create_or_get_job(s, run.id, epoch, JobKind.ROLLOUT)
        if have >= expected:
            train_jobs.complete(s, job, rollouts=have)
            return PhaseResult.DONE
        if ctx.dispatcher.inline:
            train_jobs.dispatched(s, job, _now())
    if ctx.dispatcher.inline:
        await ctx.dispatcher.rollout(run.id, epoch)
        with session_scope(ctx.session_factory) as s:
            have = rollouts.count_epoch_rollouts(s, run.id, epoch)
            if have >= expected:  # done as in the distributed path (an embedded run left it 'running' for good)
                train_jobs.complete(s, train_jobs.create_or_get_job(s, run.id, epoch, JobKind.ROLLOUT),
                                    rollouts=have)
        if have < expected:
            raise RuntimeError(f"rollout stored {have} of {expected} attempts")
        return PhaseResult.DONE
    return await _watch_job(ctx, run.id, epoch, JobKind.ROLLOUT, progress=have,
                            dispatch=lambda: ctx.dispatcher.rollout(run.id, epoch))


def _external_attempts(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """An outside agent's epoch closes when every valid task has rollouts_per_task attempts, or, from
    external.epoch_deadline_s after its tasks became leasable, as soon as at least external.min_attempted_share of
    them have any (the issue's "at the deadline when at least the share have attempts": before the share is reached
    the epoch keeps waiting, since scoring a few tasks would train the simulator on noise; a client that never
    comes back leaves the run waiting, to be cancelled or paused by its owner). Tasks with fewer attempts are scored
    on what they have; unattempted ones have no verdict, so scoring leaves them out, and the epoch summary counts
    them (tasks_unattempted)."""
    cfg = run.config
    with session_scope(ctx.session_factory) as s:
        progress = leases.epoch_attempts(s, run.id, epoch, cfg.rollouts_per_task)
        row = q.get_or_create_epoch(s, run.id, epoch)
        started = q.phase_started(row, EpochPhase.ROLLOUT)
    if progress.complete_tasks >= progress.valid_tasks:  # every task attempted in full (or no valid task at all)
        return PhaseResult.DONE
    waited = 0.0 if started is None else time.time() - started
    share = progress.attempted_tasks / progress.valid_tasks
    if waited >= cfg.external.epoch_deadline_s and share >= cfg.external.min_attempted_share:
        return PhaseResult.DONE
    return PhaseResult.WAITING


async def _watch_job(
    ctx: OrchestratorContext, run_id: str, epoch: int, kind: JobKind, *, progress: int,
    dispatch: Callable[[], Awaitable[None]],
) -> PhaseResult:
    """Dispatch a job the first time, and again if it made no progress for stall_timeout_s (its worker died).

    A job whose last delivery found a dependency away (the rollout worker reports it on the job) raises that
    outage, so the run waits on it by name (never a failure), and is dispatched again on each try once no
    delivery is at work (the tries' backoff paces it), until a delivery ends otherwise.
    """
    now = _now()
    stall = timedelta(seconds=ctx.stall_timeout_s)
    send = False
    with session_scope(ctx.session_factory) as s:
        job = train_jobs.create_or_get_job(s, run_id, epoch, kind)
        s.refresh(job, with_for_update=True)  # its metrics are read and written here and by the worker's report
        last = int(job.metrics.get("progress", -1))
        if progress != last:
            job.metrics = {**job.metrics, "progress": progress}
            job.heartbeat_at = now
        dispatched = _aware(job.dispatched_at)
        beat = _aware(job.heartbeat_at) or dispatched
        away = train_jobs.away_of(job)
        # The delivery that found the dependency away ended after the last dispatch: none is at work or on its way.
        again = away is not None and job.claimed_by is None and (dispatched is None or dispatched <= away.at)
        if dispatched is None or again or (beat is not None and now - beat > stall and now - dispatched > stall):
            train_jobs.dispatched(s, job, now)
            send = True
        job_id = job.id
    if send:
        await _send(ctx, job_id, dispatch)
    if away is not None:
        raise DependencyAwayError(Outage(away.dependency, away.error))
    return PhaseResult.WAITING


async def _send(ctx: OrchestratorContext, job_id: int, send: Callable[[], Awaitable[None]]) -> None:
    """Send a job's message, recorded as dispatched just before. A message that did not go out (the broker is
    away) is not dispatched: its mark is removed, so the phase's next try sends it at once instead of after
    stall_timeout_s, and the error propagates (a broker outage: the run waits on it)."""
    try:
        await send()
    except Exception:
        with session_scope(ctx.session_factory) as s:
            s.execute(update(TrainJobRow).where(TrainJobRow.id == job_id).values(dispatched_at=None)
                      .execution_options(synchronize_session=False))
        raise


def _verdict_row(rollout_id: int, v: Verdict) -> VerdictRow:
    # A valid row with an error kind is a reply that did not parse (score 0); an invalid row's kind says why.
    err = v.error or v.form_error
    return VerdictRow(
        rollout_id=rollout_id, valid=v.valid, score=v.score, success=v.success,
        error_kind=None if err is None else err.kind.value,
        error_message=None if err is None else err.message, details=v.details,
    )


async def verify(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """A verdict for every rollout; a failed request is recorded as an invalid verdict, never as reward 0."""
    threshold = run.config.curriculum.success_threshold
    while True:
        with session_scope(ctx.session_factory) as s:
            pending = q.unverified_rollouts(s, run.id, epoch, ctx.verify_chunk)
            if not pending:
                return PhaseResult.DONE
            failed = [(r.id, r.error or "no response") for r, _ in pending if r.error or r.response is None]
            for rid, msg in failed:
                s.add(_verdict_row(rid, Verdict(valid=False, error={"kind": VerdictErrorKind.ROLLOUT_ERROR,
                                                                   "message": msg[:2000]})))
            todo = [(r.id, t.domain, t.payload or {}, r.response or "") for r, t in pending
                    if not (r.error or r.response is None)]
        if not todo:
            continue
        resp = await ctx.verifier.verify(
            VerifyRequest(items=[VerifyItem(domain=d, task=p, response=txt) for _, d, p, txt in todo],
                          success_threshold=threshold)
        )
        if len(resp.verdicts) != len(todo):
            raise RuntimeError(f"verifier returned {len(resp.verdicts)} verdicts for {len(todo)} items")
        with session_scope(ctx.session_factory) as s:
            ids = [rid for rid, *_ in todo]
            seen = set(s.scalars(select(VerdictRow.rollout_id).where(VerdictRow.rollout_id.in_(ids))))
            s.add_all(_verdict_row(rid, v) for (rid, *_), v in zip(todo, resp.verdicts, strict=True)
                      if rid not in seen)


async def score(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """p̂, R_env, RWR weights and band flags per seed batch (stored by the curriculum service)."""
    await ctx.curriculum.score(ScoreRequest(run_id=run.id, epoch=epoch))
    return PhaseResult.DONE


def _train_kinds(cfg: RunConfig) -> list[JobKind]:
    # A frozen agent (agent.train = false) gets no job at all, so it never gets an adapter: rollouts stay the base's.
    return [*([JobKind.TRAIN_AGENT] if cfg.trains_agent else []),
            *([JobKind.TRAIN_SIMULATOR] if cfg.trains_simulator else [])]


async def train(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """train_agent (GRPO) and, in a mode that trains the simulator, train_simulator (RWR), in parallel on the gpu
    queue."""
    kinds = _train_kinds(run.config)
    if not kinds:
        return PhaseResult.DONE
    with session_scope(ctx.session_factory) as s:
        jobs = {k: train_jobs.create_or_get_job(s, run.id, epoch, k) for k in kinds}
        state = {k: (j.id, JobStatus(j.status), j.error) for k, j in jobs.items()}
    finished = JOB_FINISHED
    for kind, (_, status, error) in state.items():
        if status is JobStatus.FAILED:
            raise PhaseFailedError(f"{kind.value} failed: {error}")
    if all(st in finished for _, st, _ in state.values()):
        return PhaseResult.DONE
    if ctx.dispatcher.inline:
        for kind, (job_id, status, _) in state.items():
            if status not in finished:
                await ctx.dispatcher.train(job_id, kind.value)
        if not _all_finished(ctx, run.id, epoch, kinds):
            raise RuntimeError("training jobs ran inline but did not finish")
        return PhaseResult.DONE
    lease = timedelta(seconds=ctx.settings.trainer.lease_s)
    resend = timedelta(seconds=ctx.stall_timeout_s)
    now = _now()
    for kind in kinds:
        with session_scope(ctx.session_factory) as s:
            job = train_jobs.create_or_get_job(s, run.id, epoch, kind)
            sent, claimed = _aware(job.dispatched_at), _aware(job.claimed_at)
            sends = int(job.metrics.get(SENDS, 0))
            # Send when never sent; re-send when a pending job was not picked up (message lost, or queued behind a
            # busy trainer: backing off) or a running job's claim went stale (its worker died: the trainer's claim
            # takes such a job over).
            pending = job.status == JobStatus.PENDING.value
            stale = (pending and (sent is None or now - sent > resend_after(resend, sends))) or (
                job.status == JobStatus.RUNNING.value and claimed is not None and now - claimed > lease
                and (sent is None or now - sent > resend)
            )
            if stale:
                job.dispatched_at = now
            job_id = job.id
        if stale:
            await _send(ctx, job_id, functools.partial(ctx.dispatcher.train, job_id, kind.value))
            if pending:  # counted once it went out: a send the broker refused (an outage) does not lengthen the wait
                with session_scope(ctx.session_factory) as s:
                    job = train_jobs.create_or_get_job(s, run.id, epoch, kind)
                    s.refresh(job, with_for_update=True)  # a trainer finishing it now replaces the metrics
                    if job.status == JobStatus.PENDING.value:
                        job.metrics = {**job.metrics, SENDS: sends + 1}
    return PhaseResult.WAITING


# A pending train job's sends, kept on the job (its metrics; the trainer's own metrics replace them when it finishes).
SENDS = "sends"
# Why a backoff: a job still pending after stall_timeout_s is most often queued behind a busy trainer (one GPU, several
# runs), not lost, and every re-send is one more (idempotent, no-op) delivery for that trainer to claim and drop.
# The first re-send keeps the old timing (a message really lost waits stall_timeout_s); each later one waits twice as
# long, up to RESEND_CAP × stall_timeout_s.
RESEND_CAP = 8


def resend_after(stall: timedelta, sends: int) -> timedelta:
    """How long after its last send a still-pending train job is sent again, once it has been sent ``sends`` times:
    stall after the first send, doubling with each later one, at most RESEND_CAP × stall."""
    return stall * min(RESEND_CAP, 1 << max(0, sends - 1))


def _all_finished(ctx: OrchestratorContext, run_id: str, epoch: int, kinds: list[JobKind]) -> bool:
    with session_scope(ctx.session_factory) as s:
        statuses = [JobStatus(train_jobs.create_or_get_job(s, run_id, epoch, k).status) for k in kinds]
    if JobStatus.FAILED in statuses:
        raise PhaseFailedError("a training job failed")
    return all(st in JOB_FINISHED for st in statuses)


async def publish(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """Hot-load the adapters written this epoch into whatever serves each role (idempotent publisher)."""
    with session_scope(ctx.session_factory) as s:
        rows: list[AdapterRow] = []
        for role in (Role.AGENT, Role.SIMULATOR):
            row = adapters.latest_adapter(s, run.id, role)
            if row is not None:
                s.expunge(row)
                rows.append(row)
    for row in rows:
        await ctx.publisher.publish(row)
    return PhaseResult.DONE


async def evaluate(ctx: OrchestratorContext, run: RunView, epoch: int) -> PhaseResult:
    """Every eval_every epochs, the run's benchmarks with the current agent adapter."""
    cfg = run.config
    if not cfg.eval_every or (epoch + 1) % cfg.eval_every:
        return PhaseResult.DONE
    with session_scope(ctx.session_factory) as s:
        agent = q.latest_adapter_name(s, run.id, Role.AGENT)
        done = set(s.scalars(select(EvaluationRow.benchmark).where(
            EvaluationRow.run_id == run.id, EvaluationRow.epoch == epoch)))
    if agent is not None and set(cfg.eval_benchmarks) - done:
        # A model server restarted since PUBLISH has forgotten the adapter: every item would be scored against a
        # 404 instead of the agent.
        await ctx.publisher.ensure_latest(run.id, Role.AGENT)
    for name in cfg.eval_benchmarks:
        if name not in done:
            await ctx.verifier.evaluate(name, adapter=agent, split=cfg.eval_splits.get(name), limit=cfg.eval_limit,
                                        run_id=run.id, epoch=epoch)
    return PhaseResult.DONE


PHASES: dict[EpochPhase, Callable[[OrchestratorContext, RunView, int], Awaitable[PhaseResult]]] = {
    EpochPhase.GENERATE: generate,
    EpochPhase.ROLLOUT: rollout,
    EpochPhase.VERIFY: verify,
    EpochPhase.SCORE: score,
    EpochPhase.TRAIN: train,
    EpochPhase.PUBLISH: publish,
    EpochPhase.EVALUATE: evaluate,
}
