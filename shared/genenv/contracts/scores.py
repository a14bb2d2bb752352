"""Success statistics and curriculum scores."""

from __future__ import annotations

import enum
from typing import Any, Self

from pydantic import AliasChoices, Field, model_validator

from genenv.contracts.base import MAX_INT32, ReadModel, WriteModel


class SuccessCounts(WriteModel):
    """k successes out of n valid attempts of one seed batch (an entry of POST /v1/score's ``counts``)."""

    # Named as in the answer's scores[].seed_id; `key`, the name this field had first, is still accepted.
    seed_id: str = Field(
        min_length=1, max_length=200, validation_alias=AliasChoices("seed_id", "key"),
        description="The seed batch's id, returned as scores[].seed_id (`key` is accepted as an old name).",
    )
    k: int = Field(ge=0, le=MAX_INT32)
    n: int = Field(ge=0, le=MAX_INT32)

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "seed_id" in data and "key" in data:
            raise ValueError("give seed_id or its old name key, not both")
        return data

    @model_validator(mode="after")
    def _k_at_most_n(self) -> Self:
        if self.k > self.n:
            raise ValueError(f"k ({self.k}) exceeds n ({self.n}) for {self.seed_id!r}; k counts successes among n")
        return self


class CountStat(ReadModel):
    """Counts and estimates for one task or seed."""

    key: str
    k: int
    n: int
    p_hat: float | None = Field(description="k/n (None when n = 0).")
    p_beta: float = Field(description="Beta(1,1) posterior mean (k+1)/(n+2).")


class TaskLedgerEntry(CountStat):
    """Difficulty-ledger row of one task: valid-verdict counts over all its rollouts."""

    task_id: int
    seed_id: str
    epoch: int


class SeedLedgerEntry(CountStat):
    """Difficulty-ledger row of one seed: valid-verdict counts over all epochs of a run."""

    tasks: int = Field(description="Valid tasks generated from this seed.")
    epochs: int = Field(description="Epochs in which the seed was used.")


class CurriculumScore(ReadModel):
    """R_env of one seed batch and its RWR weight."""

    seed_id: str
    k: int
    n: int
    p_hat: float | None
    r_env: float | None
    weight: float | None = Field(description="RWR weight, mean 1 over the in-band batches of the update.")
    in_band: bool


class ScoreRequest(WriteModel):
    """Body of POST /v1/score: either a stored run epoch or raw counts."""

    run_id: str | None = Field(default=None, max_length=32)
    epoch: int | None = Field(default=None, ge=0, le=MAX_INT32)
    counts: list[SuccessCounts] | None = Field(default=None, max_length=100_000)
    alpha: float | None = Field(default=None, gt=0.0, lt=1.0, description="Override the run's α (raw counts).")
    beta: float | None = Field(default=None, gt=0.0, le=1e6)
    k_min: float | None = Field(default=None, ge=0.0, le=0.5)
    rwr_lambda: float | None = Field(default=None, ge=0.0, le=100.0)
    use_beta_prior: bool | None = None


class ScoreResponse(ReadModel):
    """Per seed batch scores."""

    scores: list[CurriculumScore]
    in_band_share: float | None


class StatKind(enum.StrEnum):
    """Which statistics table a RunStat row comes from."""

    TASK = "task"
    SEED = "seed"
    CURRICULUM = "curriculum"


class RunStat(ReadModel):
    """One row of GET /v1/runs/{id}/stats: task or seed success counts, or a seed batch's curriculum score."""

    kind: StatKind
    epoch: int
    key: str = Field(description="Task id (kind=task) or seed id (kind=seed|curriculum).")
    k: int
    n: int
    p_hat: float | None
    p_beta: float | None = Field(default=None, description="Beta(1,1) posterior mean (task and seed rows).")
    r_env: float | None = Field(default=None, description="α-curriculum reward (curriculum rows).")
    weight: float | None = Field(default=None, description="RWR weight (curriculum rows).")
    in_band: bool | None = Field(default=None, description="|p̂-α| ≤ k_min (curriculum rows).")
