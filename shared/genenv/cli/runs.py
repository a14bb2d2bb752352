"""CLI commands of the runs area: ``genenv serve control-plane`` and ``genenv runs ...`` (via the typed client)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
from pydantic import BaseModel, ValidationError
from rich import box
from rich.console import Console
from rich.table import Table

from genenv.clients.base import ApiError
from genenv.clients.control_plane import ControlPlaneClient
from genenv.contracts.epochs import Epoch
from genenv.contracts.runs import Run, RunAction, RunConfig, RunStatus
from genenv.settings import GenEnvSettings, get_settings

out = Console()
err = Console(stderr=True)
R = TypeVar("R")

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Control-plane base URL (default GENENV_SERVICES__CONTROL_PLANE; 'inprocess' = this process, "
        "on the configured database).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def read_document(path: Path) -> Any:
    """The parsed content of a YAML (.yaml, .yml) or JSON file."""
    text = path.read_text()
    if path.suffix in {".yaml", ".yml"}:
        import yaml

        return yaml.safe_load(text)
    return json.loads(text)


def _load_config(path: Path) -> RunConfig:
    """A RunConfig from a JSON or YAML file holding either the config or {"config": {...}}."""
    data = read_document(path)
    if isinstance(data, dict) and set(data) == {"config"}:
        data = data["config"]
    return RunConfig.model_validate(data or {})


def _run_client(settings: GenEnvSettings, url: str | None, call: Callable[[ControlPlaneClient], Awaitable[R]]) -> R:
    """Call the control plane once: over HTTP, or in-process on the configured database."""
    base = url or settings.services.control_plane
    token = settings.auth.client_token.get_secret_value() if settings.auth.client_token else None

    async def go() -> R:
        if base != "inprocess":
            async with ControlPlaneClient(base, token=token) as client:
                return await call(client)
        from genenv.db.migrate import upgrade
        from genenv_control_plane.app import create_app

        if settings.database.url.startswith("sqlite"):
            upgrade(settings.database.url)  # the embedded default has nobody else to create the schema
        app = create_app(settings)
        try:
            transport = httpx.ASGITransport(app=app)
            async with ControlPlaneClient("http://control-plane", token=token, transport=transport) as client:
                return await call(client)
        finally:
            app.state.control_plane.close()

    try:
        return asyncio.run(go())
    except ApiError as exc:
        where = f" [{exc.param}]" if exc.param else ""
        err.print(f"error{where}: {exc.message}", style="red", markup=False)
        raise typer.Exit(2 if exc.status_code is not None and exc.status_code < 500 else 1) from exc


async def _all_epochs(client: ControlPlaneClient, run_id: str) -> list[Epoch]:
    """Every epoch of a run (all pages)."""
    items: list[Epoch] = []
    cursor: str | None = None
    while True:
        page = await client.list_epochs(run_id, cursor=cursor, limit=500)
        items.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return items


def _print(model: BaseModel, as_json: bool) -> None:
    if as_json:
        typer.echo(model.model_dump_json(indent=2))
    else:
        out.print_json(model.model_dump_json())


def _runs_table(rows: list[Run]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("epoch", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    table.add_column("name", overflow="fold")
    for r in rows:
        created = r.created_at.strftime("%m-%d %H:%M")
        table.add_row(r.id, r.status.value, f"{r.current_epoch}/{r.config.epochs}", created, r.name)
    return table


def register(app: typer.Typer, serve_app: typer.Typer, worker_app: typer.Typer) -> None:
    """Attach this area's commands."""
    runs_app = typer.Typer(help="Create, inspect and steer co-evolution runs.", no_args_is_help=True)
    app.add_typer(runs_app, name="runs")

    @serve_app.command("control-plane")
    def serve_control_plane(
        host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
        workers: Annotated[
            int,
            typer.Option(
                min=1, max=64, help="Server processes sharing the port (one per core the API may use)."
            ),
        ] = 1,
        migrate: Annotated[
            bool | None,
            typer.Option("--migrate/--no-migrate", help="Upgrade the schema first (default: only on SQLite)."),
        ] = None,
    ) -> None:
        """Start the control-plane REST API (uvicorn)."""
        from genenv.http.serve import serve, serve_workers
        from genenv.logging import setup_logging
        from genenv_control_plane.app import create_app

        settings = get_settings()
        setup_logging(settings.logging)
        if migrate if migrate is not None else settings.database.url.startswith("sqlite"):
            from genenv.db.migrate import upgrade

            upgrade(settings.database.url)
        if workers > 1:
            serve_workers("genenv_control_plane.app:create_app", settings, host=host, port=port, workers=workers)
        else:
            serve(create_app(settings), settings, host=host, port=port)

    @runs_app.command("create")
    def create(
        file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Run config (JSON or YAML).")],
        url: UrlOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Create a run from a run-config FILE (fields not given take their defaults)."""
        try:
            config = _load_config(file)
        except ValidationError as exc:
            for e in exc.errors():
                where = ".".join(str(p) for p in e["loc"]) or "config"
                err.print(f"{where}: {e['msg']}", style="red", markup=False)
            raise typer.Exit(2) from exc
        run = _run_client(get_settings(), url, lambda c: c.create_run(config))
        if as_json:
            _print(run, True)
        else:
            out.print(f"created run [bold]{run.id}[/bold] ({run.status.value})")

    @runs_app.command("list")
    def list_(
        status: Annotated[RunStatus | None, typer.Option(help="Only runs in this status.")] = None,
        limit: Annotated[int, typer.Option(min=1, max=500, help="Runs per page.")] = 20,
        cursor: Annotated[str | None, typer.Option(help="next_cursor printed by the previous page.")] = None,
        url: UrlOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List runs, newest first."""
        page = _run_client(get_settings(), url, lambda c: c.list_runs(status=status, cursor=cursor, limit=limit))
        if as_json:
            _print(page, True)
            return
        out.print(_runs_table(page.items))
        if page.next_cursor:
            out.print(f"more: --cursor {page.next_cursor}")

    @runs_app.command("show")
    def show(run_id: Annotated[str, typer.Argument(help="Run id.")], url: UrlOption = None) -> None:
        """Show one run with its config (JSON)."""
        _print(_run_client(get_settings(), url, lambda c: c.get_run(run_id)), True)

    def _action(action: RunAction) -> None:
        @runs_app.command(action)
        def command(run_id: Annotated[str, typer.Argument(help="Run id.")], url: UrlOption = None) -> None:
            run = _run_client(get_settings(), url, lambda c: c.act(run_id, action))
            out.print(f"run [bold]{run.id}[/bold] is {run.status.value}")

        command.__doc__ = f"{action.capitalize()} a run (POST /v1/runs/ID/{action})."

    for name in ("start", "pause", "resume", "cancel"):
        _action(name)

    @runs_app.command("watch")
    def watch(
        run_id: Annotated[str, typer.Argument(help="Run id.")],
        url: UrlOption = None,
        interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 2.0,
    ) -> None:
        """Show live epoch progress (the epoch table) until the run completes, fails, pauses or is cancelled."""
        from rich.live import Live

        from genenv.cli.render import epoch_table

        settings = get_settings()
        done = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.PAUSED}

        async def snapshot(c: ControlPlaneClient) -> tuple[Run, Table]:
            run = await c.get_run(run_id)
            epochs = await _all_epochs(c, run_id)
            title = f"run {run.id} · {run.status.value} · epoch {run.current_epoch + 1}/{run.config.epochs}"
            band = run.config.curriculum
            return run, epoch_table(epochs, title=title, alpha=band.alpha, k_min=band.k_min)

        run, table = _run_client(settings, url, snapshot)
        with Live(table, console=out, refresh_per_second=4) as live:
            while run.status not in done:
                time.sleep(interval)
                run, table = _run_client(settings, url, snapshot)
                live.update(table)
        if run.error:
            err.print(f"error: {run.error}", style="red", markup=False)

    @runs_app.command("plot")
    def plot(
        run_id: Annotated[str, typer.Argument(help="Run id.")],
        out_file: Annotated[
            Path | None, typer.Option("--out", dir_okay=False, help="PNG to write (default: RUN_ID-curves.png).")
        ] = None,
        url: UrlOption = None,
    ) -> None:
        """Draw the run's training-dynamics curves (the dashboard's charts) into a PNG, e.g. for CI artifacts."""
        try:
            from genenv.observability.plot import build_figure
        except ImportError as exc:  # matplotlib comes with the `bench` extra only
            err.print(f"plotting needs matplotlib: pip install 'genenv[bench]' ({exc})", style="red", markup=False)
            raise typer.Exit(1) from exc

        async def fetch(c: ControlPlaneClient) -> tuple[Run, list[Epoch]]:
            return await c.get_run(run_id), await _all_epochs(c, run_id)

        run, epochs = _run_client(get_settings(), url, fetch)
        # The server's id (hex), not the argument, names the default file: no path tricks through RUN_ID.
        target = out_file or Path(f"{run.id}-curves.png")
        build_figure(run, epochs).savefig(target, dpi=100)
        done = sum(e.summary is not None for e in epochs)
        out.print(f"wrote {target} ({done} summarised epoch(s) of {len(epochs)})", markup=False, soft_wrap=True)
