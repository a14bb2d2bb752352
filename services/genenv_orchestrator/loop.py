"""Advance a run phase by phase. One advancer per run at a time; every step is recorded before the next starts."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, and_, func, or_, select, text, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Role
from genenv.contracts.epochs import EpochPhase, EpochSummary, next_phase
from genenv.contracts.runs import RunStatus, WaitingOn
from genenv.db.engine import session_scope
from genenv.db.models import EpochRow, RunRow
from genenv.db.repositories import experiments, runs
from genenv.observability.tensorboard import write_epoch_scalars
from genenv.observability.trackers import log_epoch_mlflow, log_epoch_wandb
from genenv.outages import BROKER, DATABASE, MODEL_SERVERS, Outage, classify
from genenv.rejections import dominant_rejection
from genenv_orchestrator import queries as q
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.phases import PHASES, PhaseFailedError, PhaseResult, RunView
from genenv_orchestrator.summary import compute_summary

log = logging.getLogger(__name__)

RETRY_BACKOFF_CAP_S = 60.0
# An embedded driver (inline dispatch) does a phase's work itself, so a phase it finds started before this process
# began was interrupted with the process that ran it, and nothing worked on it in between (a session's end and the
# next one's `genenv experiment resume`). Its clock restarts at the first step here: phase_seconds, and every wall
# time summed from them, leave that gap out and miss only the interrupted process's part of the one phase.
# Distributed orchestrators keep the first start: their workers go on while an orchestrator restarts.
PROCESS_STARTED = time.time()

PhaseCallback = Callable[[str, int, EpochPhase, str], None]
"""Called as (run_id, epoch, phase, event) with event 'start' | 'done' | 'waiting' | 'retry'."""

_local_locks: dict[str, threading.Lock] = {}
_local_guard = threading.Lock()


def _lock_key(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big", signed=True)


@asynccontextmanager
async def run_lock(factory: sessionmaker[Session], run_id: str) -> AsyncIterator[bool]:
    """Try to become the run's only advancer: a Postgres advisory lock (released if the process dies) or,
    on SQLite (one embedded process), a process-local lock."""
    engine = factory.kw["bind"]
    if engine.dialect.name == "postgresql":
        conn = engine.connect()
        try:
            got = bool(conn.execute(select(func.pg_try_advisory_lock(_lock_key(run_id)))).scalar())
            conn.commit()
            try:
                yield got
            finally:
                if got:
                    _unlock(conn, run_id)
        finally:
            conn.close()
        return
    with _local_guard:
        lock = _local_locks.setdefault(run_id, threading.Lock())
    got = lock.acquire(blocking=False)
    try:
        yield got
    finally:
        if got:
            lock.release()


def _unlock(conn: Connection, run_id: str) -> None:
    try:
        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _lock_key(run_id)})
        conn.commit()
    except (OperationalError, InterfaceError):
        # The database went away while this advancer held the lock: the lock ended with its connection's session.
        log.warning("run %s: the advance lock's connection was lost (the lock went with it)", run_id)


def retry_backoff(poll_interval_s: float, tries: int) -> float:
    """Seconds before try ``tries`` + 1: doubling from poll_interval_s, at most RETRY_BACKOFF_CAP_S (a restarting
    service gets time to come back)."""
    return min(RETRY_BACKOFF_CAP_S, poll_interval_s * 2.0 ** (tries - 1))


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Step:
    """The phase a run is at, read under one session: what ``advance`` runs next."""

    view: RunView
    waiting: WaitingOn | None
    epoch: int
    phase: EpochPhase


async def advance(
    ctx: OrchestratorContext, run_id: str, on_phase: PhaseCallback | None = None, token: str | None = None
) -> str:
    """Run phases until the run waits on a worker, stops being 'running', or completes. Returns the outcome.

    ``token``: the chain token of a scheduled advance message (None for a start, a resume, a worker's start-up or the
    watchdog); a message whose token is no longer the run's was superseded by a later one and does nothing, so a
    duplicated message (a redelivery, a re-enqueue while the chain was alive) never forks a second polling chain.
    """
    notify = on_phase or (lambda *_: None)
    async with run_lock(ctx.session_factory, run_id) as got:
        if not got:
            return "busy"
        first = True
        while True:
            step = _next_step(ctx, run_id, token if first else None)
            first = False
            if isinstance(step, str):
                return step
            epoch, phase = step.epoch, step.phase
            notify(run_id, epoch, phase, "start")
            try:
                outcome = await _run_phase(ctx, run_id, step)
            except PhaseFailedError as exc:
                _fail(ctx, run_id, f"{phase.value} (epoch {epoch}): {exc}")
                await _chain_experiment(ctx, run_id)
                return RunStatus.FAILED.value
            except Exception as exc:
                stop = await _after_error(ctx, run_id, epoch, phase, exc, notify)
                if stop is not None:
                    return stop
                continue
            if step.waiting is not None:  # the phase got its answers: the outage is over
                _end_outage(ctx, run_id)
            if outcome is PhaseResult.WAITING:
                notify(run_id, epoch, phase, "waiting")
                await _schedule(ctx, run_id, ctx.poll_interval_s)
                return "waiting"
            if phase is not EpochPhase.CLOSE:
                _finish_phase(ctx, run_id, epoch, phase)
            notify(run_id, epoch, phase, "done")
            if isinstance(outcome, str):  # CLOSE ended the run (completed): the experiment's next member starts
                await _chain_experiment(ctx, run_id)
                return outcome


def _next_step(ctx: OrchestratorContext, run_id: str, token: str | None) -> _Step | str:
    """The run's current epoch and phase (the phase's start time stored once), or the outcome that ends
    ``advance``: the run is missing or not running, or ``token`` is no longer its chain's."""
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id)
        if run is None:
            return "missing"
        if token is not None and run.advance_token != token:
            return "superseded"
        if run.status != RunStatus.RUNNING.value:
            return run.status
        epoch_row = q.get_or_create_epoch(s, run.id, run.current_epoch)
        step = _Step(view=RunView(id=run.id, config=runs.config_of(run)),
                     waiting=None if run.waiting_on is None else WaitingOn.model_validate(run.waiting_on),
                     epoch=epoch_row.index, phase=EpochPhase(epoch_row.phase))
        started = dict((epoch_row.summary or {}).get("_phase_started", {}))
        first = started.get(step.phase.value)
        resumed = first is not None and ctx.dispatcher.inline and first < PROCESS_STARTED
        if first is None or resumed:
            if resumed:
                log.info("run %s epoch %d: phase %s was interrupted with an earlier process; its clock restarts",
                         run.id, step.epoch, step.phase.value)
            started[step.phase.value] = time.time()
            q.merge_summary(epoch_row, _phase_started=started)
        return step


async def _run_phase(ctx: OrchestratorContext, run_id: str, step: _Step) -> PhaseResult | str | None:
    """Run one phase: its result, or for CLOSE the run's status after it (None while the run goes on)."""
    delay = ctx.settings.orchestrator.phase_delay_s.get(step.phase.value)
    if delay:  # fault injection: widen the window in which a crash test kills this process
        await asyncio.sleep(delay)
    if step.waiting is not None and step.waiting.dependency in MODEL_SERVERS:
        # A model server that was away has most likely restarted and forgotten the run's adapters: serve the newest
        # again before the phase tries (still away: this raises the same outage).
        for role in Role:
            await ctx.publisher.ensure_latest(run_id, role)
    if step.phase is not EpochPhase.CLOSE:
        return await PHASES[step.phase](ctx, step.view, step.epoch)
    # An epoch ends with its newest adapters served, whatever restarted since PUBLISH (a run that completes leaves
    # them loaded; cheap: one list call per role when nothing changed).
    for role in Role:
        await ctx.publisher.ensure_latest(run_id, role)
    outcome = _close(ctx, run_id, step.epoch)
    return None if outcome == RunStatus.RUNNING.value else outcome


async def _after_error(
    ctx: OrchestratorContext, run_id: str, epoch: int, phase: EpochPhase, exc: Exception, notify: PhaseCallback
) -> str | None:
    """A phase raised: wait on a dependency that is away (never counted), or count a real failure (a 4xx, a bad
    payload, a bug) and fail the run after orchestrator.max_phase_failures. Returns the outcome that ends
    ``advance``, or None to try the phase again now (the embedded driver, after its backoff).

    A database that does not answer cannot record the wait (nor a failure): the error that says so propagates out
    of ``advance``, and its caller waits (``driver.drive``, the Celery task's retry)."""
    outage = classify(exc, ctx.settings.services)
    if outage is not None:
        log.warning("phase %s of run %s epoch %d waits on %s: %s",
                    phase.value, run_id, epoch, outage.dependency, outage.error)
        tries = _record_outage(ctx, run_id, epoch, phase, outage)
        if tries is None:  # paused (waited too long), or the user paused or cancelled meanwhile
            return _status(ctx, run_id)
    else:
        log.exception("phase %s of run %s epoch %d failed", phase.value, run_id, epoch, exc_info=exc)
        limit = ctx.settings.orchestrator.max_phase_failures
        tries = _count_failure(ctx, run_id, epoch, phase)
        if tries >= limit:
            _fail(ctx, run_id, f"{phase.value} (epoch {epoch}) failed {limit} times: {exc}")
            await _chain_experiment(ctx, run_id)
            return RunStatus.FAILED.value
    notify(run_id, epoch, phase, "retry")
    backoff = retry_backoff(ctx.poll_interval_s, tries)
    if not ctx.dispatcher.inline:
        await _schedule(ctx, run_id, backoff)
        return "retry"
    await asyncio.sleep(backoff)
    # A database that went away may have taken the run's advance lock with its connection: leave, so the caller's
    # next advance takes the lock again before it runs a phase.
    return "retry" if outage is not None and outage.dependency == DATABASE else None


def _finish_phase(ctx: OrchestratorContext, run_id: str, epoch: int, phase: EpochPhase) -> None:
    with session_scope(ctx.session_factory) as s:
        row = q.get_or_create_epoch(s, run_id, epoch)
        if row.phase != phase.value:  # another advancer already recorded it
            return
        summary = dict(row.summary or {})
        started = q.phase_started(row, phase) or time.time()
        seconds = dict(summary.get("phase_seconds", {}))
        seconds[phase.value] = round(time.time() - started, 3)
        q.merge_summary(row, phase_seconds=seconds)
        row.phase = next_phase(phase).value


async def _chain_experiment(ctx: OrchestratorContext, run_id: str) -> None:
    """A member of a sequential experiment finished: start the next member and hand it to the orchestrator.

    Idempotent (a member already started is live, so a second call starts nothing). If this process dies between
    the commit and the message, the next member is 'running' and the orchestrator's start-up re-enqueues it.
    """
    with session_scope(ctx.session_factory) as s:
        following = experiments.start_next_member(s, run_id)
    if following is not None:
        log.info("run %s finished; started the next member %s of its experiment", run_id, following)
        await _schedule(ctx, following, 0.0)


async def _schedule(ctx: OrchestratorContext, run_id: str, delay_s: float) -> None:
    """Queue the run's next advance as its one live chain: a fresh token and the due time are stored first, then the
    message carrying that token is sent (the embedded driver loops itself: nothing to queue)."""
    if ctx.dispatcher.inline:
        return
    token = uuid.uuid4().hex
    with session_scope(ctx.session_factory) as s:
        s.execute(
            update(RunRow).where(RunRow.id == run_id)
            # Polling is not a change of the run: updated_at keeps its value.
            .values(advance_token=token, advance_due_at=_now() + timedelta(seconds=delay_s),
                    updated_at=RunRow.updated_at)
            .execution_options(synchronize_session=False)
        )
    try:
        await ctx.dispatcher.advance_later(run_id, delay_s, token)
    except Exception as exc:
        outage = classify(exc, ctx.settings.services)
        if outage is None or outage.dependency != BROKER:
            raise
        # Not a failure of the run: its due time is stored, so once the broker answers again the watchdog
        # (orchestrator.watchdog_s) re-enqueues the overdue run and its chain goes on.
        log.warning("run %s: its next advance could not be queued (the broker does not answer; the watchdog "
                    "re-enqueues it once it does): %s", run_id, outage.error)


def overdue_runs(factory: sessionmaker[Session], grace_s: float) -> list[str]:
    """Running runs whose next advance is more than ``grace_s`` overdue and that no advancer holds: their chain's
    message was lost (a broker restart drops the countdown messages a worker held; a failed advance whose database
    was down could not schedule the next). Their due time moves ``grace_s`` ahead, so the next sweep leaves the
    message the caller sends now its chance. Postgres only (the embedded mode's driver loops in the foreground)."""
    engine = factory.kw["bind"]
    if engine.dialect.name != "postgresql":
        return []
    now = _now()
    cutoff = now - timedelta(seconds=grace_s)
    with session_scope(factory) as s:
        candidates = list(s.scalars(select(RunRow.id).where(
            RunRow.status == RunStatus.RUNNING.value,
            or_(RunRow.advance_due_at < cutoff, and_(RunRow.advance_due_at.is_(None), RunRow.updated_at < cutoff)),
        )))
        overdue = []
        for run_id in candidates:
            # An advancer at work holds the run's advisory lock (a long phase: its next message is not due yet).
            if s.scalar(select(func.pg_try_advisory_xact_lock(_lock_key(run_id)))):
                overdue.append(run_id)
        if overdue:
            s.execute(update(RunRow).where(RunRow.id.in_(overdue))
                      .values(advance_due_at=now + timedelta(seconds=grace_s), updated_at=RunRow.updated_at)
                      .execution_options(synchronize_session=False))
        return overdue


def _count_failure(ctx: OrchestratorContext, run_id: str, epoch: int, phase: EpochPhase) -> int:
    with session_scope(ctx.session_factory) as s:
        row = q.get_or_create_epoch(s, run_id, epoch)
        failures = dict((row.summary or {}).get("_failures", {}))
        failures[phase.value] = int(failures.get(phase.value, 0)) + 1
        q.merge_summary(row, _failures=failures)
        return int(failures[phase.value])


def _record_outage(
    ctx: OrchestratorContext, run_id: str, epoch: int, phase: EpochPhase, outage: Outage
) -> int | None:
    """Store what the run waits on (``since`` kept from the outage's first try); the tries so far, or None when the
    run is no longer running: paused here because it waited past orchestrator.outage_pause_after_s, or by a user."""
    now = _now()
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id, with_for_update=True)
        if run is None or run.status != RunStatus.RUNNING.value:
            return None
        before = None if run.waiting_on is None else WaitingOn.model_validate(run.waiting_on)
        since = now if before is None else before.since
        waiting = WaitingOn(dependency=outage.dependency, since=since, last_error=outage.error,
                            attempts=1 if before is None else before.attempts + 1, epoch=epoch, phase=phase.value)
        run.waiting_on = waiting.model_dump(mode="json")
        limit = ctx.settings.orchestrator.outage_pause_after_s
        if (now - since).total_seconds() < limit:
            return waiting.attempts
        reason = (f"paused: {phase.value} (epoch {epoch}) waited on {outage.dependency} since "
                  f"{since.strftime('%Y-%m-%d %H:%M:%S')} UTC ({waiting.attempts} tries), longer than "
                  f"orchestrator.outage_pause_after_s = {limit:g} s; resume the run once it is back. "
                  f"Last error: {outage.error}")
        log.warning("run %s %s", run_id, reason)
        s.flush()
        runs.move(s, run, RunStatus.PAUSED, error=reason[:4000])
        return None


def _end_outage(ctx: OrchestratorContext, run_id: str) -> None:
    with session_scope(ctx.session_factory) as s:
        s.execute(update(RunRow).where(RunRow.id == run_id).values(waiting_on=None)
                  .execution_options(synchronize_session=False))


def _status(ctx: OrchestratorContext, run_id: str) -> str:
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id)
        return "missing" if run is None else run.status


def _fail(ctx: OrchestratorContext, run_id: str, message: str) -> None:
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id, with_for_update=True)
        # A run the user paused or cancelled meanwhile keeps the user's status; the failure stays in the logs.
        if run is not None and run.status == RunStatus.RUNNING.value:
            runs.move(s, run, RunStatus.FAILED, error=message[:4000])


def _close(ctx: OrchestratorContext, run_id: str, epoch: int) -> str:
    """Store the epoch summary, then open the next epoch or complete the run (one transaction).

    Only a running run is closed: a pause or cancel that committed after the loop read the status (the row lock
    orders the two) leaves the epoch waiting in CLOSE — a resumed run closes it then, a cancelled one never does.
    """
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id, with_for_update=True)
        if run is None:
            return "missing"
        if run.status != RunStatus.RUNNING.value:
            return run.status
        row = q.get_or_create_epoch(s, run_id, epoch)
        if row.phase != EpochPhase.CLOSE.value:
            return run.status
        closed = _close_epoch(ctx, s, run, row, run_id, epoch)
    # After the commit: a tracker is slow (seconds) and must not hold the run's row lock; an epoch that closes
    # twice cannot happen, so nothing is logged twice (a crash between the commit and here loses that point).
    status, name, summary = closed
    _export_epoch(ctx, run_id, epoch, name, summary)
    return status


def _close_epoch(
    ctx: OrchestratorContext, s: Session, run: RunRow, row: EpochRow, run_id: str, epoch: int
) -> tuple[str, str, EpochSummary]:
    """Store the summary of an epoch in CLOSE and advance the run; (run status, run name, summary)."""
    internal = dict(row.summary or {})
    seconds = dict(internal.get("phase_seconds", {}))
    started = q.phase_started(row, EpochPhase.CLOSE) or time.time()
    seconds[EpochPhase.CLOSE.value] = round(time.time() - started, 3)
    summary = compute_summary(s, run_id, epoch, seconds)
    dominant = dominant_rejection(summary.rejections, summary.tasks_valid)
    if dominant is not None:
        # "no in-band generation" from the trainer is the symptom; this line names the cause and the fix.
        log.warning("run %s epoch %d: %s", run_id, epoch, dominant.sentence())
    row.summary = {**summary.model_dump(mode="json"), "_phase_started": internal.get("_phase_started", {})}
    board = ctx.settings.paths.tensorboard_dir
    if board is not None:
        # Written before the commit: a crash after it re-runs CLOSE, which replaces this epoch's file.
        write_epoch_scalars(board, run_id, epoch, summary)
    row.phase = EpochPhase.CLOSED.value
    row.finished_at = _now()
    config = runs.config_of(run)
    if epoch + 1 < config.epochs:
        q.get_or_create_epoch(s, run_id, epoch + 1)
        run.current_epoch = epoch + 1
    else:
        runs.move(s, run, RunStatus.COMPLETED)
    return run.status, config.name, summary


def _export_epoch(ctx: OrchestratorContext, run_id: str, epoch: int, name: str, summary: EpochSummary) -> None:
    """Send a closed epoch's metrics to the experiment trackers the settings name (MLflow, W&B)."""
    obs = ctx.settings.observability
    if obs.mlflow_tracking_uri:
        try:
            log_epoch_mlflow(obs.mlflow_tracking_uri, obs.mlflow_experiment, run_id, name, epoch, summary)
        except Exception:  # a tracker that is down or misconfigured must not stop the run
            log.warning(
                "run %s epoch %d: logging to MLflow at %s failed", run_id, epoch, obs.mlflow_tracking_uri, exc_info=True
            )
    if obs.wandb_project:
        directory = obs.wandb_dir or ctx.settings.paths.home
        try:
            log_epoch_wandb(obs.wandb_project, obs.wandb_mode, directory, run_id, name, epoch, summary)
        except Exception:  # as above
            log.warning(
                "run %s epoch %d: logging to W&B project %s failed", run_id, epoch, obs.wandb_project, exc_info=True
            )


def running_run_ids(factory: sessionmaker[Session]) -> list[str]:
    """Runs in status running (re-enqueued when an orchestrator worker starts, so a crash never strands one)."""
    with session_scope(factory) as s:
        return list(s.scalars(select(RunRow.id).where(RunRow.status == RunStatus.RUNNING.value)))


def current_phase(factory: sessionmaker[Session], run_id: str) -> tuple[int, EpochPhase] | None:
    """(epoch, phase) the run is at, for progress displays."""
    with session_scope(factory) as s:
        run = s.get(RunRow, run_id)
        if run is None:
            return None
        row = s.scalar(select(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == run.current_epoch))
        return (run.current_epoch, EpochPhase(row.phase) if row else EpochPhase.GENERATE)
