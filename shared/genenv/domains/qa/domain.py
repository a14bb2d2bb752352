"""Short-answer QA (Bamboogle): closed-book questions scored by SQuAD-normalised token-F1 (EM reported too).

Data: ``<benchmarks>/bamboogle/test.jsonl`` (125 two-hop questions, FlashRAG format). Bamboogle has no train
split, so a fixed fifth of it seeds the simulator: an item is a seed iff sha256 of its id is ≡ 0 (mod 5) (25
items). ``load_seeds("eval")`` returns the other 100; the evaluator reports both the full 125-question test set
(comparable with published numbers, but it includes the seed questions) and this held-out part.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import run_checker
from genenv.checkers.text import check_free_text, normalize_answer
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.base import DataMissingError, Domain, TaskRejected

SEED_MODULUS = 5
MAX_QUESTION_CHARS = 400
MAX_ANSWER_WORDS = 8

AGENT_PROMPT = (
    "Answer the question with a short phrase only (a name, date, number or yes/no), without explanation.\n"
    "Question: {question}\nAnswer:"
)


def question_and_answer(obj: Any) -> tuple[str, str]:
    """A generation's question and answer, stripped (a numeric answer as text), or TaskRejected(SCHEMA)."""
    question = obj.get("question") if isinstance(obj, dict) else None
    answer = obj.get("answer") if isinstance(obj, dict) else None
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(question, str) or not isinstance(answer, str):
        raise TaskRejected(RejectionReason.SCHEMA, "question and answer must be strings")
    return question.strip(), answer.strip()


def question_messages(
    system: str,
    example: dict[str, Any] | None,
    solvers: str,
    *,
    stats: tuple[int, int] | None,
    target_success: float | None,
) -> list[ChatMessage]:
    """The simulator's prompt for one new question: ``system``, then the seed's ``{question, answer}`` as example
    (none: a question from scratch) and, once attempts are counted, the success rate to aim for; ``solvers`` opens
    that sentence ("The student solved", "Students answered")."""
    if example is None:
        user = "Write one new question."
    else:
        user = f"Example: {json.dumps(example)}\nWrite one NEW question of the same kind."
    if stats is not None and stats[1] > 0 and target_success is not None:
        user += f" {solvers} {stats[0]} of {stats[1]} recent attempts; aim for {target_success:.0%}."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def is_seed_item(item_id: str) -> bool:
    """Whether a Bamboogle item belongs to the fixed seed fifth."""
    return int.from_bytes(hashlib.sha256(item_id.encode()).digest()[:8], "big") % SEED_MODULUS == 0


def load_bamboogle(benchmarks_dir: Path | None) -> list[dict[str, Any]]:
    """All 125 Bamboogle items as payloads ``{id, question, golden_answers}``, in file order."""
    if benchmarks_dir is None:
        raise DataMissingError("Bamboogle needs settings.paths.benchmarks (folder with bamboogle/)")
    path = Path(benchmarks_dir) / "bamboogle" / "test.jsonl"
    if not path.is_file():
        raise DataMissingError(
            f"Bamboogle data not found: expected {path}; fetch it with `genenv data fetch bamboogle` or set "
            "GENENV_PATHS__BENCHMARKS to a folder holding bamboogle/"
        )
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"id": x["id"], "question": x["question"], "golden_answers": list(x["golden_answers"])} for x in items]


class QaDomain(Domain):
    """Closed-book short-answer questions."""

    name: ClassVar[str] = "qa"
    default_success_threshold: ClassVar[float] = 0.5

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """'train' = the fixed seed fifth of Bamboogle, 'eval' = the other four fifths."""
        if split not in {"train", "eval"}:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        want_seed = split == "train"
        return [
            Seed(id=f"bamboogle-{p['id']}", domain=self.name, payload=p)
            for p in load_bamboogle(benchmarks_dir)
            if is_seed_item(p["id"]) == want_seed
        ]

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for one new compositional question with a short, checkable answer."""
        system = (
            "You write quiz questions that need two facts combined (e.g. 'Who was president of the United States "
            "in the year that Citibank was founded?'). The answer must be short (a name, date, number or yes/no) "
            'and correct. Reply with JSON only: {"question": ..., "answer": ...}.'
        )
        example = None if seed is None else {
            "question": seed.payload.get("question"),
            "answer": (seed.payload.get("golden_answers") or [""])[0],
        }
        return question_messages(system, example, "Students answered", stats=stats, target_success=target_success)

    def task_json_schema(self) -> dict[str, Any]:
        """A question and its short answer."""
        return {
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 10, "maxLength": MAX_QUESTION_CHARS},
                "answer": {"type": "string", "minLength": 1, "maxLength": 100},
            },
            "required": ["question", "answer"],
            "additionalProperties": False,
        }

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A payload with one gold answer, or TaskRejected (empty, too long, answer given away in the question)."""
        question, answer = question_and_answer(obj)
        if not question or not normalize_answer(answer):
            raise TaskRejected(RejectionReason.EMPTY, "empty question or answer")
        if len(question) > MAX_QUESTION_CHARS or len(answer.split()) > MAX_ANSWER_WORDS:
            raise TaskRejected(RejectionReason.TOO_LONG, "question too long or answer not short")
        if f" {normalize_answer(answer)} " in f" {normalize_answer(question)} ":
            raise TaskRejected(RejectionReason.INVALID_TASK, "the answer appears in the question")
        return self.reject_if_seed({"question": question, "golden_answers": [answer]}, seed)

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The SQuAD-normalised question (the same question is a repeat whatever answer it now claims)."""
        return normalize_answer(str(payload.get("question", "")))

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """The closed-book prompt."""
        return [{"role": "user", "content": AGENT_PROMPT.format(question=task["question"])}]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """Token-F1 against the gold answers (EM in details)."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        golds = [str(g) for g in task.get("golden_answers") or []]
        return run_checker(lambda: check_free_text(response, golds, threshold))


DOMAIN = QaDomain()
