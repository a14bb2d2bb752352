"""Fixtures of the end-to-end tests: a fresh migrated Postgres database per module."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from genenv.db import migrate
from tests.conftest import PG_ADMIN
from tests.e2e.helpers import RECOVERY_S


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The crash tests' recovery times: seconds from kill -9 until the killed process's work moved again."""
    if RECOVERY_S:
        terminalreporter.section("crash recovery (kill -9, restart at once)")
        for what, seconds in sorted(RECOVERY_S.items(), key=lambda kv: kv[0]):
            terminalreporter.write_line(f"{what:<28} {seconds:6.1f} s")


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
