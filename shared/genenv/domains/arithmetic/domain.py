"""The CPU-sized domain: integer expressions a 135M model partly solves (quickstart and CI).

The simulator writes ``{"expression": "12 + 7 * 3"}``; the answer comes from a safe AST evaluator (never
``eval``). Seeds are generated deterministically per difficulty level, so the domain needs no data files.
Difficulty levels follow the measured greedy accuracy of SmolLM2-135M-Instruct (INFRA.md): 1-digit a+b ≈ 0.9
down to 3-digit sums ≈ 0.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import invalid_verdict, valid_verdict, wrong_form_verdict
from genenv.contracts.rollouts import Verdict, VerdictErrorKind
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.base import Domain, TaskRejected

MAX_EXPRESSION_CHARS = 64
MAX_OPERATORS = 6
MAX_CONSTANT = 10**6
MAX_RESULT = 10**12
MAX_DEPTH = 8
SEEDS_PER_LEVEL = 100
EVAL_SHARE_MODULUS = 5
"""An expression is in the eval split iff sha256(canonical form) mod 5 == 0 (≈20 %); identical expressions
therefore always land in the same split, so an evaluation item can never reappear as a seed."""

HELDOUT_PER_LEVEL = 120
HELDOUT_SCAN = 4000
"""The larger held-out split: per level, the first HELDOUT_PER_LEVEL distinct eval-hash expressions among the first
HELDOUT_SCAN indices. The 1-digit levels have only 100–200 expressions, so they give all of their eval fifth (≈ 20
each); the rest give 120: ≈ 540 items, never a seed (the same hash rule decides)."""

AGENT_PROMPT = "What is {expression}? Reply with the number only."


class UnsafeExpressionError(ValueError):
    """The expression is not a small integer expression over + - * and parentheses."""


@dataclass(frozen=True)
class Level:
    """A difficulty level: operand digit count, operand count and operators."""

    name: str
    digits: int
    operands: int
    ops: str


# Ordered from easy to hard (greedy accuracy of the 135M model, INFRA.md table).
LEVELS: tuple[Level, ...] = (
    Level("1d-add", 1, 2, "+"),
    Level("1d-mul", 1, 2, "*"),
    Level("1d-addsub", 1, 2, "+-"),
    Level("2d-add", 2, 2, "+"),
    Level("1d-3op", 1, 3, "+-"),
    Level("2d-3op", 2, 3, "+-"),
    Level("3d-add", 3, 2, "+"),
)
LEVELS_BY_NAME = {lv.name: lv for lv in LEVELS}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}


def _check(node: ast.AST, depth: int, counter: list[int]) -> int:
    """Evaluate a whitelisted node, enforcing size and magnitude bounds at every step."""
    if depth > MAX_DEPTH:
        raise UnsafeExpressionError("expression nested too deeply")
    if isinstance(node, ast.Constant):
        # bool is an int subclass; True/False are not numbers here.
        if type(node.value) is not int:
            raise UnsafeExpressionError(f"only integer constants are allowed, got {node.value!r}")
        if abs(node.value) > MAX_CONSTANT:
            raise UnsafeExpressionError(f"constant {node.value} exceeds {MAX_CONSTANT}")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_check(node.operand, depth + 1, counter)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        counter[0] += 1
        if counter[0] > MAX_OPERATORS:
            raise UnsafeExpressionError(f"more than {MAX_OPERATORS} operators")
        left = _check(node.left, depth + 1, counter)
        right = _check(node.right, depth + 1, counter)
        if isinstance(node.op, ast.Add):
            value = left + right
        elif isinstance(node.op, ast.Sub):
            value = left - right
        else:
            value = left * right
        if abs(value) > MAX_RESULT:
            raise UnsafeExpressionError(f"intermediate result exceeds {MAX_RESULT}")
        return value
    raise UnsafeExpressionError(f"{type(node).__name__} is not allowed (only integers, + - * and parentheses)")


def parse_expression(text: str) -> tuple[str, int, int]:
    """Parse and evaluate safely: (canonical form, value, operator count). Raises UnsafeExpressionError."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise UnsafeExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise UnsafeExpressionError(f"not an expression: {exc.msg if isinstance(exc, SyntaxError) else exc}") from None
    counter = [0]
    value = _check(tree.body, 0, counter)
    return ast.unparse(tree.body), value, counter[0]


def evaluate(text: str) -> int:
    """The integer value of a safe expression (raises UnsafeExpressionError otherwise)."""
    return parse_expression(text)[1]


_INT = re.compile(r"-?\d{1,3}(?:,\d{3})+(?!\d)|-?\d+")


def parse_answer(response: str) -> int | None:
    """The LAST integer in the reply (the model echoes the expression: "3 + 4 = 7"); None if there is none."""
    matches = _INT.findall(response)
    if not matches:
        return None
    return int(matches[-1].replace(",", ""))


def split_of(canonical: str) -> str:
    """'eval' or 'train', by a fixed hash rule on the canonical expression."""
    digest = hashlib.sha256(canonical.encode()).digest()
    return "eval" if int.from_bytes(digest[:8], "big") % EVAL_SHARE_MODULUS == 0 else "train"


def _operand(rng: random.Random, digits: int) -> int:
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(low, 10**digits - 1)


def level_expression(level: Level, index: int) -> str:
    """The index-th expression of a level (deterministic: seeded by level name and index)."""
    rng = random.Random(f"arithmetic/{level.name}/{index}")
    parts = [str(_operand(rng, level.digits))]
    for _ in range(level.operands - 1):
        parts += [rng.choice(level.ops), str(_operand(rng, level.digits))]
    return " ".join(parts)


def make_payload(expression: str, level: str | None = None) -> dict[str, Any]:
    """A task payload for an expression (answer computed by the safe evaluator)."""
    canonical, value, n_ops = parse_expression(expression)
    digits = max((len(d) for d in re.findall(r"\d+", canonical)), default=0)
    payload: dict[str, Any] = {"expression": canonical, "answer": value, "operators": n_ops, "max_digits": digits}
    if level is not None:
        payload["level"] = level
    return payload


def _difficulty_hint(stats: tuple[int, int] | None, target: float | None) -> str:
    if stats is None or stats[1] == 0 or target is None:
        return "Keep a similar difficulty."
    k, n = stats
    rate = k / n
    line = f"A student solved {k} of {n} recent attempts at problems like this ({rate:.0%}); target {target:.0%}."
    if rate > target + 0.1:
        return line + " Make the new problem HARDER: larger numbers or one more operation."
    if rate < target - 0.1:
        return line + " Make the new problem EASIER: smaller numbers or fewer operations."
    return line + " Keep a similar difficulty."


class ArithmeticDomain(Domain):
    """Integer arithmetic over + - * with parentheses."""

    name: ClassVar[str] = "arithmetic"
    group_field: ClassVar[str | None] = "level"
    default_success_threshold: ClassVar[float] = 1.0
    difficulty_measures: ClassVar[dict[str, str]] = {
        "operand_digits": "digits of the longest operand",
        "operators": "number of + - * operators",
        "has_mul": "1 if the expression multiplies, else 0",
    }

    def difficulty(self, payload: dict[str, Any]) -> dict[str, float]:
        """Operand digits, operator count and whether it multiplies: the axes the levels are built on."""
        expression = str(payload.get("expression", ""))
        digits = payload.get("max_digits")
        if not isinstance(digits, int):
            digits = max((len(d) for d in re.findall(r"\d+", expression)), default=0)
        operators = payload.get("operators")
        if not isinstance(operators, int):
            operators = len(re.findall(r"(?<=[\d)\s])[-+*]", expression))
        return {"operand_digits": float(digits), "operators": float(operators), "has_mul": float("*" in expression)}

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """Deterministic seeds of every level for ``split`` ('train' or 'eval'); no data files needed."""
        if split not in {"train", "eval"}:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        seeds: list[Seed] = []
        seen: set[str] = set()  # across levels too: "3 + 4" is a 1d-add seed, not also a 1d-addsub one
        for level in LEVELS:
            for i in range(SEEDS_PER_LEVEL):
                payload = make_payload(level_expression(level, i), level.name)
                canonical = payload["expression"]
                if canonical in seen or split_of(canonical) != split:
                    continue
                seen.add(canonical)
                seeds.append(Seed(id=f"arith-{level.name}-{i:04d}", domain=self.name, payload=payload))
        return seeds

    def heldout_items(self) -> list[Seed]:
        """The larger held-out split (≥ 500 items, stratified by level; HELDOUT_PER_LEVEL): eval-hash expressions
        only, so disjoint from every seed by construction."""
        items: list[Seed] = []
        seen: set[str] = set()
        for level in LEVELS:
            taken = 0
            for i in range(HELDOUT_SCAN):
                if taken == HELDOUT_PER_LEVEL:
                    break
                payload = make_payload(level_expression(level, i), level.name)
                canonical = payload["expression"]
                if canonical in seen or split_of(canonical) != "eval":
                    continue
                seen.add(canonical)
                taken += 1
                items.append(Seed(id=f"arith-heldout-{level.name}-{i:04d}", domain=self.name, payload=payload))
        return items

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for ONE new integer expression, near the seed's difficulty and steered by its success stats."""
        system = (
            "You write arithmetic problems for a student. A problem is an integer expression using only "
            'whole numbers, +, -, * and parentheses. Reply with JSON only, like {"expression": "12 + 7"}.'
        )
        if seed is None:
            user = "Write one new arithmetic problem."
        else:
            example = json.dumps({"expression": seed.payload.get("expression", "")})
            user = f"Example problem: {example}\nWrite one NEW problem that varies the example."
        user += " " + _difficulty_hint(stats, target_success)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def task_json_schema(self) -> dict[str, Any]:
        """One object with an ``expression`` string restricted to digits, operators, parentheses and spaces."""
        return {
            "type": "object",
            "properties": {
                # The length bound lives in the pattern: xgrammar (vLLM's grammar engine) ignores
                # minLength/maxLength when a pattern is present.
                "expression": {"type": "string", "pattern": f"^[0-9(-][0-9 +*()-]{{0,{MAX_EXPRESSION_CHARS - 1}}}$"}
            },
            "required": ["expression"],
            "additionalProperties": False,
        }

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A payload with the safely computed answer, or TaskRejected with the reason."""
        expression = obj.get("expression") if isinstance(obj, dict) else None
        if not isinstance(expression, str | int) or isinstance(expression, bool):
            raise TaskRejected(RejectionReason.SCHEMA, "missing string field 'expression'")
        expression = str(expression).strip()
        if not expression:
            raise TaskRejected(RejectionReason.EMPTY, "empty expression")
        if len(expression) > MAX_EXPRESSION_CHARS:
            raise TaskRejected(RejectionReason.TOO_LONG, f"expression longer than {MAX_EXPRESSION_CHARS} characters")
        try:
            payload = make_payload(expression)
        except UnsafeExpressionError as exc:
            raise TaskRejected(RejectionReason.INVALID_TASK, str(exc)) from None
        if payload["operators"] == 0:
            raise TaskRejected(RejectionReason.INVALID_TASK, "no operation: the expression is a bare number")
        return self.reject_if_seed(payload, seed)

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The expression as the safe parser prints it (`7+8` and `7 + 8` are one task)."""
        expression = str(payload.get("expression", ""))
        try:
            return parse_expression(expression)[0]
        except UnsafeExpressionError:
            return expression.strip()

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """The fixed question format the difficulty table was measured with."""
        return [{"role": "user", "content": AGENT_PROMPT.format(expression=task["expression"])}]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """Exact match of the last integer in the reply against the safely computed value."""
        try:
            expected = evaluate(str(task["expression"]))
        except (KeyError, UnsafeExpressionError) as exc:
            return invalid_verdict(VerdictErrorKind.TASK_ERROR, f"bad task: {exc}")
        got = parse_answer(response)
        if got is None:
            return wrong_form_verdict(VerdictErrorKind.PARSE_ERROR, "no integer in the reply")
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        return valid_verdict(1.0 if got == expected else 0.0, threshold, {"expected": expected, "got": got})


DOMAIN = ArithmeticDomain()
