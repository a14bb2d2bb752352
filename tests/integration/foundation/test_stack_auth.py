"""One token setting for a stack started together (issue 14, item 3): `genenv up` derives the client token or
refuses to start, and every worker checks at start-up that the services it calls accept its credentials.

The services are real `genenv serve` processes with auth on; the workers are real `genenv worker` processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fnd_helpers import free_port

from genenv.db.migrate import upgrade

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

TOKEN = "stack-token"
CALLED = ("simulator", "verifier", "curriculum")  # what the orchestrator calls


@pytest.fixture(scope="module")
def services(
    new_pg_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The services the orchestrator calls, with auth on; yields the worker's environment (no client token)."""
    db_url = new_pg_database()
    upgrade(db_url)
    logs = tmp_path_factory.mktemp("logs")
    env = {**os.environ, "GENENV_DATABASE__URL": db_url, "GENENV_AUTH__TOKENS": json.dumps([TOKEN]),
           "GENENV_INFERENCE__BACKEND": "local"}
    env.pop("GENENV_AUTH__CLIENT_TOKEN", None)
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for name in CALLED:
            port = free_port()
            with (logs / f"{name}.log").open("wb") as log:
                procs.append(subprocess.Popen([sys.executable, "-m", "genenv.cli.main", "serve", name, "--port",
                                               str(port)], env=env, stdout=log, stderr=subprocess.STDOUT))
            urls[name] = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        for name, url in urls.items():
            while True:
                assert time.monotonic() < deadline, (logs / f"{name}.log").read_text()[-3000:]
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
        yield {**env, **{f"GENENV_SERVICES__{n.upper()}": u for n, u in urls.items()}}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _run(args: list[str], env: dict[str, str], log: Path, timeout_s: float) -> int | None:
    """Run a genenv command in its own process group; its exit code, or None if still running at the timeout."""
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "genenv.cli.main", *args], env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_a_worker_without_the_client_token_refuses_to_start(services: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    code = _run(["worker", "orchestrator", "--hostname", f"preflight-{os.getpid()}@%h"], services, log, 90)
    text = log.read_text()
    assert code == 2, f"the worker did not refuse to start (exit {code}):\n{text[-3000:]}"
    assert "GENENV_AUTH__CLIENT_TOKEN" in text and all(f"{n} at http" in text for n in CALLED), text[-3000:]

    code = _run(["worker", "orchestrator"], {**services, "GENENV_AUTH__CLIENT_TOKEN": "wrong"}, log, 90)
    assert code == 2 and "(403)" in log.read_text(), log.read_text()[-3000:]


def test_a_worker_with_the_right_token_says_so_and_starts(
    services: dict[str, str], redis_url: str, tmp_path: Path
) -> None:
    env = {**services, "GENENV_AUTH__CLIENT_TOKEN": TOKEN, "GENENV_REDIS__URL": redis_url,
           "GENENV_QUEUE__EAGER": "false"}
    log = tmp_path / "worker.log"
    code = _run(["worker", "orchestrator", "--hostname", f"preflight-ok-{os.getpid()}@%h"], env, log, 20)
    text = log.read_text()
    assert code is None, f"the worker exited ({code}):\n{text[-3000:]}"
    for name in CALLED:
        assert f"orchestrator worker → {name} at {services[f'GENENV_SERVICES__{name.upper()}']}: credentials " \
               "accepted" in text, text[-3000:]


def test_genenv_up_with_several_tokens_and_no_client_token_refuses_to_start(tmp_path: Path) -> None:
    env = {**os.environ, "GENENV_AUTH__TOKENS": json.dumps(["a-token", "b-token"]),
           "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'x.db'}"}
    env.pop("GENENV_AUTH__CLIENT_TOKEN", None)
    log = tmp_path / "up.log"
    code = _run(["up", "--log-dir", str(tmp_path / "logs")], env, log, 60)
    assert code == 2 and "GENENV_AUTH__CLIENT_TOKEN" in log.read_text(), log.read_text()[-3000:]
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())  # nothing was started


def test_stack_auth_derives_the_one_token_and_checks_the_client_token() -> None:
    from genenv.devstack import StackConfigError, stack_auth

    assert stack_auth(["only"], None) == (["only"], "only")
    assert stack_auth(["a", "b"], "b") == (["a", "b"], "b")
    assert stack_auth([], None) == ([], None)
    with pytest.raises(StackConfigError, match="GENENV_AUTH__CLIENT_TOKEN"):
        stack_auth(["a", "b"], None)
    with pytest.raises(StackConfigError, match="not one of GENENV_AUTH__TOKENS"):
        stack_auth(["a"], "c")
