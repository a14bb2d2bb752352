"""A scripted arithmetic agent whose frontier is known in closed form (issue 33, item 5). Pure.

It answers a task correctly with probability

    p(d, k) = σ(bias − digit_weight·(d − 1) − operator_weight·(k − 1))

where d is the digit count of the longest operand and k the number of + - * operators (the arithmetic domain's
own ``operand_digits`` and ``operators`` measures), and otherwise replies a wrong integer. So for any target α the
tasks it solves with p = α are known exactly (:meth:`Profile.frontier`), which is the ground truth an external-
agent run is measured against: does the simulator's p̂ move toward α from below (``weak``) and from above
(``strong``)?

The agent reads only what an external agent sees: the lease item's ``messages`` (with service-side scoring an item
carries no payload or answer), so it parses the expression back out of the domain's prompt.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from genenv.contracts.tasks import ChatMessage
from genenv.domains.arithmetic.domain import (
    AGENT_PROMPT,
    MAX_CONSTANT,
    MAX_OPERATORS,
    UnsafeExpressionError,
    make_payload,
)

PresetName = Literal["weak", "strong", "capable", "struggling"]

MAX_DIGITS = len(str(MAX_CONSTANT))
"""The longest operand the domain accepts (|constant| ≤ 10**6, so 7 digits)."""

NO_ANSWER_REPLY = "I cannot read this problem."
"""The reply to a prompt that holds no expression the domain parses: no integer, so the checker scores it 0 with a
form error (this never happens for a task the simulator's validation accepted)."""

_PREFIX, _SUFFIX = AGENT_PROMPT.split("{expression}")
# The domain's prompt with the expression as the one capture group, so the agent follows the prompt if it changes.
_PROMPT = re.compile(re.escape(_PREFIX) + r"(.+?)" + re.escape(_SUFFIX), re.DOTALL)


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _sigmoid(x: float) -> float:
    # Split by sign so neither branch overflows exp().
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@dataclass(frozen=True)
class TaskFeatures:
    """What the success probability depends on: longest operand's digits and operator count (both ≥ 1 for a
    task the domain accepts; a bare number has 0 operators and is rejected at generation)."""

    digits: int
    operators: int


@dataclass(frozen=True)
class FrontierPoint:
    """Where p = α on one operator count: the (real-valued) longest-operand digit count, and whether it lies
    inside what the domain can express (1 ≤ digits ≤ MAX_DIGITS)."""

    operators: int
    digits: float

    @property
    def in_domain(self) -> bool:
        """True when a task of this many operators and digits can exist."""
        return 1.0 <= self.digits <= MAX_DIGITS


@dataclass(frozen=True)
class Profile:
    """The agent's skill: p(d, k) = σ(bias − digit_weight·(d − 1) − operator_weight·(k − 1))."""

    name: str
    bias: float
    digit_weight: float
    operator_weight: float

    def __post_init__(self) -> None:
        if self.digit_weight <= 0 or self.operator_weight <= 0:
            raise ValueError("weights must be positive: p must fall with digits and with operators")

    def probability(self, features: TaskFeatures) -> float:
        """The probability that the agent answers a task with these features correctly."""
        return _sigmoid(self.bias - self.digit_weight * (features.digits - 1)
                        - self.operator_weight * (features.operators - 1))

    def digits_at(self, alpha: float, operators: int) -> float:
        """The longest-operand digit count at which p = α for ``operators`` operators (real-valued)."""
        _check_alpha(alpha)
        return 1.0 + (self.bias - _logit(alpha) - self.operator_weight * (operators - 1)) / self.digit_weight

    def frontier(self, alpha: float, max_operators: int = MAX_OPERATORS) -> tuple[FrontierPoint, ...]:
        """The ground truth: for each operator count 1..max_operators, the digit count where p = α."""
        return tuple(FrontierPoint(k, self.digits_at(alpha, k)) for k in range(1, max_operators + 1))

    def nearest_cells(
        self, alpha: float, *, max_digits: int = MAX_DIGITS, max_operators: int = MAX_OPERATORS
    ) -> list[tuple[TaskFeatures, float]]:
        """Every integer cell (digits, operators) the domain can express with its p, closest to α first (ties:
        fewer operators, then fewer digits): the tasks a perfect α-curriculum would write."""
        _check_alpha(alpha)
        cells = [TaskFeatures(d, k) for k in range(1, max_operators + 1) for d in range(1, max_digits + 1)]
        scored = [(cell, self.probability(cell)) for cell in cells]
        return sorted(scored, key=lambda cp: (abs(cp[1] - alpha), cp[0].operators, cp[0].digits))


PRESETS: dict[PresetName, Profile] = {
    # p = 0.82 on a 1-digit sum; α = 0.5 at 2 digits with 1 operator or 1 digit with 3 operators.
    "weak": Profile("weak", bias=1.5, digit_weight=1.5, operator_weight=0.75),
    # p = 0.98 on a 1-digit sum; α = 0.5 at 5 digits with 1 operator, 4 digits with 3, 3 digits with 5.
    "strong": Profile("strong", bias=4.0, digit_weight=1.0, operator_weight=0.5),
    # The two sides of issue 34's design (c) (docs/experiments/preregistration-two-sided-scripted.md), chosen from
    # the untrained SmolLM2 simulator's epoch-0 tasks (a pilot of 1,067): on them the capable agent's mean p is 0.81
    # (too easy: above α = 0.5), the struggling agent's 0.22 (too hard), and about a fifth to a quarter of them lie
    # in the band [0.25, 0.75] — the frontier is where this simulator already writes sometimes, unlike "strong"'s.
    # capable: p = 0.95 on a 2-digit sum, 0.73 at 3 digits, 0.27 at 4; 0.5 at 2 digits with 3 operators.
    "capable": Profile("capable", bias=5.0, digit_weight=2.0, operator_weight=1.5),
    # struggling: p = 0.73 on a 1-digit sum, 0.5 with 3 operators, 0.18 on a 2-digit sum.
    "struggling": Profile("struggling", bias=1.0, digit_weight=2.5, operator_weight=0.5),
}


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")


def expression_from_messages(messages: Sequence[ChatMessage]) -> str | None:
    """The expression in the last user message built from the domain's prompt; None if there is none."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        match = _PROMPT.search(str(message.get("content", "")))
        return match.group(1).strip() if match else None
    return None


def features_of(expression: str) -> TaskFeatures:
    """Digits of the longest operand and operator count, as the domain measures them (UnsafeExpressionError for
    something the domain would not accept)."""
    payload = make_payload(expression)
    return TaskFeatures(digits=int(payload["max_digits"]), operators=int(payload["operators"]))


@dataclass(frozen=True)
class ScriptedAttempt:
    """One reply and what the agent knows about it (for tests and the driver's own tally; not sent)."""

    reply: str
    expression: str | None
    probability: float
    correct: bool


class ScriptedAgent:
    """Answers arithmetic prompts right with the profile's probability, else with a wrong integer.

    Deterministic given ``seed`` and the sequence of prompts it is asked (one ``random.Random`` per agent).
    """

    def __init__(self, profile: Profile | PresetName, seed: int = 0) -> None:
        self.profile = PRESETS[profile] if isinstance(profile, str) else profile
        self._rng = random.Random(seed)

    def attempt(self, messages: Sequence[ChatMessage]) -> ScriptedAttempt:
        """One attempt at the task these messages pose."""
        expression = expression_from_messages(messages)
        if expression is None:
            return ScriptedAttempt(NO_ANSWER_REPLY, None, 0.0, False)
        try:
            payload = make_payload(expression)
        except UnsafeExpressionError:
            return ScriptedAttempt(NO_ANSWER_REPLY, expression, 0.0, False)
        features = TaskFeatures(int(payload["max_digits"]), int(payload["operators"]))
        p = self.profile.probability(features)
        value = int(payload["answer"])
        if self._rng.random() < p:
            return ScriptedAttempt(str(value), expression, p, True)
        # A near miss of either sign, never 0, so the reply is a wrong integer the checker parses.
        offset = self._rng.randint(1, 10) * self._rng.choice((-1, 1))
        return ScriptedAttempt(str(value + offset), expression, p, False)

    def reply(self, messages: Sequence[ChatMessage]) -> str:
        """Just the reply text (what is reported to the service)."""
        return self.attempt(messages).reply
