"""Leases of an external_agent run's tasks and the attempts an outside agent reports on them. Flush, never commit.

Every call here first locks the run row with a no-op UPDATE, as the transaction's first statement: a row lock on
Postgres, the database's write lock on SQLite (taken before anything is read, so no stale snapshot). Lease and
report calls of one run therefore take turns: two leases never hold the same open attempt, and a report never
records more attempts than its lease has open. A report also holds the epoch row (a conditional no-op UPDATE on
phase = rollout), so the orchestrator's move of the epoch past ROLLOUT waits for it: an attempt is either in the
epoch or refused (409 epoch_closed), never recorded after its epoch was scored.

A task's open attempts are rollouts_per_task minus its stored rollouts minus what unexpired open leases still hold;
an expired lease holds nothing, so its tasks return to the pool the moment it expires, without a sweeper.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from genenv.contracts.epochs import EpochPhase
from genenv.contracts.errors import ConflictError, LimitExceededError, NotFoundError, UnprocessableError
from genenv.contracts.leases import (
    AttemptOrigin,
    AttemptsRecorded,
    AttemptsReport,
    AttemptVerdict,
    ExternalScoring,
    Lease,
    LeaseItem,
    LeaseRequest,
)
from genenv.contracts.rollouts import Verdict
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import (
    EpochRow,
    IdempotentReplyRow,
    LeaseItemRow,
    LeaseRow,
    RolloutRow,
    RunRow,
    TaskRow,
    VerdictRow,
)
from genenv.db.repositories import runs
from genenv.db.repositories.common import as_utc, rowcount, serialize_on

OPEN = "open"
EXPIRED = "expired"
RETRY_WHILE_BUSY_S = 5.0
"""retry_after_s while the epoch is not taking attempts (generating, scoring, training, or every task attempted)."""
RETRY_MAX_S = 30.0
"""Longest retry_after_s while every open attempt is leased (a lease's expiry returns attempts sooner or later)."""


def _lock_run(session: Session, run_id: str) -> tuple[RunRow, RunConfig]:
    """The run, locked (see the module doc), and its config; 404 for an unknown run, 409 for one whose agent is not
    outside."""
    session.execute(update(RunRow).where(RunRow.id == run_id).values(updated_at=RunRow.updated_at)
                    .execution_options(synchronize_session=False))
    run = runs.get(session, run_id)
    config = runs.config_of(run)
    if not config.policy.external_agent:
        raise ConflictError(f"run {run_id} is a {config.mode} run, whose attempts our rollout workers make; leases "
                            "and attempts are for mode external_agent", param="run_id", code="not_external_agent")
    return run, config


def _require_running(run: RunRow) -> None:
    if run.status != RunStatus.RUNNING.value:
        raise ConflictError(f"run {run.id} is {run.status}; its tasks are leased and its attempts taken only while "
                            "it runs", param="run_id", code="run_not_running")


def _phase(session: Session, run_id: str, epoch: int) -> str | None:
    return session.scalar(select(EpochRow.phase).where(EpochRow.run_id == run_id, EpochRow.index == epoch))


def _held(session: Session, run_id: str, epoch: int, now: datetime) -> dict[int, int]:
    """Attempts that unexpired open leases of the epoch hold and have not reported, per task."""
    rows = session.execute(
        select(LeaseItemRow.task_id, func.sum(LeaseItemRow.attempts - LeaseItemRow.reported))
        .join(LeaseRow, LeaseRow.id == LeaseItemRow.lease_id)
        .where(LeaseRow.run_id == run_id, LeaseRow.epoch == epoch, LeaseRow.state == OPEN, LeaseRow.expires_at > now)
        .group_by(LeaseItemRow.task_id)
    )
    return {int(t): int(n or 0) for t, n in rows}


def _stored(session: Session, task_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(rollouts, highest attempt index) per task that has any."""
    if not task_ids:
        return {}
    rows = session.execute(
        select(RolloutRow.task_id, func.count(RolloutRow.id), func.max(RolloutRow.attempt))
        .where(RolloutRow.task_id.in_(list(task_ids))).group_by(RolloutRow.task_id)
    )
    return {int(t): (int(n), int(m)) for t, n, m in rows}


def _expire(session: Session, run_id: str, now: datetime) -> None:
    """Mark the run's open leases that are past their time expired (bookkeeping: the pool ignores them already)."""
    session.execute(update(LeaseRow).where(LeaseRow.run_id == run_id, LeaseRow.state == OPEN,
                                           LeaseRow.expires_at <= now)
                    .values(state=EXPIRED).execution_options(synchronize_session=False))


def check_open_leases(session: Session, tenant: str, limit: int | None, now: datetime) -> None:
    """LimitExceededError (429) when ``tenant`` already holds ``limit`` open leases (None: no limit): unexpired, with
    attempts still to report, over all its runs."""
    if limit is None:
        return
    serialize_on(session, f"genenv.tenant.leases:{tenant}")  # held until the new lease is committed
    unreported = select(LeaseItemRow.id).where(
        LeaseItemRow.lease_id == LeaseRow.id, LeaseItemRow.reported < LeaseItemRow.attempts
    ).exists()
    held = session.scalar(
        select(func.count()).select_from(LeaseRow).join(RunRow, RunRow.id == LeaseRow.run_id)
        .where(RunRow.tenant == tenant, LeaseRow.state == OPEN, LeaseRow.expires_at > now, unreported)
    ) or 0
    if held >= limit:
        raise LimitExceededError(
            f"tenant {tenant!r} holds {held} open lease(s), the most it may (tenants.max_open_leases); report the "
            "attempts of a lease, or let one expire, then lease again",
            param="run_id", code="tenant_limit_exceeded",
        )


AgentMessages = Callable[[str, dict[str, Any]], list[dict[str, Any]]]
"""A task's agent prompt from its domain name and payload (the domain's ``agent_messages``)."""


def take_lease(
    session: Session, run_id: str, request: LeaseRequest, now: datetime, agent_messages: AgentMessages
) -> Lease:
    """Lease up to ``request.limit`` tasks of the run's current epoch with all their open attempts (the tasks with
    the fewest attempts first, so attempts spread over the epoch); an empty lease with retry_after_s when none is
    open or the epoch is not at ROLLOUT. The caller renders each task's prompt (``agent_messages``): the repository
    reads and writes rows and never looks a domain up."""
    run, config = _lock_run(session, run_id)
    _require_running(run)
    epoch = run.current_epoch
    _expire(session, run_id, now)
    empty = Lease(lease_id=None, expires_at=None, epoch=epoch, items=[], retry_after_s=RETRY_WHILE_BUSY_S)
    if _phase(session, run_id, epoch) != EpochPhase.ROLLOUT.value:
        return empty
    tasks = list(session.execute(
        select(TaskRow.id, TaskRow.domain, TaskRow.payload)
        .where(TaskRow.run_id == run_id, TaskRow.epoch == epoch, TaskRow.status == TaskStatus.VALID.value)
        .order_by(TaskRow.id)
    ).tuples())
    stored = _stored(session, [t for t, _, _ in tasks])
    held = _held(session, run_id, epoch, now)
    g = config.rollouts_per_task
    open_ = [(stored.get(t, (0, -1))[0], t, d, p or {}, g - stored.get(t, (0, -1))[0] - held.get(t, 0))
             for t, d, p in tasks]
    chosen = sorted((o for o in open_ if o[4] > 0), key=lambda o: (o[0], o[1]))[: request.limit]
    if not chosen:
        if held:  # every open attempt is leased: the earliest expiry may return some
            first = session.scalar(select(func.min(LeaseRow.expires_at)).where(
                LeaseRow.run_id == run_id, LeaseRow.epoch == epoch, LeaseRow.state == OPEN, LeaseRow.expires_at > now))
            wait = RETRY_MAX_S if first is None else (as_utc(first) - now).total_seconds()
            return empty.model_copy(update={"retry_after_s": round(min(RETRY_MAX_S, max(1.0, wait)), 3)})
        return empty
    lease = LeaseRow(id=uuid.uuid4().hex, run_id=run_id, epoch=epoch, state=OPEN, created_at=now,
                     expires_at=now + timedelta(seconds=request.lease_s))
    session.add(lease)
    session.flush()
    client_scores = config.external.scoring is ExternalScoring.CLIENT
    items = []
    for _, task_id, domain, payload, n in chosen:
        session.add(LeaseItemRow(lease_id=lease.id, task_id=task_id, attempts=n, reported=0))
        items.append(LeaseItem(task_id=task_id, domain=domain, attempts=n,
                               messages=agent_messages(domain, payload),
                               payload=payload if client_scores else None))
    session.flush()
    return Lease(lease_id=lease.id, expires_at=as_utc(lease.expires_at), epoch=epoch, items=items)


@dataclass(frozen=True)
class PlannedAttempt:
    """One reported attempt, checked against its lease: its task's domain and payload (what the checker needs)."""

    task_id: int
    domain: str
    payload: dict[str, Any]
    reply: str | None
    score: float | None


@dataclass(frozen=True)
class ReportPlan:
    """A report that may be recorded: its attempts and the run's config."""

    config: RunConfig
    epoch: int
    attempts: list[PlannedAttempt]


def stored_answer(session: Session, run_id: str, key: str | None, digest: str) -> AttemptsRecorded | None:
    """The answer given before to this Idempotency-Key, or None; 422 when the key came with another body."""
    if key is None:
        return None
    row = session.scalar(select(IdempotentReplyRow).where(IdempotentReplyRow.run_id == run_id,
                                                         IdempotentReplyRow.key == key))
    if row is None:
        return None
    if row.request_sha256 != digest:
        raise UnprocessableError(f"Idempotency-Key {key!r} was used for another request body in this run; use a "
                                 "fresh key for a new report", param="Idempotency-Key", code="idempotency_key_reused")
    return AttemptsRecorded.model_validate(row.response)


def check_report(
    session: Session, run_id: str, report: AttemptsReport, now: datetime, key: str | None, digest: str
) -> ReportPlan | AttemptsRecorded:
    """The stored answer of a repeated request (same Idempotency-Key), else the report checked against its lease:
    404 unknown lease; 409 run not running, epoch closed, lease expired, more attempts at a task than the lease has
    open; 422 a task not in the lease, a score without external.scoring client."""
    run, config = _lock_run(session, run_id)
    answer = stored_answer(session, run_id, key, digest)
    if answer is not None:
        return answer
    _require_running(run)
    lease = session.get(LeaseRow, report.lease_id)
    if lease is None or lease.run_id != run_id:
        raise NotFoundError(f"lease {report.lease_id!r} not found in run {run_id}", param="lease_id",
                            code="unknown_lease")
    if lease.epoch != run.current_epoch or _phase(session, run_id, lease.epoch) != EpochPhase.ROLLOUT.value:
        raise ConflictError(f"epoch {lease.epoch} of run {run_id} takes no more attempts (it is closed or being "
                            "scored); lease tasks of the current epoch", param="lease_id", code="epoch_closed")
    if lease.state != OPEN or as_utc(lease.expires_at) <= now:
        raise ConflictError(f"lease {lease.id} expired at {as_utc(lease.expires_at).isoformat()}; its open attempts "
                            "went back to the pool: take a new lease", param="lease_id", code="lease_expired")
    items = {i.task_id: i for i in session.scalars(select(LeaseItemRow).where(LeaseItemRow.lease_id == lease.id))}
    # (Result has .keys(), so dict(result) would not read its rows.)
    tasks = {int(t): (d, p or {}) for t, d, p in session.execute(
        select(TaskRow.id, TaskRow.domain, TaskRow.payload).where(TaskRow.id.in_(list(items))))}
    counts: Counter[int] = Counter()
    planned = []
    for index, attempt in enumerate(report.attempts):
        item = items.get(attempt.task_id)
        if item is None:
            raise UnprocessableError(f"task {attempt.task_id} is not in lease {lease.id}", code="task_not_leased",
                                     param=f"attempts.{index}.task_id")
        if attempt.score is not None and config.external.scoring is not ExternalScoring.CLIENT:
            raise UnprocessableError("a score needs external.scoring: client in the run config; send the reply "
                                     "instead", param=f"attempts.{index}.score", code="client_scoring_off")
        counts[attempt.task_id] += 1
        left = item.attempts - item.reported
        if counts[attempt.task_id] > left:
            raise ConflictError(f"lease {lease.id} has {left} attempt(s) open at task {attempt.task_id} and this "
                                f"report gives {counts[attempt.task_id]} or more", code="too_many_attempts",
                                param=f"attempts.{index}.task_id")
        domain, payload = tasks[attempt.task_id]
        planned.append(PlannedAttempt(attempt.task_id, domain, payload, attempt.reply, attempt.score))
    return ReportPlan(config=config, epoch=lease.epoch, attempts=planned)


def _verdict_row(rollout_id: int, v: Verdict) -> VerdictRow:
    # As the VERIFY phase stores one: a valid row with an error kind is a reply that did not parse (score 0).
    err = v.error or v.form_error
    return VerdictRow(rollout_id=rollout_id, valid=v.valid, score=v.score, success=v.success,
                      error_kind=None if err is None else err.kind.value,
                      error_message=None if err is None else err.message, details=v.details)


def _reason(v: Verdict) -> str | None:
    err = v.error or v.form_error
    return None if err is None else f"{err.kind.value}: {err.message}"


def record_report(
    session: Session, run_id: str, report: AttemptsReport, verdicts: Sequence[Verdict], now: datetime,
    key: str | None, digest: str,
) -> AttemptsRecorded:
    """Check the report again under the locks (the state may have moved while the checker ran), then store each
    attempt as a rollout with its verdict, count it on the lease and keep the answer under the Idempotency-Key."""
    plan = check_report(session, run_id, report, now, key, digest)
    if isinstance(plan, AttemptsRecorded):  # a concurrent twin of this request recorded it meanwhile
        return plan
    held = session.execute(update(EpochRow).where(EpochRow.run_id == run_id, EpochRow.index == plan.epoch,
                                                  EpochRow.phase == EpochPhase.ROLLOUT.value)
                           .values(phase=EpochRow.phase).execution_options(synchronize_session=False))
    if rowcount(held) != 1:  # unreachable under the run lock; kept so a future writer cannot slip past
        raise ConflictError(f"epoch {plan.epoch} of run {run_id} takes no more attempts", param="lease_id",
                            code="epoch_closed")
    last = {t: m for t, (_, m) in _stored(session, sorted({a.task_id for a in plan.attempts})).items()}
    out = []
    for attempt, verdict in zip(plan.attempts, verdicts, strict=True):
        number = last.get(attempt.task_id, -1) + 1
        last[attempt.task_id] = number
        origin = AttemptOrigin.CLIENT_REPLY if attempt.reply is not None else AttemptOrigin.CLIENT_SCORE
        row = RolloutRow(task_id=attempt.task_id, attempt=number, agent_adapter=None, prompt_messages=[],
                         response=attempt.reply, origin=origin.value, created_at=now)
        session.add(row)
        session.flush()
        session.add(_verdict_row(row.id, verdict))
        out.append(AttemptVerdict(task_id=attempt.task_id, rollout_id=row.id, score=verdict.score,
                                  valid=verdict.valid, success=verdict.success, reason=_reason(verdict),
                                  origin=origin))
    reported = Counter(a.task_id for a in plan.attempts)
    items = list(session.scalars(select(LeaseItemRow).where(LeaseItemRow.lease_id == report.lease_id)))
    for item in items:
        item.reported += reported.get(item.task_id, 0)
    answer = AttemptsRecorded(recorded=len(out), verdicts=out, epoch=plan.epoch,
                              lease_open=sum(i.attempts - i.reported for i in items))
    if key is not None:
        session.add(IdempotentReplyRow(run_id=run_id, key=key, request_sha256=digest,
                                       response=answer.model_dump(mode="json"), created_at=now))
    session.flush()
    return answer


@dataclass(frozen=True)
class EpochAttempts:
    """How far an external_agent epoch's attempts are: what its ROLLOUT phase decides on."""

    valid_tasks: int
    complete_tasks: int
    """Tasks with rollouts_per_task attempts."""
    attempted_tasks: int
    """Tasks with at least one attempt."""


def epoch_attempts(session: Session, run_id: str, epoch: int, rollouts_per_task: int) -> EpochAttempts:
    """Valid tasks of the epoch, those with all their attempts and those with any."""
    per_task = (
        select(TaskRow.id.label("task_id"), func.count(RolloutRow.id).label("n"))
        .outerjoin(RolloutRow, RolloutRow.task_id == TaskRow.id)
        .where(TaskRow.run_id == run_id, TaskRow.epoch == epoch, TaskRow.status == TaskStatus.VALID.value)
        .group_by(TaskRow.id)
        .subquery()
    )
    valid, complete, attempted = session.execute(select(
        func.count(per_task.c.task_id),
        func.coalesce(func.sum(case((per_task.c.n >= rollouts_per_task, 1), else_=0)), 0),
        func.coalesce(func.sum(case((per_task.c.n > 0, 1), else_=0)), 0),
    )).one()
    return EpochAttempts(int(valid), int(complete), int(attempted))
