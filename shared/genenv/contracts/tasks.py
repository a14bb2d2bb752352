"""Seeds, generated tasks and the simulator service's wire models."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from genenv.contracts.base import MAX_INT32, ReadModel, WriteModel

ChatMessage = dict[str, Any]
"""An OpenAI-style chat message: {"role": ..., "content": ...}."""


class Seed(ReadModel):
    """One (context, target action) pair from a benchmark's training split."""

    id: str = Field(description="Stable id within the domain, e.g. 'arith-1d-add-0007' or 'simple_python_12'.")
    domain: str
    payload: dict[str, Any] = Field(description="Domain-specific task payload (same shape as a generated task).")


class TaskStatus(enum.StrEnum):
    """A generated task is stored either valid or rejected with a reason."""

    VALID = "valid"
    REJECTED = "rejected"


class RejectionReason(enum.StrEnum):
    """Why a generation did not become a task. Counted, never a 500."""

    NOT_JSON = "not_json"
    SCHEMA = "schema_error"
    INVALID_TASK = "invalid_task"
    DUPLICATE = "duplicate"
    TOO_LONG = "too_long"
    EMPTY = "empty"
    GENERATION_ERROR = "generation_error"
    REPEAT = "repeat"
    """The task repeats a valid task of an earlier epoch of the same run (only with simulator.reject_repeats)."""


class GeneratedTask(ReadModel):
    """A task written by the simulator (or a seed used as a task), before or after storage."""

    seed_id: str | None
    domain: str
    variation: int = Field(ge=0, description="Index among the n variations of its seed.")
    payload: dict[str, Any] | None = Field(default=None, description="Domain task payload when valid.")
    status: TaskStatus
    rejection_reason: RejectionReason | None = None
    rejection_detail: str | None = None
    raw_text: str = Field(default="", description="The simulator's raw output (kept for the RWR update).")
    prompt_messages: list[ChatMessage] = Field(
        default_factory=list, description="The conditioning prompt the simulator saw (RWR trains on prompt→raw_text)."
    )
    generator_adapter: str | None = Field(default=None, description="Simulator adapter name that wrote it.")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Task(ReadModel):
    """A stored task."""

    id: int
    run_id: str
    epoch: int
    seed_id: str | None
    domain: str
    variation: int
    status: TaskStatus
    payload: dict[str, Any] | None
    rejection_reason: str | None = None
    rejection_detail: str | None = None
    raw_text: str = Field(default="", description="The simulator's raw output: what a rejected task's reason is about.")
    generator_adapter: str | None = None
    completion_tokens: int | None = None


class InlineSeed(WriteModel):
    """A seed given inline in a generate request."""

    id: str = Field(min_length=1, max_length=200)
    payload: dict[str, Any]


class SeedStats(WriteModel):
    """Recent success statistics of a seed, shown to the simulator so it can aim at the target."""

    k: int = Field(ge=0, le=MAX_INT32)
    n: int = Field(ge=0, le=MAX_INT32)
    scope: Literal["seed", "group", "run"] = Field(
        default="seed",
        description="What the counts cover: this seed's own recent tasks, the seed's difficulty group as the "
        "domain defines it (e.g. arithmetic level, BFCL category), or the whole run's recent tasks.",
    )


class GenerateRequest(WriteModel):
    """Body of POST /v1/tasks:generate."""

    domain: str = Field(min_length=1, max_length=64)
    seed_ids: list[Annotated[str, StringConstraints(max_length=200)]] = Field(
        default_factory=list, max_length=256, description="Seed ids from the domain's split."
    )
    seeds: list[InlineSeed] = Field(default_factory=list, max_length=256, description="Seeds given inline.")
    n: int = Field(default=4, ge=1, le=64, description="Variations per seed (or tasks in total without seeds).")
    target_success: float | None = Field(default=None, gt=0.0, lt=1.0, description="Desired agent success rate.")
    adapter: str | None = Field(default=None, max_length=200, description="Simulator adapter name; None = base model.")
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=256, ge=16, le=16384)
    run_id: str | None = Field(default=None, max_length=32, description="Store the tasks under this run and epoch.")
    epoch: int | None = Field(default=None, ge=0, le=MAX_INT32)
    seed_stats: dict[Annotated[str, StringConstraints(max_length=200)], SeedStats] = Field(
        default_factory=dict, max_length=512, description="Per seed id, recent k/n."
    )


class GenerateResponse(ReadModel):
    """Accepted and rejected tasks, with counts per rejection reason."""

    accepted: list[GeneratedTask]
    rejected: list[GeneratedTask]
    rejection_counts: dict[str, int]
