"""Epoch phases and the epoch summary users watch."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from pydantic import Field

from genenv.contracts.base import ReadModel


class EpochPhase(enum.StrEnum):
    """Persisted phases of one epoch, in order. CLOSED means the epoch is done."""

    GENERATE = "generate"
    ROLLOUT = "rollout"
    VERIFY = "verify"
    SCORE = "score"
    TRAIN = "train"
    PUBLISH = "publish"
    EVALUATE = "evaluate"
    CLOSE = "close"
    CLOSED = "closed"


PHASE_ORDER: tuple[EpochPhase, ...] = tuple(EpochPhase)


def next_phase(phase: EpochPhase) -> EpochPhase:
    """The phase after ``phase`` (CLOSED is terminal)."""
    i = PHASE_ORDER.index(phase)
    return PHASE_ORDER[min(i + 1, len(PHASE_ORDER) - 1)]


class EpochSummary(ReadModel):
    """The training-dynamics numbers of one epoch (the paper's curves)."""

    p_hat: float | None = Field(default=None, description="Mean success of the agent on this epoch's tasks.")
    in_band_share: float | None = Field(default=None, description="Share of seed batches with |p̂-α| ≤ k_min.")
    mean_task_tokens: float | None = None
    mean_response_tokens: float | None = None
    tasks_valid: int = 0
    tasks_rejected: int = 0
    rejections: dict[str, int] = Field(
        default_factory=dict, description="Rejected generations of this epoch per reason (contracts/tasks.py "
        "RejectionReason), e.g. {\"too_long\": 10, \"invalid_task\": 6}; their sum is tasks_rejected."
    )
    tasks_solved: int = Field(default=0, description="Tasks every attempt of which succeeded.")
    tasks_unsolved: int = Field(default=0, description="Tasks no attempt of which succeeded.")
    tasks_unattempted: int = Field(
        default=0, description="Valid tasks without any attempt when the epoch closed (external_agent: closed at its "
        "deadline); left out of p̂ and of scoring. 0 in the other modes."
    )
    rollouts: int = 0
    rollout_errors: int = 0
    verifier_errors: int = 0
    malformed_responses: int = Field(
        default=0, description="Replies that did not parse: wrong answers (score 0), counted in p̂ and in GRPO."
    )
    groups_with_variance_share: float | None = Field(
        default=None, description="Share of this epoch's tasks whose attempts got different rewards (GRPO signal)."
    )
    prompts_with_stats_share: float | None = Field(
        default=None, description="Share of this epoch's seeds whose simulator prompt carried the agent's recent "
        "success statistics (None in agent_only: no simulator)."
    )
    generated_tasks_so_far: int = Field(
        default=0, description="Tasks the simulator wrote in the run up to the end of this epoch (valid or not)."
    )
    rollouts_so_far: int = Field(default=0, description="Agent attempts in the run up to this epoch, inclusive.")
    simulator_kl_capped: bool = Field(
        default=False, description="The simulator's update stopped early this epoch at the per-epoch KL cap."
    )
    agent_adapter_version: int | None = None
    simulator_adapter_version: int | None = None
    benchmark_scores: dict[str, float] = Field(default_factory=dict)
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    train_metrics: dict[str, Any] = Field(default_factory=dict)


class Epoch(ReadModel):
    """One epoch of a run."""

    run_id: str
    index: int
    phase: EpochPhase
    summary: EpochSummary | None = None
    started_at: datetime
    finished_at: datetime | None = None
