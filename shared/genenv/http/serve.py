"""``serve``: run one HTTP service under uvicorn with the project's logging and connection timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import socket
from asyncio import TimerHandle
from typing import Any

from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from genenv.logging import setup_logging
from genenv.settings import GenEnvSettings, get_settings

# The app factory each worker process builds its app with (``module:function(settings) -> FastAPI``).
_FACTORY_ENV = "GENENV_SERVE_FACTORY"


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus a deadline for a request's headers.

    uvicorn bounds only the idle time between requests, and cancels even that once any byte arrives, so a client
    that sends half a request line holds the connection (and a file descriptor) for as long as it likes. The
    deadline starts when the connection opens and after each response, and stops when the headers are complete.
    """

    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: TimerHandle | None = None

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._header_deadline_passed)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_deadline_passed(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Turn Nagle off and start the header deadline with the connection."""
        set_nodelay(transport)
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        """The request's headers arrived in time."""
        self._disarm_header_deadline()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """The next request on this connection gets its own deadline."""
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_header_deadline()


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """TCP_NODELAY on a TCP connection, whatever the listening socket and event loop.

    asyncio sets it on accepted sockets only when the socket's ``proto`` is IPPROTO_TCP, and uvicorn's
    ``--workers N`` path binds its listener with ``socket.socket(family)`` (proto 0; Kludex/uvicorn#3149), so with the
    stdlib loop every accepted connection kept Nagle's algorithm on. A response is two writes (headers, body): the
    body then waited for the client's delayed ACK, ~40 ms on Linux, on every keep-alive request. uvloop sets the
    option itself, which is why environments with uvloop never showed it.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):  # a connection already reset by its peer
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def serve(app: FastAPI, settings: GenEnvSettings, *, host: str, port: int) -> None:
    """Set up logging from settings and serve ``app`` until SIGINT/SIGTERM (one process, one event loop)."""
    import uvicorn

    setup_logging(settings.logging)
    protocol = type("ConfiguredHeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                    {"header_timeout_s": settings.http.header_timeout_s})
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_config=None,  # our handler (text or JSON, with request ids) instead of uvicorn's
        http=protocol,
        loop=settings.http.loop,
        timeout_keep_alive=settings.http.keep_alive_s,
    )


def serve_workers(factory: str, settings: GenEnvSettings, *, host: str, port: int, workers: int) -> None:
    """Serve ``factory``'s app from ``workers`` processes sharing one socket (uvicorn's supervisor restarts any
    that dies). ``factory`` is ``"module:function"``, a function taking the settings and returning the app.

    The workers are spawned, not forked, so they get the import path instead of the app object and read the same
    settings from the environment.
    """
    import uvicorn

    setup_logging(settings.logging)
    os.environ[_FACTORY_ENV] = factory
    uvicorn.run(
        f"{__name__}:worker_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_config=None,
        http=f"{__name__}:HeaderTimeoutProtocol",
        loop=settings.http.loop,
        timeout_keep_alive=settings.http.keep_alive_s,
    )


def worker_app() -> FastAPI:
    """The app of one worker process started by ``serve_workers``."""
    settings = get_settings()
    setup_logging(settings.logging)
    # One app per worker process, so the class attribute is this process's setting.
    HeaderTimeoutProtocol.header_timeout_s = settings.http.header_timeout_s
    module, _, name = os.environ[_FACTORY_ENV].partition(":")
    app: FastAPI = getattr(importlib.import_module(module), name)(settings)
    return app
