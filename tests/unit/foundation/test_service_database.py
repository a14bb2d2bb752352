"""The database every HTTP service holds: borrowed from the embedding process (never disposed by the service) or
opened from settings (disposed by the service's close)."""

from __future__ import annotations

from pathlib import Path

from genenv.db.engine import ServiceDatabase, make_engine, make_session_factory
from genenv.settings import DatabaseSettings


def test_a_borrowed_engine_is_used_and_left_to_its_owner(tmp_path: Path) -> None:
    settings = DatabaseSettings(url=f"sqlite:///{tmp_path / 'shared.db'}")
    engine = make_engine(settings)
    sessions = make_session_factory(engine)
    pool = engine.pool
    db = ServiceDatabase.open(DatabaseSettings(url=f"sqlite:///{tmp_path / 'never-opened.db'}"), sessions)
    assert db.engine is engine and db.sessions is sessions and not db.owns_engine
    db.ping()
    db.close()
    assert engine.pool is pool  # not disposed: the embedding process still uses it
    assert not (tmp_path / "never-opened.db").exists()
    engine.dispose()


def test_an_opened_engine_is_the_services_to_dispose(tmp_path: Path) -> None:
    db = ServiceDatabase.open(DatabaseSettings(url=f"sqlite:///{tmp_path / 'own.db'}"))
    assert db.owns_engine and db.sessions.kw["bind"] is db.engine
    db.ping()
    pool = db.engine.pool
    db.close()
    assert db.engine.pool is not pool  # dispose() swaps in a fresh pool
