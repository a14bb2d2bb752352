"""Trainer job rows: one per (run, epoch, kind), claimed in a transaction, finished only by their claimant.

The claim is ``SELECT … FOR UPDATE`` (a row lock on Postgres; SQLite has none and ignores it) followed by an
UPDATE conditioned on the state just read (status and attempts), so two workers can never both claim a job on
either database. A running worker renews ``claimed_at`` every few seconds from a background thread
(``genenv.db.heartbeat``); a running claim whose heartbeat is older than the lease belongs to a dead worker and is
taken over by the next delivery. Rollout jobs are not claimed: their worker renews ``heartbeat_at``, which the
orchestrator reads to tell a slow rollout from a dead one.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from genenv.contracts.adapters import JobKind, JobStatus
from genenv.contracts.errors import NotFoundError
from genenv.db.models import TrainJobRow, utcnow
from genenv.db.repositories.common import as_utc
from genenv.db.repositories.upsert import insert_for

FINISHED = (JobStatus.DONE.value, JobStatus.SKIPPED.value)


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
    if row.status in FINISHED:
        return Claim(ClaimOutcome.FINISHED, row)
    if row.status == JobStatus.RUNNING.value and row.claimed_at is not None:
        expires = as_utc(row.claimed_at) + timedelta(seconds=lease_s)
        if expires > now:
            return Claim(ClaimOutcome.BUSY, row, retry_after_s=(expires - now).total_seconds())
    if row.attempts >= max_attempts:
        if not (row.error or "").startswith("gave up"):
            last = f"; last error: {row.error}" if row.error else ""
            row.status = JobStatus.FAILED.value
            row.error = f"gave up after {row.attempts} attempt(s) (trainer.max_attempts = {max_attempts}){last}"
            session.flush()
        return Claim(ClaimOutcome.EXHAUSTED, row)
    token = f"{worker}/{uuid.uuid4().hex[:12]}"
    result = session.execute(
        update(TrainJobRow)
        .where(TrainJobRow.id == job_id, TrainJobRow.status == row.status, TrainJobRow.attempts == row.attempts)
        .values(
            status=JobStatus.RUNNING.value, claimed_by=token, claimed_at=now, attempts=row.attempts + 1, error=None
        )
        .execution_options(synchronize_session=False)
    )
    session.refresh(row)
    if _rowcount(result) != 1:
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
    return _rowcount(result) == 1


def beat_rollout_job(session: Session, run_id: str, epoch: int, now: datetime | None = None) -> None:
    """Mark the rollout job of (run, epoch) alive: the orchestrator re-dispatches one whose beat went stale."""
    session.execute(
        update(TrainJobRow)
        .where(TrainJobRow.run_id == run_id, TrainJobRow.epoch == epoch, TrainJobRow.kind == JobKind.ROLLOUT.value)
        .values(heartbeat_at=now or utcnow())
        .execution_options(synchronize_session=False)
    )


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
    result = session.execute(
        update(TrainJobRow)
        .where(TrainJobRow.id == job_id, TrainJobRow.claimed_by == token,
               TrainJobRow.status == JobStatus.RUNNING.value)
        .values(status=status.value, adapter_version=adapter_version, metrics=metrics or {}, error=error)
        .execution_options(synchronize_session=False)
    )
    return _rowcount(result) == 1


def _rowcount(result: Any) -> int:
    assert isinstance(result, CursorResult)
    return int(result.rowcount)
