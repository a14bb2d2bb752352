"""Parsing a model's function-call output: accepted formats, failure kinds, no evaluation, fast path = ast path."""

from __future__ import annotations

import ast
import json
import random
import string
from typing import Any

import pytest
from bfcl_cases import gold_cases, perturbations, relevance_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from genenv.checkers import callparse
from genenv.checkers.base import CheckFailure
from genenv.checkers.callparse import Call, parse_calls
from genenv.contracts.rollouts import VerdictErrorKind


def kind_of(text: str, **kw: Any) -> VerdictErrorKind:
    with pytest.raises(CheckFailure) as err:
        parse_calls(text, **kw)
    return err.value.kind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[f(a=1, b='x')]", [Call("f", {"a": 1, "b": "x"})]),
        ("f(a=-1.5)", [Call("f", {"a": -1.5})]),
        ("math.factorial(number=5)", [Call("math.factorial", {"number": 5})]),
        (
            "[f(x=[1, 2], y={'k': True}, z=None), g()]",
            [Call("f", {"x": [1, 2], "y": {"k": True}, "z": None}), Call("g", {})],
        ),
        ('[{"f": {"a": 1}}]', [Call("f", {"a": 1})]),
        ('{"name": "f", "arguments": "{\\"a\\": 2}"}', [Call("f", {"a": 2})]),
        ('{"name": "f", "parameters": {"a": 2}}', [Call("f", {"a": 2})]),
        ('[{"function": "f", "parameters": {"a": 3}}]', [Call("f", {"a": 3})]),
        (
            '{"tool_calls": [{"id": "c1", "type": "function", '
            '"function": {"name": "g", "arguments": "{\\"q\\": \\"x\\"}"}}]}',
            [Call("g", {"q": "x"})],
        ),
        ('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>', [Call("f", {"x": 1})]),
        ("```python\n[f(a=1)]\n```", [Call("f", {"a": 1})]),
        ("```\n[f(a=1)]\n```", [Call("f", {"a": 1})]),
        ("<TOOLCALL>[f(a=1)]</TOOLCALL>", [Call("f", {"a": 1})]),
        ("[{'name': 'f', 'arguments': {'a': 1}}]", [Call("f", {"a": 1})]),
        ("[]", []),
        (
            "f(a=3 * 10 ** 8, b=x, c=now(), d=a[1], e=g(z=1), f=...)",
            [Call("f", {"a": 300000000, "b": "x", "c": "now()", "d": "a[1]", "e": {"g": {"z": 1}}, "f": "..."})],
        ),
        ("sort('final_report.pdf')", [Call("sort", {}, ("final_report.pdf",))]),
        ("f(a=(1, 2))", [Call("f", {"a": (1, 2)})]),
    ],
)
def test_accepted_formats(text: str, expected: list[Call]) -> None:
    assert parse_calls(text) == expected


@pytest.mark.parametrize(
    ("text", "kind", "fragment"),
    [
        ("", VerdictErrorKind.PARSE_ERROR, "empty"),
        ("   \n ", VerdictErrorKind.PARSE_ERROR, "empty"),
        ("I am sorry, I cannot do that.", VerdictErrorKind.PARSE_ERROR, "not a function call"),
        ('[{"f": {"a": 1}', VerdictErrorKind.PARSE_ERROR, "truncated"),
        ("[f(a=1), g(b=", VerdictErrorKind.PARSE_ERROR, "truncated"),
        ('{"name": "f", "arguments": "{not json"}', VerdictErrorKind.PARSE_ERROR, "not valid JSON"),
        ("[1, 2]", VerdictErrorKind.SCHEMA_ERROR, "expected a function call"),
        ('{"foo": 1}', VerdictErrorKind.SCHEMA_ERROR, "function-call object"),
        ('[{"f": 1}]', VerdictErrorKind.SCHEMA_ERROR, "function-call object"),
        ('{"name": "f", "arguments": [1]}', VerdictErrorKind.SCHEMA_ERROR, "string keys"),
        ("f(**kw)", VerdictErrorKind.SCHEMA_ERROR, "kwargs"),
        ("f(x=lambda: 1)", VerdictErrorKind.SCHEMA_ERROR, "not a literal"),
        ("f(x=1 if y else 2)", VerdictErrorKind.SCHEMA_ERROR, "not a literal"),
        ("f(x=a.b)", VerdictErrorKind.SCHEMA_ERROR, "not a literal"),
        ("f(x=10 ** 100000)", VerdictErrorKind.SCHEMA_ERROR, "exponent"),
        ("f(x=1 / 0)", VerdictErrorKind.SCHEMA_ERROR, "ZeroDivisionError"),
        ("f(x={[1]: 2})", VerdictErrorKind.SCHEMA_ERROR, "hashable"),
        ("f()(a=1)", VerdictErrorKind.SCHEMA_ERROR, "dotted identifier"),
        ("[" * 400 + "]" * 400, VerdictErrorKind.PARSE_ERROR, ""),
    ],
)
def test_malformed_responses_fail_with_the_right_kind(text: str, kind: VerdictErrorKind, fragment: str) -> None:
    with pytest.raises(CheckFailure) as err:
        parse_calls(text)
    assert err.value.kind is kind
    assert fragment in err.value.message


def test_huge_responses_are_too_large_before_any_parsing() -> None:
    assert kind_of("[f(a='" + "x" * 40_000 + "')]") is VerdictErrorKind.TOO_LARGE
    assert kind_of("[f(a=1)]", max_chars=4) is VerdictErrorKind.TOO_LARGE


def test_nothing_in_a_response_is_executed(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    payloads = [
        f"f(x=__import__('os').system('touch {marker}'))",
        f"f(x=__import__('os').system('touch {marker}') + 1)",
        f"f(x=[__import__('pathlib').Path('{marker}').touch()][0] * 2)",
        f"f(x=(lambda: __import__('os').system('touch {marker}'))())",
    ]
    for text in payloads:
        try:
            parse_calls(text)
        except CheckFailure:
            pass
    assert not marker.exists()
    # A call without keywords is kept as its source text, never called.
    assert parse_calls("f(x=os.system('rm -rf /'))") == [Call("f", {"x": "os.system('rm -rf /')"})]


def _ast_path(s: str) -> list[Call] | str:
    """What the ast path alone makes of a (wrapped) Python call list."""
    try:
        body = ast.parse(s, mode="eval").body
        if type(body) is ast.Call:
            return [callparse._call(body)]
        if type(body) is not ast.List or not all(type(e) is ast.Call for e in body.elts):
            return "schema"
        return [callparse._call(e) for e in body.elts]
    except (SyntaxError, ValueError, CheckFailure):
        return "error"


def _same(a: Any, b: Any) -> bool:
    return repr(a) == repr(b) and a == b


@pytest.mark.full_data("bfcl")
def test_fast_path_equals_ast_path_on_every_bfcl_response(
    ast_tasks: list[dict[str, Any]], relevance_tasks: list[dict[str, Any]]
) -> None:
    rng = random.Random(7)
    fast_hits = 0
    total = 0
    for task in ast_tasks:
        for case in [*gold_cases([task]), *perturbations(task, rng)]:
            total += 1
            fast = callparse._fast_parse(case.response)
            if fast is not None:
                fast_hits += 1
                assert _same(fast, _ast_path(case.response)), case.response
    for task in relevance_tasks:
        for case in relevance_cases(task):
            fast = callparse._fast_parse(case.response)
            if fast is not None:
                assert _same(fast, _ast_path(case.response))
    # The fast path is the common path (tuples, escaped quotes and the like go to ast).
    assert fast_hits / total > 0.8


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in {"True", "False", "None"}
)
_scalars = (
    st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.none()
    | st.text(alphabet=string.printable + "éü漢", max_size=12)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=3),
    max_leaves=12,
)
_spaces = st.sampled_from(["", " ", "  ", "\n", "\t"])


@settings(max_examples=400, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.lists(_names, min_size=1, max_size=3), st.dictionaries(_names, _values, max_size=4)),
        min_size=1,
        max_size=3,
    ),
    sep=_spaces,
    trailing=st.booleans(),
)
def test_fast_path_equals_ast_path_on_generated_literals(calls: list[Any], sep: str, trailing: bool) -> None:
    parts = []
    for name_parts, args in calls:
        inner = f",{sep}".join(f"{k}{sep}={sep}{v!r}" for k, v in args.items())
        parts.append(f"{'.'.join(name_parts)}({inner})")
    text = "[" + f",{sep}".join(parts) + ("," if trailing else "") + "]"
    reference = _ast_path(text)
    fast = callparse._fast_parse(text)
    if fast is not None:
        assert _same(fast, reference)
    result: Any
    try:
        result = parse_calls(text)
    except CheckFailure:
        result = "error"
    if reference not in ("error", "schema"):
        assert _same(result, reference)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[](){},:=.-+*'\"0123456789abcxyz_ \n\\#", max_size=40))
def test_fast_path_never_disagrees_on_junk(text: str) -> None:
    s = "[" + text + "]"
    fast = callparse._fast_parse(s)
    if fast is not None:
        assert _same(fast, _ast_path(s))


def test_json_path_handles_deep_nesting_as_a_parse_error() -> None:
    deep = '{"f": ' * 3000 + "{}" + "}" * 3000
    assert kind_of(deep) in (VerdictErrorKind.PARSE_ERROR, VerdictErrorKind.SCHEMA_ERROR)
    assert parse_calls(json.dumps([{"f": {"a": [[[1]]]}}])) == [Call("f", {"a": [[[1]]]})]
