"""The task families of data-defined domains, one per kind, each reusing a built-in family's prompts and checker.

``function_calling`` is the BFCL family (its simulator prompt, validation and AST checker) over the user's tools;
``qa`` is the Bamboogle family (token-F1); ``exact_answer`` asks one question and compares the normalised answer.
Seeds come from the seed file instead of benchmark data; every task payload names its kind (``data_kind``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import run_checker
from genenv.checkers.text import check_exact_answer, normalize_answer
from genenv.contracts.domains import DATA_KINDS, DataKind
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.base import Domain, TaskRejected
from genenv.domains.data.seedfile import (
    DATA_KIND_FIELD,
    DEFAULT_MAX_BYTES,
    SeedFileReport,
    check_options,
    parse_number,
    read_seed_file,
)
from genenv.domains.function_calling.domain import FunctionCallingDomain, gold_answer
from genenv.domains.qa.domain import QaDomain, question_and_answer, question_messages

__all__ = ["DATA_KIND_FIELD", "DataDomain", "build_data_domain", "check_seed_file", "kind_domain"]

MAX_QUESTION_CHARS = 1_000
MAX_ANSWER_CHARS = 200


class DataDomain(Domain):
    """What every data-defined family shares: seeds from the seed file, payloads tagged with the kind."""

    kind: ClassVar[DataKind]

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = check_options(self.kind, options or {})
        self.report = SeedFileReport(kind=self.kind)

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """The seed file's rows of ``split`` ('train' seeds the simulator; 'eval' is held out)."""
        if split not in {"train", "eval"}:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        return list(self.report.train if split == "train" else self.report.eval)

    def gold_problem(self, payload: dict[str, Any]) -> str | None:
        """Why a seed's own gold answer would not score 1 with this family's checker, or None."""
        return None

    def tag(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload naming its kind (the verifier scores data-defined tasks by it)."""
        return {**payload, DATA_KIND_FIELD: self.kind}

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The parent family's canonical form, without the kind tag."""
        return super().canonical_task({k: v for k, v in payload.items() if k != DATA_KIND_FIELD})


class DataFunctionCallingDomain(DataDomain, FunctionCallingDomain):
    """The user's tools and example calls, as BFCL tasks (BFCL's prompt, validation and AST checker)."""

    kind: ClassVar[DataKind] = "function_calling"

    def gold_problem(self, payload: dict[str, Any]) -> str | None:
        """The gold calls must pass BFCL's AST checker (a request no tool serves passes by answering no call)."""
        if not payload["ground_truth"]:
            return None
        verdict = self.verify(payload, gold_answer(payload))
        if verdict.valid and verdict.score == 1.0:
            return None
        return verdict.error.message if verdict.error else str(verdict.details.get("message", "scored 0"))

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """BFCL's validation (its own gold answer scores 1; not its seed), tagged with the kind."""
        return self.tag(super().validate_generation(obj, seed))


class DataQaDomain(DataDomain, QaDomain):
    """The user's questions with short answers, scored by token-F1 like Bamboogle."""

    kind: ClassVar[DataKind] = "qa"

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """Bamboogle's validation, tagged with the kind."""
        return self.tag(super().validate_generation(obj, seed))


AGENT_PROMPT = "Answer the question with the answer only, without explanation.\nQuestion: {question}\nAnswer:"


class ExactAnswerDomain(DataDomain):
    """Questions with one answer that must match after a normalisation (number, exact or case-insensitive)."""

    kind: ClassVar[DataKind] = "exact_answer"
    default_success_threshold: ClassVar[float] = 1.0

    @property
    def normalize(self) -> str:
        """How answers are compared."""
        return str(self.options["normalize"])

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for one new question of the example's kind, with its one correct answer."""
        answer_kind = "a number" if self.normalize == "number" else "a short exact answer"
        system = (f"You write questions for a student. Each question has exactly one correct answer, {answer_kind}. "
                  'Reply with JSON only: {"question": ..., "answer": ...}.')
        example = None if seed is None else {k: seed.payload.get(k) for k in ("question", "answer")}
        return question_messages(system, example, "The student solved", stats=stats, target_success=target_success)

    def task_json_schema(self) -> dict[str, Any]:
        """A question and its answer."""
        return {
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 3, "maxLength": MAX_QUESTION_CHARS},
                "answer": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_CHARS},
            },
            "required": ["question", "answer"],
            "additionalProperties": False,
        }

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A question with an answer of the domain's form, or TaskRejected."""
        question, answer = question_and_answer(obj)
        if not question or not answer:
            raise TaskRejected(RejectionReason.EMPTY, "empty question or answer")
        if len(question) > MAX_QUESTION_CHARS or len(answer) > MAX_ANSWER_CHARS:
            raise TaskRejected(RejectionReason.TOO_LONG, "question or answer too long")
        if self.normalize == "number" and parse_number(answer) is None:
            raise TaskRejected(RejectionReason.INVALID_TASK, f"answer {answer!r} is not a number")
        if self.normalize != "number" and f" {normalize_answer(answer)} " in f" {normalize_answer(question)} ":
            raise TaskRejected(RejectionReason.INVALID_TASK, "the answer appears in the question")
        payload = self.tag({"question": question, "answer": answer, "normalize": self.normalize})
        return self.reject_if_seed(payload, seed)

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The SQuAD-normalised question."""
        return normalize_answer(str(payload.get("question", "")))

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """The question, answer only."""
        return [{"role": "user", "content": AGENT_PROMPT.format(question=task["question"])}]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """The normalised reply against the gold answer (the task's own normalisation)."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        normalize = str(task.get("normalize") or self.normalize)
        return run_checker(lambda: check_exact_answer(response, str(task.get("answer", "")), normalize, threshold))


_KIND_CLASSES: dict[str, type[DataDomain]] = {
    cls.kind: cls for cls in (DataFunctionCallingDomain, DataQaDomain, ExactAnswerDomain)
}
"""Each kind's family, keyed by the kind the class declares (tests check every declared kind has one)."""


def _named(kind: str, name: str, options: dict[str, Any]) -> DataDomain:
    cls = _KIND_CLASSES.get(kind)
    if cls is None:
        raise ValueError(f"unknown kind {kind!r}; choose from {list(DATA_KINDS)}")
    # A subclass per domain: ``name`` is a class attribute of the Domain interface.
    named: type[DataDomain] = type(f"{cls.__name__}_{name}", (cls,), {"name": name, "__module__": __name__})
    return named(options)


def check_seed_file(
    name: str, kind: str, content: str | bytes, options: dict[str, Any] | None = None, *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[DataDomain, SeedFileReport]:
    """The domain a seed file defines and its report (bad rows as ``line N: reason``). ValueError for a bad kind or
    options."""
    domain = _named(kind, name, options or {})
    report = read_seed_file(name, kind, content, domain.options, canonical=domain.canonical_task,
                            gold_check=domain.gold_problem, max_bytes=max_bytes)
    domain.report = report
    return domain, report


def build_data_domain(name: str, kind: str, content: str, options: dict[str, Any]) -> DataDomain:
    """The domain of a stored (already checked) seed file."""
    domain, report = check_seed_file(name, kind, content, options, max_bytes=len(content.encode()) + 1)
    if not report.ok:
        raise ValueError(f"stored seed file of {name!r} no longer checks: {report.errors[0]}")
    return domain


_kind_lock = threading.Lock()
_kind_domains: dict[tuple[str, str], DataDomain] = {}


def kind_domain(name: str, kind: str, payload: dict[str, Any]) -> Domain | None:
    """A rows-less domain of ``kind`` called ``name``: enough to prompt for and score a task payload of that kind."""
    if kind not in _KIND_CLASSES:
        return None
    with _kind_lock:
        if (name, kind) not in _kind_domains:
            options = {"normalize": payload["normalize"]} if kind == "exact_answer" and payload.get(
                "normalize") in ("number", "exact", "case-insensitive") else {}
            if len(_kind_domains) >= 256:
                _kind_domains.clear()
            _kind_domains[(name, kind)] = _named(kind, name, options)
        return _kind_domains[(name, kind)]
