"""The ROLLOUT phase of an external_agent run decides from the stored attempts alone (issue 33): it dispatches
nothing, closes when every valid task has rollouts_per_task attempts, or from external.epoch_deadline_s on once
min_attempted_share of the tasks have any; before that share it keeps waiting. Real SQLite and Postgres."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import session_scope
from genenv.db.models import EpochRow, RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import runs
from genenv.settings import GenEnvSettings
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.phases import PhaseResult, RunView, _train_kinds, rollout

G = 2
TASKS = 5


class NoWorkers:
    """Dispatches nothing: an outside agent's epoch must never reach the rollout workers."""

    inline = False

    async def rollout(self, run_id: str, epoch: int) -> None:
        raise AssertionError("an external_agent epoch dispatched a rollout job")

    async def train(self, job_id: int, kind: str) -> None:
        raise AssertionError("not in this test")

    async def advance_later(self, run_id: str, delay_s: float, token: str | None = None) -> None:
        raise AssertionError("not in this test")


def _run(sessions: sessionmaker[Session], started_ago_s: float) -> tuple[RunView, list[int]]:
    config = RunConfig.model_validate({"mode": "external_agent", "rollouts_per_task": G,
                                       "external": {"epoch_deadline_s": 60, "min_attempted_share": 0.6}})
    with session_scope(sessions) as s:
        run = runs.create(s, config)
        runs.move(s, run, RunStatus.RUNNING)
        s.add(EpochRow(run_id=run.id, index=0, phase="rollout",
                       summary={"_phase_started": {"rollout": time.time() - started_ago_s}}))
        tasks = [TaskRow(run_id=run.id, epoch=0, seed_id="s", domain="arithmetic", variation=i, status="valid",
                         payload={"expression": "1 + 1", "answer": 2}) for i in range(TASKS)]
        s.add_all(tasks)
        s.flush()
        return RunView(id=run.id, config=config), [t.id for t in tasks]


def _attempt(sessions: sessionmaker[Session], task_id: int, n: int, first: int = 0) -> None:
    with session_scope(sessions) as s:
        for a in range(first, first + n):
            row = RolloutRow(task_id=task_id, attempt=a, response="2", origin="client_reply")
            s.add(row)
            s.flush()
            s.add(VerdictRow(rollout_id=row.id, valid=True, score=1.0, success=True))


async def _phase(sessions: sessionmaker[Session], view: RunView) -> PhaseResult:
    unused: Any = None  # the phase reads the database only
    ctx = OrchestratorContext(settings=GenEnvSettings(), session_factory=sessions, simulator=unused, verifier=unused,
                              curriculum=unused, dispatcher=NoWorkers(), publisher=unused)
    return await rollout(ctx, view, 0)


async def test_before_the_deadline_only_a_complete_epoch_closes(sessions: sessionmaker[Session]) -> None:
    view, ids = _run(sessions, started_ago_s=1)
    assert await _phase(sessions, view) is PhaseResult.WAITING
    for task_id in ids[:-1]:
        _attempt(sessions, task_id, G)
    _attempt(sessions, ids[-1], G - 1)
    assert await _phase(sessions, view) is PhaseResult.WAITING  # one attempt short
    _attempt(sessions, ids[-1], 1, first=G - 1)
    assert await _phase(sessions, view) is PhaseResult.DONE


async def test_after_the_deadline_it_closes_once_the_share_is_attempted(sessions: sessionmaker[Session]) -> None:
    view, ids = _run(sessions, started_ago_s=61)
    _attempt(sessions, ids[0], 1)
    _attempt(sessions, ids[1], G)
    assert await _phase(sessions, view) is PhaseResult.WAITING  # 2 of 5 attempted < 0.6: keep waiting
    _attempt(sessions, ids[2], 1)
    assert await _phase(sessions, view) is PhaseResult.DONE  # 3 of 5 = 0.6


async def test_no_valid_task_closes_at_once_and_the_agent_is_never_trained(sessions: sessionmaker[Session]) -> None:
    view, ids = _run(sessions, started_ago_s=0)
    with session_scope(sessions) as s:
        for task in s.query(TaskRow).filter(TaskRow.id.in_(ids)):
            task.status = "rejected"
    assert await _phase(sessions, view) is PhaseResult.DONE
    assert [k.value for k in _train_kinds(view.config)] == ["train_simulator"]
