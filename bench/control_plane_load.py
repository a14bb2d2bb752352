"""Control-plane read path under load: req/s, p50/p99 latency and server CPU per request, per endpoint.

Target (issue 14, item 12): on 2 cores against Postgres, while a run is in progress, ``GET /v1/runs`` (50 per page)
and ``GET /v1/runs/{id}/epochs`` each serve ≥ 500 req/s at p99 < 50 ms, i.e. ≤ 2 ms of server CPU per request.

The server runs in the SHIPPED dependency set: a virtual environment made by a plain ``pip install .`` of this
checkout (what deploy/docker/Dockerfile.app does), not the development venv. The development venv carries extras
(vLLM, torch, uvloop through vLLM's dependencies) that can hide what a deployment gets: issue 22's ~40 ms stall per
keep-alive request with ``--workers 2`` on the stdlib event loop never showed here because of that.

One run of this script:

1. builds or refreshes the shipped venv (``--server-venv``; or uses ``--server-python`` as given);
2. creates a fresh Postgres database and seeds realistic rows: ``--runs`` runs whose configs are the shipped
   example configs (full, with every default filled in), and one run in progress with ``--epochs`` epochs carrying
   full summaries (train metrics, phase times, benchmark scores);
3. starts ``genenv serve control-plane --workers W`` on loopback for each ``--workers`` value and each event loop
   of ``--loops`` (settings.http.loop);
4. while a writer process keeps the in-progress run moving (an epoch summary and the run row updated
   ``--write-hz`` times a second, as the orchestrator does), drives each endpoint from a second process with
   ``--concurrency`` keep-alive connections for ``--seconds`` seconds (after a warm-up);
5. prints one table: req/s, p50/p99 latency, and the server processes' CPU milliseconds per request (user + system
   time of the server and its worker processes over the measured window, divided by the requests served). A
   ``GET /healthz`` row (no database, no body) gives the floor: what the HTTP stack itself costs per request. The
   title carries the load average: the machine may be shared, so compare rows of one table (ratios), not tables.

    python bench/control_plane_load.py --workers 1 2 --loops auto asyncio --seconds 10

The load generator speaks HTTP/1.1 over raw asyncio streams (hand-written, ~30 lines): on a 2-core machine the
client shares the CPU with the server, and a full HTTP client library would spend more CPU per request than the
server is allowed to (≤ 2 ms), so it would measure itself.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml
from _common import ROOT, serving
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, text

from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.repositories import epochs as epoch_repo
from genenv.db.repositories import runs as run_repo
from genenv.devstack import free_port
from genenv.inference.launcher import Started
from genenv.settings import DatabaseSettings

TOKEN = "bench-token"


@dataclass
class Measured:
    """One endpoint under one server configuration."""

    endpoint: str
    workers: int
    loop: str
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_request: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


# ---------------------------------------------------------------- seeding


def _summary(index: int) -> dict[str, Any]:
    """An epoch summary shaped like a real genenv epoch's (every field set, train metrics of both roles)."""
    train = {
        f"{role}_{key}": 0.1 * index + i
        for role in ("agent", "simulator")
        for i, key in enumerate(
            ["loss", "grad_norm", "kl", "clip_fraction", "mean_ratio", "lr", "steps", "planned_steps",
             "examples_seen", "fresh_seen", "replayed_seen", "groups_with_variance", "pool_size", "tokens"]
        )
    }
    return EpochSummary(
        p_hat=0.41 + 0.001 * index, in_band_share=0.62, mean_task_tokens=48.2, mean_response_tokens=17.9,
        tasks_valid=24, tasks_rejected=3, tasks_solved=2, tasks_unsolved=5, rollouts=144, rollout_errors=0,
        verifier_errors=0, malformed_responses=11, groups_with_variance_share=0.7, prompts_with_stats_share=1.0,
        generated_tasks_so_far=24 * (index + 1), rollouts_so_far=144 * (index + 1), simulator_kl_capped=False,
        agent_adapter_version=index, simulator_adapter_version=index,
        benchmark_scores={"arithmetic": 0.3, "bfcl": 0.21, "alfworld": 0.1},
        phase_seconds={"generate": 12.5, "rollout": 40.1, "verify": 1.2, "score": 0.4, "train": 80.3, "eval": 9.9},
        train_metrics=train,
    ).model_dump(mode="json")


def seed(url: str, n_runs: int, n_epochs: int) -> str:
    """Fill a fresh database; return the id of the run in progress."""
    migrate.upgrade(url)
    # Run configs, and the run template of each experiment file (examples/experiment-*.yaml).
    docs = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    configs = [RunConfig.model_validate(d.get("template", d)) for d in docs]
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    with session_scope(sessions) as session:
        for i in range(n_runs):
            row = run_repo.create(session, configs[i % len(configs)].model_copy(update={"name": f"bench-{i}"}))
            row.status = RunStatus.COMPLETED.value if i % 3 else RunStatus.CREATED.value
        live = run_repo.create(session, configs[0].model_copy(update={"name": "in-progress"}))
        live.status = RunStatus.RUNNING.value
        live_id = live.id
        for e in range(n_epochs):
            summary = EpochSummary.model_validate(_summary(e))
            epoch_repo.upsert(session, live_id, e, phase=EpochPhase.CLOSE, summary=summary)
    engine.dispose()
    return live_id


def writer(url: str, run_id: str, hz: float, stop: Any) -> None:
    """The orchestrator's write traffic on the run in progress: an epoch summary and the run row, ``hz`` per second."""
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    summary = EpochSummary.model_validate(_summary(0))
    i = 0
    while not stop.is_set():
        with session_scope(sessions) as session:
            epoch_repo.upsert(session, run_id, 0, phase=EpochPhase.TRAIN, summary=summary)
            row = run_repo.get(session, run_id, for_update=True)
            row.current_epoch = i % 50
        i += 1
        time.sleep(1.0 / hz)
    engine.dispose()


# ---------------------------------------------------------------- load generator


async def _read_response(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 response with a Content-Length body; return the status code."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _drive(port: int, path: str, concurrency: int, warmup: float, seconds: float) -> tuple[list[float], int]:
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Accept: application/json\r\n\r\n"
    ).encode()
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    measure_from, measure_to = t0 + warmup, t0 + warmup + seconds

    async def connection() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            start = loop.time()
            if start >= measure_to:
                break
            writer.write(request)
            status = await _read_response(reader)
            end = loop.time()
            if start >= measure_from and end <= measure_to:
                latencies.append(end - start)
                errors += status != 200
        writer.close()

    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return latencies, errors


def _load_process(port: int, path: str, concurrency: int, warmup: float, seconds: float, out: Any) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # the stdlib loop works too, at a higher client CPU cost
        pass
    out.put(asyncio.run(_drive(port, path, concurrency, warmup, seconds)))


# ---------------------------------------------------------------- server


def shipped_python(venv: Path, *, refresh: bool = True) -> Path:
    """The interpreter of a venv holding a plain (non-editable) ``pip install`` of this checkout: the dependency set
    a deployment gets. Made on first use; ``refresh`` reinstalls the package so the venv runs this checkout's code."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(ROOT)], check=True)
    elif refresh:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", str(ROOT)],
                       check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(ROOT)], check=True)
    return python


def has_uvloop(python: Path) -> bool:
    """Whether ``python``'s environment can import uvloop (settings.http.loop 'auto' then uses it)."""
    return subprocess.run([str(python), "-c", "import uvloop"], capture_output=True).returncode == 0


@contextmanager
def server(python: Path, url: str, workers: int, loop: str) -> Iterator[Started]:
    """The shipped environment's control plane on a free port, ready for load, for the ``with`` block."""
    # Only the server's own settings: the development venv's PYTHONPATH must not leak its packages into the
    # shipped environment.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GENENV_")}
    env = {
        **env,
        "GENENV_HTTP__LOOP": loop,
        "GENENV_DATABASE__URL": url,
        "GENENV_QUEUE__EAGER": "false",
        "GENENV_AUTH__TOKENS": f'["{TOKEN}"]',
        "GENENV_AUTH__REQUIRED": "true",
        "GENENV_LOGGING__LEVEL": "WARNING",
    }
    args = ["serve", "control-plane", "--workers", str(workers), "--no-migrate"]
    with serving(args, free_port(), None, timeout_s=120, poll_s=0.5, env=env, python=python) as started:
        # the master's socket accepts as soon as one worker is up; give the others a moment to finish importing
        time.sleep(2.0 * workers)
        yield started


def _server_cpu_s(proc: subprocess.Popen[bytes]) -> float:
    total = 0.0
    parent = psutil.Process(proc.pid)
    for p in [parent, *parent.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(
    proc: subprocess.Popen[bytes], port: int, endpoint: str, path: str, workers: int, loop: str,
    args: argparse.Namespace,
) -> Measured:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_load_process, args=(port, path, args.concurrency, args.warmup, args.seconds, out))
    child.start()
    time.sleep(args.warmup)
    cpu0 = _server_cpu_s(proc)
    time.sleep(args.seconds)
    cpu1 = _server_cpu_s(proc)
    latencies, errors = out.get(timeout=args.seconds + 120)
    child.join()
    n = len(latencies)
    q = statistics.quantiles(latencies, n=100) if n >= 2 else [float("nan")] * 99
    return Measured(
        endpoint=endpoint, workers=workers, loop=loop, requests=n, errors=errors, seconds=args.seconds,
        p50_ms=1000 * statistics.median(latencies) if n else float("nan"), p99_ms=1000 * q[98],
        cpu_ms_per_request=1000 * (cpu1 - cpu0) / max(n, 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
                        help="An admin URL of the Postgres server; a fresh database is created next to it.")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="uvicorn worker counts to measure.")
    parser.add_argument("--loops", nargs="+", default=["auto", "asyncio"], choices=["auto", "asyncio", "uvloop"],
                        help="Server event loops to measure (settings.http.loop; 'auto' is what a deployment runs).")
    parser.add_argument("--server-venv", type=Path, default=ROOT / ".genenv" / "bench-venv",
                        help="Venv with `pip install .` of this checkout for the server (made on first use, the "
                        "package refreshed on each run).")
    parser.add_argument("--server-python", type=Path, default=None,
                        help="Run the server with this interpreter as it is instead (e.g. a venv of another commit).")
    parser.add_argument("--runs", type=int, default=200, help="Runs seeded (the list endpoint pages 50 of them).")
    parser.add_argument("--epochs", type=int, default=50, help="Epochs with summaries of the run in progress.")
    parser.add_argument("--concurrency", type=int, default=8, help="Keep-alive connections of the load generator.")
    parser.add_argument("--seconds", type=float, default=10.0, help="Measured window per endpoint.")
    parser.add_argument("--warmup", type=float, default=2.0, help="Unmeasured load before each window.")
    parser.add_argument("--write-hz", type=float, default=20.0, help="Writes per second on the run in progress.")
    args = parser.parse_args()

    console = Console(width=160)
    python = args.server_python or shipped_python(args.server_venv)
    uvloop_there = has_uvloop(python)
    console.log(f"server interpreter {python} (uvloop {'installed' if uvloop_there else 'absent'})")
    name = f"genenv_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = args.postgres.rsplit("/", 1)[0] + f"/{name}"
    results: list[Measured] = []
    try:
        console.log(f"seeding {args.runs} runs and {args.epochs} epochs into {name}")
        live_id = seed(url, args.runs, args.epochs)
        stop = mp.get_context("spawn").Event()
        bg = mp.get_context("spawn").Process(target=writer, args=(url, live_id, args.write_hz, stop))
        bg.start()
        try:
            for workers, loop in [(w, lp) for lp in args.loops for w in args.workers]:
                if loop == "uvloop" and not uvloop_there:
                    console.log("skipping loop 'uvloop': not installed in the server's environment")
                    continue
                # What 'auto' resolves to in the server's environment.
                shown = loop if loop != "auto" else f"auto ({'uvloop' if uvloop_there else 'asyncio'})"
                with server(python, url, workers, loop) as started:
                    proc, port = started.proc, started.port
                    for endpoint, path in [
                        ("GET /v1/runs", "/v1/runs?limit=50"),
                        ("GET /v1/runs/{id}/epochs", f"/v1/runs/{live_id}/epochs?limit=50"),
                        # No database, no body: what the server stack itself costs per request.
                        ("GET /healthz (floor)", "/healthz"),
                    ]:
                        console.log(f"{endpoint}, {workers} worker(s), loop {shown}, {args.concurrency} connections")
                        results.append(measure(proc, port, endpoint, path, workers, shown, args))
        finally:
            stop.set()
            bg.join(30)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    table = Table(title=f"Control-plane read path: {os.cpu_count()} cores, Postgres, {args.concurrency} connections, "
                        f"{args.write_hz:g} writes/s on a running run; server {python}; load average {load}")
    for col in ["endpoint", "workers", "loop", "requests", "errors", "req/s", "p50 ms", "p99 ms", "server CPU ms/req",
                "req/s ≥ 500", "p99 < 50 ms"]:
        table.add_column(col, justify="left" if col == "endpoint" else "right")
    for m in results:
        table.add_row(
            m.endpoint, str(m.workers), m.loop, str(m.requests), str(m.errors), f"{m.rps:.0f}", f"{m.p50_ms:.1f}",
            f"{m.p99_ms:.1f}", f"{m.cpu_ms_per_request:.2f}", "yes" if m.rps >= 500 else "no",
            "yes" if m.p99_ms < 50 else "no",
        )
    console.print(table)


if __name__ == "__main__":
    main()
