"""Thin routes over the ledger and scores repositories."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from genenv.contracts.base import MAX_INT32
from genenv.contracts.errors import GenEnvError
from genenv.contracts.pagination import DEFAULT_LIMIT, Page
from genenv.contracts.runs import CurriculumConfig
from genenv.contracts.scores import ScoreRequest, ScoreResponse, SeedLedgerEntry, TaskLedgerEntry
from genenv.curriculum.scoring import score_batches
from genenv.db.repositories import ledger, runs
from genenv.http.auth import CallerDep
from genenv.http.pagination import Cursor, Limit
from genenv_curriculum import scoring
from genenv_curriculum.deps import SessionDep

router = APIRouter(prefix="/v1", tags=["curriculum"])

_OVERRIDES = ("alpha", "beta", "k_min", "rwr_lambda", "use_beta_prior")
RunId = Annotated[str, Path(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]
EpochIndex = Annotated[int, Path(ge=0, le=MAX_INT32)]


@router.post("/score", response_model=ScoreResponse)
def score(body: ScoreRequest, session: SessionDep, caller: CallerDep) -> ScoreResponse:
    """Score seed batches: a stored run epoch (scores are stored, idempotently) or raw counts (not stored)."""
    if body.run_id is not None:
        runs.require(session, body.run_id, caller=caller)  # another tenant's run is a 404, as an unknown one
    overrides = {f: getattr(body, f) for f in _OVERRIDES if getattr(body, f) is not None}
    if body.counts is None:
        if body.run_id is None or body.epoch is None:
            raise GenEnvError("give run_id and epoch, or counts", param="counts", code="missing_input")
        if overrides:
            # Stored scores must be the run's own: they drive the simulator update and the epoch summary.
            raise GenEnvError(
                f"{sorted(overrides)} cannot override a run's curriculum settings when scoring a stored epoch; "
                "drop them, or send raw counts",
                param=sorted(overrides)[0],
                code="override_not_allowed",
            )
        return scoring.score_epoch(session, body.run_id, body.epoch)
    if body.epoch is not None:
        raise GenEnvError("epoch goes with run_id alone; raw counts are not stored", param="epoch")
    base = runs.run_config(session, body.run_id).curriculum if body.run_id else CurriculumConfig()
    config = base.model_copy(update=overrides)
    return score_batches([(c.seed_id, c.k, c.n) for c in body.counts], config)


@router.get("/runs/{run_id}/epochs/{epoch}/scores", response_model=ScoreResponse)
def get_scores(run_id: RunId, epoch: EpochIndex, session: SessionDep, caller: CallerDep) -> ScoreResponse:
    """The stored curriculum scores of one epoch (empty list when not scored yet)."""
    runs.require(session, run_id, caller=caller)
    return scoring.stored_scores(session, run_id, epoch)


@router.get("/runs/{run_id}/ledger/tasks", response_model=Page[TaskLedgerEntry])
def get_task_ledger(
    run_id: RunId,
    session: SessionDep,
    caller: CallerDep,
    epoch: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
    seed_id: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")] = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Page[TaskLedgerEntry]:
    """Per task: valid-verdict counts k/n, k/n and the Beta(1,1) posterior mean."""
    runs.get(session, run_id, caller=caller)
    return ledger.task_ledger_page(session, run_id, epoch=epoch, seed_id=seed_id, cursor=cursor, limit=limit)


@router.get("/runs/{run_id}/ledger/seeds", response_model=Page[SeedLedgerEntry])
def get_seed_ledger(
    run_id: RunId, session: SessionDep, caller: CallerDep, cursor: Cursor = None, limit: Limit = DEFAULT_LIMIT
) -> Page[SeedLedgerEntry]:
    """Per seed, over all epochs: valid-verdict counts and estimates."""
    runs.get(session, run_id, caller=caller)
    return ledger.seed_ledger_page(session, run_id, cursor=cursor, limit=limit)
