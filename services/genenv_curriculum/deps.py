"""Process-wide resources of the curriculum service and the FastAPI dependencies that hand them to routes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.repositories.common import DEFAULT_LIMIT, MAX_LIMIT
from genenv.settings import GenEnvSettings


@dataclass
class CurriculumResources:
    """The database the service reads and writes; ``owns_engine`` when the service created it."""

    engine: Engine
    sessions: sessionmaker[Session]
    owns_engine: bool

    @classmethod
    def build(cls, settings: GenEnvSettings, sessions: sessionmaker[Session] | None = None) -> CurriculumResources:
        """Use the given session factory (embedded mode shares one engine) or open the configured database."""
        if sessions is not None:
            bind = sessions.kw["bind"]
            assert isinstance(bind, Engine)
            return cls(bind, sessions, owns_engine=False)
        engine = make_engine(settings.database)
        return cls(engine, make_session_factory(engine), owns_engine=True)

    def ping_database(self) -> None:
        """Readiness: the database answers a query."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def close(self) -> None:
        """Release the pool if this service opened it."""
        if self.owns_engine:
            self.engine.dispose()


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the route returns, rolled back when it raises."""
    resources: CurriculumResources = request.app.state.curriculum
    with session_scope(resources.sessions) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
Cursor = Annotated[
    str | None,
    Query(max_length=1024, pattern=r"^[A-Za-z0-9_-]+$", description="next_cursor of the previous page."),
]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")]
DEFAULT_PAGE = DEFAULT_LIMIT
