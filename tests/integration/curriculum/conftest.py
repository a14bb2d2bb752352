"""Curriculum integration fixtures: private migrated databases (Postgres, SQLite) and the service app."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.db.engine import make_engine, make_session_factory
from genenv.db.migrate import upgrade
from genenv.settings import DatabaseSettings


@pytest.fixture(scope="session")
def private_pg(new_pg_database: Callable[[], str]) -> Callable[[], str]:
    """Private empty Postgres databases (the shared factory in tests/conftest.py)."""
    return new_pg_database


def migrated(url: str) -> Iterator[sessionmaker[Session]]:
    """Session factory on ``url`` after migrating it to head."""
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def pg_sessions(private_pg: Callable[[], str]) -> Iterator[sessionmaker[Session]]:
    """A migrated private Postgres database for one test module."""
    yield from migrated(private_pg())


@pytest.fixture(
    scope="module", params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def any_sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    sessionmaker[Session]
]:
    """The same tests on a SQLite file and on real Postgres."""
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('curdb')) / 'genenv.db'}"
    else:
        url = request.getfixturevalue("private_pg")()
    yield from migrated(url)
