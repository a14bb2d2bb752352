"""LoRA adapters, training jobs and evaluations."""

from __future__ import annotations

import enum
import re
from datetime import datetime
from typing import Any

from pydantic import Field

from genenv.contracts.base import MAX_INT32, ReadModel, WriteModel


class Role(enum.StrEnum):
    """Which model an adapter belongs to."""

    AGENT = "agent"
    SIMULATOR = "simulator"


def adapter_name(run_id: str, role: Role | str, version: int) -> str:
    """The name an adapter is served under in vLLM (unique across runs)."""
    return f"{run_id}-{Role(role).value}-v{version}"


_ADAPTER_NAME = re.compile(r"^(?P<run>.+)-(?:agent|simulator)-v[0-9]+$")


def adapter_run_id(name: str) -> str | None:
    """The run an ``adapter_name`` belongs to, or None when ``name`` is not one (the adapter's tenant is its run's)."""
    match = _ADAPTER_NAME.match(name)
    return match.group("run") if match else None


class Adapter(ReadModel):
    """One adapter version written by a trainer."""

    id: int
    run_id: str
    role: Role
    version: int
    path: str
    parent_version: int | None
    metrics: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


class JobKind(enum.StrEnum):
    """Trainer job kinds."""

    TRAIN_AGENT = "train_agent"
    TRAIN_SIMULATOR = "train_simulator"
    ROLLOUT = "rollout"


class JobStatus(enum.StrEnum):
    """Train job lifecycle."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class TrainJob(ReadModel):
    """A trainer job row (claimed in a transaction)."""

    id: int
    run_id: str
    epoch: int
    kind: JobKind
    status: JobStatus
    attempts: int
    claimed_by: str | None
    adapter_version: int | None = None
    error: str | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)


class Evaluation(ReadModel):
    """A benchmark evaluation result."""

    id: int
    run_id: str | None
    epoch: int | None
    benchmark: str
    split: str
    adapter: str | None
    metrics: dict[str, Any]
    n_items: int
    created_at: datetime


class EvaluateRequest(WriteModel):
    """Body of POST /v1/benchmarks/{name}/evaluate."""

    adapter: str | None = Field(default=None, max_length=200, description="Agent adapter to evaluate; None = base.")
    split: str | None = Field(default=None, max_length=64, description="Benchmark split; None = its default.")
    limit: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Evaluate only this many items (round-robin)."
    )
    run_id: str | None = Field(default=None, max_length=32, description="Store the evaluation under this run.")
    epoch: int | None = Field(default=None, ge=0, le=MAX_INT32)
    idempotency_key: str | None = Field(
        default=None, max_length=300, description="An evaluation already stored under this key is returned, not rerun."
    )
