"""Helpers for the foundation integration tests (imported by conftest and the test modules)."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import RunRow
from genenv.inference.launcher import started
from genenv.settings import GenEnvSettings

TOKEN = "foundation-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class RecordingEnqueuer:
    """Records advance requests and the run status a *separate* connection saw at that moment."""

    db_url: str
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def advance_run(self, run_id: str) -> None:
        engine = make_engine(GenEnvSettings(database={"url": self.db_url}).database)
        try:
            with session_scope(make_session_factory(engine)) as s:
                status = s.scalars(select(RunRow.status).where(RunRow.id == run_id)).one()
        finally:
            engine.dispose()
        self.calls.append((run_id, status))

    def close(self) -> None:
        return None


def app_settings(db_url: str, **overrides: object) -> GenEnvSettings:
    """Settings of a control plane under test: auth on, small body limit."""
    values: dict[str, object] = {
        "database": {"url": db_url},
        "auth": {"tokens": [TOKEN]},
        "max_body_bytes": 64 * 1024,
    }
    values.update(overrides)
    return GenEnvSettings(**values)  # type: ignore[arg-type]


@dataclass
class Api:
    """The app under test, an authenticated client and the enqueuer it calls."""

    client: httpx.AsyncClient
    transport: httpx.ASGITransport
    enqueuer: RecordingEnqueuer
    app: FastAPI


def run_status(db_url: str, run_id: str) -> RunStatus:
    """A run's status as a fresh connection sees it."""
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            return RunStatus(s.scalars(select(RunRow.status).where(RunRow.id == run_id)).one())
    finally:
        engine.dispose()


def seed_run_data(s: Session, run_id: str) -> dict[str, list[int]]:
    """Two epochs of plausible rows under ``run_id``: tasks, rollouts, verdicts, stats, scores, adapters, evals."""
    from genenv.db.models import (
        AdapterRow,
        CurriculumScoreRow,
        EvaluationRow,
        RolloutRow,
        SeedStatRow,
        TaskRow,
        TaskStatRow,
        VerdictRow,
    )

    ids: dict[str, list[int]] = {"tasks": [], "rollouts": []}
    for epoch in (0, 1):
        for seed in ("s1", "s2"):
            for variation in (0, 1):
                rejected = seed == "s2" and variation == 1
                task = TaskRow(
                    run_id=run_id, epoch=epoch, seed_id=seed, domain="arithmetic" if seed == "s1" else "qa",
                    variation=variation, status="rejected" if rejected else "valid",
                    payload=None if rejected else {"question": f"{epoch}-{seed}-{variation}"},
                    rejection_reason="not_json" if rejected else None,
                )
                s.add(task)
                s.flush()
                ids["tasks"].append(task.id)
                if rejected:
                    continue
                for attempt in range(2):
                    rollout = RolloutRow(task_id=task.id, attempt=attempt, response=str(attempt), token_logprobs=[-0.5])
                    s.add(rollout)
                    s.flush()
                    ids["rollouts"].append(rollout.id)
                    s.add(VerdictRow(rollout_id=rollout.id, valid=True, score=float(attempt), success=attempt == 1))
                s.add(TaskStatRow(task_id=task.id, n=2, k=1, p_hat=0.5, p_beta=0.5))
            s.add(SeedStatRow(run_id=run_id, epoch=epoch, seed_id=seed, n=4, k=2, p_hat=0.5, p_beta=0.5))
            s.add(CurriculumScoreRow(run_id=run_id, epoch=epoch, seed_id=seed, k=2, n=4, p_hat=0.5, r_env=1.0,
                                     weight=1.0, in_band=True))
        s.add(AdapterRow(run_id=run_id, role="agent", version=epoch + 1, path=f"/a/{epoch}",
                         parent_version=epoch or None))
        s.add(AdapterRow(run_id=run_id, role="simulator", version=epoch + 1, path=f"/s/{epoch}"))
        s.add(EvaluationRow(run_id=run_id, epoch=epoch, benchmark="bfcl", split="test", metrics={"acc": 0.1},
                            n_items=5))
    s.add(EvaluationRow(run_id=run_id, epoch=1, benchmark="api_bank", split="test", metrics={"acc": 0.2}, n_items=3))
    s.flush()
    return ids


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served_control_plane(db_url: str, token: str, log_path: Path) -> Iterator[str]:
    """`genenv serve control-plane` as a real uvicorn process on a free loopback port (auth on); yields its URL."""
    port = free_port()
    env = {**os.environ, "GENENV_DATABASE__URL": db_url, "GENENV_AUTH__TOKENS": json.dumps([token])}
    argv = [sys.executable, "-m", "genenv.cli.main", "serve", "control-plane", "--port", str(port)]
    with started(argv, f"http://127.0.0.1:{port}", path="/healthz", timeout_s=60, poll_s=0.2, log=log_path, env=env,
                 stop_timeout_s=20) as server:
        yield server.url


def sample_summary(epoch: int) -> EpochSummary:
    """A plausible epoch summary whose numbers move with ``epoch`` (p̂ climbs towards α, lengths grow)."""
    return EpochSummary(
        p_hat=0.2 + 0.08 * epoch,
        in_band_share=min(1.0, 0.25 * epoch),
        mean_task_tokens=80.0 + 5 * epoch,
        mean_response_tokens=30.0 + 4 * epoch,
        tasks_valid=30 + epoch,
        tasks_rejected=2 + epoch % 3,
        tasks_solved=3 + epoch,
        tasks_unsolved=10 - epoch,
        rollouts=8 * (30 + epoch),
        agent_adapter_version=epoch + 1,
        simulator_adapter_version=epoch + 1,
        benchmark_scores={"bfcl": 0.1 + 0.05 * epoch} if epoch % 2 == 1 else {},
        phase_seconds={"generate": 12.5, "rollout": 40.0 + epoch, "verify": 1.5, "score": 0.2, "train": 95.0,
                       "publish": 3.0, "close": 0.1},
    )


def insert_run_with_epochs(s: Session, *, name: str, closed: int, epochs: int = 6) -> str:
    """A started run (α=0.5, k_min=0.1) with ``closed`` summarised epochs and one more epoch in ROLLOUT."""
    from genenv.db.repositories import epochs as epoch_repo
    from genenv.db.repositories import runs as run_repo

    run = run_repo.create(s, RunConfig(name=name, epochs=epochs))
    run_repo.apply_action(s, run.id, "start")
    for i in range(closed):
        epoch_repo.upsert(s, run.id, i, phase=EpochPhase.CLOSED, summary=sample_summary(i))
    epoch_repo.upsert(s, run.id, closed, phase=EpochPhase.ROLLOUT)
    return run.id
