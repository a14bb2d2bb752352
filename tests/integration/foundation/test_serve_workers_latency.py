"""`genenv serve control-plane --workers 2` without uvloop answers keep-alive requests without a delayed-ACK stall
(issue 22, item 1).

uvicorn's multi-worker path binds its listener with proto 0, so the stdlib event loop never set TCP_NODELAY on the
accepted connections; each response's second write (the body) then waited for the client's delayed ACK, ~40 ms on
Linux, on every request after the first on a connection. uvloop sets the option itself, so the server here runs
where uvloop cannot be imported: a shim package first on PYTHONPATH, inherited by uvicorn's spawned workers — the
environment of an install without uvloop.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fnd_helpers import free_port

pytestmark = pytest.mark.slow

REQUESTS = 40


@pytest.fixture(scope="module")
def two_workers_without_uvloop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The control plane on SQLite, two uvicorn workers, uvloop not importable; its base URL."""
    tmp = tmp_path_factory.mktemp("serve-workers")
    shim = tmp / "shim" / "uvloop"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("uvloop is hidden for this test")\n')
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shim.parent), os.environ.get("PYTHONPATH", "")]),
        "GENENV_DATABASE__URL": f"sqlite:///{tmp / 'cp.db'}",
        "GENENV_PATHS__HOME": str(tmp),
        "GENENV_LOGGING__LEVEL": "WARNING",
    }
    log = tmp / "server.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "genenv.cli.main", "serve", "control-plane", "--port", str(port),
             "--workers", "2", "--migrate"],
            env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, f"not healthy: {log.read_text(errors='replace')}"
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        time.sleep(3)  # the socket answers once one worker is up; let the second finish importing
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def _keep_alive_latencies(port: int, n: int) -> list[float]:
    """Seconds per request of ``n`` sequential GET /healthz on one keep-alive connection (the client sets
    TCP_NODELAY itself, so any wait is the server's)."""
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = sock.makefile("rb")
        for _ in range(n):
            start = time.perf_counter()
            sock.sendall(request)
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            stream.read(length)
            out.append(time.perf_counter() - start)
    return out


def test_two_workers_on_the_stdlib_loop_answer_keep_alive_requests_without_a_stall(
    two_workers_without_uvloop: str,
) -> None:
    port = int(two_workers_without_uvloop.rsplit(":", 1)[1])
    latencies = _keep_alive_latencies(port, REQUESTS)[1:]  # the first request never waits for an ACK
    median_ms = 1000 * statistics.median(latencies)
    # With Nagle on, every request waits for the client's delayed ACK: ≥ 40 ms (Linux's minimum delayed-ACK timer).
    # Without, /healthz takes about a millisecond; 20 ms leaves room for a loaded 2-core machine.
    assert median_ms < 20, f"median {median_ms:.1f} ms per keep-alive request: {[round(1000 * x) for x in latencies]}"


def test_the_shim_really_hides_uvloop(tmp_path: Path) -> None:
    """The fixture's premise: with the shim first on the path, uvloop cannot be imported (so the server above ran
    on asyncio's loop even in the development venv, which has uvloop)."""
    shim = tmp_path / "uvloop"
    shim.mkdir()
    (shim / "__init__.py").write_text('raise ImportError("hidden")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    code = subprocess.run([sys.executable, "-c", "import uvloop"], env=env, capture_output=True).returncode
    assert code != 0
