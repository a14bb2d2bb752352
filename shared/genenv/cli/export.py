"""``genenv export RUN_ID``: a run's generated tasks as a dataset file."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from genenv.cli.common import HomeOption, embedded_settings, err, home_database
from genenv.cli.render import stdout_console
from genenv.settings import GenEnvSettings, get_settings

console = stdout_console(140)

# Merged into the root command: `genenv export`.
app = typer.Typer()


class ExportFormat(StrEnum):
    """Output formats of ``genenv export``."""

    JSONL = "jsonl"
    PARQUET = "parquet"


class ExportStatus(StrEnum):
    """Which generated tasks ``genenv export`` writes."""

    VALID = "valid"
    REJECTED = "rejected"
    ALL = "all"


def _settings(home: Path | None) -> GenEnvSettings:
    """HOME's embedded database, else the configured one; exit 2 when a SQLite file is missing (never created)."""
    if home is not None:
        home_database(home)
        return embedded_settings(home.resolve())
    settings = get_settings()
    url = settings.database.url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        err.print(f"error: no GenEnv database at {url.removeprefix('sqlite:///')} (GENENV_DATABASE__URL); a "
                  "quickstart or experiment run's database is read with --home FOLDER", style="red", markup=False,
                  soft_wrap=True)
        raise typer.Exit(2)
    return settings


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output file.")] = Path("tasks.jsonl"),
    fmt: Annotated[ExportFormat, typer.Option("--format", help="jsonl or parquet.")] = ExportFormat.JSONL,
    status: Annotated[ExportStatus, typer.Option(help="Which tasks: valid, rejected or all.")] = ExportStatus.VALID,
    home: HomeOption = None,
) -> None:
    """Write a run's generated tasks with their success statistics for verl / TRL dataset loaders."""
    from sqlalchemy.exc import SQLAlchemyError

    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.models import RunRow
    from genenv_orchestrator.export import export_rows, write_jsonl, write_parquet

    settings = _settings(home)
    engine = make_engine(settings.database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            if s.get(RunRow, run_id) is None:
                err.print(f"error: run {run_id!r} not found in {engine.url.render_as_string(hide_password=True)}",
                          style="red", markup=False, soft_wrap=True)
                raise typer.Exit(2)
            rows = export_rows(s, run_id, status=status.value)
    except SQLAlchemyError as exc:  # no schema (never migrated), a foreign file, a database that is down
        cause: BaseException = getattr(exc, "orig", None) or exc
        first = (str(cause).splitlines() or [""])[0]
        err.print(f"error: cannot read runs from {engine.url.render_as_string(hide_password=True)}: "
                  f"{type(cause).__name__}: {first}", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    finally:
        engine.dispose()
    # Written only now: a failed read leaves no empty or partial file behind.
    (write_parquet if fmt is ExportFormat.PARQUET else write_jsonl)(rows, out)
    console.print(f"wrote {len(rows)} tasks to {out}", markup=False)
