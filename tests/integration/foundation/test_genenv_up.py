"""`genenv up` as a user runs it (issue 14, items 2 and 4): the documented ports (moved with --base-port), the
URLs and a ready-to-paste export block, and a process that dies is restarted instead of taking the stack down.

Real processes on Postgres and Redis; the vLLM URL points at a closed port (no model is served), which no process
needs in order to start.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest
from fnd_helpers import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

TOKEN = "up-token"


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _base_port() -> int:
    """A base port whose next three ports are free too."""
    for _ in range(50):
        base = free_port()
        if base + 3 < 65536 and all(_free(base + i) for i in range(1, 4)):
            return base
    raise AssertionError("no four consecutive free ports")


def _wait(pred: Callable[[], bool], timeout_s: float, what: str, out: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; genenv up printed:\n{out.read_text()[-4000:]}")


def _child(up: psutil.Process, name: str) -> psutil.Process:
    """The stack's process ``name`` (a direct child of `genenv up`; Celery retitles it '[celeryd: name-…]')."""
    for proc in up.children():
        cmd = " ".join(proc.cmdline())
        if f"worker {name}" in cmd or f"celeryd: {name}-" in cmd:
            return proc
    raise AssertionError(f"no child process {name}")


def test_up_uses_documented_ports_prints_exports_and_restarts_a_killed_worker(
    new_pg_database: Callable[[], str], redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    base = _base_port()
    env = {**os.environ, "GENENV_DATABASE__URL": new_pg_database(), "GENENV_REDIS__URL": redis_url,
           "GENENV_AUTH__TOKENS": json.dumps([TOKEN]), "GENENV_PATHS__HOME": str(tmp_path / "home"),
           "COLUMNS": "200"}
    env.pop("GENENV_AUTH__CLIENT_TOKEN", None)  # one token: `up` derives the client token from it
    out = tmp_path / "up.out"
    with out.open("wb") as fh:
        up = subprocess.Popen(
            [sys.executable, "-m", "genenv.cli.main", "up", "--vllm-url", f"http://127.0.0.1:{free_port()}",
             "--model", str(model_dir), "--base-port", str(base), "--log-dir", str(tmp_path / "logs")],
            env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
        )
    children: list[psutil.Process] = []  # each in its own session: killing `up` alone would orphan them
    try:
        export = f"export GENENV_URL=http://127.0.0.1:{base} GENENV_TOKEN={TOKEN}"
        _wait(lambda: export in out.read_text() or up.poll() is not None, 420, "the stack to be ready", out)
        assert up.poll() is None, out.read_text()[-4000:]
        text = out.read_text()
        assert (f"GENENV_SIM_URL=http://127.0.0.1:{base + 1} GENENV_VERIFIER_URL=http://127.0.0.1:{base + 2} "
                f"GENENV_CURRICULUM_URL=http://127.0.0.1:{base + 3}") in text, text[-4000:]
        runs = httpx.get(f"http://127.0.0.1:{base}/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert runs.status_code == 200, runs.text

        # kill -9 one worker: the stack stays up and the worker comes back.
        parent = psutil.Process(up.pid)
        children.extend(parent.children())
        victim = _child(parent, "rollout")
        victim.send_signal(signal.SIGKILL)
        _wait(lambda: "rollout restarted" in out.read_text(), 120, "the rollout worker's restart", out)
        assert "rollout exited with code -9" in out.read_text()
        assert up.poll() is None, out.read_text()[-4000:]
        again = _child(parent, "rollout")
        children.append(again)
        assert again.pid != victim.pid and again.is_running()
        assert httpx.get(f"http://127.0.0.1:{base + 2}/healthz", timeout=10).status_code == 200

        up.send_signal(signal.SIGTERM)  # stops the stack, exit 0
        assert up.wait(timeout=180) == 0, out.read_text()[-4000:]
        assert not psutil.pid_exists(again.pid) or again.status() == psutil.STATUS_ZOMBIE
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)  # `up` stops its own stack
            try:
                up.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait(timeout=30)
        for child in children:  # whatever is left of the stack's process groups
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_process_that_keeps_failing_at_start_stops_the_supervisor(tmp_path: Path) -> None:
    from genenv.devstack import DevStack, ProcessSpec, RestartPolicy, StackFailedError, Supervisor

    # A real `genenv` process that fails at start every time (a usage error).
    stack = DevStack(env={}, specs={"broken": ProcessSpec("broken", ["serve", "verifier", "--port", "x"])},
                     log_dir=tmp_path)
    stack.start("broken")
    lines: list[str] = []
    supervisor = Supervisor(stack, lines.append, RestartPolicy(backoff_s=0.1, max_start_failures=2))
    deadline = time.monotonic() + 120
    with pytest.raises(StackFailedError, match="broken keeps failing at start") as failed:
        while time.monotonic() < deadline:
            supervisor.check()
            time.sleep(0.1)
    assert "Invalid value" in str(failed.value)  # the process's own error, from its log
    assert supervisor.restarts == 2 and sum("restarting in" in line for line in lines) == 2, lines
    stack.stop_all()
