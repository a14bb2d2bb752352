"""The FastAPI dependencies of the curriculum service: its only process-wide resource is the database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from genenv.db.engine import ServiceDatabase, session_scope


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the route returns, rolled back when it raises."""
    db: ServiceDatabase = request.app.state.curriculum
    with session_scope(db.sessions) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
