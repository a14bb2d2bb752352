"""Read the trainer's inputs: GRPO groups (valid rollouts per task) and in-band generations with weights."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, and_, exists, func, select
from sqlalchemy.orm import Session

from genenv.contracts.tasks import TaskStatus
from genenv.curriculum.generic import size_matched_random
from genenv.db.models import CurriculumScoreRow, RolloutRow, TaskRow, VerdictRow
from genenv_trainer.records import Attempt, Generation, RolloutGroup


def _valid_attempts() -> Select[Any]:
    """Rollouts that produced a response and got a valid verdict, on valid tasks."""
    return (
        select(
            RolloutRow.id, RolloutRow.task_id, TaskRow.epoch, RolloutRow.prompt_messages, RolloutRow.response,
            RolloutRow.token_ids, RolloutRow.token_logprobs, VerdictRow.score,
        )
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .join(VerdictRow, and_(VerdictRow.rollout_id == RolloutRow.id, VerdictRow.valid.is_(True)))
        .where(TaskRow.status == TaskStatus.VALID.value, RolloutRow.response.is_not(None),
               RolloutRow.error.is_(None))
    )


def _groups(session: Session, stmt: Select[Any]) -> list[RolloutGroup]:
    groups: dict[int, RolloutGroup] = {}
    for r in session.execute(stmt.order_by(RolloutRow.task_id, RolloutRow.attempt)):
        g = groups.setdefault(r.task_id, RolloutGroup(task_id=r.task_id, epoch=r.epoch))
        g.attempts.append(
            Attempt(rollout_id=r.id, prompt_messages=r.prompt_messages, response=r.response, reward=r.score,
                    token_ids=r.token_ids or None, token_logprobs=r.token_logprobs or None)
        )
    return list(groups.values())


def fresh_groups(session: Session, run_id: str, epoch: int) -> list[RolloutGroup]:
    """The epoch's GRPO groups: per valid task, its attempts with valid verdicts."""
    return _groups(session, _valid_attempts().where(TaskRow.run_id == run_id, TaskRow.epoch == epoch))


def replay_groups(
    session: Session, run_id: str, epoch: int, *, max_groups: int, rng: random.Random
) -> list[RolloutGroup]:
    """Up to ``max_groups`` random groups of earlier epochs that can still teach: ≥ 2 valid attempts with
    different rewards (chosen by aggregation in SQL; only the chosen groups' rollouts are loaded)."""
    if max_groups <= 0:
        return []
    candidates: Sequence[int] = session.scalars(
        select(TaskRow.id)
        .join(RolloutRow, RolloutRow.task_id == TaskRow.id)
        .join(VerdictRow, and_(VerdictRow.rollout_id == RolloutRow.id, VerdictRow.valid.is_(True)))
        .where(TaskRow.run_id == run_id, TaskRow.epoch < epoch, TaskRow.status == TaskStatus.VALID.value,
               RolloutRow.response.is_not(None), RolloutRow.error.is_(None))
        .group_by(TaskRow.id)
        .having(func.count(VerdictRow.id) >= 2, func.min(VerdictRow.score) < func.max(VerdictRow.score))
        .order_by(TaskRow.id)
    ).all()
    chosen = rng.sample(list(candidates), min(max_groups, len(candidates)))
    if not chosen:
        return []
    return _groups(session, _valid_attempts().where(TaskRow.id.in_(chosen)))


def has_scores(session: Session, run_id: str, epoch: int) -> bool:
    """Whether the epoch's seed batches were scored."""
    return bool(session.scalar(select(exists().where(CurriculumScoreRow.run_id == run_id,
                                                     CurriculumScoreRow.epoch == epoch))))


def _band_rows(run_id: str, epoch: int, first: int) -> Select[Any]:
    """Valid tasks of epochs [first, epoch] whose seed batch was in band with a weight: what D_env is made of."""
    return (
        select(TaskRow.id, TaskRow.seed_id, TaskRow.epoch, TaskRow.prompt_messages, TaskRow.raw_text,
               CurriculumScoreRow.weight)
        .join(CurriculumScoreRow, and_(CurriculumScoreRow.run_id == TaskRow.run_id,
                                       CurriculumScoreRow.epoch == TaskRow.epoch,
                                       CurriculumScoreRow.seed_id == TaskRow.seed_id))
        .where(TaskRow.run_id == run_id, TaskRow.epoch <= epoch, TaskRow.epoch >= first,
               TaskRow.status == TaskStatus.VALID.value, CurriculumScoreRow.in_band.is_(True),
               CurriculumScoreRow.weight.is_not(None), TaskRow.raw_text != "")
    )


def _first_epoch(epoch: int, recent_epochs: int) -> int:
    return epoch - recent_epochs + 1 if recent_epochs > 0 else 0


def pool_generations(
    session: Session, run_id: str, epoch: int, *, max_size: int, recent_epochs: int = 0
) -> list[Generation]:
    """The simulator pool D_env at ``epoch``: valid tasks of this and earlier epochs whose seed batch was in band,
    each with its own batch's RWR weight (paper Algorithm 1). Newest first, at most ``max_size``; with
    ``recent_epochs`` > 0 only that many most recent epochs."""
    rows = session.execute(
        _band_rows(run_id, epoch, _first_epoch(epoch, recent_epochs))
        .order_by(TaskRow.epoch.desc(), TaskRow.id)
        .limit(max_size)
    )
    return [Generation(task_id=r.id, seed_id=r.seed_id, prompt_messages=r.prompt_messages, raw_text=r.raw_text,
                       weight=r.weight, epoch=r.epoch) for r in rows]


def generic_pool_generations(
    session: Session, run_id: str, epoch: int, *, max_size: int, recent_epochs: int = 0, seed: int
) -> list[Generation]:
    """The generic_rwr control's pool at ``epoch``: per epoch of the window, a random selection of the run's valid
    generations as large as the band's selection from that epoch (genenv.curriculum.generic), weight 1; newest
    first, at most ``max_size``, as D_env. Counts and candidate ids come from SQL; only the chosen rows are loaded."""
    first = _first_epoch(epoch, recent_epochs)
    band = _band_rows(run_id, epoch, first).subquery()
    matched = {int(e): int(n) for e, n in session.execute(
        select(band.c.epoch, func.count()).group_by(band.c.epoch))}
    candidates = session.execute(
        select(TaskRow.id, TaskRow.epoch)
        .where(TaskRow.run_id == run_id, TaskRow.epoch <= epoch, TaskRow.epoch >= first,
               TaskRow.status == TaskStatus.VALID.value, TaskRow.raw_text != "")
    ).all()
    chosen = size_matched_random([(int(i), int(e)) for i, e in candidates], matched=matched,
                                 epoch_of=lambda c: c[1], key_of=lambda c: c[0], seed=seed)[:max_size]
    if not chosen:
        return []
    rows = session.execute(
        select(TaskRow.id, TaskRow.seed_id, TaskRow.epoch, TaskRow.prompt_messages, TaskRow.raw_text)
        .where(TaskRow.id.in_([i for i, _ in chosen]))
        .order_by(TaskRow.epoch.desc(), TaskRow.id)
    )
    return [Generation(task_id=r.id, seed_id=r.seed_id, prompt_messages=r.prompt_messages, raw_text=r.raw_text,
                       weight=1.0, epoch=r.epoch) for r in rows]
