"""INSERT … ON CONFLICT for the two databases we run on (Postgres and SQLite share the syntax)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_for(session: Session, model: Any) -> Any:
    """A dialect-specific ``insert(model)`` that supports ``on_conflict_do_update/do_nothing``."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(model)
    if name == "sqlite":
        return sqlite.insert(model)
    raise NotImplementedError(f"upserts are implemented for postgresql and sqlite, not {name}")
