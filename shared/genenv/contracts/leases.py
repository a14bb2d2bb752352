"""An outside agent's protocol (mode external_agent): it leases an epoch's tasks and reports its attempts.

The simulator writes each epoch's tasks as in any mode; instead of our rollout workers, a client of the control plane
leases tasks (``POST /v1/runs/{id}/leases``) and reports what its agent replied, or, with ``external.scoring:
client``, the score it gave (``POST /v1/runs/{id}/attempts``). Attempts are stored as rollouts, so epochs, stats,
curriculum scoring and the dashboard read them as any other.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Self

from pydantic import Field, field_validator, model_validator

from genenv.contracts.base import MAX_INT32, ReadModel, WriteModel
from genenv.contracts.tasks import ChatMessage

MAX_LEASE_TASKS = 256
"""Most tasks one lease may hold."""
MAX_REPLY_CHARS = 100_000
"""Longest reply an attempt may carry (a longer one is a 422, never stored)."""
MAX_REPORT_ATTEMPTS = 4096
"""Most attempts one report may carry (MAX_LEASE_TASKS × a typical rollouts_per_task)."""


class ExternalScoring(enum.StrEnum):
    """Who scores an outside agent's attempts."""

    SERVICE = "service"
    """The client sends replies; the domain's checker scores them (via the verifier). Leased items carry no
    payload and no answer."""
    CLIENT = "client"
    """The client may send its own score (0-1) instead of a reply; leased items carry the task payload (with its
    answer), so the client can score."""


class ExternalConfig(WriteModel):
    """Settings of a run whose agent is outside (mode external_agent; read only in that mode)."""

    epoch_deadline_s: float = Field(
        default=3600.0, ge=10.0, le=30 * 86400.0,
        description="Seconds after an epoch's tasks become leasable at which the epoch may close with fewer than "
        "rollouts_per_task attempts per task: it closes then if at least min_attempted_share of its valid tasks have "
        "an attempt, else as soon as they do (tasks with fewer attempts are scored on what they have, unattempted "
        "ones are left out and counted in the epoch summary's tasks_unattempted).",
    )
    min_attempted_share: float = Field(
        default=0.8, gt=0.0, le=1.0,
        description="Share of an epoch's valid tasks that must have at least one attempt before the epoch may close "
        "at its deadline.",
    )
    scoring: ExternalScoring = Field(
        default=ExternalScoring.SERVICE, strict=False,
        description="service: attempts carry replies, scored by the domain's checker (leased items carry no payload "
        "and no answer). client: an attempt may carry a score (0-1) instead of a reply, stored as client-scored; "
        "leased items then carry the task payload.",
    )


class AttemptOrigin(enum.StrEnum):
    """Who made a rollout and who scored it (the marker stored on each rollout)."""

    WORKER = "worker"
    """Our rollout workers, with the run's agent adapter; scored by the verifier."""
    CLIENT_REPLY = "client_reply"
    """An outside agent's reply, reported over the attempts endpoint; scored by the verifier."""
    CLIENT_SCORE = "client_score"
    """An outside agent's attempt reported with its own score (external.scoring: client); no reply is stored."""


class LeaseRequest(WriteModel):
    """Body of POST /v1/runs/{id}/leases."""

    limit: int = Field(
        default=32, ge=1, le=MAX_LEASE_TASKS,
        description="Most tasks to lease; fewer when fewer are leasable right now.",
    )
    lease_s: int = Field(
        default=600, ge=10, le=3600,
        description="Seconds the lease holds its tasks; attempts after that are refused (409) and the tasks' open "
        "attempts return to the pool.",
    )


class LeaseItem(ReadModel):
    """One leased task: the prompt the agent sees and how many attempts the lease asks for."""

    task_id: int = Field(description="The task's id (as in GET /v1/runs/{id}/tasks); attempts name it.")
    domain: str = Field(description="The task's domain.")
    messages: list[ChatMessage] = Field(description="The agent prompt the domain builds for the task (agent_messages).")
    attempts: int = Field(ge=1, description="Attempts this lease asks for at the task (at most rollouts_per_task).")
    payload: dict[str, Any] | None = Field(
        default=None,
        description="The task payload, answer included, only with external.scoring: client (null otherwise).",
    )


class Lease(ReadModel):
    """Answer of POST /v1/runs/{id}/leases. Nothing leasable right now: ``items`` is empty, ``lease_id`` null and
    ``retry_after_s`` says when to ask again."""

    lease_id: str | None = Field(description="The lease's id, named by the attempts that report on it; null when "
                                             "items is empty.")
    expires_at: datetime | None = Field(description="UTC time after which attempts on the lease are refused.")
    epoch: int = Field(ge=0, description="The epoch whose tasks are leased (the run's current epoch).")
    items: list[LeaseItem] = Field(description="The leased tasks; empty when nothing is leasable right now.")
    retry_after_s: float | None = Field(
        default=None, description="Set when items is empty: seconds after which a lease may find tasks (the epoch is "
        "generating, scoring or training, or every open attempt is leased)."
    )


class AttemptIn(WriteModel):
    """One attempt: the agent's reply, or (external.scoring: client) its score."""

    task_id: int = Field(ge=1, le=2**63 - 1, description="A task of the lease.")
    reply: str | None = Field(default=None, max_length=MAX_REPLY_CHARS, description="The agent's raw reply text.")
    score: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="The client's score instead of a reply (only with external.scoring: client).",
    )

    @field_validator("reply")
    @classmethod
    def _no_nul(cls, v: str | None) -> str | None:
        # Stored as text: Postgres refuses U+0000, so it is refused here (422) rather than failing the INSERT.
        if v is not None and "\x00" in v:
            raise ValueError("a reply must not contain NUL (\\u0000) characters")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.reply is None) == (self.score is None):
            raise ValueError("give exactly one of reply and score")
        return self


class AttemptsReport(WriteModel):
    """Body of POST /v1/runs/{id}/attempts."""

    lease_id: str = Field(min_length=1, max_length=64, pattern=r"^[^\x00]+$",
                          description="The lease the attempts are made under.")
    attempts: list[AttemptIn] = Field(
        min_length=1, max_length=MAX_REPORT_ATTEMPTS,
        description="Attempts, in any order; a task may appear as many times as the lease has attempts open for it.",
    )


class AttemptVerdict(ReadModel):
    """What was recorded for one attempt, in request order."""

    task_id: int
    rollout_id: int = Field(description="The rollout the attempt is stored as.")
    score: float | None = Field(description="R_agent in [0, 1]; null exactly when valid is false.")
    valid: bool = Field(description="false: the check could not be made (not the agent's fault); the attempt is left "
                                    "out of p̂ and of scoring.")
    success: bool = Field(description="score ≥ the run's success threshold.")
    reason: str | None = Field(
        default=None, description="Why: the check's error (invalid) or why a reply scored 0 without comparing (it did "
        "not parse), as `kind: message`; null otherwise."
    )
    origin: AttemptOrigin = Field(description="client_reply (scored by the checker) or client_score.")


class AttemptsRecorded(ReadModel):
    """Answer of POST /v1/runs/{id}/attempts. The same request with the same Idempotency-Key gets the same answer."""

    recorded: int = Field(ge=0, description="Attempts recorded (every one in the request).")
    verdicts: list[AttemptVerdict] = Field(description="Per attempt, in request order.")
    epoch: int = Field(ge=0, le=MAX_INT32, description="The epoch the attempts belong to.")
    lease_open: int = Field(ge=0, description="Attempts the lease still accepts.")
