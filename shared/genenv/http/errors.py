"""Map every error onto the one envelope ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from genenv.contracts.errors import ErrorBody, ErrorEnvelope, GenEnvError

log = logging.getLogger(__name__)

# Error type per HTTP status for errors that do not come from a GenEnvError (OpenAI-style names).
_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "method_not_allowed_error",
    409: "conflict_error",
    413: "request_too_large_error",
    415: "unsupported_media_type_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable_error",
}
_MAX_LISTED_ERRORS = 5

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorEnvelope, "description": description}
    for status, description in (
        (400, "Bad request"),
        (401, "Missing or malformed bearer token"),
        (403, "Wrong bearer token"),
        (404, "Not found"),
        (409, "Conflict with the object's current state"),
        (413, "Request body too large"),
        (422, "Request failed validation"),
        (429, "A per-tenant limit is reached"),
        (500, "Internal error"),
        (503, "A dependency is unavailable"),
    )
}
"""The error envelope as OpenAPI responses; every router of every service is included with these."""


def error_response(
    status: int,
    message: str,
    *,
    type_: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON response carrying the envelope."""
    body = ErrorEnvelope(
        error=ErrorBody(
            message=message, type=type_ or _TYPE_BY_STATUS.get(status, "server_error"), param=param, code=code
        )
    )
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def _loc_to_param(loc: Sequence[int | str]) -> str | None:
    """``("body", "config", "alpha")`` → ``"config.alpha"``; query/path params keep their location."""
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or None


def _validation_message(errors: Sequence[Any]) -> str:
    """Human-readable summary: ``where: what`` for the first few errors."""
    items = []
    for err in errors[:_MAX_LISTED_ERRORS]:
        where = _loc_to_param(err.get("loc", ())) or "body"
        items.append(f"{where}: {err.get('msg', 'invalid value')}")
    extra = len(errors) - _MAX_LISTED_ERRORS
    if extra > 0:
        items.append(f"... and {extra} more")
    return "; ".join(items) or "request failed validation"


async def _genenv_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GenEnvError)
    return JSONResponse(exc.envelope().model_dump(), status_code=exc.status_code)


def _allowed_methods(request: Request) -> str:
    """Every method any route on this path accepts (Starlette only names the first route's)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    return error_response(exc.status_code, str(exc.detail), headers=headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    param = _loc_to_param(errors[0].get("loc", ())) if errors else None
    return error_response(422, _validation_message(errors), param=param, code="validation_error")


def internal_error_response(request_id: str | None) -> JSONResponse:
    """The 500 envelope: says where to look (the request id), never what broke."""
    suffix = f" (request id {request_id})" if request_id else ""
    return error_response(500, f"internal server error{suffix}", type_="server_error")


def install_error_handlers(app: FastAPI) -> None:
    """Register the envelope handlers (unhandled exceptions are caught by the request middleware)."""
    app.add_exception_handler(GenEnvError, _genenv_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
