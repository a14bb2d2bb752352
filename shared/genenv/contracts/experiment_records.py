"""The stored rows an experiment's series is computed from, as the repository reads them.

In-process only (never on the wire): genenv.db.repositories.experiments.series_records returns them and the pure
genenv.experiments.series turns them into the ExperimentSeries. They live here, below both, so that the database
layer needs no domain plug-in and the aggregation no database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from genenv.contracts.epochs import EpochSummary
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.contracts.experiments import ExperimentCreate, ExperimentStatus
from genenv.contracts.runs import RunStatus


@dataclass(frozen=True)
class MemberRecord:
    """A member run, in the experiment's run order."""

    run_id: str
    mode: str
    replicate: int
    status: RunStatus


@dataclass(frozen=True)
class ClosedEpochRecord:
    """A closed epoch of a member and its stored summary."""

    run_id: str
    epoch: int
    summary: EpochSummary


@dataclass(frozen=True)
class EvaluationRecord:
    """The held-out benchmark's metrics of a member after one epoch."""

    run_id: str
    epoch: int
    metrics: EvaluationMetrics


@dataclass(frozen=True)
class PayloadRecord:
    """A valid task's (or a seed's) payload with its epoch and seed id; for a task also its own success counts
    (task_stat: k successes of n valid attempts; 0/0 before the epoch was scored)."""

    run_id: str
    epoch: int
    seed_id: str
    payload: dict[str, Any]
    k: int = 0
    n: int = 0


@dataclass(frozen=True)
class ScoreRecord:
    """One curriculum score (a seed batch)."""

    run_id: str
    epoch: int
    seed_id: str
    k: int
    n: int
    p_hat: float | None
    in_band: bool


@dataclass(frozen=True)
class TrainJobRecord:
    """A training job with its stored metrics."""

    run_id: str
    epoch: int
    kind: str
    status: str
    adapter_version: int | None
    metrics: dict[str, Any]


@dataclass(frozen=True)
class ExperimentRecords:
    """Everything series_records read for one experiment; per-member lists are in (epoch, seed) order.

    ``tasks`` and ``seeds`` leave out the epochs the caller said it already knows (see series_records); ``written``
    is tasks generated per simulator adapter name, per run.
    """

    experiment_id: str
    name: str
    status: ExperimentStatus
    spec: ExperimentCreate
    members: list[MemberRecord]
    epochs: list[ClosedEpochRecord] = field(default_factory=list)
    evaluations: list[EvaluationRecord] = field(default_factory=list)
    tasks: list[PayloadRecord] = field(default_factory=list)
    seeds: list[PayloadRecord] = field(default_factory=list)
    scores: list[ScoreRecord] = field(default_factory=list)
    train_jobs: list[TrainJobRecord] = field(default_factory=list)
    written: dict[str, dict[str, int]] = field(default_factory=dict)
