"""Runs: create, read, list (cursor pagination, newest first) and state transitions. Flush, never commit.

``move`` is the only writer of ``run.status`` (the control plane's actions, the orchestrator's completed and failed,
an experiment starting or cancelling its members): the edge must be in genenv.lifecycle.RUN and the UPDATE is
conditioned on the status that was checked.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, func, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from genenv.contracts.errors import ConflictError, GenEnvError, LimitExceededError, NotFoundError
from genenv.contracts.pagination import Page
from genenv.contracts.runs import Run, RunAction, RunConfig, RunStatus, WaitingOn
from genenv.db.models import RunRow, utcnow
from genenv.db.repositories.cache import ValidatedCache
from genenv.db.repositories.common import (
    as_utc,
    decode_cursor,
    encode_cursor,
    one_or_raise,
    rowcount,
    serialize_on,
    visible_to,
)
from genenv.lifecycle import RUN
from genenv.tenancy import DEFAULT_TENANT, SERVICE, Caller


def new_run_id() -> str:
    """A fresh run id (32 hex characters, fits run.id)."""
    return uuid.uuid4().hex


def create(session: Session, config: RunConfig, *, tenant: str = DEFAULT_TENANT) -> RunRow:
    """Store a validated run config as a new run of ``tenant`` in status ``created``."""
    stored = config.model_dump(mode="json")
    # Postgres JSONB cannot hold U+0000; reject it here instead of failing inside the INSERT.
    if has_nul(stored):
        raise GenEnvError("text fields must not contain NUL (\\u0000) characters", param="config")
    row = RunRow(
        id=new_run_id(), name=config.name, status=RunStatus.CREATED.value, config=stored, current_epoch=0,
        tenant=tenant,
    )
    session.add(row)
    session.flush()
    return row


def has_nul(value: Any) -> bool:
    """Whether a JSON-like value holds U+0000 in any string (Postgres text and JSONB reject it)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def get(session: Session, run_id: str, *, for_update: bool = False, caller: Caller = SERVICE) -> RunRow:
    """The run ``run_id`` (row-locked on Postgres when ``for_update``); NotFoundError (404) if absent or not
    visible to ``caller`` (the default, SERVICE, is for the processes' own reads)."""
    stmt = visible_to(select(RunRow).where(RunRow.id == run_id), RunRow.tenant, caller)
    return one_or_raise(session, stmt, lambda: _not_found(run_id), for_update=for_update)


def _not_found(run_id: str) -> NotFoundError:
    return NotFoundError(f"run {run_id!r} not found", param="run_id", code="run_not_found")


# A run's config is written once, by ``create``, and never updated, and run ids are random and never reused, so an
# entry cannot go stale. Validating a full RunConfig (with its cross-field checks) was the largest share of the CPU
# a ``GET /v1/runs`` page cost; with the cache a page validates only the configs it has not seen.
_configs: ValidatedCache[str, RunConfig] = ValidatedCache(max_size=1024)


def _config(run_id: str, stored: dict[str, Any]) -> RunConfig:
    return _configs.get_or_build(run_id, lambda: RunConfig.model_validate(stored))


def config_of(row: RunRow) -> RunConfig:
    """The validated config of a run row: the one door every process reads a run's config through (validated once
    per run id and process, see ``_configs``)."""
    return _config(row.id, row.config)


def run_config(session: Session, run_id: str) -> RunConfig:
    """The validated config of run ``run_id``; NotFoundError (404) when the run does not exist."""
    return config_of(get(session, run_id))


# Every column but the config: a page reads the configs it has not cached with a second query (JSON decoding
# 50 configs per page costs more than the round trip).
_SUMMARY_COLUMNS = (
    RunRow.id, RunRow.name, RunRow.status, RunRow.current_epoch, RunRow.error, RunRow.waiting_on,
    RunRow.created_at, RunRow.updated_at,
)


def list_runs(
    session: Session,
    *,
    status: RunStatus | None = None,
    cursor: str | None = None,
    limit: int = 50,
    caller: Caller = SERVICE,
) -> Page[Run]:
    """Runs ``caller`` may see, newest first, optionally of one status; keyset over (created_at, id)."""
    stmt = visible_to(select(*_SUMMARY_COLUMNS), RunRow.tenant, caller)
    if status is not None:
        stmt = stmt.where(RunRow.status == status.value)
    if cursor is not None:
        created, last_id = decode_cursor(cursor, [datetime, str])
        stmt = stmt.where(
            or_(RunRow.created_at < created, and_(RunRow.created_at == created, RunRow.id < last_id))
        )
    rows = session.execute(stmt.order_by(RunRow.created_at.desc(), RunRow.id.desc()).limit(limit + 1)).all()
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor([rows[-1].created_at.isoformat(), rows[-1].id])
    configs = {r.id: c for r in rows if (c := _configs.get(r.id)) is not None}
    missing = [r.id for r in rows if r.id not in configs]
    if missing:
        for run_id, stored in session.execute(select(RunRow.id, RunRow.config).where(RunRow.id.in_(missing))):
            configs[run_id] = _config(run_id, stored)
    return Page[Run](items=[_run(r, configs[r.id]) for r in rows], next_cursor=next_cursor)


def move(session: Session, row: RunRow, target: RunStatus, *, error: str | None = None) -> RunRow:
    """The one door for a run's status: ``row`` (read with ``for_update``) moves along a legal edge of
    lifecycle.RUN, ConflictError (409) otherwise; ``error`` is recorded if given. A run that starts running again
    (a resume) starts with no error and waits on nothing: what paused it is over, or will be recorded anew.

    The write is conditioned on the status just checked: on Postgres the row lock already holds other writers off,
    on SQLite (no row locks) a writer that changed the row in between turns this write into a 409 instead of
    being overwritten.
    """
    current = RunStatus(row.status)
    RUN.check(current, target)
    values: dict[str, Any] = {"status": target.value, "updated_at": utcnow()}
    if target is RunStatus.RUNNING:
        values.update(error=None, waiting_on=None)
    if error is not None:
        values["error"] = error
    result = session.execute(
        update(RunRow).where(RunRow.id == row.id, RunRow.status == current.value).values(**values)
        .execution_options(synchronize_session=False)
    )
    if rowcount(result) != 1:
        session.refresh(row)
        raise ConflictError(
            f"run {row.id} became {row.status} while it was being moved to {target.value}; try again",
            param="run_id", code="concurrent_transition",
        )
    for name, value in values.items():  # the loaded row reflects the write without a second UPDATE
        set_committed_value(row, name, value)
    return row


def transition(session: Session, run_id: str, target: RunStatus, *, error: str | None = None) -> RunRow:
    """Lock the run and move it to ``target`` (``move``); ConflictError (409) on an illegal edge."""
    return move(session, get(session, run_id, for_update=True), target, error=error)


def apply_action(session: Session, run_id: str, action: RunAction, *, caller: Caller = SERVICE) -> RunRow:
    """Apply a user action (start/pause/resume/cancel); ConflictError (409) when not allowed now."""
    row = get(session, run_id, for_update=True, caller=caller)
    return move(session, row, RUN.action_target(RunStatus(row.status), action))


def require(session: Session, run_id: str, *, caller: Caller = SERVICE) -> None:
    """NotFoundError (404) unless run ``run_id`` exists and ``caller`` may see it; reads only its id (the check of
    every route under /v1/runs/{run_id} that does not read the run itself)."""
    if session.scalar(visible_to(select(RunRow.id).where(RunRow.id == run_id), RunRow.tenant, caller)) is None:
        raise _not_found(run_id)


def check_running_limit(session: Session, tenant: str, limit: int | None) -> None:
    """LimitExceededError (429) when ``tenant`` has more than ``limit`` runs running (None: no limit).

    Called after a start or resume moved its runs, in the same transaction: the error rolls the move back, so the
    count includes what this request started (one run, or every member of a concurrent experiment).
    """
    if limit is None:
        return
    serialize_on(session, f"genenv.tenant.running:{tenant}")
    running = session.scalar(
        select(func.count()).select_from(RunRow)
        .where(RunRow.tenant == tenant, RunRow.status == RunStatus.RUNNING.value)
    ) or 0
    if running > limit:
        raise LimitExceededError(
            f"tenant {tenant!r} may run at most {limit} run(s) at once (tenants.max_running_runs) and this would make "
            f"{running}; pause, cancel or wait for one of its running runs, then try again",
            param="run_id", code="tenant_limit_exceeded",
        )


def delete(session: Session, run_id: str, *, caller: Caller = SERVICE) -> None:
    """Delete a run that is not running with every row under it (foreign keys cascade); ConflictError if running."""
    row = get(session, run_id, for_update=True, caller=caller)
    if row.status == RunStatus.RUNNING.value:
        raise ConflictError(
            f"run {run_id} is running; pause or cancel it first, then delete it", param="run_id", code="run_running"
        )
    session.delete(row)
    session.flush()
    _configs.discard(run_id)


def to_contract(row: RunRow) -> Run:
    """The wire form of a run row."""
    return _run(row, _config(row.id, row.config))


def _run(row: RunRow | Row[Any], config: RunConfig) -> Run:
    """A run row (an entity, or a row of the summary columns) with its validated config."""
    return Run(
        id=row.id,
        name=row.name,
        status=RunStatus(row.status),
        config=config,
        current_epoch=row.current_epoch,
        error=row.error,
        waiting_on=None if row.waiting_on is None else WaitingOn.model_validate(row.waiting_on),
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )
