"""``genenv export RUN_ID``: a run's generated tasks as a dataset file."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from genenv.cli.render import stdout_console
from genenv.settings import get_settings

console = stdout_console(140)

# Merged into the root command: `genenv export`.
app = typer.Typer()


class ExportFormat(StrEnum):
    """Output formats of ``genenv export``."""

    JSONL = "jsonl"
    PARQUET = "parquet"


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output file.")] = Path("tasks.jsonl"),
    fmt: Annotated[ExportFormat, typer.Option("--format", help="jsonl or parquet.")] = ExportFormat.JSONL,
    status: Annotated[str, typer.Option(help="valid | rejected | all")] = "valid",
) -> None:
    """Write a run's generated tasks with their success statistics for verl / TRL dataset loaders."""
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv_orchestrator.export import export_rows, write_jsonl, write_parquet

    settings = get_settings()
    engine = make_engine(settings.database)
    with session_scope(make_session_factory(engine)) as s:
        rows = export_rows(s, run_id, status=status)
    engine.dispose()
    (write_parquet if fmt is ExportFormat.PARQUET else write_jsonl)(rows, out)
    console.print(f"wrote {len(rows)} tasks to {out}")
