"""Verifier integration fixtures: settings, a migrated Postgres database, the app, a typed client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.verifier import VerifierClient
from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory
from genenv.settings import DatabaseSettings
from tests.integration.verifier.verifier_support import verifier_settings


@pytest.fixture(scope="session")
def verifier_pg(pg_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on the session's Postgres database, migrated to head."""
    migrate.upgrade(pg_url)
    engine = make_engine(DatabaseSettings(url=pg_url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


@pytest.fixture
async def client(benchmarks_dir: Path, tmp_path: Path) -> AsyncIterator[VerifierClient]:
    """A typed client on the app in-process (SQLite file database; verification needs no database)."""
    from genenv_verifier.app import create_app

    settings = verifier_settings(benchmarks_dir)
    settings.database.url = f"sqlite:///{tmp_path / 'verifier.db'}"
    app = create_app(settings)
    async with VerifierClient("http://verifier", transport=httpx.ASGITransport(app)) as c:
        yield c
