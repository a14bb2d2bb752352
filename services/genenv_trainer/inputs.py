"""Read the trainer's inputs: GRPO groups (valid rollouts per task) and the simulator pool's candidates; the
policies that choose among them are pure (genenv.curriculum.selection and genenv.curriculum.pool)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, and_, exists, func, select
from sqlalchemy.orm import Session

from genenv.contracts.modes import SimulatorPool
from genenv.contracts.tasks import TaskStatus
from genenv.curriculum.pool import PoolCandidate, PoolPick, choose_pool, first_epoch
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


def pool_candidates(session: Session, run_id: str, epoch: int, *, recent_epochs: int = 0) -> list[PoolCandidate]:
    """Every valid generation of epochs [first, epoch] (recency: genenv.curriculum.pool.first_epoch) with its seed
    batch's band flag and RWR weight, as the curriculum service stored them at SCORE: what a pool policy chooses
    from. Ids and scores only; ``load_generations`` reads the chosen rows' text."""
    rows = session.execute(
        select(TaskRow.id, TaskRow.epoch, CurriculumScoreRow.in_band, CurriculumScoreRow.weight)
        .outerjoin(CurriculumScoreRow, and_(CurriculumScoreRow.run_id == TaskRow.run_id,
                                            CurriculumScoreRow.epoch == TaskRow.epoch,
                                            CurriculumScoreRow.seed_id == TaskRow.seed_id))
        .where(TaskRow.run_id == run_id, TaskRow.epoch <= epoch, TaskRow.epoch >= first_epoch(epoch, recent_epochs),
               TaskRow.status == TaskStatus.VALID.value, TaskRow.raw_text != "")
    )
    return [PoolCandidate(task_id=int(r.id), epoch=int(r.epoch), in_band=r.in_band,
                          weight=None if r.weight is None else float(r.weight)) for r in rows]


def load_generations(session: Session, picks: Sequence[PoolPick]) -> list[Generation]:
    """The chosen generations with their prompts and text, each with its pick's weight; newest epoch first."""
    if not picks:
        return []
    weight = {p.task_id: p.weight for p in picks}
    rows = session.execute(
        select(TaskRow.id, TaskRow.seed_id, TaskRow.epoch, TaskRow.prompt_messages, TaskRow.raw_text)
        .where(TaskRow.id.in_(list(weight)))
        .order_by(TaskRow.epoch.desc(), TaskRow.id)
    )
    return [Generation(task_id=r.id, seed_id=r.seed_id, prompt_messages=r.prompt_messages, raw_text=r.raw_text,
                       weight=weight[r.id], epoch=r.epoch) for r in rows]


def simulator_pool(
    session: Session, run_id: str, epoch: int, kind: SimulatorPool, *, max_size: int, recent_epochs: int = 0,
    seed: int = 0,
) -> list[Generation]:
    """D_env at ``epoch`` by the run mode's pool policy: the candidates fetched here, chosen by
    genenv.curriculum.pool.choose_pool."""
    candidates = pool_candidates(session, run_id, epoch, recent_epochs=recent_epochs)
    return load_generations(session, choose_pool(kind, candidates, max_size=max_size, seed=seed))


def pool_generations(
    session: Session, run_id: str, epoch: int, *, max_size: int, recent_epochs: int = 0
) -> list[Generation]:
    """genenv's D_env at ``epoch``: valid tasks of this and earlier epochs whose seed batch was in band, each with
    its own batch's RWR weight (paper Algorithm 1). Newest first, at most ``max_size``; with ``recent_epochs`` > 0
    only that many most recent epochs."""
    return simulator_pool(session, run_id, epoch, SimulatorPool.BAND_RWR, max_size=max_size,
                          recent_epochs=recent_epochs)


def generic_pool_generations(
    session: Session, run_id: str, epoch: int, *, max_size: int, recent_epochs: int = 0, seed: int
) -> list[Generation]:
    """The generic_rwr control's pool at ``epoch``: per epoch of the window, a random selection of the run's valid
    generations as large as the band's selection from that epoch, weight 1; newest first, at most ``max_size``."""
    return simulator_pool(session, run_id, epoch, SimulatorPool.RANDOM_SIZE_MATCHED, max_size=max_size,
                          recent_epochs=recent_epochs, seed=seed)
