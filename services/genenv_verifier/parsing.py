"""Parse a POST /v1/verify body fast, with the pydantic contract as the judge of every error.

A batch repeats each task once per response (G rollouts of one task), and parsing those copies is most of the
service's cost. The fast path decodes the body with msgspec, keeping each task as raw JSON, parses each
*distinct* task text once and lets all items with that text share one dict — so the checker's compiled-task
cache hits by identity. It is at least as strict as the ``VerifyRequest`` contract (same field names, types and
bounds; unknown fields rejected); anything it does not accept goes through ``VerifyRequest.model_validate_json``,
which either accepts it or raises the usual validation error (the same 422 envelope as every other route).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from genenv.contracts.rollouts import VerifyItem, VerifyRequest

_MAX_ITEMS = 4096  # VerifyRequest.items max_length


class _Item(msgspec.Struct, forbid_unknown_fields=True):
    domain: Annotated[str, msgspec.Meta(min_length=1)]
    task: msgspec.Raw
    response: str


class _Request(msgspec.Struct, forbid_unknown_fields=True):
    items: Annotated[list[_Item], msgspec.Meta(max_length=_MAX_ITEMS)]
    success_threshold: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] | None = None


_decoder = msgspec.json.Decoder(_Request)


def parse_verify_request(body: bytes) -> tuple[list[VerifyItem], float | None]:
    """Items and success threshold of a verify body; RequestValidationError (422) when it breaks the contract."""
    try:
        request = _decoder.decode(body)
        tasks: dict[bytes, dict[str, Any]] = {}
        items = []
        for item in request.items:
            raw = bytes(item.task)
            task = tasks.get(raw)
            if task is None:
                parsed = json.loads(raw)
                if type(parsed) is not dict:
                    raise ValueError("task is not an object")
                task = tasks[raw] = parsed
            # The fields were validated above (same rules as the contract); construct without copying the task.
            items.append(VerifyItem.model_construct(domain=item.domain, task=task, response=item.response))
        return items, request.success_threshold
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError):
        pass
    try:
        contract = VerifyRequest.model_validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    return contract.items, contract.success_threshold


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline(v, defs) for v in schema]
    return schema


def request_body_doc() -> dict[str, Any]:
    """OpenAPI requestBody of POST /v1/verify: the VerifyRequest contract's JSON schema, inlined."""
    schema = VerifyRequest.model_json_schema()
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _inline(schema, schema.get("$defs", {}))}},
        }
    }
