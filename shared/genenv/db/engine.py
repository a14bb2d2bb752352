"""Engine and session factory. The caller owns the transaction (``with session_scope(...)``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
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
