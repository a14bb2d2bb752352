"""Repositories on real SQLite and Postgres: round trips, state transitions, pagination, unique keys."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from fnd_helpers import run_status, seed_run_data
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from genenv.contracts.adapters import Role
from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.errors import ConflictError, NotFoundError
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.contracts.scores import StatKind
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import (
    AdapterRow,
    CurriculumScoreRow,
    EpochRow,
    EvaluationRow,
    RolloutRow,
    RunRow,
    SeedStatRow,
    TaskRow,
    TaskStatRow,
    TrainJobRow,
    VerdictRow,
)
from genenv.db.repositories import epochs, inspection, runs
from genenv.db.repositories.common import InvalidCursorError


def test_run_round_trip(session: Session) -> None:
    config = RunConfig.model_validate({"name": "round trip", "rollouts_per_task": 4, "curriculum": {"alpha": 0.3}})
    row = runs.create(session, config)
    session.expire_all()
    run = runs.to_contract(runs.get(session, row.id))
    assert run.config == config and run.name == "round trip"
    assert run.status is RunStatus.CREATED and run.current_epoch == 0
    assert run.created_at.tzinfo is UTC and abs(run.created_at - datetime.now(UTC)).total_seconds() < 60


def test_repositories_flush_but_never_commit(db_url: str, session: Session) -> None:


    row = runs.create(session, RunConfig())
    assert session.scalars(select(RunRow.id).where(RunRow.id == row.id)).one() == row.id  # flushed
    with pytest.raises(Exception, match="No row was found"):
        run_status(db_url, row.id)  # another connection does not see it: not committed


def test_get_missing_run_is_not_found(session: Session) -> None:
    with pytest.raises(NotFoundError) as info:
        runs.get(session, "does-not-exist")
    assert info.value.status_code == 404 and info.value.param == "run_id"


def test_nul_characters_are_rejected_before_the_insert(session: Session) -> None:
    with pytest.raises(Exception, match="NUL"):
        runs.create(session, RunConfig(name="bad\x00name"))


def test_transitions_follow_the_state_machine(session: Session) -> None:
    run_id = runs.create(session, RunConfig()).id
    assert runs.apply_action(session, run_id, "start").status == "running"
    assert runs.apply_action(session, run_id, "pause").status == "paused"
    with pytest.raises(ConflictError):
        runs.apply_action(session, run_id, "pause")
    assert runs.apply_action(session, run_id, "resume").status == "running"
    failed = runs.transition(session, run_id, RunStatus.FAILED, error="trainer exploded")
    assert (failed.status, failed.error) == ("failed", "trainer exploded")
    with pytest.raises(ConflictError) as info:
        runs.transition(session, run_id, RunStatus.RUNNING)
    assert info.value.status_code == 409
    assert runs.get(session, run_id).status == "failed"  # a rejected transition changes nothing


def test_list_runs_pages_newest_first_with_status_filter(session: Session) -> None:
    mine = [runs.create(session, RunConfig(name=f"page-{i}")).id for i in range(7)]
    runs.apply_action(session, mine[2], "start")
    seen: list[str] = []
    cursor = None
    while True:
        page = runs.list_runs(session, cursor=cursor, limit=3)
        assert len(page.items) <= 3
        seen += [r.id for r in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert [i for i in seen if i in mine] == list(reversed(mine))
    running = runs.list_runs(session, status=RunStatus.RUNNING, limit=500).items
    assert mine[2] in {r.id for r in running} and all(r.status is RunStatus.RUNNING for r in running)
    with pytest.raises(InvalidCursorError):
        runs.list_runs(session, cursor="garbage")


def test_epoch_upsert_is_idempotent(session: Session) -> None:
    run_id = runs.create(session, RunConfig()).id
    first = epochs.upsert(session, run_id, 0)
    again = epochs.upsert(session, run_id, 0, phase=EpochPhase.ROLLOUT)
    assert first.id == again.id and again.phase == "rollout"
    summary = EpochSummary(p_hat=0.4, tasks_valid=3, benchmark_scores={"bfcl": 0.1})
    done = epochs.upsert(session, run_id, 0, phase=EpochPhase.CLOSED, summary=summary, finished_at=datetime.now(UTC))
    assert session.scalars(select(EpochRow).where(EpochRow.run_id == run_id)).all() == [done]
    session.expire_all()
    epoch = epochs.to_contract(epochs.get(session, run_id, 0))
    assert epoch.phase is EpochPhase.CLOSED and epoch.summary == summary and epoch.finished_at is not None
    epochs.upsert(session, run_id, 1)
    page = epochs.list_epochs(session, run_id, limit=1)
    assert [e.index for e in page.items] == [0] and page.next_cursor
    assert [e.index for e in epochs.list_epochs(session, run_id, cursor=page.next_cursor).items] == [1]
    with pytest.raises(NotFoundError):
        epochs.get(session, run_id, 7)


def test_inspection_filters_and_pages(session: Session) -> None:
    run_id = runs.create(session, RunConfig()).id
    other = runs.create(session, RunConfig()).id
    ids = seed_run_data(session, run_id)
    seed_run_data(session, other)

    all_tasks = inspection.list_tasks(session, run_id, limit=500).items
    assert [t.id for t in all_tasks] == ids["tasks"]
    assert len(inspection.list_tasks(session, run_id, epoch=1, limit=500).items) == 4
    assert {t.seed_id for t in inspection.list_tasks(session, run_id, seed_id="s2", limit=500).items} == {"s2"}
    rejected = inspection.list_tasks(session, run_id, status=TaskStatus.REJECTED, limit=500).items
    assert len(rejected) == 2 and all(t.rejection_reason == "not_json" for t in rejected)
    assert len(inspection.list_tasks(session, run_id, domain="qa", epoch=0, limit=500).items) == 2

    first = inspection.list_tasks(session, run_id, limit=5)
    rest = inspection.list_tasks(session, run_id, cursor=first.next_cursor, limit=5)
    assert [t.id for t in first.items + rest.items] == ids["tasks"] and rest.next_cursor is None

    rollouts = inspection.list_rollouts(session, run_id, limit=500).items
    assert [r.id for r in rollouts] == ids["rollouts"]
    assert len(inspection.list_rollouts(session, run_id, task_id=ids["tasks"][0]).items) == 2
    assert len(inspection.list_rollouts(session, run_id, epoch=1, limit=500).items) == 6

    assert len(inspection.list_stats(session, run_id, kind=StatKind.TASK, limit=500).items) == 6
    seed_stats = inspection.list_stats(session, run_id, kind=StatKind.SEED, epoch=1).items
    assert [(s.key, s.epoch, s.p_beta) for s in seed_stats] == [("s1", 1, 0.5), ("s2", 1, 0.5)]
    scores = inspection.list_stats(session, run_id, kind=StatKind.CURRICULUM).items
    assert len(scores) == 4 and all(s.in_band and s.r_env == 1.0 for s in scores)

    agents = inspection.list_adapters(session, run_id, role=Role.AGENT).items
    assert [(a.version, a.parent_version) for a in agents] == [(1, None), (2, 1)]
    assert agents[0].created_at.tzinfo is UTC
    assert len(inspection.list_adapters(session, run_id).items) == 4
    assert len(inspection.list_evaluations(session, run_id).items) == 3
    assert [e.benchmark for e in inspection.list_evaluations(session, run_id, epoch=1).items] == ["bfcl", "api_bank"]
    assert len(inspection.list_evaluations(session, run_id, benchmark="api_bank").items) == 1


def _duplicate(session: Session, make: Callable[[], object]) -> None:
    session.add(make())
    session.flush()
    nested = session.begin_nested()
    session.add(make())
    with pytest.raises(IntegrityError):
        session.flush()
    nested.rollback()


@pytest.mark.parametrize(
    "table",
    ["rollout", "adapter", "epoch", "task", "task_stat", "seed_stat", "curriculum_score", "verdict", "train_job",
     "evaluation"],
)
def test_unique_keys_reject_duplicates(session: Session, table: str) -> None:
    run_id = runs.create(session, RunConfig()).id
    task = TaskRow(run_id=run_id, epoch=0, seed_id="s", domain="d", variation=0, status="valid")
    session.add(task)
    session.flush()
    rollout = RolloutRow(task_id=task.id, attempt=0)
    if table != "rollout":
        session.add(rollout)
        session.flush()
    makers: dict[str, Callable[[], object]] = {
        "rollout": lambda: RolloutRow(task_id=task.id, attempt=0),
        "adapter": lambda: AdapterRow(run_id=run_id, role="agent", version=1, path="/x"),
        "epoch": lambda: EpochRow(run_id=run_id, index=0, phase="generate"),
        "task": lambda: TaskRow(run_id=run_id, epoch=1, seed_id="s", domain="d", variation=0, status="valid"),
        "task_stat": lambda: TaskStatRow(task_id=task.id, n=1, k=1, p_hat=1.0, p_beta=0.6),
        "seed_stat": lambda: SeedStatRow(run_id=run_id, epoch=0, seed_id="s", n=1, k=1, p_hat=1.0, p_beta=0.6),
        "curriculum_score": lambda: CurriculumScoreRow(run_id=run_id, epoch=0, seed_id="s", k=1, n=1, in_band=False),
        "verdict": lambda: VerdictRow(rollout_id=rollout.id, valid=True, score=1.0),
        "train_job": lambda: TrainJobRow(run_id=run_id, epoch=0, kind="train_agent", status="pending"),
        "evaluation": lambda: EvaluationRow(idempotency_key=f"{run_id}/0/bfcl", benchmark="bfcl", split="test"),
    }
    _duplicate(session, makers[table])


def test_different_keys_coexist(session: Session) -> None:
    run_id = runs.create(session, RunConfig()).id
    pairs = [(r, v) for r in ("agent", "simulator") for v in (1, 2)]
    session.add_all([AdapterRow(run_id=run_id, role=r, version=v, path="/x") for r, v in pairs])
    session.flush()
    assert len(inspection.list_adapters(session, run_id).items) == 4
