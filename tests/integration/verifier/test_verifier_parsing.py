"""The fast body parser of POST /v1/verify accepts exactly what the VerifyRequest contract accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from genenv.contracts.rollouts import VerifyRequest
from genenv_verifier.parsing import parse_verify_request, request_body_doc

TASK = {"id": "t", "category": "simple", "functions": [], "ground_truth": []}


def _contract(body: bytes) -> tuple[list[Any], float | None] | str:
    try:
        r = VerifyRequest.model_validate_json(body)
    except ValidationError:
        return "invalid"
    return [i.model_dump() for i in r.items], r.success_threshold


def _fast(body: bytes) -> tuple[list[Any], float | None] | str:
    try:
        items, threshold = parse_verify_request(body)
    except RequestValidationError:
        return "invalid"
    return [i.model_dump() for i in items], threshold


def test_items_sharing_a_task_share_one_dict() -> None:
    body = json.dumps({"items": [{"domain": "d", "task": TASK, "response": str(i)} for i in range(4)]}).encode()
    items, threshold = parse_verify_request(body)
    assert threshold is None and len({id(i.task) for i in items}) == 1
    assert [i.response for i in items] == ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    "body",
    [
        {"items": []},
        {"items": [{"domain": "d", "task": TASK, "response": "x"}], "success_threshold": 1},
        {"items": [{"domain": "d", "task": TASK, "response": "x"}], "success_threshold": 0.5},
        {"items": [{"domain": "d", "task": {}, "response": ""}]},
        {"items": [{"domain": "", "task": TASK, "response": "x"}]},
        {"items": [{"domain": "d", "task": [1], "response": "x"}]},
        {"items": [{"domain": "d", "task": TASK, "response": 5}]},
        {"items": [{"domain": "d", "task": TASK}]},
        {"items": [{"domain": "d", "task": TASK, "response": "x", "extra": 1}]},
        {"items": [], "extra": 1},
        {"items": [], "success_threshold": 0},
        {"items": [], "success_threshold": 1.5},
        {"items": [{"domain": "d", "task": TASK, "response": "x"}] * 4097},
        {},
        [],
    ],
)
def test_fast_path_agrees_with_the_contract(body: Any) -> None:
    raw = json.dumps(body).encode()
    assert _fast(raw) == _contract(raw)


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"not json", b'{"items": [{"domain": "d", "task": {"a": 1}, "response": "x"}']
)
def test_malformed_bodies_are_validation_errors(raw: bytes) -> None:
    assert _fast(raw) == _contract(raw) == "invalid"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.dictionaries(st.sampled_from(["domain", "task", "response", "other"]), _json, max_size=4), max_size=3
    ),
    threshold=st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.integers(-2, 2) | st.text(max_size=2),
)
def test_fast_path_agrees_on_generated_bodies(items: list[dict[str, Any]], threshold: Any) -> None:
    raw = json.dumps({"items": items, "success_threshold": threshold}).encode()
    assert _fast(raw) == _contract(raw)


def test_openapi_documents_the_contract_body() -> None:
    schema = request_body_doc()["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == {"items", "success_threshold"}
    assert "$ref" not in json.dumps(schema)
