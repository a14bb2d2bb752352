"""End to end in containers: build every image (cached), `docker compose --profile cpu up` on host networking
(deploy/compose/hostnet.yml), run 2 epochs through the control plane's REST API with a token, crash the rollout
worker during ROLLOUT and the trainer during TRAIN, let compose's restart policy bring them back, check the counts
and the adapters the vLLM container serves, then `down -v`.

A crash is a SIGKILL of the container's main process from the host (what the OOM killer does): compose's
``restart: unless-stopped`` restarts it. ``docker kill`` would not test that: the engine records it as a manual
stop and the restart policy leaves such a container down (measured on Docker 20.10).

Needs root, a Docker engine (started here when none runs; ``apt-get install docker.io``), debootstrap and PyPI for
the first build, and the ports of deploy/compose/hostnet.yml free on 127.0.0.1. Opt-in: ``GENENV_DOCKER_E2E=1 pytest
tests/e2e_docker -s`` (the default run skips it; ``.ci/run`` sets it).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine

from genenv.contracts.adapters import adapter_name
from genenv.db.models import AdapterRow, EpochRow, TaskRow, TrainJobRow
from tests.e2e.helpers import FAST_RECOVERY, G, N, counts, tiny_config

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HOSTNET_PORTS = (15432, 16379, 18000, 18001, 18002, 18003, 18010, 18011)
CONTROL_PLANE = "http://127.0.0.1:18000"
VLLM = {"agent": "http://127.0.0.1:18010", "simulator": "http://127.0.0.1:18011"}
LONG_RUNNING = (
    "postgres",
    "redis",
    "control-plane",
    "simulator",
    "verifier",
    "curriculum",
    "orchestrator",
    "rollout",
    "trainer-cpu",
    "vllm-agent-cpu",
    "vllm-simulator-cpu",
)
# 3 seeds (6 generations an epoch, as the crash tests): with 4, an epoch 0 whose generations are all invalid
# (≈ 0.25⁴ ≈ 0.4 %) has no ROLLOUT work to crash, and the test would wait out its 900 s.
SEEDS_DOCKER = 3
CONFIG = tiny_config("docker-e2e", epochs=2, seeds=SEEDS_DOCKER)
# The rollout crash must land mid-phase. The agent's server answers an epoch's few requests (3-4 tasks x G) together
# and they fit one write (rollout.write_batch 32), so without fault injection every attempt is stored at the job's
# very end and ROLLOUT ends at the orchestrator's next poll (poll_interval_s 1): "ROLLOUT with stored rollouts" then
# lasts 0-1 s (measured 0.9 s, 1.0 s and under 0.1 s: that run's wait timed out after 900 s). Stored in pairs with
# 1.5 s between writes (the settings the process-level crash test uses), it lasts several seconds and a part of the
# attempts is left to the restarted worker.
SLOW_ROLLOUT = {"GENENV_ROLLOUT__WRITE_BATCH": "2", "GENENV_ROLLOUT__WRITE_DELAY_S": "1.5"}


def _docker() -> str:
    """A Docker client that talks to the engine (the Debian client where the newer one lacks buildx)."""
    return "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")


def _compose_bin() -> str:
    """The Docker Compose v2 binary that .ci/deploy_checks.sh installs (the `docker compose` plugin if present)."""
    out = subprocess.run(
        ["bash", str(REPO / ".ci/deploy_checks.sh"), "--tools-only"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return str(Path(out.stdout.strip().splitlines()[-1]) / "docker-compose")


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Stack:
    """A compose project of this test, with its secrets and timings."""

    compose: list[str]
    secrets: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [*self.compose, *args], cwd=REPO, capture_output=True, text=True, check=False, timeout=timeout
        )
        if check and out.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out

    def containers(self) -> dict[str, dict[str, Any]]:
        """`docker inspect` of this project's containers, by compose service name."""
        ids = self.run("ps", "-a", "-q").stdout.split()
        if not ids:
            return {}
        data = json.loads(
            subprocess.run([_docker(), "inspect", *ids], capture_output=True, text=True, check=True).stdout
        )
        return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in data}

    def logs(self, *services: str, tail: int = 60) -> str:
        return self.run("logs", "--no-color", "--tail", str(tail), *services, check=False).stdout

    @property
    def token(self) -> str:
        return self.secrets["GENENV_AUTH__CLIENT_TOKEN"]

    def db(self) -> Engine:
        return create_engine(f"postgresql+psycopg://genenv:{self.secrets['POSTGRES_PASSWORD']}@127.0.0.1:15432/genenv")


@pytest.fixture(scope="module")
def engine_ready() -> Iterator[None]:
    """A Docker engine: the running one, or dockerd started here (and stopped again at the end)."""
    if os.environ.get("GENENV_DOCKER_E2E") != "1":
        # Opt-in for users (root, a Docker engine, ~12 min of cold image builds); .ci/run sets it (~3.5 min warm).
        pytest.skip("the container end-to-end test runs with GENENV_DOCKER_E2E=1 (root, Docker engine; ~15 min cold)")
    if os.geteuid() != 0:
        pytest.skip("the container test needs root (dockerd, debootstrap)")
    if shutil.which("dockerd") is None:
        pytest.skip("no Docker engine installed: apt-get install -y docker.io debootstrap")
    pid_file = REPO / ".images" / "dockerd.pid"
    before = pid_file.read_text() if pid_file.exists() else None
    out = subprocess.run(
        ["bash", str(REPO / "scripts/images.sh"), "daemon"], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr
    started = pid_file.read_text() if pid_file.exists() and pid_file.read_text() != before else None
    yield
    if started:
        os.kill(int(started), signal.SIGTERM)


@pytest.fixture(scope="module")
def images(engine_ready: None) -> float:
    """Every image built by scripts/images.sh (a warm build of an unchanged tree is all cache hits)."""
    start = time.monotonic()
    out = subprocess.run(
        ["bash", str(REPO / "scripts/images.sh")], capture_output=True, text=True, check=False, timeout=3600
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return time.monotonic() - start


@pytest.fixture(scope="module")
def stack(images: float, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The cpu profile up and healthy on host networking, with fresh secrets; `down -v` afterwards."""
    busy = [p for p in HOSTNET_PORTS if _port_busy(p)]
    assert not busy, f"ports of deploy/compose/hostnet.yml already in use on 127.0.0.1: {busy}"
    tmp = tmp_path_factory.mktemp("compose")
    token = secrets.token_urlsafe(24)
    values = {
        "POSTGRES_PASSWORD": secrets.token_urlsafe(16),
        "REDIS_PASSWORD": secrets.token_urlsafe(16),
        "VLLM_API_KEY": secrets.token_urlsafe(16),
        "GENENV_AUTH__TOKENS": json.dumps([token]),
        "GENENV_AUTH__CLIENT_TOKEN": token,
    }
    (tmp / "test.env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    # Short leases and stall timeouts, as in tests/e2e, so a crashed job is taken up again within the test; the
    # rollout worker stores its attempts slowly so that its crash lands mid-phase (SLOW_ROLLOUT).
    env = {s: dict(FAST_RECOVERY) for s in ("orchestrator", "rollout", "trainer-cpu")}
    env["rollout"].update(SLOW_ROLLOUT)
    (tmp / "fast-recovery.yml").write_text(
        json.dumps({"services": {s: {"environment": e} for s, e in env.items()}})
    )
    compose = [
        _compose_bin(),
        "-p",
        f"genenv-e2e-{secrets.token_hex(3)}",
        "--env-file",
        str(tmp / "test.env"),
        "-f",
        "docker-compose.yml",
        "-f",
        "deploy/compose/hostnet.yml",
        "-f",
        str(tmp / "fast-recovery.yml"),
        "--profile",
        "cpu",
    ]
    st = Stack(compose, values, {"images_s": images})
    start = time.monotonic()
    try:
        st.run("up", "-d", "--no-build", timeout=900)
        _wait_healthy(st, 900)
        st.timings["up_s"] = time.monotonic() - start
        yield st
    finally:
        print(st.logs(tail=30))
        # Every container's whole log survives `down -v`, for the failure that the last 30 lines do not explain.
        full = tmp / "compose.log"
        full.write_text(st.run("logs", "--no-color", "--timestamps", check=False, timeout=300).stdout)
        print(f"full container logs: {full}")
        st.run("down", "-v", "--remove-orphans", "--timeout", "20", check=False, timeout=300)


def _wait_healthy(st: Stack, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        found = st.containers()
        states = {s: c["State"].get("Health", {}).get("Status", c["State"]["Status"]) for s, c in found.items()}
        failed = {
            s: c["State"]["ExitCode"]
            for s, c in found.items()
            if s in ("migrate", "models-prepare") and c["State"]["Status"] == "exited" and c["State"]["ExitCode"]
        }
        assert not failed, f"one-shot steps failed: {failed}\n{st.logs(*failed)}"
        if all(states.get(s) == "healthy" for s in LONG_RUNNING):
            return
        time.sleep(3)
    raise AssertionError(f"stack not healthy after {timeout_s} s: {states}\n{st.logs()}")


def _phase(engine: Engine, run_id: str) -> tuple[int, str] | None:
    with engine.connect() as c:
        row = c.execute(
            select(EpochRow.index, EpochRow.phase)
            .where(EpochRow.run_id == run_id)
            .order_by(EpochRow.index.desc())
            .limit(1)
        ).first()
    return (int(row[0]), str(row[1])) if row else None


def _mid_rollout(engine: Engine, run_id: str) -> bool:
    """Epoch 0 is in ROLLOUT with some of its attempts stored and some still to come."""
    if _phase(engine, run_id) != (0, "rollout"):
        return False
    c = counts(engine, run_id, 0)
    return 0 < c["rollouts"] < c["valid"] * G


def _train_running(engine: Engine, run_id: str) -> bool:
    with engine.connect() as c:
        return bool(
            c.scalar(
                select(func.count())
                .select_from(TrainJobRow)
                .where(
                    TrainJobRow.run_id == run_id,
                    TrainJobRow.kind != "rollout",
                    TrainJobRow.status == "running",
                    TrainJobRow.claimed_by.is_not(None),
                )
            )
        )


def _crash_and_time_recovery(st: Stack, service: str, node: str) -> float:
    """SIGKILL the service's main process; seconds until the restarted worker answers a Celery ping."""
    before = st.containers()[service]
    killed_at = time.monotonic()
    os.kill(int(before["State"]["Pid"]), signal.SIGKILL)
    deadline = killed_at + 300
    while time.monotonic() < deadline:
        now = st.containers()[service]
        if now["RestartCount"] > before["RestartCount"] and now["State"]["Running"]:
            ping = subprocess.run(
                [
                    _docker(),
                    "exec",
                    now["Id"],
                    "python",
                    "/opt/genenv/scripts/celery_ping.py",
                    "--node",
                    node,
                    "--timeout",
                    "3",
                ],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            if ping.returncode == 0:
                return time.monotonic() - killed_at
        time.sleep(1)
    raise AssertionError(f"{service} not back within 300 s after SIGKILL\n{st.logs(service)}")


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_compose_stack_runs_two_epochs_and_survives_crashed_workers(stack: Stack) -> None:
    auth = {"Authorization": f"Bearer {stack.token}"}
    # Secure by default: no token, no API; no key, no vLLM (LoRA loading included); wrong Redis password refused.
    assert httpx.get(f"{CONTROL_PLANE}/v1/runs", timeout=10).status_code == 401
    assert httpx.get(f"{VLLM['agent']}/v1/models", timeout=10).status_code == 401
    engine = stack.db()
    recovery: dict[str, float] = {}
    started = time.monotonic()
    try:
        with httpx.Client(base_url=CONTROL_PLANE, headers=auth, timeout=30) as client:
            created = client.post("/v1/runs", json={"config": CONFIG})
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
            assert client.post(f"/v1/runs/{run_id}/start").status_code == 200

            _wait(lambda: _mid_rollout(engine, run_id), 900, "epoch 0 ROLLOUT with some rollouts stored, not all")
            recovery["rollout"] = _crash_and_time_recovery(stack, "rollout", "rollout@%h")
            _wait(lambda: _train_running(engine, run_id), 1200, "a claimed training job")
            recovery["trainer"] = _crash_and_time_recovery(stack, "trainer-cpu", "trainer@%h")

            deadline = time.monotonic() + 1800
            run: dict[str, Any] = {}
            while time.monotonic() < deadline:
                run = client.get(f"/v1/runs/{run_id}").json()
                if run["status"] in ("completed", "failed"):
                    break
                time.sleep(2)
            assert run.get("status") == "completed", f"{run}\n{stack.logs('orchestrator', 'rollout', 'trainer-cpu')}"
            epochs = client.get(f"/v1/runs/{run_id}/epochs").json()["items"]
        wall = time.monotonic() - started

        # The counts of an uninterrupted run: exactly N tasks per seed, G attempts per valid task, one verdict per
        # rollout, one score per scorable seed batch; nothing duplicated by the redelivered jobs.
        assert [e["index"] for e in epochs] == [0, 1]
        per_epoch = []
        for e in epochs:
            c = counts(engine, run_id, e["index"])
            per_epoch.append(c)
            assert c["tasks"] == SEEDS_DOCKER * N
            assert c["rollouts"] == c["valid"] * G
            assert c["verdicts"] == c["rollouts"]
            assert c["scores"] == c["scorable_seeds"]
            assert e["phase"] == "closed" and e["summary"]["rollouts"] == c["rollouts"]
        with engine.connect() as conn:
            tasks_per_key = (
                conn.execute(
                    select(func.count())
                    .select_from(TaskRow)
                    .where(TaskRow.run_id == run_id)
                    .group_by(TaskRow.epoch, TaskRow.seed_id, TaskRow.variation)
                )
                .scalars()
                .all()
            )
            adapters = {
                (r.role, r.version)
                for r in conn.execute(select(AdapterRow.role, AdapterRow.version).where(AdapterRow.run_id == run_id))
            }
        assert set(tasks_per_key) == {1}
        assert ("simulator", 1) in adapters
        # The newest version of each role is served by that role's vLLM container (loaded with the API key).
        for role in ("agent", "simulator"):
            versions = [v for r, v in adapters if r == role]
            if not versions:
                continue
            served = httpx.get(
                f"{VLLM[role]}/v1/models",
                timeout=10,
                headers={"Authorization": f"Bearer {stack.secrets['VLLM_API_KEY']}"},
            ).json()["data"]
            assert adapter_name(run_id, role, max(versions)) in {m["id"] for m in served}
    finally:
        engine.dispose()
    restarts = {s: c["RestartCount"] for s, c in stack.containers().items() if s in ("rollout", "trainer-cpu")}
    assert restarts == {"rollout": 1, "trainer-cpu": 1}
    print(
        f"\n[docker-e2e] images {stack.timings.get('images_s', 0):.0f} s, up {stack.timings['up_s']:.0f} s, "
        f"run {wall:.0f} s, recovery { ({k: round(v, 1) for k, v in recovery.items()}) }, counts {per_epoch}, "
        f"adapters {sorted(adapters)}"
    )
