"""The arithmetic domain: safe evaluator, seeds and split, prompts, generation validation, answer parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genenv.contracts.rollouts import VerdictErrorKind
from genenv.contracts.tasks import RejectionReason
from genenv.domains import get_domain
from genenv.domains.arithmetic.domain import (
    LEVELS,
    MAX_OPERATORS,
    UnsafeExpressionError,
    evaluate,
    level_expression,
    parse_answer,
    parse_expression,
    split_of,
)
from genenv.domains.base import TaskRejected

DOMAIN = get_domain("arithmetic")


@pytest.mark.parametrize(
    ("text", "value"),
    [("3 + 4", 7), ("(1 + 2) * 3", 9), ("10 - 3 * 2", 4), ("-5 + 2", -3), ("((7))", 7), ("2 * (3 - 10)", -14)],
)
def test_safe_evaluator_values(text: str, value: int) -> None:
    assert evaluate(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "x + 1",
        "2 ** 10",
        "7 / 2",
        "7 // 2",
        "7 % 2",
        "1.5 + 2",
        "True + 1",
        "'a' * 3",
        "[1] * 3",
        "abs(-3)",
        "1 if 1 else 2",
        "9999999 + 1",
        "1 +",
        "",
        "1 << 3",
        "+".join(["1"] * (MAX_OPERATORS + 2)),
        "(" * 30 + "1" + ")" * 30 + " + " + "(((((((((1)))))))))",
        "999999 * 999999 * 999999",
    ],
)
def test_safe_evaluator_rejects(text: str) -> None:
    with pytest.raises(UnsafeExpressionError):
        evaluate(text)


_leaf = st.integers(min_value=0, max_value=999).map(str)
_expr = st.recursive(
    _leaf,
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    max_leaves=4,
)


@given(_expr)
@settings(max_examples=200, deadline=None)
def test_safe_evaluator_agrees_with_python_arithmetic(text: str) -> None:
    # Reference: a tiny recursive-descent interpreter independent of ast, over the fully parenthesised form.
    def ref(s: str) -> int:
        s = s.strip()
        if s.startswith("(") and s.endswith(")"):
            depth = 0
            for i, ch in enumerate(s):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 1 and ch == " " and s[i + 1] in "+-*" and s[i + 2] == " ":
                    left, op, right = s[1:i], s[i + 1], s[i + 3 : -1]
                    a, b = ref(left), ref(right)
                    return a + b if op == "+" else a - b if op == "-" else a * b
        return int(s)

    assert evaluate(text) == ref(text)


def test_canonical_form_normalises_spacing_and_redundant_parentheses() -> None:
    assert parse_expression(" ( 1+2 ) *3")[0] == "(1 + 2) * 3"
    assert parse_expression("(4+5)")[0] == "4 + 5"


def test_seeds_are_deterministic_split_disjoint_and_cover_every_level() -> None:
    train, evals = DOMAIN.load_seeds(None, "train"), DOMAIN.load_seeds(None, "eval")
    assert DOMAIN.load_seeds(None, "train") == train
    train_exprs = {s.payload["expression"] for s in train}
    eval_exprs = {s.payload["expression"] for s in evals}
    assert not train_exprs & eval_exprs
    assert len(train_exprs) == len(train) and len(eval_exprs) == len(evals)
    assert {s.payload["level"] for s in train} == {lv.name for lv in LEVELS}
    assert {s.payload["level"] for s in evals} == {lv.name for lv in LEVELS}
    assert 0.1 < len(evals) / (len(train) + len(evals)) < 0.3
    for s in train + evals:
        assert s.payload["answer"] == evaluate(s.payload["expression"])
        assert split_of(s.payload["expression"]) == ("train" if s in train else "eval")
    with pytest.raises(ValueError, match="unknown split"):
        DOMAIN.load_seeds(None, "test")


def test_levels_grow_in_size() -> None:
    for lv in LEVELS:
        canonical, _value, n_ops = parse_expression(level_expression(lv, 0))
        assert n_ops == lv.operands - 1
        assert max(len(t) for t in canonical.replace("-", " ").replace("+", " ").replace("*", " ").split()) <= lv.digits


def test_agent_prompt_is_the_measured_format() -> None:
    assert DOMAIN.agent_messages({"expression": "12 + 7"}) == [
        {"role": "user", "content": "What is 12 + 7? Reply with the number only."}
    ]


def test_simulator_prompt_steers_difficulty() -> None:
    seed = DOMAIN.load_seeds(None, "train")[0]
    harder = DOMAIN.simulator_messages(seed, 4, target_success=0.5, stats=(8, 8))[-1]["content"]
    easier = DOMAIN.simulator_messages(seed, 4, target_success=0.5, stats=(0, 8))[-1]["content"]
    same = DOMAIN.simulator_messages(seed, 4, target_success=0.5, stats=(4, 8))[-1]["content"]
    assert seed.payload["expression"] in harder
    assert "HARDER" in harder and "EASIER" in easier and "similar" in same
    assert "one new" in DOMAIN.simulator_messages(None, 4, target_success=None, stats=None)[-1]["content"]


def test_json_schema_describes_the_expression() -> None:
    schema = DOMAIN.task_json_schema()
    assert schema["required"] == ["expression"]
    assert schema["properties"]["expression"]["type"] == "string"


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ({"question": "3 + 4"}, RejectionReason.SCHEMA),
        ({"expression": ["3 + 4"]}, RejectionReason.SCHEMA),
        ({"expression": "   "}, RejectionReason.EMPTY),
        ({"expression": "1 + " * 40 + "1"}, RejectionReason.TOO_LONG),
        ({"expression": "2 ** 8"}, RejectionReason.INVALID_TASK),
        ({"expression": "42"}, RejectionReason.INVALID_TASK),
        ({"expression": "open('x')"}, RejectionReason.INVALID_TASK),
    ],
)
def test_validate_generation_rejects_with_reason(obj: dict[str, object], reason: RejectionReason) -> None:
    with pytest.raises(TaskRejected) as info:
        DOMAIN.validate_generation(obj, None)
    assert info.value.reason is reason


def test_validate_generation_computes_the_answer() -> None:
    payload = DOMAIN.validate_generation({"expression": "12+7*3", "note": "ignored"}, None)
    assert payload == {"expression": "12 + 7 * 3", "answer": 33, "operators": 2, "max_digits": 2}


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("3 + 4 = 7", 7),
        ("7", 7),
        ("The answer is -12.", -12),
        ("12 - 15 = -3", -3),
        ("1,234", 1234),
        ("The sum is 1,234,567 (one million...)", 1234567),
        ("none", None),
        ("", None),
    ],
)
def test_answer_parser_takes_the_last_integer(reply: str, value: int | None) -> None:
    assert parse_answer(reply) == value


def test_verify() -> None:
    task = DOMAIN.validate_generation({"expression": "3 + 4"}, None)
    right, wrong, unparsable = (DOMAIN.verify(task, r) for r in ("3 + 4 = 7", "3 + 4 = 8", "seven"))
    assert right.valid and right.score == 1.0 and right.success
    assert wrong.valid and wrong.score == 0.0 and not wrong.success
    # No integer in the reply: a wrong answer (R_agent = 0), not an invalid verdict.
    assert unparsable.valid and unparsable.score == 0.0 and not unparsable.success
    assert unparsable.form_error is not None and unparsable.form_error.kind is VerdictErrorKind.PARSE_ERROR
    bad_task = DOMAIN.verify({"expression": "2 ** 99"}, "1")
    assert bad_task.error is not None and bad_task.error.kind is VerdictErrorKind.TASK_ERROR
    assert DOMAIN.verify(task, "7", success_threshold=0.5).success
