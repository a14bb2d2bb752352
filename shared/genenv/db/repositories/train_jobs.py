"""Trainer job rows: one per (run, epoch, kind), claimed in a transaction, finished only by their claimant.

The claim is ``SELECT … FOR UPDATE`` (a row lock on Postgres; SQLite has none and ignores it) followed by an
UPDATE conditioned on the state just read (status and attempts), so two workers can never both claim a job on
either database. A running worker renews ``claimed_at`` every few seconds from a background thread
(``genenv.db.heartbeat``); a running claim whose heartbeat is older than the lease belongs to a dead worker and is
taken over by the next delivery. A rollout job is claimed the same way by each Celery delivery (``claim_rollout``):
a message the broker redelivers while the first delivery still works (Redis's visibility timeout) finds the claim
fresh and exits instead of generating every missing attempt a second time. Its worker also renews
``heartbeat_at``, which the orchestrator reads to tell a slow rollout from a dead one.

``move_job`` is the only writer of ``train_job.status`` (the trainer's claims and outcomes, the orchestrator's
dispatches and a rollout phase's completion): one UPDATE matching only the legal sources of the target status
(genenv.lifecycle.JOB) and the caller's own conditions (the claim token, the status and attempts it read).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from genenv.contracts.adapters import JobKind, JobStatus
from genenv.contracts.errors import NotFoundError
from genenv.db.models import TrainJobRow, utcnow
from genenv.db.repositories.common import as_utc, rowcount
from genenv.db.repositories.upsert import insert_for
from genenv.lifecycle import JOB, JOB_FINISHED


class ClaimOutcome(enum.StrEnum):
    """What a delivery of a job found."""

    CLAIMED = "claimed"
    FINISHED = "finished"
    BUSY = "busy"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True)
class Claim:
    """Result of claim_job: the outcome, the job row, the claim token (when claimed), when to retry (busy)."""

    outcome: ClaimOutcome
    job: TrainJobRow
    token: str | None = None
    retry_after_s: float | None = None


def create_or_get_job(session: Session, run_id: str, epoch: int, kind: JobKind) -> TrainJobRow:
    """The job of (run, epoch, kind), created pending if it does not exist yet (safe under concurrency)."""
    session.execute(
        insert_for(session, TrainJobRow)
        .values(run_id=run_id, epoch=epoch, kind=kind.value, status=JobStatus.PENDING.value, attempts=0, metrics={})
        .on_conflict_do_nothing(index_elements=["run_id", "epoch", "kind"])
    )
    return session.scalars(
        select(TrainJobRow).where(
            TrainJobRow.run_id == run_id, TrainJobRow.epoch == epoch, TrainJobRow.kind == kind.value
        )
    ).one()


def move_job(
    session: Session, job_id: int, target: JobStatus, *, where: tuple[ColumnElement[bool], ...] = (), **values: Any
) -> bool:
    """The one door for a job's status: move job ``job_id`` to ``target`` (and write ``values``) only if its stored
    status is a legal source of ``target`` and ``where`` holds; False (nothing written) otherwise.

    Loaded rows of the job in ``session`` are refreshed from the write.
    """
    sources = sorted(s.value for s in JOB.sources(target))
    result = session.execute(
        update(TrainJobRow)
        .where(TrainJobRow.id == job_id, TrainJobRow.status.in_(sources), *where)
        .values(status=target.value, **values)
        .execution_options(synchronize_session="fetch")
    )
    return rowcount(result) == 1


def get_job(session: Session, job_id: int) -> TrainJobRow:
    """A job row by id; NotFoundError when absent."""
    row = session.get(TrainJobRow, job_id)
    if row is None:
        raise NotFoundError(f"train job {job_id} not found", param="job_id", code="job_not_found")
    return row


def claim_job(
    session: Session,
    job_id: int,
    *,
    worker: str,
    lease_s: float,
    max_attempts: int,
    now: datetime | None = None,
) -> Claim:
    """Claim a job for ``worker`` unless it is finished, held by a live worker, or out of attempts."""
    now = now or utcnow()
    row = session.scalars(select(TrainJobRow).where(TrainJobRow.id == job_id).with_for_update()).one_or_none()
    if row is None:
        raise NotFoundError(f"train job {job_id} not found", param="job_id", code="job_not_found")
    if JobStatus(row.status) in JOB_FINISHED:
        return Claim(ClaimOutcome.FINISHED, row)
    if row.status == JobStatus.RUNNING.value and row.claimed_at is not None:
        expires = as_utc(row.claimed_at) + timedelta(seconds=lease_s)
        if expires > now:
            return Claim(ClaimOutcome.BUSY, row, retry_after_s=(expires - now).total_seconds())
    if row.attempts >= max_attempts:
        if not (row.error or "").startswith("gave up"):
            last = f"; last error: {row.error}" if row.error else ""
            move_job(session, job_id, JobStatus.FAILED, where=(TrainJobRow.attempts == row.attempts,),
                     error=f"gave up after {row.attempts} attempt(s) (trainer.max_attempts = {max_attempts}){last}")
            session.refresh(row)
        return Claim(ClaimOutcome.EXHAUSTED, row)
    token = f"{worker}/{uuid.uuid4().hex[:12]}"
    claimed = move_job(
        session, job_id, JobStatus.RUNNING,
        where=(TrainJobRow.status == row.status, TrainJobRow.attempts == row.attempts),
        claimed_by=token, claimed_at=now, attempts=row.attempts + 1, error=None,
    )
    session.refresh(row)
    if not claimed:
        # Another worker won the race between our read and our update (possible on SQLite only).
        return Claim(ClaimOutcome.BUSY, row, retry_after_s=lease_s)
    return Claim(ClaimOutcome.CLAIMED, row, token=token)


def heartbeat(session: Session, job_id: int, token: str, now: datetime | None = None) -> bool:
    """Renew the claim; False when the job is no longer ours (taken over after our lease expired)."""
    result = session.execute(
        update(TrainJobRow)
        .where(TrainJobRow.id == job_id, TrainJobRow.claimed_by == token,
               TrainJobRow.status == JobStatus.RUNNING.value)
        .values(claimed_at=now or utcnow())
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def claim_rollout(session: Session, run_id: str, epoch: int, *, worker: str, lease_s: float,
                  now: datetime | None = None) -> Claim:
    """Claim the rollout job of (run, epoch) for one delivery: FINISHED when done, BUSY while another delivery's claim
    is fresh (its heartbeat younger than ``lease_s``), else CLAIMED (a dead worker's claim is taken over).

    Attempts are not counted here: the orchestrator counts its dispatches (``dispatched``).
    """
    now = now or utcnow()
    job_id = create_or_get_job(session, run_id, epoch, JobKind.ROLLOUT).id
    row = session.scalars(select(TrainJobRow).where(TrainJobRow.id == job_id).with_for_update()).one()
    if JobStatus(row.status) in JOB_FINISHED:
        return Claim(ClaimOutcome.FINISHED, row)
    if row.claimed_by is not None and row.claimed_at is not None:
        expires = as_utc(row.claimed_at) + timedelta(seconds=lease_s)
        if expires > now:
            return Claim(ClaimOutcome.BUSY, row, retry_after_s=(expires - now).total_seconds())
    token = f"{worker}/{uuid.uuid4().hex[:12]}"
    holder = TrainJobRow.claimed_by.is_(None) if row.claimed_by is None else TrainJobRow.claimed_by == row.claimed_by
    claimed = move_job(session, job_id, JobStatus.RUNNING, where=(holder,),
                       claimed_by=token, claimed_at=now, heartbeat_at=now)
    session.refresh(row)
    if not claimed:  # another delivery won between our read and our write (SQLite only: no row locks)
        return Claim(ClaimOutcome.BUSY, row, retry_after_s=lease_s)
    return Claim(ClaimOutcome.CLAIMED, row, token=token)


def beat_rollout(session: Session, job_id: int, token: str | None, now: datetime | None = None) -> bool:
    """Mark a rollout job alive (the orchestrator re-dispatches one whose beat went stale) and, for a claimed
    delivery, renew its claim; False when the claim was taken over (this delivery must stop)."""
    now = now or utcnow()
    stmt = update(TrainJobRow).where(TrainJobRow.id == job_id)
    if token is None:
        session.execute(stmt.values(heartbeat_at=now).execution_options(synchronize_session=False))
        return True
    result = session.execute(
        stmt.where(TrainJobRow.claimed_by == token).values(heartbeat_at=now, claimed_at=now)
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


AWAY = "away"
"""Key of a rollout job's metrics: the dependency its last delivery found away (the orchestrator's waiting_on)."""


@dataclass(frozen=True)
class Away:
    """What a rollout job's last delivery found away: the dependency, the error that said so, and when."""

    dependency: str
    error: str
    at: datetime


def release_claim(session: Session, job_id: int, token: str, away: Away | None = None) -> None:
    """A delivery that stopped working lets the next one start at once instead of waiting out its lease, and
    records whether it stopped because a dependency was away (``away``; None clears an earlier delivery's report).
    Nothing is written when the claim is no longer ``token``'s (taken over: the holder reports)."""
    row = session.scalars(select(TrainJobRow).where(TrainJobRow.id == job_id, TrainJobRow.claimed_by == token)
                          .with_for_update()).one_or_none()
    if row is None:
        return
    metrics = {k: v for k, v in (row.metrics or {}).items() if k != AWAY}
    if away is not None:
        metrics[AWAY] = {"dependency": away.dependency, "error": away.error, "at": away.at.isoformat()}
    row.metrics = metrics
    row.claimed_by = None


def away_of(job: TrainJobRow) -> Away | None:
    """The dependency the job's last delivery found away, or None (it ended otherwise, or none ended yet)."""
    found = (job.metrics or {}).get(AWAY)
    if not found:
        return None
    return Away(str(found["dependency"]), str(found["error"]), as_utc(datetime.fromisoformat(found["at"])))


def finish_job(
    session: Session,
    job_id: int,
    token: str,
    *,
    status: JobStatus,
    adapter_version: int | None = None,
    metrics: dict[str, Any] | None = None,
    error: str | None = None,
) -> bool:
    """Record the outcome of our claim; False (nothing written) when another worker holds the job now."""
    return move_job(
        session, job_id, status,
        where=(TrainJobRow.claimed_by == token, TrainJobRow.status == JobStatus.RUNNING.value),
        adapter_version=adapter_version, metrics=metrics or {}, error=error,
    )


def dispatched(session: Session, job: TrainJobRow, now: datetime) -> None:
    """The orchestrator handed ``job`` to a worker (again): running, one more attempt, its clocks restarted."""
    move_job(session, job.id, JobStatus.RUNNING, dispatched_at=now, heartbeat_at=now,
             attempts=TrainJobRow.attempts + 1)
    session.refresh(job)


def complete(session: Session, job: TrainJobRow, **metrics: Any) -> None:
    """A job whose work is all stored (a rollout phase that counted every attempt): done, ``metrics`` merged."""
    if JobStatus(job.status) is not JobStatus.DONE:
        move_job(session, job.id, JobStatus.DONE, metrics={**job.metrics, **metrics})
        session.refresh(job)
