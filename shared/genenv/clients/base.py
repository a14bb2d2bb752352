"""Base of every typed service client: one long-lived ``httpx.AsyncClient``, the error envelope as an exception.

Create one client per process and reuse it (connection pooling). Tests and the embedded mode pass
``transport=httpx.ASGITransport(app)`` so the same code calls the app in-process.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from genenv.contracts.errors import ErrorBody, ErrorEnvelope
from genenv.logging import current_request_id

REQUEST_ID_HEADER = "X-Request-Id"
RETRY_BACKOFF_S = 0.2
# The request provably never reached the server, so repeating an idempotent GET cannot duplicate anything.
_RETRYABLE = (httpx.ConnectError, httpx.ConnectTimeout)

M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """A service answered with an error (the envelope, parsed) or could not be reached (``status_code`` None)."""

    def __init__(
        self,
        status_code: int | None,
        error: ErrorBody,
        *,
        request_id: str | None = None,
        service: str | None = None,
        base_url: str | None = None,
    ) -> None:
        super().__init__(f"{error.type}: {error.message}" + (f" (param {error.param})" if error.param else ""))
        self.status_code = status_code
        self.error = error
        self.request_id = request_id
        # Which client saw it: genenv.outages names the dependency a run waits on from these.
        self.service = service
        self.base_url = base_url

    @property
    def message(self) -> str:
        """Human-readable message from the service."""
        return self.error.message

    @property
    def type(self) -> str:
        """Error type, e.g. ``not_found_error``."""
        return self.error.type

    @property
    def param(self) -> str | None:
        """The offending field path, when the service named one."""
        return self.error.param

    @property
    def code(self) -> str | None:
        """Machine-readable code, e.g. ``illegal_transition``."""
        return self.error.code


class ServiceUnreachableError(ApiError):
    """No HTTP response: connection refused, DNS, timeout."""


class ServiceClient:
    """Typed JSON calls to one service with explicit timeouts, bearer token and request-id forwarding."""

    service = "service"

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.retries = retries
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            transport=transport,
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def request(
        self,
        method: str,
        path: str,
        response_model: type[M],
        *,
        body: BaseModel | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> M:
        """Send one request and parse the answer into ``response_model``; ApiError on any error."""
        request_id = current_request_id() or uuid.uuid4().hex
        query = {k: v for k, v in (params or {}).items() if v is not None}
        content = body.model_dump_json().encode() if body is not None else None
        headers = {REQUEST_ID_HEADER: request_id}
        if content is not None:
            headers["Content-Type"] = "application/json"
        attempts = 1 + (self.retries if method.upper() == "GET" else 0)
        for attempt in range(attempts):
            try:
                response = await self._http.request(method, path, params=query, content=content, headers=headers)
                break
            except _RETRYABLE as exc:
                if attempt + 1 < attempts:
                    await asyncio.sleep(RETRY_BACKOFF_S * 2**attempt)
                    continue
                raise self._unreachable(exc, request_id) from exc
            except httpx.TransportError as exc:
                raise self._unreachable(exc, request_id) from exc
        return self._parse(response, response_model)

    def _unreachable(self, exc: httpx.TransportError, request_id: str) -> ServiceUnreachableError:
        return unreachable_error(exc, request_id, service=self.service, base_url=str(self._http.base_url))

    def _parse(self, response: httpx.Response, response_model: type[M]) -> M:
        return parse_response(response, response_model, service=self.service, base_url=str(self._http.base_url))


def unreachable_error(
    exc: httpx.TransportError, request_id: str, *, service: str, base_url: str
) -> ServiceUnreachableError:
    """The ApiError for a request that got no HTTP response (shared by the async and the sync clients)."""
    kind = "timeout_error" if isinstance(exc, httpx.TimeoutException) else "connection_error"
    message = f"{service} at {base_url} did not answer: {type(exc).__name__} {exc}".strip()
    return ServiceUnreachableError(None, ErrorBody(message=message, type=kind), request_id=request_id,
                                   service=service, base_url=base_url)


def parse_response(response: httpx.Response, response_model: type[M], *, service: str, base_url: str) -> M:
    """The answer parsed into ``response_model``, or ApiError from the error envelope (shared by the async and
    the sync clients)."""
    request_id = response.headers.get(REQUEST_ID_HEADER)
    if response.is_success:
        try:
            return response_model.model_validate_json(response.content)
        except ValidationError as exc:
            error = ErrorBody(
                message=f"{service} sent a response that is not a {response_model.__name__}: {exc}",
                type="invalid_response_error",
            )
            raise ApiError(response.status_code, error, request_id=request_id, service=service,
                           base_url=base_url) from exc
    try:
        error = ErrorEnvelope.model_validate_json(response.content).error
    except ValidationError:
        # Not our envelope (a proxy, a non-GenEnv server): keep the start of the body for the operator.
        error = ErrorBody(message=f"HTTP {response.status_code}: {response.text[:300]}", type="http_error")
    raise ApiError(response.status_code, error, request_id=request_id, service=service, base_url=base_url)
