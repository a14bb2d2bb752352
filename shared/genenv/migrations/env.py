"""Alembic environment: one history for Postgres and SQLite (render_as_batch for SQLite's ALTER limits)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from genenv.db.engine import make_engine
from genenv.db.models import Base
from genenv.settings import DatabaseSettings, get_settings

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    # genenv.db.migrate sets the URL; the plain `alembic -c .../alembic.ini` CLI falls back to GENENV_ settings.
    return config.get_main_option("sqlalchemy.url") or get_settings().database.url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )


def run_offline() -> None:
    """Emit SQL to stdout instead of executing it (``alembic upgrade --sql``)."""
    context.configure(
        url=_url(), target_metadata=target_metadata, render_as_batch=True, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Run against a live database (a connection handed in by genenv.db.migrate, or a fresh engine)."""
    given: Connection | None = config.attributes.get("connection")
    if given is not None:
        _configure(given)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(DatabaseSettings(url=_url()))
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
