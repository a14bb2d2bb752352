"""Crash safety, one test per phase: kill -9 the process doing that phase mid-way, restart it, and the run completes
with exactly the counts of an uninterrupted run and no duplicate rows.

Orchestrator-driven phases get a fault-injection delay (settings.orchestrator.phase_delay_s) so the kill lands
inside the phase. The rollout worker stores small batches with a pause after each (settings.rollout.write_batch
and write_delay_s), so the kill lands after some attempts are stored and before all are; training is long enough
by itself. One stack serves all the tests (each test restarts the orchestrator with its own delay), so the vLLM
server and services start once.

Each test also measures the recovery: seconds from the kill until the work moves again (a rollout stored, a training
job claimed by the restarted trainer, the phase finished by the restarted orchestrator, which includes the phase's
injected delay), under the production lease and stall timeout; the terminal summary prints them (conftest.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, func, select

from genenv.db.models import AdapterRow, CurriculumScoreRow, EpochRow, RolloutRow, TaskRow, TrainJobRow, VerdictRow
from genenv.devstack import DevStack
from tests.e2e.helpers import RECOVERY_S, TOKEN, G, N, build_stack, counts, tiny_config, wait_status

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.vllm, pytest.mark.slow]

# Three seeds, not the helpers' two: every check below needs at least one valid generation, and SmolLM2 writes an
# invalid or seed-repeating variation about a quarter of the time (measured: 39 of 160 on these seeds), so with
# four generations a run with none valid, though rare, happened once in CI; with six it is about 30 times rarer.
SEEDS = 3
CONFIG = tiny_config("crash", epochs=1, seeds=SEEDS)

# phase -> the process doing it
VICTIM = {
    "generate": "simulator",
    "rollout": "rollout",
    "verify": "orchestrator",
    "score": "orchestrator",
    "train": "trainer",
    "publish": "orchestrator",
    "close": "orchestrator",
}


def _phase(engine: Any, run_id: str) -> str | None:
    with engine.connect() as c:
        return c.scalar(select(EpochRow.phase).where(EpochRow.run_id == run_id, EpochRow.index == 0))


def _train_running(engine: Any, run_id: str) -> bool:
    with engine.connect() as c:
        return bool(c.scalar(select(func.count()).select_from(TrainJobRow).where(
            TrainJobRow.run_id == run_id, TrainJobRow.kind != "rollout", TrainJobRow.status == "running",
            TrainJobRow.claimed_by.is_not(None))))


def _rollouts_started(engine: Any, run_id: str) -> bool:
    return counts(engine, run_id, 0)["rollouts"] > 0


# A killed process costs at most about a minute (issue 14); the bound leaves room for a loaded 2-core machine.
MAX_RECOVERY_S = 120.0


def _progress(engine: Any, run_id: str, phase: str) -> object:
    """What changes when the victim's work moves again: stored rollouts, train-job claims, else the phase."""
    if phase == "rollout":
        return counts(engine, run_id, 0)["rollouts"]
    if phase == "train":
        with engine.connect() as c:
            return dict(c.execute(select(TrainJobRow.id, TrainJobRow.claimed_by).where(
                TrainJobRow.run_id == run_id, TrainJobRow.kind != "rollout")).tuples().all())
    return _phase(engine, run_id)


def _moved(before: object, now: object, phase: str) -> bool:
    if phase == "train":
        # A new claim: the killed job taken over, or first the run's other pending job (the trainer runs one job at
        # a time, so the killed job is taken over once that one is done; its lease has long expired by then).
        assert isinstance(before, dict) and isinstance(now, dict)
        return any(now.get(job) not in (token, None) for job, token in before.items())
    return now != before


def _generations(engine: Any, run_id: str) -> list[tuple[str, str | None, str | None]]:
    """(status, rejection reason, raw text) of every generation: what a failure message needs to say why."""
    with engine.connect() as c:
        return [tuple(r) for r in c.execute(select(TaskRow.status, TaskRow.rejection_reason, TaskRow.raw_text)
                                            .where(TaskRow.run_id == run_id)).all()]


def _measure_recovery(engine: Any, run_id: str, phase: str, killed_at: float, before: object) -> float:
    deadline = killed_at + 600
    while time.monotonic() < deadline:
        if _moved(before, _progress(engine, run_id, phase), phase) or _phase(engine, run_id) == "closed":
            return time.monotonic() - killed_at
        time.sleep(0.5)
    raise AssertionError(f"no progress in {phase} for 600 s after the kill")


@pytest.fixture(scope="module")
def crash_stack(
    tmp_path_factory: pytest.TempPathFactory, e2e_db: str, vllm_url: str, model_dir: Path, benchmarks_dir: Path
) -> Iterator[DevStack]:
    slow_rollout = {"GENENV_ROLLOUT__WRITE_BATCH": "2", "GENENV_ROLLOUT__WRITE_DELAY_S": "1.5"}
    st = build_stack(tmp_path_factory.mktemp("crash"), e2e_db, vllm_url, model_dir, benchmarks_dir, slow_rollout)
    try:
        st.start_all()
        yield st
    finally:
        st.stop_all()


@pytest.mark.parametrize("phase", list(VICTIM))
def test_kill_mid_phase_then_resume(phase: str, crash_stack: DevStack, e2e_db: str) -> None:
    stack, victim = crash_stack, VICTIM[phase]
    # Only the orchestrator reads the fault-injection delay: restart it with this test's value. Generate gets a short
    # one too: four short tasks can be written faster than this test polls, and the kill must land in the phase.
    delay = {"orchestrator": 8, "simulator": 3}.get(victim)
    stack.env["GENENV_ORCHESTRATOR__PHASE_DELAY_S"] = f'{{"{phase}": {delay}}}' if delay else "{}"
    stack.kill("orchestrator")
    stack.restart("orchestrator")
    engine = create_engine(e2e_db)
    try:
        with httpx.Client(base_url=stack.url("control-plane"), headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=30) as client:
            run_id = client.post("/v1/runs", json={"config": CONFIG}).json()["id"]
            assert client.post(f"/v1/runs/{run_id}/start").status_code == 200
            deadline = time.monotonic() + 600
            while True:  # wait until the victim is inside the phase
                assert time.monotonic() < deadline, f"never reached {phase}: {_phase(engine, run_id)}"
                current = _phase(engine, run_id)
                if current == phase and (
                    (phase == "rollout" and _rollouts_started(engine, run_id))
                    or (phase == "train" and _train_running(engine, run_id))
                    or phase not in ("rollout", "train")
                ):
                    break
                assert current != "closed", f"run passed {phase} before the kill"
                time.sleep(0.2)
            if phase == "rollout":  # the kill must land mid-phase: some attempts stored, not all
                stored = counts(engine, run_id, 0)
                assert 0 < stored["rollouts"] < stored["valid"] * G, stored
            stack.kill(victim)
            killed_at = time.monotonic()
            before = _progress(engine, run_id, phase)  # read after the kill: nothing more from the victim
            stack.restart(victim)  # at once
            RECOVERY_S[f"{phase} ({victim})"] = recovery = _measure_recovery(engine, run_id, phase, killed_at, before)
            assert recovery <= MAX_RECOVERY_S, f"{victim} killed in {phase}: {recovery:.0f} s to recover"
            run = wait_status(client, run_id, {"completed", "failed"}, 900, stack)
            assert run["status"] == "completed", run.get("error")
        c = counts(engine, run_id, 0)
        assert c["tasks"] == SEEDS * N
        assert c["rollouts"] == c["valid"] * G
        assert c["verdicts"] == c["rollouts"]
        assert c["scores"] == c["scorable_seeds"] > 0, (c, _generations(engine, run_id))
        with engine.connect() as conn:
            per_attempt = conn.execute(select(func.count()).select_from(RolloutRow).join(TaskRow)
                                       .where(TaskRow.run_id == run_id)
                                       .group_by(RolloutRow.task_id, RolloutRow.attempt)).scalars().all()
            per_score = conn.execute(select(func.count()).select_from(CurriculumScoreRow)
                                     .where(CurriculumScoreRow.run_id == run_id)
                                     .group_by(CurriculumScoreRow.seed_id)).scalars().all()
            verdicts_per_rollout = conn.execute(select(func.count()).select_from(VerdictRow).join(RolloutRow)
                                                .join(TaskRow).where(TaskRow.run_id == run_id)
                                                .group_by(VerdictRow.rollout_id)).scalars().all()
            adapters = conn.execute(select(AdapterRow.role, AdapterRow.version)
                                    .where(AdapterRow.run_id == run_id)).all()
        assert set(per_attempt) == {1} and set(per_score) == {1} and set(verdicts_per_rollout) == {1}
        roles = sorted(r for r, _ in adapters)
        assert roles.count("simulator") == 1 and roles.count("agent") <= 1  # one version per trained role
        assert {v for _, v in adapters} == {1}
    finally:
        engine.dispose()
