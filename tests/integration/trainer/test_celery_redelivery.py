"""Redis redelivers a long job's message while its first delivery still works (issue 22, item 5).

With the Redis broker, a message a worker has not acknowledged within the transport's visibility_timeout is put
back on its queue (the "visibility timeout" problem of late acks: Celery's docs; 1 h by kombu's default). Here each
queue's timeout is 2 s, a first worker takes the job and works on it for longer, and a second worker that starts
afterwards sweeps the unacknowledged message back and receives it. The second delivery must do nothing twice:

* rollouts: every (task, attempt) is requested from the agent's server once, the agent adapter is loaded once, and
  every attempt is stored once (the redelivered delivery finds the first one's claim fresh and exits);
* training: one claim, one optimiser run, one adapter version (the redelivered delivery finds the claim fresh and
  waits; once the job is done it exits).

The agent's server is a stub OpenAI-compatible endpoint that counts requests (what is asserted is how often each
attempt was generated, which the real server cannot tell); Redis, Postgres, Celery and the workers are real.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from trn_helpers import adapters_of, add_group, agent_epoch, job, run_config

from genenv.contracts.adapters import JobKind, Role
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GeneratedTask, TaskStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import RolloutRow, TaskRow
from genenv.db.repositories import adapters, train_jobs
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.domains import get_domain
from genenv.queue import TASK_ROLLOUT_EPOCH, TASK_TRAIN_AGENT, make_celery
from genenv.settings import DatabaseSettings, GenEnvSettings
from tests.conftest import REDIS_URL, free_port

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

VISIBILITY_S = 2
TASKS, G = 10, 2


class StubAgentServer:
    """The agent's vLLM server as the rollout worker sees it: chat completions (counted per prompt, slowed down a
    little), /v1/models and runtime LoRA loading (counted)."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.loads: list[str] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                return None

            def _send(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with stub._lock:
                    loaded = list(stub.loads)
                models = [{"id": "base", "root": "/models/base"}] + [{"id": n, "parent": "base"} for n in loaded]
                self._send({"object": "list", "data": models})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/v1/load_lora_adapter":
                    with stub._lock:
                        stub.loads.append(body["lora_name"])
                    self._send({})
                    return
                n = int(body.get("n", 1))
                with stub._lock:
                    stub.requests[body["messages"][-1]["content"]] += n
                time.sleep(0.3)
                self._send({
                    "id": "x", "object": "chat.completion", "model": body["model"],
                    "usage": {"prompt_tokens": 5, "completion_tokens": n},
                    "choices": [{"index": i, "message": {"role": "assistant", "content": "7"}, "token_ids": [22],
                                 "logprobs": {"content": [{"token": "7", "logprob": -0.1}]}, "finish_reason": "stop"}
                                for i in range(n)],
                })

        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def broker() -> str:
    """A private Redis database number (the workers' queues and unacknowledged sets start empty)."""
    import redis

    url = f"{REDIS_URL}/{1 + secrets.randbelow(14)}"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def stub() -> Iterator[StubAgentServer]:
    server = StubAgentServer()
    try:
        yield server
    finally:
        server.close()


class Workers:
    """Worker processes of one kind, each with its own log."""

    def __init__(self, kind: str, env: dict[str, str], logs: Path) -> None:
        self.kind, self.env, self.logs = kind, env, logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> Path:
        log = self.logs / f"{self.kind}-{len(self.procs)}.log"
        with log.open("wb") as fh:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "genenv.cli.main", "worker", self.kind, "--hostname",
                 f"{self.kind}-{len(self.procs)}-{secrets.token_hex(3)}@%h"],
                env=self.env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
            ))
        _wait(lambda: " ready." in log.read_text(errors="replace"), 120, f"{log.name} ready", log)
        return log

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)

    def text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.logs.glob(f"{self.kind}-*.log")))


def _wait(pred: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; log:\n{log.read_text(errors='replace')[-4000:]}")


def _env(url: str, broker: str, tmp: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "GENENV_DATABASE__URL": url, "GENENV_REDIS__URL": broker, "GENENV_QUEUE__EAGER": "false",
            "GENENV_QUEUE__ROLLOUTS_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
            "GENENV_QUEUE__GPU_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
            "GENENV_PATHS__ADAPTER_STORE": str(tmp / "adapters"), "GENENV_LOGGING__LEVEL": "INFO", **extra}


def test_a_redelivered_rollout_job_generates_publishes_and_stores_nothing_twice(
    trainer_pg: Callable[[], str], broker: str, stub: StubAgentServer, tmp_path: Path
) -> None:
    url = trainer_pg()
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    domain = get_domain("arithmetic")
    with session_scope(sessions) as s:
        run_id = run_repo.create(s, RunConfig(rollouts_per_task=G, max_response_tokens=8)).id
        task_repo.store_generated(s, run_id, 0, [
            GeneratedTask(seed_id=f"seed-{i}", domain="arithmetic", variation=0, status=TaskStatus.VALID,
                          payload=domain.validate_generation({"expression": f"{i} + 11"}, None))
            for i in range(TASKS)
        ])
        adapters.create_adapter(s, run_id=run_id, role=Role.AGENT, version=1, path=str(tmp_path / "agent-v1"),
                                parent_version=None, metrics={})
        rollout_job = train_jobs.create_or_get_job(s, run_id, 0, JobKind.ROLLOUT)
        train_jobs.dispatched(s, rollout_job, datetime.now(UTC))  # as the orchestrator does before sending
    # One attempt-pair stored per write with a pause after each: the job takes ≈ TASKS × 3 s, far past the 2 s and
    # long enough for the second worker to start (import, connect, sweep) on a loaded machine before it ends (at
    # 1.5 s a write the window was ≈ 12 s, of the order of a worker's start on a busy 2-core machine).
    workers = Workers("rollout", _env(url, broker, tmp_path, GENENV_INFERENCE__BACKEND="vllm",
                                      GENENV_SERVICES__VLLM_AGENT=stub.url, GENENV_ROLLOUT__WRITE_BATCH="1",
                                      GENENV_ROLLOUT__WRITE_DELAY_S="3", GENENV_ROLLOUT__HEARTBEAT_S="0.5"),
                      tmp_path)
    sender = make_celery(GenEnvSettings(redis={"url": broker}, queue={"eager": False}))

    def stored() -> int:
        with session_scope(sessions) as s:
            return int(s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(TaskRow.run_id == run_id))
                       or 0)

    try:
        first_log = workers.start()
        sent = time.monotonic()
        result = sender.send_task(TASK_ROLLOUT_EPOCH, args=[run_id, 0])
        _wait(lambda: stored() > 0, 120, "the first delivery's first stored attempts", first_log)
        time.sleep(max(0.0, sent + VISIBILITY_S + 1 - time.monotonic()))
        assert stored() < TASKS * G, "the first delivery finished before the message could be redelivered"
        # A worker sweeps unacknowledged messages older than the visibility timeout back when it starts.
        second_log = workers.start()
        _wait(lambda: "not run: busy" in second_log.read_text(errors="replace") or stored() == TASKS * G, 120,
              "the redelivered message to reach the second worker", second_log)
        _wait(lambda: stored() == TASKS * G, 300, "every attempt stored", first_log)
        # Both deliveries carry one task id: its result is whichever delivery stored one first.
        assert result.get(timeout=300)["outcome"] in ("claimed", "busy")
        second = second_log.read_text(errors="replace")
    finally:
        workers.stop()
        sender.close()
    assert len(stub.requests) == TASKS and set(stub.requests.values()) == {G}, (
        f"attempts generated more than once (prompt → attempts requested): {dict(stub.requests)}")
    assert stub.loads == [f"{run_id}-agent-v1"], f"adapter loads: {stub.loads}"
    assert stored() == TASKS * G
    assert "not run: busy" in second, "the message was never redelivered"
    engine.dispose()


def test_a_redelivered_training_job_trains_once(
    trainer_pg: Callable[[], str], broker: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    url = trainer_pg()
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    sessions = make_session_factory(engine)
    # One sequence per optimiser step over 8 + 16·4 sequences: many seconds, well past the 2 s timeout.
    config = run_config(tiny_model_dir, agent={"batch_size": 1, "micro_batch_size": 1, "max_steps_per_epoch": 40})
    run = agent_epoch(sessions, config)
    with session_scope(sessions) as s:
        for i in range(16):
            add_group(s, run, 0, f"seed-long-{i}", 0, [1.0, 0.0, 1.0, 0.0])
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)
    # STEP_DELAY_S: ≥ 40 s of steps whatever the machine (an idle one finished the job before the second worker
    # had started and swept the message back).
    workers = Workers("trainer", _env(url, broker, tmp_path, GENENV_TRAINER__TORCH_THREADS="1",
                                      GENENV_TRAINER__HEARTBEAT_S="0.5", GENENV_TRAINER__LEASE_S="3",
                                      GENENV_TRAINER__STEP_DELAY_S="1.0"), tmp_path)
    sender = make_celery(GenEnvSettings(redis={"url": broker}, queue={"eager": False}))

    def status() -> tuple[str, int, int]:
        with session_scope(sessions) as s:
            row = train_jobs.get_job(s, job_id)
            return row.status, row.attempts, int(row.metrics.get("steps", 0) or 0)

    try:
        first_log = workers.start()
        sent = time.monotonic()
        result = sender.send_task(TASK_TRAIN_AGENT, args=[job_id])
        _wait(lambda: status()[0] == "running", 120, "the first delivery's claim", first_log)
        time.sleep(max(0.0, sent + VISIBILITY_S + 1 - time.monotonic()))
        assert status()[0] == "running", "the job finished before the message could be redelivered"
        second_log = workers.start()
        _wait(lambda: "not run: busy" in second_log.read_text(errors="replace") or status()[0] == "done", 300,
              "the redelivered message to reach the second worker", second_log)
        assert result.get(timeout=600)["status"] == "done"
        _wait(lambda: status()[0] == "done", 60, "the job to be done", first_log)
        assert "not run: busy" in workers.text(), "the message was never redelivered"
    finally:
        workers.stop()
        sender.close()
    final, attempts, _ = status()
    assert (final, attempts) == ("done", 1)  # one claim: trained once
    assert adapters_of(sessions, run) == [("agent", 1, None)]
    assert workers.text().count(f"train job {job_id} (train_agent") == 1  # the "claimed, attempt N" line
    engine.dispose()
