"""Engine and session factory. The caller owns the transaction (``with session_scope(...)``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from genenv.settings import DatabaseSettings


def make_engine(settings: DatabaseSettings) -> Engine:
    """Create an engine; SQLite gets WAL, foreign keys and a busy timeout so several threads can share it."""
    url = settings.url
    kwargs: dict[str, Any] = {"echo": settings.echo, "future": True}
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    else:
        kwargs["pool_size"] = settings.pool_size
    engine = create_engine(url, **kwargs)
    if not url.startswith("sqlite"):
        _ping_idle_connections(engine, settings.ping_after_idle_s)
    else:

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

    return engine


def _ping_idle_connections(engine: Engine, after_idle_s: float) -> None:
    """Ping a pooled connection before use only if it sat idle for longer than ``after_idle_s``.

    SQLAlchemy's ``pool_pre_ping`` pings on every checkout: one more round trip per transaction, which on the
    control plane's read path was a large share of a request. A connection returned to the pool a moment ago is as
    alive as a ping would show; the ones worth checking are those that sat idle through a database restart or an
    idle-connection timeout. Raising ``DisconnectionError`` from the checkout event is SQLAlchemy's documented way
    to make the pool discard that connection and hand out a fresh one.
    """

    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_conn: Any, record: Any) -> None:
        record.info["genenv_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("genenv_idle_since")
        if idle_since is None or time.monotonic() - idle_since <= after_idle_s:
            return  # new, or in use a moment ago
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise DisconnectionError("idle connection failed its ping") from exc
        if not alive:
            raise DisconnectionError("idle connection failed its ping")


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that do not expire objects on commit (routes read them after committing)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: commit on success, roll back on error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@dataclass
class ServiceDatabase:
    """An HTTP service's engine and session factory: borrowed from the process that embeds the service (one engine
    for all of them) or opened here from settings, and then released by ``close``."""

    engine: Engine
    sessions: sessionmaker[Session]
    owns_engine: bool

    @classmethod
    def open(cls, settings: DatabaseSettings, sessions: sessionmaker[Session] | None = None) -> ServiceDatabase:
        """Borrow ``sessions`` and its engine when given, else open the configured database."""
        if sessions is not None:
            bind = sessions.kw["bind"]
            assert isinstance(bind, Engine)
            return cls(bind, sessions, owns_engine=False)
        engine = make_engine(settings)
        return cls(engine, make_session_factory(engine), owns_engine=True)

    def ping(self) -> None:
        """Readiness: the database answers a query."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def close(self) -> None:
        """Release the pool if this service opened it; a borrowed engine is its owner's to dispose."""
        if self.owns_engine:
            self.engine.dispose()


class ProcessDatabase:
    """A worker process's engine and session factory, created on first use and reset after a fork.

    Celery's prefork pool forks children from the parent: a pool inherited across the fork would share sockets with
    the parent, so each child starts from nothing (``reset_after_fork`` is connected to ``worker_process_init``).
    """

    def __init__(self, settings: DatabaseSettings) -> None:
        self._settings = settings
        self._engine: Engine | None = None
        self._sessions: sessionmaker[Session] | None = None
        self._lock = threading.Lock()  # a threads-pool worker may start several jobs at once

    def sessions(self) -> sessionmaker[Session]:
        """The session factory (engine created now if needed)."""
        with self._lock:
            if self._sessions is None:
                self._engine = make_engine(self._settings)
                self._sessions = make_session_factory(self._engine)
            return self._sessions

    def reset_after_fork(self, **_: object) -> None:
        """Forget the inherited pool without closing the parent's connections."""
        if self._engine is not None:
            self._engine.dispose(close=False)
        self._engine = self._sessions = None
