"""Fixtures of the end-to-end tests: a fresh migrated Postgres database per module."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from genenv.db import migrate
from tests.conftest import PG_ADMIN


@pytest.fixture(scope="module")
def e2e_db() -> Iterator[str]:
    """A fresh, migrated Postgres database for this module."""
    name = f"genenv_e2e_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"
    migrate.upgrade(url)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
