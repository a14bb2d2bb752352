"""compute_summary, field by field, on a hand-built epoch (SQLite): every number of EpochSummary from the rows it
aggregates (tasks and rejections, verdict outcomes, rollouts, generation, the band, training, evaluation)."""

from __future__ import annotations

from pathlib import Path

from genenv.contracts.adapters import Role
from genenv.contracts.runs import RunConfig
from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import (
    CurriculumScoreRow,
    EvaluationRow,
    RolloutRow,
    SeedRow,
    TaskRow,
    TrainJobRow,
    VerdictRow,
)
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import runs as run_repo
from genenv.settings import DatabaseSettings
from genenv_orchestrator.summary import compute_summary


def test_every_summary_field_comes_from_its_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'summary.db'}"
    migrate.upgrade(url)
    sessions = make_session_factory(make_engine(DatabaseSettings(url=url)))
    with session_scope(sessions) as s:
        run_id = run_repo.create(s, RunConfig(name="summary")).id
        s.add_all([SeedRow(run_id=run_id, epoch=1, seed_id=f"s{i}", domain="arithmetic", payload={},
                           context={"k": 1} if i == 0 else None) for i in range(2)])
        tasks = [TaskRow(run_id=run_id, epoch=1, seed_id="s0", domain="arithmetic", variation=v, status="valid",
                         payload={}) for v in range(3)]
        tasks += [TaskRow(run_id=run_id, epoch=1, seed_id="s1", domain="arithmetic", variation=3, status="rejected",
                          rejection_reason="invalid_json"),
                  TaskRow(run_id=run_id, epoch=0, seed_id="s1", domain="arithmetic", variation=0, status="valid"),
                  # Valid and never attempted (an outside agent's epoch closed at its deadline): tasks_unattempted.
                  TaskRow(run_id=run_id, epoch=1, seed_id="s0", domain="arithmetic", variation=4, status="valid",
                          payload={})]
        s.add_all(tasks)
        s.flush()
        # task 0: 2 of 2 solved; task 1: 1 of 2 (variance, one malformed answer); task 2: 0 of 1 + a rollout error;
        # the epoch-0 task: one rollout, counted only in rollouts_so_far.
        plan = [(tasks[0], [True, True]), (tasks[1], [True, False]), (tasks[2], [False, None]), (tasks[4], [True])]
        for task, outcomes in plan:
            for attempt, success in enumerate(outcomes):
                rollout = RolloutRow(task_id=task.id, attempt=attempt, prompt_tokens=10 * (attempt + 1),
                                     completion_tokens=4, error="boom" if success is None else None)
                s.add(rollout)
                s.flush()
                s.add(VerdictRow(rollout_id=rollout.id, valid=success is not None, success=bool(success),
                                 error_kind="rollout_error" if success is None else
                                 ("malformed" if task is tasks[1] and not success else None)))
        s.add_all([CurriculumScoreRow(run_id=run_id, epoch=1, seed_id="s0", k=3, n=5, p_hat=0.6, in_band=True),
                   CurriculumScoreRow(run_id=run_id, epoch=1, seed_id="s1", k=0, n=4, p_hat=0.0, in_band=False),
                   CurriculumScoreRow(run_id=run_id, epoch=1, seed_id="s2", k=0, n=0, p_hat=None, in_band=False)])
        s.add_all([TrainJobRow(run_id=run_id, epoch=1, kind="train_simulator", status="done",
                               metrics={"early_stopped": True, "kl": 0.2}),
                   TrainJobRow(run_id=run_id, epoch=1, kind="rollout", status="done", metrics={"x": 1}),
                   EvaluationRow(run_id=run_id, epoch=1, benchmark="arithmetic", split="test",
                                 metrics={"score": 0.25}),
                   EvaluationRow(run_id=run_id, epoch=1, benchmark="none", split="test", metrics={})])
        adapter_repo.create_adapter(s, run_id=run_id, role=Role.AGENT, version=2, path="/a", parent_version=None,
                                    metrics={})
        summary = compute_summary(s, run_id, 1, {"close": 1.5})
    assert summary.model_dump(mode="json") == {
        "p_hat": 3 / 5, "in_band_share": 0.5, "mean_task_tokens": 15.0, "mean_response_tokens": 4.0,
        "tasks_valid": 4, "tasks_rejected": 1, "rejections": {"invalid_json": 1}, "tasks_solved": 1,
        "tasks_unsolved": 1, "tasks_unattempted": 1, "rollouts": 6, "rollout_errors": 1, "verifier_errors": 0,
        "malformed_responses": 1,
        "groups_with_variance_share": 1 / 3, "prompts_with_stats_share": 0.5, "generated_tasks_so_far": 6,
        "rollouts_so_far": 7, "simulator_kl_capped": True, "agent_adapter_version": 2,
        "simulator_adapter_version": None, "benchmark_scores": {"arithmetic": 0.25}, "phase_seconds": {"close": 1.5},
        "train_metrics": {"train_simulator": {"early_stopped": True, "kl": 0.2}},
    } | {k: v for k, v in summary.model_dump(mode="json").items() if k not in _CHECKED}


_CHECKED = {"p_hat", "in_band_share", "mean_task_tokens", "mean_response_tokens", "tasks_valid", "tasks_rejected",
            "rejections", "tasks_solved", "tasks_unsolved", "tasks_unattempted", "rollouts", "rollout_errors",
            "verifier_errors",
            "malformed_responses", "groups_with_variance_share", "prompts_with_stats_share",
            "generated_tasks_so_far", "rollouts_so_far", "simulator_kl_capped", "agent_adapter_version",
            "simulator_adapter_version", "benchmark_scores", "phase_seconds", "train_metrics"}
