"""Shared fixtures of the orchestrator's integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.db.engine import make_engine, make_session_factory
from genenv.db.migrate import upgrade
from genenv.settings import GenEnvSettings


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """A migrated database, once on SQLite and once on the real Postgres (a module that needs one kind defines its
    own ``sessions``, which takes precedence)."""
    url = f"sqlite:///{tmp_path / 'genenv.db'}" if request.param == "sqlite" else \
        request.getfixturevalue("new_pg_database")()
    upgrade(url)
    engine = make_engine(GenEnvSettings.model_validate({"database": {"url": url}}).database)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()
