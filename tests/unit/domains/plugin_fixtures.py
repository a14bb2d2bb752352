"""Plug-in objects the registry tests point fake entry points at (good ones and ones that break the interface)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, Seed
from genenv.domains.arithmetic.domain import ArithmeticDomain
from genenv.domains.base import Domain


class EchoDomain(ArithmeticDomain):
    """Arithmetic under another name: a working plug-in."""

    name: ClassVar[str] = "echo_math"


GOOD = EchoDomain()


class Unfinished(Domain):
    """Leaves the abstract methods unimplemented."""

    name: ClassVar[str] = "unfinished"


class BadSchema(ArithmeticDomain):
    """Its task schema is not an object schema."""

    name: ClassVar[str] = "bad_schema"

    def task_json_schema(self) -> dict[str, Any]:
        return {"type": "string"}


class Exploding(Domain):
    """Its constructor raises (the plug-in's own bug)."""

    name: ClassVar[str] = "exploding"

    def __init__(self) -> None:
        raise RuntimeError("boom")

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        raise NotImplementedError

    def simulator_messages(self, seed: Seed | None, n: int, *, target_success: float | None,
                           stats: tuple[int, int] | None) -> list[ChatMessage]:
        raise NotImplementedError

    def task_json_schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        raise NotImplementedError

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        raise NotImplementedError

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        raise NotImplementedError


NOT_A_DOMAIN = object()
