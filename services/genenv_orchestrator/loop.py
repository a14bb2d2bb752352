"""Advance a run phase by phase. One advancer per run at a time; every step is recorded before the next starts."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.epochs import EpochPhase, next_phase
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import session_scope
from genenv.db.models import EpochRow, RunRow
from genenv.db.repositories import experiments
from genenv.observability.tensorboard import write_epoch_scalars
from genenv_orchestrator import queries as q
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.phases import PHASES, PhaseFailedError, PhaseResult, RunView
from genenv_orchestrator.summary import compute_summary

log = logging.getLogger(__name__)

RETRY_BACKOFF_CAP_S = 60.0

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
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _lock_key(run_id)})
                    conn.commit()
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


def _now() -> datetime:
    return datetime.now(UTC)


async def advance(ctx: OrchestratorContext, run_id: str, on_phase: PhaseCallback | None = None) -> str:
    """Run phases until the run waits on a worker, stops being 'running', or completes. Returns the outcome."""
    notify = on_phase or (lambda *_: None)
    async with run_lock(ctx.session_factory, run_id) as got:
        if not got:
            return "busy"
        while True:
            with session_scope(ctx.session_factory) as s:
                run = s.get(RunRow, run_id)
                if run is None:
                    return "missing"
                if run.status != RunStatus.RUNNING.value:
                    return run.status
                view = RunView(id=run.id, config=RunConfig.model_validate(run.config))
                epoch_row = q.get_or_create_epoch(s, run.id, run.current_epoch)
                epoch, phase = epoch_row.index, EpochPhase(epoch_row.phase)
                started = dict((epoch_row.summary or {}).get("_phase_started", {}))
                if phase.value not in started:
                    started[phase.value] = time.time()
                    q.merge_summary(epoch_row, _phase_started=started)
            notify(run_id, epoch, phase, "start")
            try:
                delay = ctx.settings.orchestrator.phase_delay_s.get(phase.value)
                if delay:  # fault injection: widen the window in which a crash test kills this process
                    await asyncio.sleep(delay)
                if phase is EpochPhase.CLOSE:
                    outcome = _close(ctx, run_id, epoch)
                    notify(run_id, epoch, phase, "done")
                    if outcome != RunStatus.RUNNING.value:
                        await _chain_experiment(ctx, run_id)
                        return outcome
                    continue
                result = await PHASES[phase](ctx, view, epoch)
            except PhaseFailedError as exc:
                _fail(ctx, run_id, f"{phase.value} (epoch {epoch}): {exc}")
                await _chain_experiment(ctx, run_id)
                return RunStatus.FAILED.value
            except Exception as exc:  # transient: a service or model call failed; retried, then the run fails
                log.exception("phase %s of run %s epoch %d failed", phase.value, run_id, epoch)
                limit = ctx.settings.orchestrator.max_phase_failures
                failures = _count_failure(ctx, run_id, epoch, phase)
                if failures >= limit:
                    _fail(ctx, run_id, f"{phase.value} (epoch {epoch}) failed {limit} times: {exc}")
                    await _chain_experiment(ctx, run_id)
                    return RunStatus.FAILED.value
                notify(run_id, epoch, phase, "retry")
                # Exponential backoff: a restarting service gets time to come back before the retries run out.
                backoff = min(RETRY_BACKOFF_CAP_S, ctx.poll_interval_s * 2 ** (failures - 1))
                if not ctx.dispatcher.inline:
                    await ctx.dispatcher.advance_later(run_id, backoff)
                    return "retry"
                await asyncio.sleep(backoff)
                continue
            if result is PhaseResult.WAITING:
                notify(run_id, epoch, phase, "waiting")
                await ctx.dispatcher.advance_later(run_id, ctx.poll_interval_s)
                return "waiting"
            _finish_phase(ctx, run_id, epoch, phase)
            notify(run_id, epoch, phase, "done")


def _finish_phase(ctx: OrchestratorContext, run_id: str, epoch: int, phase: EpochPhase) -> None:
    with session_scope(ctx.session_factory) as s:
        row = q.get_or_create_epoch(s, run_id, epoch)
        if row.phase != phase.value:  # another advancer already recorded it
            return
        summary = dict(row.summary or {})
        started = summary.get("_phase_started", {}).get(phase.value, time.time())
        seconds = dict(summary.get("phase_seconds", {}))
        seconds[phase.value] = round(time.time() - float(started), 3)
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
        await ctx.dispatcher.advance_later(following, 0.0)


def _count_failure(ctx: OrchestratorContext, run_id: str, epoch: int, phase: EpochPhase) -> int:
    with session_scope(ctx.session_factory) as s:
        row = q.get_or_create_epoch(s, run_id, epoch)
        failures = dict((row.summary or {}).get("_failures", {}))
        failures[phase.value] = int(failures.get(phase.value, 0)) + 1
        q.merge_summary(row, _failures=failures)
        return int(failures[phase.value])


def _fail(ctx: OrchestratorContext, run_id: str, message: str) -> None:
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id)
        if run is not None and run.status == RunStatus.RUNNING.value:
            run.status = RunStatus.FAILED.value
            run.error = message[:4000]


def _close(ctx: OrchestratorContext, run_id: str, epoch: int) -> str:
    """Store the epoch summary, then open the next epoch or complete the run (one transaction)."""
    with session_scope(ctx.session_factory) as s:
        run = s.get(RunRow, run_id, with_for_update=True)
        assert run is not None
        row = q.get_or_create_epoch(s, run_id, epoch)
        if row.phase != EpochPhase.CLOSE.value:
            return run.status
        internal = dict(row.summary or {})
        seconds = dict(internal.get("phase_seconds", {}))
        started = internal.get("_phase_started", {}).get(EpochPhase.CLOSE.value, time.time())
        seconds[EpochPhase.CLOSE.value] = round(time.time() - float(started), 3)
        summary = compute_summary(s, run_id, epoch, seconds)
        row.summary = {**summary.model_dump(mode="json"), "_phase_started": internal.get("_phase_started", {})}
        board = ctx.settings.paths.tensorboard_dir
        if board is not None:
            # Written before the commit: a crash after it re-runs CLOSE, which replaces this epoch's file.
            write_epoch_scalars(board, run_id, epoch, summary)
        row.phase = EpochPhase.CLOSED.value
        row.finished_at = _now()
        config = RunConfig.model_validate(run.config)
        if epoch + 1 < config.epochs:
            q.get_or_create_epoch(s, run_id, epoch + 1)
            run.current_epoch = epoch + 1
        else:
            run.status = RunStatus.COMPLETED.value
        return run.status


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
