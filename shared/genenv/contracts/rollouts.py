"""Agent attempts and their verdicts."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import Field, model_validator

from genenv.contracts.base import ReadModel, WriteModel
from genenv.contracts.leases import AttemptOrigin


class VerdictErrorKind(enum.StrEnum):
    """What went wrong with a reply or its check.

    PARSE_ERROR and SCHEMA_ERROR are the agent's fault: the reply did not parse into an answer. Such a verdict is
    VALID with score 0 (a wrong answer, METHOD.md Eq. 1) and carries the kind in ``form_error``. The other kinds are
    not the agent's fault and make a verdict INVALID (left out of p̂ and of training), never a zero score.
    """

    PARSE_ERROR = "parse_error"
    SCHEMA_ERROR = "schema_error"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"
    CHECKER_ERROR = "checker_error"
    TASK_ERROR = "task_error"
    ROLLOUT_ERROR = "rollout_error"


class VerdictError(ReadModel):
    """Kind and human-readable message of an invalid verdict."""

    kind: VerdictErrorKind
    message: str


class Verdict(ReadModel):
    """R_agent of one response. ``score`` is None exactly when the verdict is invalid."""

    valid: bool
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    success: bool = False
    error: VerdictError | None = None
    details: dict[str, Any] = Field(default_factory=dict, description="Checker-specific breakdown (em, f1, …).")
    form_error: VerdictError | None = Field(
        default=None, description="Why a valid verdict scored 0 without comparing: the reply did not parse."
    )

    @model_validator(mode="after")
    def _coherent(self) -> Verdict:
        if self.valid and (self.score is None or self.error is not None):
            raise ValueError("a valid verdict has a score and no error")
        if self.form_error is not None and (not self.valid or self.score != 0.0 or self.success):
            raise ValueError("a verdict with a form error is valid, scores 0 and is not a success")
        if not self.valid and (self.score is not None or self.error is None or self.success):
            raise ValueError("an invalid verdict has an error, no score and no success")
        return self


class Rollout(ReadModel):
    """One agent attempt at one task."""

    id: int
    task_id: int
    attempt: int
    agent_adapter: str | None
    response: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_logprobs: list[float] | None = None
    latency_s: float | None = None
    error: str | None = None
    origin: AttemptOrigin = Field(
        default=AttemptOrigin.WORKER,
        description="Who made and scored it: worker (our rollout workers), client_reply (an outside agent's reply, "
        "scored by the checker) or client_score (an outside agent's own score; response is null).",
    )
    verdict: Verdict | None = Field(
        default=None, description="Its R_agent once the verify phase judged it; None before that."
    )


class VerifyItem(WriteModel):
    """One (task, response) pair to verify."""

    domain: str = Field(min_length=1)
    task: dict[str, Any] = Field(description="The task payload as stored.")
    response: str = Field(description="The agent's raw response text.")


class VerifyRequest(WriteModel):
    """Body of POST /v1/verify."""

    items: list[VerifyItem] = Field(max_length=4096)
    success_threshold: float | None = Field(default=None, gt=0.0, le=1.0)


class VerifyResponse(ReadModel):
    """Verdicts in request order."""

    verdicts: list[Verdict]
