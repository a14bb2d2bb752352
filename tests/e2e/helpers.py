"""Helpers for the end-to-end tests: a DevStack on private Redis/Postgres databases, counts, polling."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from genenv.db.models import CurriculumScoreRow, RolloutRow, TaskRow, VerdictRow
from genenv.devstack import DevStack
from tests.conftest import REDIS_URL

TOKEN = "e2e-" + secrets.token_hex(8)

# The production lease and stall timeout (trainer.lease_s, orchestrator.stall_timeout_s): the crash tests measure
# the recovery a user gets. A shorter poll interval only makes the runs themselves quicker.
FAST_RECOVERY = {
    "GENENV_ORCHESTRATOR__POLL_INTERVAL_S": "1",
    "GENENV_ORCHESTRATOR__MAX_PHASE_FAILURES": "8",
    "GENENV_TRAINER__TORCH_THREADS": "1",
    "GENENV_LOGGING__LEVEL": "INFO",
}


SEEDS, N, G = 2, 2, 4

# Crash tests' measurements, "phase (victim)" -> seconds from the kill until the work moved again (printed by the
# terminal summary in conftest.py).
RECOVERY_S: dict[str, float] = {}


def tiny_config(name: str, epochs: int, *, seeds: int = SEEDS, rollouts: int = G,
                replay_ratio: float = 0.0, agent_batch: int = 8) -> dict[str, Any]:
    """The run the e2e tests start: arithmetic, tiny batches, short answers."""
    return {
        "name": name,
        "mode": "genenv",
        "domain": "arithmetic",
        "epochs": epochs,
        "seeds_per_epoch": seeds,
        "variations_per_seed": N,
        "rollouts_per_task": rollouts,
        "max_response_tokens": 16,
        "max_task_tokens": 96,
        # A band as wide as [0, 1] so every scored seed batch trains the simulator in these short runs.
        "curriculum": {"k_min": 0.5, "replay_ratio": replay_ratio},
        "agent": {"batch_size": agent_batch, "micro_batch_size": 8},
        "simulator": {"batch_size": 4, "micro_batch_size": 4},
    }


def build_stack(
    tmp: Path, db_url: str, vllm_url: str, model_dir: Path, benchmarks_dir: Path, extra: dict[str, str]
) -> DevStack:
    """A DevStack on a private Redis database number (so stacks never consume each other's messages)."""
    import redis

    db = 1 + secrets.randbelow(14)
    redis.Redis.from_url(f"{REDIS_URL}/{db}").flushdb()
    return DevStack.build(
        database_url=db_url,
        redis_url=f"{REDIS_URL}/{db}",
        log_dir=tmp / "logs",
        home=tmp,
        model=str(model_dir),
        vllm_url=vllm_url,
        token=TOKEN,
        extra_env={**FAST_RECOVERY, "GENENV_PATHS__BENCHMARKS": str(benchmarks_dir),
                   "GENENV_PATHS__MODEL_CACHE": str(model_dir.parent), **extra},
    )


def api(stack: DevStack) -> httpx.Client:
    return httpx.Client(base_url=stack.url("control-plane"), headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=30)


def wait_status(
    client: httpx.Client, run_id: str, statuses: set[str], timeout_s: float, stack: DevStack
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get(f"/v1/runs/{run_id}").json()
        if run["status"] in statuses:
            return dict(run)
        time.sleep(1)
    logs = "\n".join(f"--- {n}\n{stack.tail(n, 2500)}" for n in ("orchestrator", "rollout", "trainer"))
    raise AssertionError(f"run {run_id} still {run['status']} after {timeout_s} s\n{logs}")


def counts(engine: Engine, run_id: str, epoch: int) -> dict[str, int]:
    with engine.connect() as c:
        in_epoch = (TaskRow.run_id == run_id) & (TaskRow.epoch == epoch)
        return {
            "tasks": c.scalar(select(func.count()).select_from(TaskRow).where(in_epoch)) or 0,
            "valid": c.scalar(select(func.count()).select_from(TaskRow).where(in_epoch, TaskRow.status == "valid"))
            or 0,
            "rollouts": c.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(in_epoch)) or 0,
            "verdicts": c.scalar(select(func.count(VerdictRow.id)).join(RolloutRow).join(TaskRow).where(in_epoch))
            or 0,
            # Seed batches with at least one valid task: only those have a p̂, hence a curriculum score (a batch
            # whose every generation was rejected is not scored; which ones are depends on what the model wrote).
            "scorable_seeds": c.scalar(select(func.count(func.distinct(TaskRow.seed_id))).where(
                in_epoch, TaskRow.status == "valid")) or 0,
            "scores": c.scalar(select(func.count()).select_from(CurriculumScoreRow).where(
                CurriculumScoreRow.run_id == run_id, CurriculumScoreRow.epoch == epoch)) or 0,
        }
