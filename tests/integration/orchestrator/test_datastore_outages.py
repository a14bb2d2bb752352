"""A run outlives its datastores (issue 31): Postgres or Redis down for longer than the old failure budget makes the
run wait, never fail, and it then completes with exact counts.

Each test starts its own throwaway datastore on a free loopback port in a temporary folder (bench/chaos.py's
Postgres and Redis: initdb/pg_ctl, ``redis-server --appendonly yes``) and stops and starts it from the test at a
chosen phase, so the outage lasts exactly as long as the test holds it down (a count of the orchestrator's tries,
several times ``orchestrator.max_phase_failures``), whatever the machine's load. The machine's own Postgres and
Redis are never touched. The model is the real SmolLM2-135M (local backend) in an agent_only run of tiny batches.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chaos import Postgres
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.epochs import EpochPhase
from genenv.contracts.runs import RunConfig, WaitingOn
from genenv.db.models import CurriculumScoreRow, RolloutRow, RunRow, TaskRow, VerdictRow
from genenv.outages import DATABASE
from genenv.settings import GenEnvSettings
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

MAX_FAILURES = 2  # the old budget: 2 tries ~0.15 s apart (poll_interval_s 0.05, doubling)
SEEDS, G, EPOCHS = 2, 4, 2
CONFIG: dict[str, Any] = {
    "mode": "agent_only",
    "domain": "arithmetic",
    "epochs": EPOCHS,
    "seeds_per_epoch": SEEDS,
    "rollouts_per_task": G,
    "max_response_tokens": 8,
    "agent": {"batch_size": 8, "micro_batch_size": 8},
}


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The local model on one thread: on a shared 2-core machine, torch's threads waiting on each other made a
    rollout of 8 short answers take minutes instead of seconds."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def private_pg() -> Iterator[Postgres]:
    """A throwaway Postgres 15 (run as the ``postgres`` user when root: its folder must be reachable by that user,
    which pytest's private tmp_path is not)."""
    with tempfile.TemporaryDirectory(prefix="genenv-outage-pg-") as folder:
        os.chmod(folder, 0o755)
        pg = Postgres(Path(folder) / "postgres")
        pg.init()
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()


async def _until(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def counts(sessions: sessionmaker[Session], run_id: str) -> dict[str, Any]:
    """Per epoch: tasks, distinct (seed, variation), valid tasks, rollouts, distinct (task, attempt), verdicts,
    scores and seeds with a valid task."""
    out: dict[int, dict[str, int]] = {}
    with sessions() as s:
        for e in range(EPOCHS):
            in_epoch = (TaskRow.run_id == run_id) & (TaskRow.epoch == e)
            out[e] = {
                "tasks": s.scalar(select(func.count(TaskRow.id)).where(in_epoch)) or 0,
                "distinct_tasks": s.scalar(select(func.count()).select_from(
                    select(TaskRow.seed_id, TaskRow.variation).where(in_epoch).distinct().subquery())) or 0,
                "valid": s.scalar(select(func.count(TaskRow.id)).where(in_epoch, TaskRow.status == "valid")) or 0,
                "rollouts": s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(in_epoch)) or 0,
                "distinct_rollouts": s.scalar(select(func.count()).select_from(
                    select(RolloutRow.task_id, RolloutRow.attempt).join(TaskRow).where(in_epoch).distinct()
                    .subquery())) or 0,
                "verdicts": s.scalar(select(func.count(VerdictRow.id)).join(RolloutRow).join(TaskRow)
                                     .where(in_epoch)) or 0,
                "scores": s.scalar(select(func.count()).select_from(CurriculumScoreRow).where(
                    CurriculumScoreRow.run_id == run_id, CurriculumScoreRow.epoch == e)) or 0,
                "scorable_seeds": s.scalar(select(func.count(func.distinct(TaskRow.seed_id))).where(
                    in_epoch, TaskRow.status == "valid")) or 0,
            }
        run = s.get(RunRow, run_id)
        assert run is not None
        return {"status": run.status, "error": run.error, "waiting_on": run.waiting_on, "epochs": out}


def _assert_exact(found: dict[str, Any]) -> None:
    assert (found["status"], found["error"], found["waiting_on"]) == ("completed", None, None)
    for e, c in found["epochs"].items():
        # One task per (epoch, seed, variation): agent_only trains on the seeds themselves (variation 0).
        assert c["tasks"] == c["distinct_tasks"] == SEEDS, (e, c)
        assert c["rollouts"] == c["distinct_rollouts"] == c["valid"] * G, (e, c)
        assert c["verdicts"] == c["rollouts"], (e, c)
        assert c["scores"] == c["scorable_seeds"] == SEEDS, (e, c)


@pytest.mark.parametrize("phase", [EpochPhase.ROLLOUT, EpochPhase.SCORE])
def test_postgres_down_longer_than_the_failure_budget_makes_the_run_wait_then_complete(
    phase: EpochPhase, private_pg: Postgres, tmp_path: Path, model_dir: Path, benchmarks_dir: Path
) -> None:
    settings = GenEnvSettings.model_validate({
        "database": {"url": private_pg.url()},
        "queue": {"eager": True},
        "paths": {"home": tmp_path, "adapter_store": tmp_path / "adapters", "model_cache": model_dir.parent,
                  "benchmarks": benchmarks_dir},
        "inference": {"backend": "local", "base_model": model_dir.name},
        "trainer": {"torch_threads": 1},
        "orchestrator": {"max_phase_failures": MAX_FAILURES, "poll_interval_s": 0.05},
    })
    waits: list[WaitingOn] = []
    retries: list[tuple[int, EpochPhase]] = []
    down: list[float] = []

    def on_phase(_run: str, epoch: int, at: EpochPhase, event: str) -> None:
        if (epoch, at, event) == (0, phase, "start") and not down:
            private_pg.stop()  # the phase starts with its database away
            down.append(time.monotonic())
        elif event == "retry":
            retries.append((epoch, at))

    async def scenario() -> tuple[str, str, float]:
        async with embedded_stack(settings) as stack:
            run = await stack.control_plane.create_run(RunConfig.model_validate(CONFIG))
            await stack.control_plane.act(run.id, "start")
            driving = asyncio.create_task(drive(stack.context, run.id, on_phase, on_wait=waits.append))
            # Three times the failure budget of tries find the database away, and the run still runs.
            await _until(lambda: driving.done() or len(waits) >= 3 * MAX_FAILURES)
            assert not driving.done(), driving.result()
            held = time.monotonic() - down[0]
            await asyncio.to_thread(private_pg.start)
            status = await asyncio.wait_for(driving, 90)
            return run.id, status, held

    run_id, status, held = asyncio.run(scenario())
    assert status == "completed"
    # What the run waited on, kept in memory while the database could not record it (and logged).
    assert {w.dependency for w in waits} == {DATABASE}
    assert [w.attempts for w in waits] == list(range(1, len(waits) + 1))
    assert len({w.since for w in waits}) == 1 and (waits[0].epoch, waits[0].phase) == (0, phase.value)
    assert "OperationalError" in waits[-1].last_error
    assert held > 0.15  # longer than the old budget's 2 tries
    assert retries and set(retries) == {(0, phase)}
    from genenv.db.engine import make_engine, make_session_factory

    engine = make_engine(settings.database)
    try:
        _assert_exact(counts(make_session_factory(engine), run_id))
    finally:
        engine.dispose()
