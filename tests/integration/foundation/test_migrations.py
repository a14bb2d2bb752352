"""One Alembic history for SQLite and Postgres: up, down, up again, and no drift from the models."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from genenv.db import migrate
from genenv.db.models import Base


def _drift(url: str) -> list[object]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "render_as_batch": True})
            return list(compare_metadata(ctx, Base.metadata))
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _check_history(url: str) -> None:
    assert migrate.current_revision(url) is None
    migrate.upgrade(url)
    assert migrate.current_revision(url) == migrate.head_revision()
    assert _drift(url) == [], "models and migrations differ: regenerate the Alembic revision"
    assert set(Base.metadata.tables) <= _tables(url)
    migrate.upgrade(url)  # idempotent at head
    migrate.downgrade(url, "base")
    assert migrate.current_revision(url) is None
    assert _tables(url) <= {"alembic_version"}
    migrate.upgrade(url)
    assert _drift(url) == []


def test_sqlite_upgrade_downgrade_upgrade(tmp_path: object) -> None:
    _check_history(f"sqlite:///{tmp_path}/m.db")


@pytest.mark.postgres
def test_postgres_upgrade_downgrade_upgrade(new_pg_database: Callable[[], str]) -> None:
    _check_history(new_pg_database())


def test_single_head() -> None:
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(migrate.alembic_config("sqlite://")).get_heads()
    assert len(heads) == 1, f"the history has branched: {heads}"
