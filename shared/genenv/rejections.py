"""Why the simulator's generations were rejected, in words a user can act on: per rejection reason the likely fix.

One table read by the CLI (under the epoch table), the orchestrator's log and — copied, and checked equal by a
test — the dashboard (static/view-run.js). Pure code: imports neither the database nor clients nor services.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from genenv.contracts.tasks import RejectionReason

LARGER_MODEL = "qwen2.5-coder-0.5b-instruct"
"""The larger model of the catalogue (genenv.models.catalogue) a hint suggests when the default one is too small."""

REJECTION_HINTS: dict[str, str] = {
    RejectionReason.NOT_JSON.value: f"the model did not write a JSON object: a larger base model ({LARGER_MODEL}) "
    "or a lower simulator_temperature",
    RejectionReason.SCHEMA.value: f"the JSON misses fields or has wrong types: a larger base model ({LARGER_MODEL}) "
    "that follows the task schema",
    RejectionReason.INVALID_TASK.value: "the model does not follow the task schema (the domain's validator refuses "
    f"the task): a larger base model ({LARGER_MODEL})",
    RejectionReason.DUPLICATE.value: "variations repeat one another: raise simulator_temperature or lower "
    "variations_per_seed",
    RejectionReason.TOO_LONG.value: f"raise simulator max_task_tokens or use a larger base model ({LARGER_MODEL})",
    RejectionReason.EMPTY.value: "the model wrote nothing: check that the base model is an instruct (chat) model, "
    "or raise max_task_tokens",
    RejectionReason.GENERATION_ERROR.value: "the inference server failed the request (timeout, server error, "
    "unknown adapter): see the simulator's and the inference server's logs",
    RejectionReason.REPEAT.value: "the simulator rewrote a valid task of an earlier epoch word for word "
    "(simulator.reject_repeats is on): expected now and then; if most are repeats, raise simulator_temperature",
}
"""Rejection reason → the likely fix. Every RejectionReason has one (a test checks)."""

UNKNOWN_HINT = "see the rejected generations: genenv runs tasks RUN --epoch N --status rejected"


def rejection_hint(reason: str) -> str:
    """The likely fix for generations rejected for ``reason`` (a generic pointer for a reason not in the table)."""
    return REJECTION_HINTS.get(reason, UNKNOWN_HINT)


@dataclass(frozen=True)
class DominantRejection:
    """The reason most generations of an epoch were rejected for, when most generations were rejected."""

    reason: str
    count: int
    rejected: int
    generated: int

    @property
    def hint(self) -> str:
        """The likely fix."""
        return rejection_hint(self.reason)

    def sentence(self) -> str:
        """One line for a log or a table caption."""
        return (f"{self.rejected} of {self.generated} generations rejected, mostly {self.reason} ({self.count}): "
                f"{self.hint}")


def dominant_rejection(rejections: Mapping[str, int], valid: int) -> DominantRejection | None:
    """The commonest rejection reason when rejected generations outnumber valid ones, else None (ties: the reason
    first in alphabetical order, so the answer does not depend on the mapping's order)."""
    rejected = sum(rejections.values())
    if rejected == 0 or rejected <= valid:
        return None
    reason, count = min(rejections.items(), key=lambda item: (-item[1], item[0]))
    return DominantRejection(reason=reason, count=count, rejected=rejected, generated=rejected + valid)
