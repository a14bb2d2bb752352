"""SQLAlchemy 2.0 models: the system of record. Unique keys make every epoch phase idempotent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from genenv.tenancy import DEFAULT_TENANT

# Named constraints so Alembic batch mode on SQLite can find and drop them.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JsonType = JSON().with_variant(JSONB(), "postgresql")
NullableJson = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
"""JSON whose Python None is SQL NULL (not the JSON value null), so that COUNT(column) counts only set values."""


def utcnow() -> datetime:
    """Timezone-aware now (stored as UTC)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base with the naming convention."""

    metadata = MetaData(naming_convention=NAMING)


class ExperimentRow(Base):
    """An experiment: a run-config template run in several modes × replicates (its members are runs)."""

    __tablename__ = "experiment"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    # 'created', 'running' or 'cancelled'; once running, completed/failed are derived from the members.
    status: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JsonType, doc="The ExperimentCreate body it was made from")
    # The tenant that created it (genenv.tenancy); its member runs carry the same tenant.
    tenant: Mapped[str] = mapped_column(String(64), default=DEFAULT_TENANT, server_default=DEFAULT_TENANT, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class RunRow(Base):
    """A co-evolution run."""

    __tablename__ = "run"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JsonType)
    # The tenant that created it, or its experiment's (genenv.tenancy): other tenants get 404 for it and its rows.
    tenant: Mapped[str] = mapped_column(String(64), default=DEFAULT_TENANT, server_default=DEFAULT_TENANT, index=True)
    current_epoch: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    experiment_id: Mapped[str | None] = mapped_column(
        ForeignKey("experiment.id", ondelete="CASCADE"), nullable=True, index=True
    )
    replicate: Mapped[int | None] = mapped_column(Integer, nullable=True, doc="Replicate index within the experiment")
    # The orchestrator's advance chain: the token its next scheduled message carries (an advance message with
    # another token was superseded and exits) and when that message is due (the watchdog re-enqueues a running run
    # whose advance is long overdue: a message lost with a restarted broker).
    advance_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    advance_due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The dependency the run waits for (genenv.contracts.runs.WaitingOn as JSON) while it does not answer; NULL
    # when not waiting. Written by the orchestrator, cleared when the phase next succeeds or the run is resumed.
    waiting_on: Mapped[dict[str, Any] | None] = mapped_column(NullableJson, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class EpochRow(Base):
    """One epoch of a run; ``phase`` is the first unfinished phase."""

    __tablename__ = "epoch"
    __table_args__ = (UniqueConstraint("run_id", "index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(16))
    summary: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class SeedRow(Base):
    """A seed sampled into an epoch of a run."""

    __tablename__ = "seed"
    __table_args__ = (UniqueConstraint("run_id", "epoch", "seed_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    epoch: Mapped[int] = mapped_column(Integer)
    seed_id: Mapped[str] = mapped_column(String(200))
    domain: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType)
    context: Mapped[dict[str, Any] | None] = mapped_column(
        NullableJson, nullable=True, doc="Success statistics shown to the simulator for this seed: {k, n, scope}"
    )


class TaskRow(Base):
    """A generated (or seed) task; rejected generations are kept with their reason."""

    __tablename__ = "task"
    __table_args__ = (
        UniqueConstraint("run_id", "epoch", "seed_id", "variation"),
        Index("ix_task_run_epoch_status", "run_id", "epoch", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    seed_id: Mapped[str] = mapped_column(String(200), doc="'' for a seedless generation")
    domain: Mapped[str] = mapped_column(String(64))
    variation: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    rejection_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    rejection_detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    raw_text: Mapped[str] = mapped_column(Text, default="")
    prompt_messages: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    generator_adapter: Mapped[str | None] = mapped_column(String(200), nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RolloutRow(Base):
    """One agent attempt at a task."""

    __tablename__ = "rollout"
    __table_args__ = (UniqueConstraint("task_id", "attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    agent_adapter: Mapped[str | None] = mapped_column(String(200), nullable=True)
    prompt_messages: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, default=list)
    response: Mapped[str | None] = mapped_column(Text, nullable=True)
    token_ids: Mapped[list[int] | None] = mapped_column(JsonType, nullable=True)
    token_logprobs: Mapped[list[float] | None] = mapped_column(JsonType, nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    retries: Mapped[int] = mapped_column(Integer, default=0)
    # Who made and scored it (genenv.contracts.leases.AttemptOrigin): worker, client_reply or client_score.
    origin: Mapped[str] = mapped_column(String(16), default="worker", server_default="worker")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class VerdictRow(Base):
    """R_agent of one rollout. score is NULL exactly when the verdict is invalid."""

    __tablename__ = "verdict"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    rollout_id: Mapped[int] = mapped_column(ForeignKey("rollout.id", ondelete="CASCADE"), unique=True)
    valid: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    success: Mapped[bool] = mapped_column(Boolean, default=False)
    error_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)


class TaskStatRow(Base):
    """Per-task success counts (materialised from verdicts)."""

    __tablename__ = "task_stat"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"), unique=True)
    n: Mapped[int] = mapped_column(Integer)
    k: Mapped[int] = mapped_column(Integer)
    p_hat: Mapped[float | None] = mapped_column(Float, nullable=True)
    p_beta: Mapped[float] = mapped_column(Float)


class SeedStatRow(Base):
    """Per-seed success counts of one epoch (materialised from verdicts)."""

    __tablename__ = "seed_stat"
    __table_args__ = (UniqueConstraint("run_id", "epoch", "seed_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    seed_id: Mapped[str] = mapped_column(String(200))
    n: Mapped[int] = mapped_column(Integer)
    k: Mapped[int] = mapped_column(Integer)
    p_hat: Mapped[float | None] = mapped_column(Float, nullable=True)
    p_beta: Mapped[float] = mapped_column(Float)


class CurriculumScoreRow(Base):
    """R_env, RWR weight and band flag of one seed batch in one epoch."""

    __tablename__ = "curriculum_score"
    __table_args__ = (UniqueConstraint("run_id", "epoch", "seed_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    seed_id: Mapped[str] = mapped_column(String(200))
    k: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    p_hat: Mapped[float | None] = mapped_column(Float, nullable=True)
    r_env: Mapped[float | None] = mapped_column(Float, nullable=True)
    weight: Mapped[float | None] = mapped_column(Float, nullable=True)
    in_band: Mapped[bool] = mapped_column(Boolean)


class AdapterRow(Base):
    """A LoRA adapter version written by a trainer."""

    __tablename__ = "adapter"
    __table_args__ = (UniqueConstraint("run_id", "role", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    parent_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    metrics: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ServedAdapterRow(Base):
    """Which adapter a vLLM server currently holds (adapter publishing's memory)."""

    __tablename__ = "served_adapter"
    __table_args__ = (UniqueConstraint("server", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    server: Mapped[str] = mapped_column(String(300))
    name: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str] = mapped_column(String(32))
    role: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    loaded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TrainJobRow(Base):
    """A worker job (train_agent, train_simulator, rollout); claimed in a transaction so a redelivered message
    finds it done."""

    __tablename__ = "train_job"
    __table_args__ = (UniqueConstraint("run_id", "epoch", "kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Workers refresh this while they run; a 'running' job whose heartbeat is stale was orphaned by a dead worker
    # and may be claimed again (crash recovery without waiting for the broker's visibility timeout).
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # When the orchestrator last handed the job to the queue (a pending job not picked up in time is re-sent).
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    adapter_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    metrics: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class EvaluationRow(Base):
    """A benchmark evaluation; ``idempotency_key`` makes an epoch's EVALUATE phase run once."""

    __tablename__ = "evaluation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(300), unique=True, nullable=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), nullable=True, index=True)
    epoch: Mapped[int | None] = mapped_column(Integer, nullable=True)
    benchmark: Mapped[str] = mapped_column(String(64))
    split: Mapped[str] = mapped_column(String(64))
    adapter: Mapped[str | None] = mapped_column(String(200), nullable=True)
    metrics: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    n_items: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DataDomainRow(Base):
    """A data-defined domain: a user's seed file and its kind (checked when registered; its name is final)."""

    __tablename__ = "data_domain"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    options: Mapped[dict[str, Any]] = mapped_column(JsonType, doc="Kind options, e.g. {normalize: number}")
    content: Mapped[str] = mapped_column(Text, doc="The seed file as registered (JSON Lines)")
    sha256: Mapped[str] = mapped_column(String(64))
    train_rows: Mapped[int] = mapped_column(Integer)
    eval_rows: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LeaseRow(Base):
    """A lease of an external_agent run's tasks to an outside agent: attempts may be reported on it until it
    expires; then its unreported attempts return to the pool (no writer needed: the pool counts only leases whose
    expires_at is ahead; ``state`` is set to 'expired' when a report or a lease call finds it past)."""

    __tablename__ = "lease"
    __table_args__ = (Index("ix_lease_run_epoch_state", "run_id", "epoch", "state"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), doc="'open' or 'expired'")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LeaseItemRow(Base):
    """One task of a lease: how many attempts were leased and how many were reported."""

    __tablename__ = "lease_item"
    __table_args__ = (UniqueConstraint("lease_id", "task_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    lease_id: Mapped[str] = mapped_column(ForeignKey("lease.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"), index=True)
    attempts: Mapped[int] = mapped_column(Integer)
    reported: Mapped[int] = mapped_column(Integer, default=0)


class IdempotentReplyRow(Base):
    """The answer given to a request with an Idempotency-Key, so that the same request gets it again and records
    nothing new (the attempts endpoint)."""

    __tablename__ = "idempotent_reply"
    __table_args__ = (UniqueConstraint("run_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    request_sha256: Mapped[str] = mapped_column(String(64), doc="Of the request body: a key reused for another "
                                                                "body is refused")
    response: Mapped[dict[str, Any]] = mapped_column(JsonType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
