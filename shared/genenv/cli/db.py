"""``genenv db upgrade|downgrade|current|revision``: the database schema (Alembic migrations)."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.engine import make_url

from genenv.cli.common import err
from genenv.settings import get_settings

# The database's URL, not the control plane's (common.UrlOption).
UrlOption = Annotated[
    str | None, typer.Option("--url", help="Database URL (default: GENENV_DATABASE__URL or the SQLite file).")
]

app = typer.Typer(help="Database schema (Alembic migrations; Postgres and SQLite).", no_args_is_help=True)


def _url(url: str | None) -> str:
    return url or get_settings().database.url


def _shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


@app.command("upgrade")
def upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head", url: UrlOption = None) -> None:
    """Migrate the database up to REVISION (idempotent)."""
    from genenv.db import migrate

    target = _url(url)
    migrate.upgrade(target, revision)
    err.print(f"[green]database at {_shown(target)} is at {migrate.current_revision(target)}[/green]")


@app.command("downgrade")
def downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, e.g. -1 or base (drops every table).")],
    url: UrlOption = None,
) -> None:
    """Migrate the database down to REVISION."""
    from genenv.db import migrate

    target = _url(url)
    migrate.downgrade(target, revision)
    err.print(f"database at {_shown(target)} is at {migrate.current_revision(target) or 'base'}")


@app.command("current")
def current(url: UrlOption = None) -> None:
    """Print the database's revision and the newest one available."""
    from genenv.db import migrate

    target = _url(url)
    typer.echo(f"current: {migrate.current_revision(target) or 'base'}  head: {migrate.head_revision()}")


@app.command("revision")
def revision(
    message: Annotated[str, typer.Option("-m", "--message", help="What the revision changes.")],
    url: UrlOption = None,
) -> None:
    """Autogenerate a revision from genenv.db.models against an up-to-date database (developers)."""
    from genenv.db import migrate

    migrate.revision(_url(url), message)
