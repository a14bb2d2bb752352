"""Foundation fixtures: migrated databases (SQLite file and a private Postgres database), the control-plane app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fnd_helpers import AUTH, Api, RecordingEnqueuer, app_settings
from sqlalchemy.orm import Session

from genenv.db.engine import make_engine, make_session_factory
from genenv.db.migrate import upgrade
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app


@pytest.fixture(
    scope="module",
    params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)],
)
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database migrated to head: a SQLite file, or a private database on the real Postgres server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'genenv.db'}"
    else:
        url = request.getfixturevalue("new_pg_database")()
    upgrade(url)
    return url


@pytest.fixture
def session(db_url: str) -> Iterator[Session]:
    """A session whose transaction the test owns (rolled back at the end unless the test commits)."""
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    s = make_session_factory(engine)()
    try:
        yield s
    finally:
        s.rollback()
        s.close()
        engine.dispose()


@pytest.fixture
async def api(db_url: str) -> AsyncIterator[Api]:
    """The control plane on ``db_url`` through the in-process ASGI transport."""
    enqueuer = RecordingEnqueuer(db_url)
    app = create_app(app_settings(db_url), enqueuer=enqueuer)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cp", headers=AUTH) as client:
        yield Api(client, transport, enqueuer, app)
    app.state.control_plane.close()


