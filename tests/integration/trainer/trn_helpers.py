"""Rows a trainer job reads: runs, tasks with GRPO groups, scored in-band generations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import JobKind
from genenv.contracts.runs import RunConfig
from genenv.db.engine import session_scope
from genenv.db.models import AdapterRow, RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import runs, train_jobs
from genenv.settings import GenEnvSettings

QUESTION = [{"role": "user", "content": "What is 7 + 5? Reply with the number only."}]


def run_config(model: Path, **overrides: Any) -> RunConfig:
    """A small run config on ``model`` (tiny batches, rank-4 LoRA)."""
    base: dict[str, Any] = {
        "base_model": str(model),
        "lora": {"rank": 4, "alpha": 8},
        "agent": {"learning_rate": 1e-3, "batch_size": 8, "micro_batch_size": 4, "max_steps_per_epoch": 2},
        "simulator": {"learning_rate": 1e-3, "batch_size": 4, "micro_batch_size": 2, "max_steps_per_epoch": 2},
    }
    for key, value in overrides.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and key in base else value
    return RunConfig.model_validate(base)


def settings_for(db_url: str, store: Path, **trainer: Any) -> GenEnvSettings:
    """Trainer process settings: the test database, a private adapter store, one torch thread."""
    return GenEnvSettings(
        database={"url": db_url}, paths={"adapter_store": store},
        trainer={"torch_threads": 1, **trainer}, worker_id="test-worker",
    )


def add_group(s: Session, run: str, epoch: int, seed: str, variation: int, rewards: list[float | None]) -> int:
    """A valid task with one rollout per reward (None = invalid verdict); answers differ by reward."""
    task = TaskRow(run_id=run, epoch=epoch, seed_id=seed, domain="arithmetic", variation=variation, status="valid",
                   payload={"q": "7+5"}, raw_text='{"question": "What is 7 + 5?"}',
                   prompt_messages=[{"role": "user", "content": f"Write a variation of seed {seed}."}])
    s.add(task)
    s.flush()
    for a, r in enumerate(rewards):
        ro = RolloutRow(task_id=task.id, attempt=a, prompt_messages=QUESTION,
                        response="12" if (r or 0) >= 0.5 else f"1{a}")
        s.add(ro)
        s.flush()
        s.add(VerdictRow(rollout_id=ro.id, valid=r is not None, score=r, success=(r or 0) >= 0.5,
                         error_kind=None if r is not None else "parse_error"))
    s.flush()
    return task.id


def agent_epoch(sessions: sessionmaker[Session], config: RunConfig, epoch: int = 0, run: str | None = None) -> str:
    """A run (new unless given) with four groups in ``epoch``: two informative, one flat, one too small."""
    with session_scope(sessions) as s:
        run = run or runs.create(s, config).id
        add_group(s, run, epoch, "seed-a", 0, [1.0, 0.0, 1.0, 0.0])
        add_group(s, run, epoch, "seed-a", 1, [0.0, 1.0, 0.0, 0.0, None])
        add_group(s, run, epoch, "seed-b", 0, [1.0, 1.0, 1.0, 1.0])
        add_group(s, run, epoch, "seed-b", 1, [1.0, None])
    return run


def job(sessions: sessionmaker[Session], run: str, epoch: int, kind: JobKind) -> int:
    """The job id of (run, epoch, kind), created pending."""
    with session_scope(sessions) as s:
        return train_jobs.create_or_get_job(s, run, epoch, kind).id


def adapters_of(sessions: sessionmaker[Session], run: str) -> list[tuple[str, int, int | None]]:
    """(role, version, parent) of every adapter row of a run."""
    with session_scope(sessions) as s:
        rows = s.scalars(select(AdapterRow).where(AdapterRow.run_id == run)
                         .order_by(AdapterRow.role, AdapterRow.version)).all()
        return [(r.role, r.version, r.parent_version) for r in rows]
