"""Hostile inputs against every HTTP service as a real process on Postgres (issue 14, items 4, 5, 7, 8, 11).

Each service is `genenv serve <name>` under uvicorn with auth on; the inference backend points at a closed port,
so any request that reaches the model instead of being refused up front shows up as slow or as a 503.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fnd_helpers import free_port

from genenv.db.migrate import upgrade

pytestmark = pytest.mark.postgres

TOKEN = "hardening-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SERVICES = ("control-plane", "simulator", "verifier", "curriculum")


@pytest.fixture(scope="module")
def stack(new_pg_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The four HTTP services on one migrated private Postgres database; yields name → base URL."""
    db_url = new_pg_database()
    upgrade(db_url)
    logs = tmp_path_factory.mktemp("logs")
    dead = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "GENENV_DATABASE__URL": db_url,
        "GENENV_AUTH__TOKENS": json.dumps([TOKEN]),
        "GENENV_INFERENCE__BACKEND": "vllm",
        "GENENV_INFERENCE__CONNECT_RETRIES": "0",
        "GENENV_SERVICES__VLLM_AGENT": dead,
        "GENENV_SERVICES__VLLM_SIMULATOR": dead,
        "GENENV_LOGGING__JSON_LOGS": "true",
        "GENENV_HTTP__HEADER_TIMEOUT_S": "1",
    }
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for name in SERVICES:
            port = free_port()
            with (logs / f"{name}.log").open("wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "genenv.cli.main", "serve", name, "--port", str(port)],
                    env=env, stdout=log, stderr=subprocess.STDOUT,
                ))
            urls[name] = f"http://127.0.0.1:{port}"
        for (name, url), proc in zip(urls.items(), procs, strict=True):
            deadline = time.monotonic() + 90
            while True:
                log_text = (logs / f"{name}.log").read_text(errors="replace")
                assert proc.poll() is None, log_text
                assert time.monotonic() < deadline, f"{name} not healthy: {log_text}"
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
        urls["logs"] = str(logs)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)


def _post(url: str, body: object | str) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(url, content=content, headers={**AUTH, "Content-Type": "application/json"}, timeout=60)


def _error(resp: httpx.Response, status: int, param: str) -> dict[str, str]:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"] == param, error
    return dict(error)


@pytest.mark.parametrize(
    ("service", "path", "body", "param"),
    [
        ("simulator", "/v1/tasks:generate", {"domain": "arithmetic", "run_id": "r", "epoch": 2**31}, "epoch"),
        ("curriculum", "/v1/score", {"run_id": "r", "epoch": 2**31}, "epoch"),
        ("verifier", "/v1/benchmarks/bfcl/evaluate", {"run_id": "r", "epoch": 2**31, "limit": 1}, "epoch"),
        ("curriculum", "/v1/score", '{"counts": [{"key": "s", "k": 1, "n": 2}], "beta": Infinity}', "beta"),
        ("curriculum", "/v1/score", '{"counts": [{"key": "s", "k": 1, "n": 2}], "rwr_lambda": 1e309}', "rwr_lambda"),
        ("control-plane", "/v1/runs", '{"config": {"curriculum": {"alpha": NaN}}}', "config.curriculum.alpha"),
        ("control-plane", "/v1/runs", '{"config": {"agent": {"max_grad_norm": 1e309}}}', "config.agent.max_grad_norm"),
    ],
)
def test_out_of_range_numbers_are_422_naming_the_field(
    stack: dict[str, str], service: str, path: str, body: object, param: str
) -> None:
    _error(_post(stack[service] + path, body), 422, param)


def test_curriculum_path_and_query_epochs_are_bounded(stack: dict[str, str]) -> None:
    url = stack["curriculum"]
    resp = httpx.get(f"{url}/v1/runs/r/epochs/{2**31}/scores", headers=AUTH)
    _error(resp, 422, "path.epoch")
    _error(httpx.get(f"{url}/v1/runs/r/ledger/tasks", params={"epoch": 2**31}, headers=AUTH), 422, "query.epoch")


def test_simulator_refuses_a_request_beyond_its_generation_budget_up_front(stack: dict[str, str]) -> None:
    seeds = [{"id": f"s{i}", "payload": {"expression": "1+1"}} for i in range(256)]
    started = time.monotonic()
    resp = _post(f"{stack['simulator']}/v1/tasks:generate",
                 {"domain": "arithmetic", "seeds": seeds, "n": 64, "max_tokens": 16384})
    err = _error(resp, 422, "max_tokens")
    assert err["code"] == "generation_budget_exceeded" and time.monotonic() - started < 5
    assert "268435456 tokens" in err["message"] and "budget of 4194304" in err["message"]


def test_verifier_checks_the_run_before_running_the_benchmark(stack: dict[str, str]) -> None:
    started = time.monotonic()
    resp = _post(f"{stack['verifier']}/v1/benchmarks/bfcl/evaluate", {"run_id": "no-such-run", "limit": 50})
    err = _error(resp, 404, "run_id")
    # The backend is a closed port: had the benchmark run first, 50 items would have failed before this answer.
    assert err["code"] == "run_not_found" and time.monotonic() - started < 5


def test_half_sent_headers_do_not_hold_a_connection(stack: dict[str, str]) -> None:
    port = int(stack["control-plane"].rsplit(":", 1)[1])
    for partial in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", b"GE"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(partial)
            started = time.monotonic()
            assert sock.recv(1024) == b""  # the server closed it (no token, no complete request)
            assert time.monotonic() - started < 4
    # A keep-alive connection is served, then closed when the next request's headers stall.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"status":"ok"}'):
            answer += sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        started = time.monotonic()
        assert sock.recv(1024) == b"" and time.monotonic() - started < 4


@pytest.mark.parametrize("service", ["simulator", "verifier"])
def test_simulator_and_verifier_log_like_the_other_services(stack: dict[str, str], service: str) -> None:
    resp = httpx.get(f"{stack[service]}/v1/nope", headers={**AUTH, "X-Request-Id": f"probe-{service}"})
    assert resp.status_code == 404
    lines = [line for line in Path(stack["logs"], f"{service}.log").read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines if line.startswith("{")]
    # GENENV_LOGGING__JSON_LOGS is honoured: uvicorn's own lines come through the project's JSON handler.
    assert records and len(records) == len(lines), lines
    assert {"ts", "level", "logger", "message", "request_id"} <= set(records[0])
    assert any(r["logger"].startswith("uvicorn") for r in records)
