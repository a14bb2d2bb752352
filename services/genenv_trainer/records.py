"""What the trainer reads from the database, as plain records (no torch, no ORM objects)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ChatMessages = list[dict[str, Any]]


@dataclass(frozen=True)
class Attempt:
    """One agent rollout with a valid verdict: what was asked, what was answered, and its R_agent."""

    rollout_id: int
    prompt_messages: ChatMessages
    response: str
    reward: float
    token_ids: list[int] | None = None
    token_logprobs: list[float] | None = None


@dataclass(frozen=True)
class RolloutGroup:
    """The valid attempts at one task: a GRPO group."""

    task_id: int
    epoch: int
    attempts: list[Attempt] = field(default_factory=list)


@dataclass(frozen=True)
class Generation:
    """One valid task the simulator wrote for an in-band seed batch, with the batch's RWR weight and its epoch."""

    task_id: int
    seed_id: str
    prompt_messages: ChatMessages
    raw_text: str
    weight: float
    epoch: int = 0
