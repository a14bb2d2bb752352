"""``genenv runs ...``: create, inspect and steer runs through the typed control-plane client."""

from __future__ import annotations

import enum
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel
from rich import box
from rich.console import Console
from rich.table import Table

from genenv.cli.common import (
    NO_EXECUTOR_HINT,
    HomeOption,
    JsonOption,
    UrlOption,
    control_plane_url,
    err,
    read_target,
    require_executor,
    run_client,
)
from genenv.cli.documents import ConfigFileError, load_model
from genenv.clients.control_plane import ControlPlaneClient
from genenv.contracts.epochs import Epoch
from genenv.contracts.runs import Run, RunAction, RunConfig, RunStatus
from genenv.contracts.tasks import TaskStatus
from genenv.settings import get_settings

# Rich's own width (80 columns when piped), as this group has always printed.
out = Console()
RunIdArgument = Annotated[str, typer.Argument(help="Run id.")]


class TaskFilter(enum.StrEnum):
    """Which generations ``runs tasks`` lists."""

    REJECTED = "rejected"
    VALID = "valid"
    ALL = "all"


app = typer.Typer(help="Create, inspect and steer co-evolution runs.", no_args_is_help=True)


def load_run_config(path: Path) -> RunConfig:
    """A RunConfig from a JSON or YAML file holding either the config or {"config": {...}}, or exit 2 with each
    problem as FILE:LINE:COL: field: message."""
    try:
        return load_model(path, RunConfig, unwrap="config")
    except ConfigFileError as exc:
        for line in exc.lines:
            err.print(line, style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None


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


@app.command("create")
def create(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Run config (JSON or YAML).")],
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a run from a run-config FILE (fields not given take their defaults)."""
    config = load_run_config(file)
    run = run_client(get_settings(), url, lambda c: c.create_run(config))
    if as_json:
        _print(run, True)
    else:
        out.print(f"created run [bold]{run.id}[/bold] ({run.status.value})")


@app.command("list")
def list_(
    status: Annotated[RunStatus | None, typer.Option(help="Only runs in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Runs per page.")] = 20,
    cursor: Annotated[str | None, typer.Option(help="next_cursor printed by the previous page.")] = None,
    url: UrlOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first."""
    settings, url = read_target(home, url)
    page = run_client(settings, url, lambda c: c.list_runs(status=status, cursor=cursor, limit=limit))
    if as_json:
        _print(page, True)
        return
    out.print(_runs_table(page.items))
    if page.next_cursor:
        out.print(f"more: --cursor {page.next_cursor}")


@app.command("show")
def show(run_id: RunIdArgument, url: UrlOption = None, home: HomeOption = None) -> None:
    """Show one run with its config (JSON)."""
    settings, url = read_target(home, url)
    _print(run_client(settings, url, lambda c: c.get_run(run_id)), True)


def _act(run_id: str, action: RunAction, url: str | None) -> None:
    settings = get_settings()
    if action in ("start", "resume"):
        require_executor(settings, url)
    run = run_client(settings, url, lambda c: c.act(run_id, action))
    out.print(f"run [bold]{run.id}[/bold] is {run.status.value}")


@app.command("start")
def start(run_id: RunIdArgument, url: UrlOption = None) -> None:
    """Start a run (POST /v1/runs/ID/start)."""
    _act(run_id, "start", url)


@app.command("pause")
def pause(run_id: RunIdArgument, url: UrlOption = None) -> None:
    """Pause a run (POST /v1/runs/ID/pause)."""
    _act(run_id, "pause", url)


@app.command("resume")
def resume(run_id: RunIdArgument, url: UrlOption = None) -> None:
    """Resume a run (POST /v1/runs/ID/resume)."""
    _act(run_id, "resume", url)


@app.command("cancel")
def cancel(run_id: RunIdArgument, url: UrlOption = None) -> None:
    """Cancel a run (POST /v1/runs/ID/cancel)."""
    _act(run_id, "cancel", url)


@app.command("watch")
def watch(
    run_id: RunIdArgument,
    url: UrlOption = None,
    home: HomeOption = None,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 2.0,
) -> None:
    """Show live epoch progress (the epoch table) until the run stops: completed, failed, paused, cancelled (or
    not started yet)."""
    from rich.console import Group, RenderableType
    from rich.live import Live
    from rich.text import Text

    from genenv.cli.render import epoch_table, waiting_line
    from genenv.lifecycle import RUN_AT_REST

    settings, url = read_target(home, url)

    async def snapshot(c: ControlPlaneClient) -> tuple[Run, RenderableType]:
        run = await c.get_run(run_id)
        epochs = await _all_epochs(c, run_id)
        title = f"run {run.id} · {run.status.value} · epoch {run.current_epoch + 1}/{run.config.epochs}"
        band = run.config.curriculum
        table = epoch_table(epochs, title=title, alpha=band.alpha, k_min=band.k_min)
        if run.waiting_on is None:
            return run, table
        # Under the table: a run that waits for a dependency says so, instead of looking stuck.
        return run, Group(table, Text(waiting_line(run.waiting_on), style="yellow", no_wrap=False))

    run, table = run_client(settings, url, snapshot)
    if run.status not in RUN_AT_REST and control_plane_url(settings, url) == "inprocess" and settings.queue.eager:
        # Nothing in this process advances the run: refreshing would wait for good. Show where it stands.
        out.print(table)
        err.print(f"error: run {run.id} is {run.status.value} but {NO_EXECUTOR_HINT}", style="red", markup=False,
                  soft_wrap=True)
        raise typer.Exit(2)
    with Live(table, console=out, refresh_per_second=4) as live:
        while run.status not in RUN_AT_REST:
            time.sleep(interval)
            run, table = run_client(settings, url, snapshot)
            live.update(table)
    if run.error:
        err.print(f"error: {run.error}", style="red", markup=False)


@app.command("plot")
def plot(
    run_id: RunIdArgument,
    out_file: Annotated[
        Path | None, typer.Option("--out", dir_okay=False, help="PNG to write (default: RUN_ID-curves.png).")
    ] = None,
    url: UrlOption = None,
    home: HomeOption = None,
) -> None:
    """Draw the run's training-dynamics curves (the dashboard's charts) into a PNG, e.g. for CI artifacts."""
    from genenv.observability.plot import build_figure  # a missing matplotlib (`bench` extra): cli.main's hint

    async def fetch(c: ControlPlaneClient) -> tuple[Run, list[Epoch]]:
        return await c.get_run(run_id), await _all_epochs(c, run_id)

    settings, url = read_target(home, url)
    run, epochs = run_client(settings, url, fetch)
    # The server's id (hex), not the argument, names the default file: no path tricks through RUN_ID.
    target = out_file or Path(f"{run.id}-curves.png")
    build_figure(run, epochs).savefig(target, dpi=100)
    done = sum(e.summary is not None for e in epochs)
    out.print(f"wrote {target} ({done} summarised epoch(s) of {len(epochs)})", markup=False, soft_wrap=True)


TEXT_CHARS = 120
"""A task's text in the table: this many characters of one line (--json prints it whole)."""


def _shorten(text: str, width: int = TEXT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@app.command("tasks")
def tasks(
    run_id: RunIdArgument,
    epoch: Annotated[int, typer.Option("--epoch", min=0, help="The epoch whose generations to list.")],
    status: Annotated[
        TaskFilter, typer.Option("--status", help="rejected, valid or all.", case_sensitive=False)
    ] = TaskFilter.ALL,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Generations to list (the first ones).")] = 50,
    url: UrlOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """List an epoch's generations with status, rejection reason and text (GET /v1/runs/ID/tasks): why the
    epoch table says 0/24."""
    from genenv.cli.render import stdout_console
    from genenv.rejections import rejection_hint

    wanted = None if status is TaskFilter.ALL else TaskStatus(status.value)
    settings, url = read_target(home, url)
    page = run_client(settings, url, lambda c: c.list_tasks(run_id, epoch=epoch, status=wanted, limit=limit))
    if as_json:
        _print(page, True)
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("id", "seed", "var", "status", "reason", "text"):
        table.add_column(column, overflow="fold", no_wrap=column != "text")
    for t in page.items:
        # A rejected generation shows what the simulator wrote; a valid one its task.
        text = t.raw_text if t.status is TaskStatus.REJECTED or t.payload is None else json.dumps(t.payload)
        reason = t.rejection_reason or ""
        if t.rejection_detail:
            reason = f"{reason}: {t.rejection_detail}"
        table.add_row(str(t.id), t.seed_id or "—", str(t.variation), t.status.value, _shorten(reason, 60) or "—",
                      _shorten(text) or "—")
    # The text column needs room: the terminal's width, or 160 columns in a pipe or log (not Rich's 80).
    wide = stdout_console()
    wide.print(table)
    shown = sorted({t.rejection_reason for t in page.items if t.rejection_reason})
    for reason in shown:
        wide.print(f"{reason}: {rejection_hint(reason)}", markup=False, soft_wrap=True)
    if page.next_cursor:
        wide.print(f"more than {limit}: raise --limit (at most 500) or use GET /v1/runs/ID/tasks with its cursor",
                  markup=False)
