"""The domain plug-in interface: everything task-specific lives behind it, as pure code."""

from __future__ import annotations

import abc
import json
from pathlib import Path
from typing import Any, ClassVar

from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed


class TaskRejected(Exception):
    """A generation that cannot become a task; carries the counted reason."""

    def __init__(self, reason: RejectionReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


class DataMissingError(FileNotFoundError):
    """Benchmark data needed by a domain is not where the settings say it is."""


class Domain(abc.ABC):
    """One kind of task: seeds, how the simulator writes variations, how the agent is prompted and scored."""

    name: ClassVar[str]
    #: success threshold on R_agent when the run does not set one (METHOD.md: 1.0 structured, 0.5 free text)
    default_success_threshold: ClassVar[float] = 1.0
    #: payload field naming a seed's difficulty group; the simulator's prompt falls back to the group's recent
    #: success statistics when the seed itself has none (None: fall back to the whole run's)
    group_field: ClassVar[str | None] = None

    def difficulty_group(self, payload: dict[str, Any]) -> str | None:
        """The seed's difficulty group (e.g. arithmetic level, BFCL category), or None."""
        value = payload.get(self.group_field) if self.group_field else None
        return None if value is None else str(value)

    #: difficulty measures of a task payload: name → what it measures (the experiment report's difficulty curves)
    difficulty_measures: ClassVar[dict[str, str]] = {
        "task_chars": "characters of the task payload as compact JSON (a domain-agnostic size measure)",
    }

    def difficulty(self, payload: dict[str, Any]) -> dict[str, float]:
        """The measures of ``difficulty_measures`` for one task payload (the default: its JSON size)."""
        return {"task_chars": float(len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False)))}

    #: payload fields that never make two tasks different (ids, bookkeeping); left out of the default canonical form
    volatile_fields: ClassVar[frozenset[str]] = frozenset({"id", "level", "category", "source"})

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The task in canonical form: two payloads that ask the same thing have the same form (the default: the
        payload less ``volatile_fields`` as sorted compact JSON; families override it with what the agent sees)."""
        kept = {k: v for k, v in payload.items() if k not in self.volatile_fields}
        return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)

    def reject_if_seed(self, payload: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """``payload``, or TaskRejected(duplicate) when it is its seed again in canonical form: a variation is
        never its seed (the simulator applies this to every family's output, plug-ins included)."""
        if seed is not None and self.canonical_task(payload) == self.canonical_task(seed.payload):
            raise TaskRejected(RejectionReason.DUPLICATE, "the task repeats its seed (same canonical form)")
        return payload

    @abc.abstractmethod
    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """Seeds of a split ('train' seeds the simulator; 'eval' is never used as seeds)."""

    @abc.abstractmethod
    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Chat prompt asking the simulator for ONE new task varying ``seed`` (stats = recent k, n)."""

    @abc.abstractmethod
    def task_json_schema(self) -> dict[str, Any]:
        """JSON schema of one generated task as the simulator must write it (guided decoding)."""

    @abc.abstractmethod
    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """Turn the simulator's parsed JSON into a task payload, or raise TaskRejected (a repeat of ``seed``
        included: end with ``return self.reject_if_seed(payload, seed)``)."""

    @abc.abstractmethod
    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """Chat prompt the agent sees for a task payload."""

    @abc.abstractmethod
    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """R_agent of a response (pure; never raises for bad responses: returns an invalid verdict)."""
