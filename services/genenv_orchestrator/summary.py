"""The epoch summary (the paper's training-dynamics numbers), computed with SQL aggregates over the rows: one
function per thing measured (tasks and rejections, verdict outcomes and p̂, rollouts, generation, the band,
training, evaluation), each returning its fields of EpochSummary."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Integer, and_, case, func, select
from sqlalchemy.orm import Session

from genenv.contracts.adapters import Role
from genenv.contracts.epochs import EpochSummary
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.contracts.tasks import TaskStatus
from genenv.curriculum.scoring import in_band_share
from genenv.db.models import (
    EvaluationRow,
    RolloutRow,
    RunRow,
    SeedRow,
    TaskRow,
    TrainJobRow,
    VerdictRow,
)
from genenv.db.repositories import adapters, runs, scores


def compute_summary(session: Session, run_id: str, epoch: int, phase_seconds: dict[str, float]) -> EpochSummary:
    """Aggregate tasks, rollouts, verdicts, scores, adapters and evaluations of one epoch."""
    in_epoch = and_(TaskRow.run_id == run_id, TaskRow.epoch == epoch)
    return EpochSummary(
        **_tasks(session, in_epoch),
        **_outcomes(session, in_epoch),
        **_rollouts(session, run_id, epoch, in_epoch),
        **_generation(session, run_id, epoch),
        **_curriculum(session, run_id, epoch),
        **_training(session, run_id, epoch),
        **_evaluation(session, run_id, epoch),
        phase_seconds=phase_seconds,
    )


def _tasks(session: Session, in_epoch: ColumnElement[bool]) -> dict[str, Any]:
    """Valid and rejected tasks of the epoch, the rejections by reason (most frequent first), and the valid tasks
    without any attempt."""
    valid_flag = func.cast(TaskRow.status == TaskStatus.VALID.value, Integer)
    tasks_valid, tasks_total = session.execute(
        select(func.coalesce(func.sum(valid_flag), 0), func.count(TaskRow.id)).where(in_epoch)
    ).one()
    # A rejected row without a reason (none is written so today) is counted under "unknown", so the counts always
    # add up to tasks_rejected.
    rejections = {
        reason or "unknown": int(count)
        for reason, count in session.execute(
            select(TaskRow.rejection_reason, func.count(TaskRow.id))
            .where(in_epoch, TaskRow.status == TaskStatus.REJECTED.value)
            .group_by(TaskRow.rejection_reason)
            .order_by(func.count(TaskRow.id).desc(), TaskRow.rejection_reason)
        )
    }
    # Valid tasks nobody attempted: only an outside agent's epoch closed at its deadline leaves any.
    unattempted = session.scalar(
        select(func.count(TaskRow.id)).where(in_epoch, TaskRow.status == TaskStatus.VALID.value,
                                             ~select(RolloutRow.id).where(RolloutRow.task_id == TaskRow.id).exists())
    )
    return {"tasks_valid": int(tasks_valid), "tasks_rejected": int(tasks_total) - int(tasks_valid),
            "rejections": rejections, "tasks_unattempted": int(unattempted or 0)}


def _outcomes(session: Session, in_epoch: ColumnElement[bool]) -> dict[str, Any]:
    """What the valid verdicts say per task: p̂, solved and unsolved tasks, groups with variance, malformed
    answers."""
    # Per task: valid verdicts and successes, then solved / unsolved counts over tasks that have any.
    per_task = (
        select(
            TaskRow.id.label("task_id"),
            func.count(VerdictRow.id).label("n"),
            func.sum(case((VerdictRow.success, 1), else_=0)).label("k"),
        )
        .join(RolloutRow, RolloutRow.task_id == TaskRow.id)
        .join(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
        .where(in_epoch, VerdictRow.valid.is_(True))
        .group_by(TaskRow.id)
        .subquery()
    )
    solved, unsolved, k_all, n_all = session.execute(
        select(
            func.coalesce(func.sum(case((per_task.c.k == per_task.c.n, 1), else_=0)), 0),
            func.coalesce(func.sum(case((per_task.c.k == 0, 1), else_=0)), 0),
            func.coalesce(func.sum(per_task.c.k), 0),
            func.coalesce(func.sum(per_task.c.n), 0),
        )
    ).one()
    with_variance, groups = session.execute(
        select(
            func.coalesce(func.sum(case((and_(per_task.c.k > 0, per_task.c.k < per_task.c.n), 1), else_=0)), 0),
            func.count(per_task.c.task_id),
        )
    ).one()
    malformed = session.scalar(
        select(func.count(VerdictRow.id))
        .join(RolloutRow, RolloutRow.id == VerdictRow.rollout_id)
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .where(in_epoch, VerdictRow.valid.is_(True), VerdictRow.error_kind.is_not(None))
    )
    return {"p_hat": (int(k_all) / int(n_all)) if n_all else None, "tasks_solved": int(solved),
            "tasks_unsolved": int(unsolved), "malformed_responses": int(malformed or 0),
            "groups_with_variance_share": int(with_variance) / int(groups) if groups else None}


def _rollouts(session: Session, run_id: str, epoch: int, in_epoch: ColumnElement[bool]) -> dict[str, Any]:
    """The epoch's rollouts, their errors and mean lengths, the verifier's errors, and the run's rollouts so far."""
    rollouts_so_far = session.scalar(
        select(func.count(RolloutRow.id)).join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .where(TaskRow.run_id == run_id, TaskRow.epoch <= epoch)
    )
    rollouts, rollout_errors, mean_prompt, mean_response = session.execute(
        select(
            func.count(RolloutRow.id),
            func.coalesce(func.sum(case((RolloutRow.error.is_not(None), 1), else_=0)), 0),
            func.avg(RolloutRow.prompt_tokens),
            func.avg(case((RolloutRow.error.is_(None), RolloutRow.completion_tokens), else_=None)),
        ).join(TaskRow, TaskRow.id == RolloutRow.task_id).where(in_epoch)
    ).one()
    verifier_errors = session.scalar(
        select(func.count(VerdictRow.id))
        .join(RolloutRow, RolloutRow.id == VerdictRow.rollout_id)
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .where(in_epoch, VerdictRow.valid.is_(False), VerdictRow.error_kind != "rollout_error")
    )
    return {"mean_task_tokens": None if mean_prompt is None else float(mean_prompt),
            "mean_response_tokens": None if mean_response is None else float(mean_response),
            "rollouts": int(rollouts), "rollout_errors": int(rollout_errors),
            "verifier_errors": int(verifier_errors or 0), "rollouts_so_far": int(rollouts_so_far or 0)}


def _generation(session: Session, run_id: str, epoch: int) -> dict[str, Any]:
    """The simulator's side: tasks generated so far in the run, and the share of prompts that showed the agent's
    statistics (neither applies to agent_only, whose tasks are the seeds themselves)."""
    seeds_with_stats, seeds_total = session.execute(
        select(func.count(SeedRow.context), func.count(SeedRow.id))
        .where(SeedRow.run_id == run_id, SeedRow.epoch == epoch)
    ).one()
    # Generated so far: the summary is written at CLOSE, before the next epoch generates, so every task row of
    # the run was written by now (static_augmentation writes all of its tasks at epoch 0); a mode without a
    # simulator (agent_only) stores the seeds themselves as its tasks, not generations.
    run = session.get(RunRow, run_id)
    generates = run is not None and runs.config_of(run).uses_simulator
    generated = 0 if not generates else session.scalar(
        select(func.count(TaskRow.id)).where(TaskRow.run_id == run_id)
    )
    return {"generated_tasks_so_far": int(generated or 0),
            "prompts_with_stats_share": int(seeds_with_stats) / int(seeds_total) if seeds_total and generates
            else None}


def _curriculum(session: Session, run_id: str, epoch: int) -> dict[str, Any]:
    """The share of scored seed batches in the α band (the curriculum's one definition, on the stored scores)."""
    return {"in_band_share": in_band_share(scores.epoch_scores(session, run_id, epoch))}


def _training(session: Session, run_id: str, epoch: int) -> dict[str, Any]:
    """The epoch's training jobs' metrics (whether the simulator's KL cap stopped it) and the latest adapters."""
    agent = adapters.latest_adapter(session, run_id, Role.AGENT)
    simulator = adapters.latest_adapter(session, run_id, Role.SIMULATOR)
    jobs = session.scalars(select(TrainJobRow).where(TrainJobRow.run_id == run_id, TrainJobRow.epoch == epoch))
    train_metrics = {j.kind: dict(j.metrics) for j in jobs if j.kind != "rollout"}
    return {"simulator_kl_capped": bool(train_metrics.get("train_simulator", {}).get("early_stopped")),
            "agent_adapter_version": None if agent is None else agent.version,
            "simulator_adapter_version": None if simulator is None else simulator.version,
            "train_metrics": train_metrics}


def _evaluation(session: Session, run_id: str, epoch: int) -> dict[str, Any]:
    """Each benchmark's headline score at this epoch."""
    evals = session.scalars(
        select(EvaluationRow).where(EvaluationRow.run_id == run_id, EvaluationRow.epoch == epoch)
    )
    scores = {e.benchmark: s for e in evals if (s := EvaluationMetrics.parse(e.metrics).headline_score()) is not None}
    return {"benchmark_scores": scores}
