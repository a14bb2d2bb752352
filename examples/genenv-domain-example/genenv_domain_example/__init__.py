"""Spell a word backwards: the smallest complete GenEnv task family, as a plug-in (see docs/domains.md).

The simulator writes ``{"word": "lantern"}``; the agent answers ``nretnal``. Seeds are a fixed word list, every
fifth word held out for evaluation.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import run_checker, valid_verdict
from genenv.checkers.text import extract_answer
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.base import Domain, TaskRejected

WORDS = ("cat", "lamp", "river", "garden", "pencil", "window", "orange", "castle", "planet", "silver",
         "bridge", "candle", "forest", "mirror", "rocket", "ticket", "winter", "yellow", "zipper", "button")
_WORD = re.compile(r"^[a-z]{3,12}$")


class WordReverseDomain(Domain):
    """Reverse a lower-case word."""

    name: ClassVar[str] = "word_reverse"
    default_success_threshold: ClassVar[float] = 1.0

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """Every fifth word is held out ('eval'); the rest seed the simulator."""
        if split not in {"train", "eval"}:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        return [Seed(id=f"word-{i:02d}", domain=self.name, payload={"word": w})
                for i, w in enumerate(WORDS) if (i % 5 == 4) == (split == "eval")]

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for one new lower-case word."""
        example = f' like {{"word": "{seed.payload["word"]}"}}' if seed is not None else ""
        return [{"role": "user", "content": f"Write one new English word as JSON{example}. Reply with JSON only."}]

    def task_json_schema(self) -> dict[str, Any]:
        """One word."""
        return {"type": "object", "properties": {"word": {"type": "string", "pattern": _WORD.pattern}},
                "required": ["word"], "additionalProperties": False}

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A lower-case word of 3-12 letters, not the seed's."""
        word = obj.get("word") if isinstance(obj, dict) else None
        if not isinstance(word, str):
            raise TaskRejected(RejectionReason.SCHEMA, "missing string field 'word'")
        word = word.strip().lower()
        if not _WORD.match(word):
            raise TaskRejected(RejectionReason.INVALID_TASK, "a task is one word of 3-12 letters a-z")
        return self.reject_if_seed({"word": word}, seed)

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """The question."""
        return [{"role": "user", "content": f"Spell the word '{task['word']}' backwards. Reply with the result only."}]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """1 when the reply's answer is the reversed word (case-insensitive)."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        expected = str(task["word"])[::-1]

        def check() -> Verdict:
            got = extract_answer(response).strip(" .'\"").lower()
            return valid_verdict(1.0 if got == expected else 0.0, threshold, {"expected": expected, "got": got})

        return run_checker(check)


DOMAIN = WordReverseDomain()
