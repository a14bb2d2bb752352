"""The scripts the images run: wait-for, the migration entrypoint, the vLLM launch script, the Celery probe."""

from __future__ import annotations

import http.server
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "deploy" / "scripts"
LAUNCH = Path(__file__).resolve().parents[2] / "deploy" / "vllm" / "launch.sh"
VENV_BIN = str(Path(sys.executable).parent)


def run(args: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command with the test interpreter's folder first on PATH."""
    full = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **(env or {})}
    return subprocess.run(args, capture_output=True, text=True, check=False, env=full, timeout=timeout)


def wait_for(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run deploy/scripts/wait-for.py."""
    return run([sys.executable, str(SCRIPTS / "wait-for.py"), *args], env=env)


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A TCP port with a listener."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    """A TCP port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_url() -> Iterator[str]:
    """A local HTTP server: /ok answers 200, anything else 503."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/ok" else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_wait_for_tcp_http_and_file(listening_port: int, http_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "config.json"
    marker.write_text("{}")
    out = wait_for("--timeout", "5", f"tcp://127.0.0.1:{listening_port}", f"{http_url}/ok", f"file://{marker}")
    assert out.returncode == 0, out.stderr


def test_wait_for_times_out_on_what_is_down(closed_port: int, http_url: str, tmp_path: Path) -> None:
    start = time.monotonic()
    out = wait_for(
        "--timeout",
        "1",
        "--interval",
        "0.2",
        f"tcp://127.0.0.1:{closed_port}",
        f"{http_url}/bad",
        f"file://{tmp_path}/missing/config.json",
    )
    assert out.returncode == 1
    assert time.monotonic() - start < 15
    for part in (f"tcp://127.0.0.1:{closed_port}", f"{http_url}/bad", "missing/config.json"):
        assert part in out.stderr


def test_wait_for_reads_database_urls_from_env_without_printing_passwords(
    listening_port: int, closed_port: int
) -> None:
    ok = wait_for(
        "--timeout",
        "3",
        "--from-env",
        "DB",
        env={"DB": f"postgresql+psycopg://genenv:s3cret@127.0.0.1:{listening_port}/genenv"},
    )
    assert ok.returncode == 0, ok.stderr
    down = wait_for(
        "--timeout",
        "0.5",
        "--from-env",
        "DB",
        env={"DB": f"postgresql+psycopg://genenv:s3cret@127.0.0.1:{closed_port}/genenv"},
    )
    assert down.returncode == 1 and "s3cret" not in down.stderr and "genenv:***@" in down.stderr
    assert wait_for("--from-env", "UNSET_VARIABLE_X").returncode == 2
    assert wait_for("ftp://example.invalid/x").returncode == 2


def test_wait_for_execs_the_command_after_the_targets(listening_port: int) -> None:
    out = wait_for(
        "--timeout", "3", f"tcp://127.0.0.1:{listening_port}", "--", sys.executable, "-c", "print('started')"
    )
    assert out.returncode == 0 and out.stdout.strip() == "started"


@pytest.mark.postgres
def test_migration_entrypoint_upgrades_postgres_idempotently(pg_url: str) -> None:
    env = {"GENENV_DATABASE__URL": pg_url, "WAIT_FOR_TIMEOUT_S": "20"}
    first = run(["sh", str(SCRIPTS / "migrate.sh")], env=env, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    second = run(["sh", str(SCRIPTS / "migrate.sh")], env=env, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    current = run(["genenv", "db", "current"], env=env)
    revision = current.stdout.split("current:")[1].split()[0]
    assert revision != "base" and f"head: {revision}" in current.stdout


def test_migration_entrypoint_fails_when_the_database_never_answers(closed_port: int) -> None:
    env = {
        "GENENV_DATABASE__URL": f"postgresql+psycopg://genenv:pw@127.0.0.1:{closed_port}/genenv",
        "WAIT_FOR_TIMEOUT_S": "1",
    }
    out = run(["sh", str(SCRIPTS / "migrate.sh")], env=env)
    assert out.returncode == 1 and "not reachable" in out.stderr


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Path:
    """A `vllm` executable that prints its arguments and the LoRA runtime flag, one per line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(
        '#!/bin/sh\necho "LORA_RUNTIME=$VLLM_ALLOW_RUNTIME_LORA_UPDATING"\nfor a in "$@"; do echo "$a"; done\n'
    )
    exe.chmod(0o755)
    return bin_dir


def launch(fake_vllm: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run deploy/vllm/launch.sh with the fake vllm first on PATH."""
    full = {"PATH": f"{fake_vllm}:/usr/bin:/bin", **env}
    return subprocess.run(["sh", str(LAUNCH), *args], capture_output=True, text=True, check=False, env=full)


def test_launch_script_resolves_a_cached_model_and_appends_overrides(fake_vllm: Path, tmp_path: Path) -> None:
    cache = tmp_path / "models"
    (cache / "smollm2-135m-instruct").mkdir(parents=True)
    (cache / "smollm2-135m-instruct" / "config.json").write_text("{}")
    out = launch(
        fake_vllm,
        {"GENENV_INFERENCE__BASE_MODEL": "smollm2-135m-instruct", "GENENV_PATHS__MODEL_CACHE": str(cache)},
        "--max-model-len",
        "4096",
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "LORA_RUNTIME=True"
    assert lines[1:3] == ["serve", str(cache / "smollm2-135m-instruct")]
    argv = " ".join(lines[3:])
    assert "--served-model-name base" in argv and "--enable-lora" in argv
    assert "--max-lora-rank 16" in argv and "--max-loras 8" in argv and "--port 8000" in argv
    assert argv.endswith("--max-model-len 4096")


def test_launch_script_passes_hub_ids_and_absolute_paths_through(fake_vllm: Path) -> None:
    for model in ("Qwen/Qwen2.5-7B-Instruct", "/var/lib/genenv/models/Qwen/Qwen2.5-7B-Instruct"):
        out = launch(fake_vllm, {"GENENV_INFERENCE__BASE_MODEL": model, "GENENV_INFERENCE__SERVED_MODEL_NAME": "qwen"})
        assert out.stdout.splitlines()[1:3] == ["serve", model]
        assert "--served-model-name\nqwen" in out.stdout


def test_launch_script_requires_a_model(fake_vllm: Path) -> None:
    out = launch(fake_vllm, {})
    assert out.returncode != 0 and "GENENV_INFERENCE__BASE_MODEL" in out.stderr


def test_fetch_model_leaves_a_finished_folder_alone(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    out = run([sys.executable, str(SCRIPTS / "fetch_model.py"), "Qwen/Qwen2.5-7B-Instruct", str(tmp_path)])
    assert out.returncode == 0 and "already holds a model" in out.stdout


WORKERS = ("orchestrator", "rollout", "trainer")


def load_celery_ping() -> Any:
    """deploy/scripts/celery_ping.py as a module."""
    spec = importlib.util.spec_from_file_location("celery_ping", SCRIPTS / "celery_ping.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.redis
def test_celery_probe_pings_each_real_worker_by_its_node_name(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """The probe the manifests run (celery_ping.py --node <worker>@%h) gets a pong from each worker started with
    the manifests' own command line."""
    deployments = {d["metadata"]["name"]: d for d in rendered["gpu"] if d["kind"] == "Deployment"}
    commands = {w: deployments[w]["spec"]["template"]["spec"]["containers"][0]["command"] for w in WORKERS}
    env = {
        "GENENV_REDIS__URL": redis_url,
        "GENENV_QUEUE__EAGER": "false",
        "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'probe.db'}",
    }
    full_env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **env}
    procs = {}
    for worker in WORKERS:  # started together: their start-up (imports) overlaps
        log = (tmp_path / f"{worker}.log").open("w")
        procs[worker] = (
            subprocess.Popen(commands[worker], stdout=log, stderr=subprocess.STDOUT, env=full_env),
            log,
        )
    try:
        # Poll in-process (cheap) until each node answers, then run the probe script itself once per worker.
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        ping = load_celery_ping()
        pending = set(WORKERS)
        deadline = time.monotonic() + 90
        while pending and time.monotonic() < deadline:
            for worker in sorted(pending):
                if ping.ping(ping.node_name(f"{worker}@%h"), 1.0):
                    pending.discard(worker)
                    # Started together, so the others are up soon too; do not wait 90 s for a wrong name.
                    deadline = min(deadline, time.monotonic() + 20)
            if pending:
                time.sleep(1)
        logs = {w: (tmp_path / f"{w}.log").read_text()[-1500:] for w in pending}
        assert not pending, f"no pong from {sorted(pending)} (is the node name <worker>@%h?):\n{logs}"
        for worker in WORKERS:
            probe = [sys.executable, str(SCRIPTS / "celery_ping.py"), "--node", f"{worker}@%h", "--timeout", "5"]
            out = run(probe, env=env)
            assert out.returncode == 0, out.stderr
        wrong = run([sys.executable, str(SCRIPTS / "celery_ping.py"), "--node", "nobody@%h", "--timeout", "1"], env=env)
        assert wrong.returncode == 1 and "no pong" in wrong.stderr
    finally:
        for proc, log in procs.values():
            proc.terminate()
        for proc, log in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def test_celery_probe_fails_when_the_broker_is_down() -> None:
    probe = [sys.executable, str(SCRIPTS / "celery_ping.py"), "--node", "rollout@%h", "--timeout", "1"]
    down = run(probe, env={"GENENV_REDIS__URL": "redis://127.0.0.1:1/0"}, timeout=60)
    assert down.returncode == 1 and "OperationalError" in down.stderr
