"""Tell a dependency that does not answer from a step that truly failed: the one place that decides it.

An outage (connection refused or reset, a timeout, HTTP 502/503/504, a database or broker that is down) says
nothing about the work: the run waits for the dependency and tries again, however long that takes. A real failure
(a 4xx, a bad payload, a bug) is the work's own, and only those count toward ``orchestrator.max_phase_failures``.
The orchestrator and the rollout worker both ask ``classify``; nothing else spells the rule again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import redis.exceptions
from kombu.exceptions import OperationalError as BrokerOperationalError
from sqlalchemy.exc import InterfaceError, OperationalError

from genenv.clients.base import ApiError
from genenv.contracts.errors import UnavailableError
from genenv.settings import ServiceUrls

UNAVAILABLE_STATUS = frozenset({502, 503, 504})
"""HTTP statuses that say "not now" (a proxy without its backend, a server starting or overloaded)."""

DATABASE = "database"
BROKER = "broker"
# settings.services field → the dependency's name as a run reports it.
_SERVICE_NAMES = {
    "control_plane": "control_plane",
    "simulator": "simulator",
    "verifier": "verifier",
    "curriculum": "curriculum",
    "vllm_agent": "agent_model",
    "vllm_simulator": "simulator_model",
}
MODEL_SERVERS = frozenset({"agent_model", "simulator_model", "model"})
"""Dependencies that serve adapters: a restarted one has forgotten them (re-published when it answers again)."""

# httpx transport errors that mean the other side is away, not that we sent something wrong (LocalProtocolError,
# UnsupportedProtocol and InvalidURL are ours, and stay failures).
_HTTP_OUTAGES = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)
_REDIS_OUTAGES = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
# The simulator service's 503 when not one request reached its model: the model server is what is away.
_MODEL_AWAY_CODE = "generation_failed"
DATABASE_AWAY_CODE = "database_unavailable"
"""The code of a service's 503 when its database did not answer (genenv.http.middleware): the run waits on the
database, as it would had it read the database itself."""


@dataclass(frozen=True)
class Outage:
    """A dependency that did not answer, and the error that said so (one line)."""

    dependency: str
    error: str

    @property
    def model_server(self) -> bool:
        """Whether the dependency serves adapters (they are published again once it answers)."""
        return self.dependency in MODEL_SERVERS


class DependencyAwayError(RuntimeError):
    """Work stopped because a dependency is away (e.g. a rollout job whose model server went down): an outage,
    whatever the caller's own exception handling would make of a RuntimeError."""

    def __init__(self, outage: Outage) -> None:
        super().__init__(f"{outage.dependency} does not answer: {outage.error}")
        self.outage = outage

    def __reduce__(self) -> tuple[type[DependencyAwayError], tuple[Outage]]:
        # Celery pickles a task's exception: rebuild it from the outage, not from the message.
        return (DependencyAwayError, (self.outage,))


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify(exc: BaseException, services: ServiceUrls) -> Outage | None:
    """The outage ``exc`` stands for, or None when it is a real failure (counted, and in the end fatal).

    The exception and its explicit causes (``raise … from``) are read: a publisher or inference error raised from a
    refused connection is an outage, the same error raised by a 400 is not.
    """
    for link in _causes(exc):
        dependency = _dependency(link, services)
        if dependency is not None:
            return Outage(dependency, one_line(exc))
    return None


def dependency_of_url(url: str, services: ServiceUrls) -> str | None:
    """The name of the configured service at ``url`` (matched by host and port), or None."""
    where = _netloc(url)
    if not where:
        return None
    names = [name for field, name in _SERVICE_NAMES.items() if _netloc(getattr(services, field)) == where]
    if {"agent_model", "simulator_model"} <= set(names):
        return "model"  # one vLLM server serves both roles
    return names[0] if names else None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__


def _dependency(exc: BaseException, services: ServiceUrls) -> str | None:
    """The dependency ``exc`` itself says is away, or None."""
    if isinstance(exc, DependencyAwayError):
        return exc.outage.dependency
    if isinstance(exc, ApiError):
        if exc.status_code is not None and exc.status_code not in UNAVAILABLE_STATUS:
            return None
        if exc.status_code == 503 and exc.code == _MODEL_AWAY_CODE:
            return "simulator_model"
        if exc.status_code == 503 and exc.code == DATABASE_AWAY_CODE:
            return DATABASE
        named = dependency_of_url(exc.base_url or "", services)
        return named or (exc.service or "service").replace(" ", "_")
    if isinstance(exc, UnavailableError):
        return "service"
    if isinstance(exc, _HTTP_OUTAGES):
        try:
            url = str(exc.request.url)
        except RuntimeError:  # raised without a request (never by httpx itself)
            return "service"
        return dependency_of_url(url, services) or _netloc(url) or "service"
    if isinstance(exc, InterfaceError):
        return DATABASE
    if isinstance(exc, OperationalError):
        return DATABASE if _database_away(exc) else None
    if isinstance(exc, (*_REDIS_OUTAGES, BrokerOperationalError)):
        return BROKER
    if isinstance(exc, ConnectionError):  # a socket refused or reset below a library that did not wrap it
        return "service"
    return None


def database_away(exc: BaseException) -> bool:
    """Whether ``exc`` (or an explicit cause) says the database does not answer: what a service answers with 503
    instead of 500, and what an orchestrator waits out without recording it (the record would go to that
    database)."""
    return any(isinstance(link, InterfaceError) or (isinstance(link, OperationalError) and _database_away(link))
               for link in _causes(exc))


def _database_away(exc: OperationalError) -> bool:
    # SQLite raises OperationalError for a missing table or a bad statement too (bugs); of its errors only a lock
    # held by another writer passes by itself. Postgres' OperationalError is a connection or server failure.
    if isinstance(exc.orig, sqlite3.OperationalError):
        return "database is locked" in str(exc.orig)
    return True


def _netloc(url: str) -> str:
    parts = urlsplit(url)
    if not parts.hostname:
        return ""
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return f"{parts.hostname.lower()}:{port}"
