"""Pure ASGI middleware: request id + last-resort 500, bearer auth, request body limit.

Pure ASGI (not BaseHTTPMiddleware) so the body limit can count streamed bytes and nothing buffers responses.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable

from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from genenv.http.auth import CALLER_SCOPE_KEY, Authenticator
from genenv.http.errors import error_response, internal_error_response
from genenv.logging import reset_request_id, set_request_id
from genenv.outages import DATABASE_AWAY_CODE, database_away

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-Id"
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class RequestContextMiddleware:
    """Accept/generate ``X-Request-Id``, echo it, bind it for logs; unhandled errors become a 500 envelope, or a 503
    when the database did not answer (an outage the caller waits out, not a failure it counts)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = Headers(scope=scope).get(REQUEST_ID_HEADER)
        # A client-chosen id is only trusted if it cannot inject anything into logs or headers.
        request_id = incoming if incoming and _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = set_request_id(request_id)
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            away = database_away(exc)
            if away:
                log.warning("database unavailable in %s %s: %s", scope.get("method"), scope.get("path"), exc)
            else:
                log.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise  # the status line is already out; the server closes the connection
            if away:
                await error_response(503, f"database unavailable (request id {request_id}); try again later",
                                     code=DATABASE_AWAY_CODE)(scope, receive, send_with_id)
            else:
                await internal_error_response(request_id)(scope, receive, send_with_id)
        finally:
            reset_request_id(token)


class BearerAuthMiddleware:
    """``Authorization: Bearer <token>`` on every path but the public ones. No tokens = auth disabled.

    An accepted token's Caller (its tenant) is left in the scope for ``genenv.http.auth.caller_of``.
    """

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator, public_paths: Iterable[str]) -> None:
        self.app = app
        self._auth = authenticator
        self._public = frozenset(public_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._auth.enabled or scope["path"] in self._public:
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        challenge = {"WWW-Authenticate": "Bearer"}
        if header is None:
            response = error_response(
                401, "missing bearer token; send 'Authorization: Bearer <token>'", headers=challenge
            )
        else:
            scheme, _, credential = header.partition(" ")
            credential = credential.strip()
            if scheme.lower() != "bearer" or not credential:
                response = error_response(
                    401, "malformed Authorization header; expected 'Bearer <token>'", headers=challenge
                )
            elif (caller := self._auth.identify(credential)) is None:
                response = error_response(403, "bearer token not accepted")
            else:
                scope[CALLER_SCOPE_KEY] = caller
                await self.app(scope, receive, send)
                return
        await response(scope, receive, send)


class BodyTooLargeError(StarletteHTTPException):
    """Raised from ``receive`` once the streamed body passes the limit.

    An HTTPException so FastAPI's body parsing re-raises it unchanged (it wraps other errors in a 400).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"request body exceeds {limit} bytes; send less data or raise GENENV_MAX_BODY_BYTES"
        )


class BodyLimitMiddleware:
    """413 when Content-Length says the body is too large, or when the streamed bytes pass the limit."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await error_response(400, "invalid Content-Length header")(scope, receive, send)
                return
            if int(declared) > self.max_bytes:
                too_large = BodyTooLargeError(self.max_bytes)
                await error_response(413, too_large.detail)(scope, receive, send)
                return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLargeError(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLargeError as exc:
            if started:
                raise
            await error_response(413, exc.detail)(scope, receive, send)
