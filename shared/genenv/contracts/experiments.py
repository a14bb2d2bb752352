"""Experiments: one run-config template run in several modes × replicates over the same seeds and settings.

Each member is an ordinary run (same orchestrator, same tables); the experiment adds the grouping, the start and
cancel rules over its members and the series its report and dashboard page are drawn from.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Literal, Self

from pydantic import Field, model_validator

from genenv.contracts import modes as mode_table
from genenv.contracts.base import ReadModel, WriteModel
from genenv.contracts.modes import MODES, KnownMode, ModeName
from genenv.contracts.runs import RunConfig, RunStatus


class ExperimentStatus(enum.StrEnum):
    """created → running → completed | failed | cancelled (derived from the members once started)."""

    CREATED = "created"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


ExperimentAction = Literal["start", "cancel"]


class ExperimentCreate(WriteModel):
    """Body of POST /v1/experiments (and the file ``genenv experiment run`` reads)."""

    name: str = Field(default="experiment", min_length=1, max_length=200, description="Human-readable label.")
    template: RunConfig = Field(
        default_factory=RunConfig,
        description="The run config every member starts from; each member overrides only `mode`, `random_seed` "
        "and `name`.",
    )
    modes: list[KnownMode] = Field(
        default_factory=lambda: ["genenv", "random_simulator", "static_augmentation"],
        min_length=1,
        max_length=16,
        description=f"Run modes compared ({' | '.join(MODES)}: the run-mode table, GET /v1/modes), each once per "
        "replicate.",
    )
    replicates: int = Field(default=3, ge=1, le=20, description="Replicates per mode (one random seed each).")
    random_seeds: list[int] | None = Field(
        default=None,
        description="The replicates' random seeds, one per replicate, shared by every mode (default: "
        "template.random_seed + 0, 1, …). Replicate r of every mode uses the same seed, so the modes see the "
        "same seed tasks.",
    )
    level_sides: dict[str, Literal["above", "below"]] = Field(
        default_factory=dict,
        description="Pre-registered side of each difficulty group (the domain's group_field, e.g. an arithmetic "
        "level) relative to α, fixed from a pilot before the run, never from its outcome. With it the report "
        "decides the two-sided endpoints: genenv − random_simulator p̂ on the groups above α (predicted < 0) and "
        "below α (predicted > 0), on non-repeated tasks, over replicates.",
    )
    concurrent: bool = Field(
        default=False,
        description="Start every member at once (distributed stack) instead of one after another. The embedded "
        "default always runs them one after another.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if len(set(self.modes)) != len(self.modes):
            raise ValueError("modes must not repeat")
        outside = [m for m in self.modes if mode_table.policy(m).external_agent]
        if outside:
            # Nobody would make its members' attempts: an outside agent's run is created and fed by its client.
            raise ValueError(f"{', '.join(outside)} has an outside agent, which an experiment cannot drive; create "
                             "such a run on its own (POST /v1/runs) and feed it from your client")
        if self.random_seeds is not None:
            if len(self.random_seeds) != self.replicates:
                raise ValueError(
                    f"random_seeds has {len(self.random_seeds)} entries for {self.replicates} replicates"
                )
            if len(set(self.random_seeds)) != len(self.random_seeds):
                raise ValueError("random_seeds must not repeat")
            if any(not 0 <= s <= 2**32 - 1 for s in self.random_seeds):
                raise ValueError("random_seeds must lie in [0, 2**32 - 1]")
        elif self.template.random_seed + self.replicates - 1 > 2**32 - 1:
            raise ValueError("template.random_seed + replicates exceeds 2**32 - 1")
        return self

    def seeds(self) -> list[int]:
        """The random seed of each replicate."""
        if self.random_seeds is not None:
            return list(self.random_seeds)
        return [self.template.random_seed + r for r in range(self.replicates)]


class ExperimentMember(ReadModel):
    """One member run of an experiment."""

    run_id: str
    mode: ModeName
    replicate: int
    random_seed: int
    status: RunStatus
    current_epoch: int
    error: str | None = None


class Experiment(ReadModel):
    """An experiment as the control plane reports it."""

    id: str
    name: str
    status: ExperimentStatus
    template: RunConfig
    modes: list[ModeName]
    replicates: int
    concurrent: bool
    members: list[ExperimentMember]
    created_at: datetime
    updated_at: datetime


class MemberEpoch(ReadModel):
    """One epoch of one member: the numbers the report and the dashboard draw."""

    epoch: int
    p_hat: float | None = Field(default=None, description="Agent success on this epoch's tasks (the epoch summary).")
    in_band_share: float | None = Field(default=None, description="Share of seed batches with |p̂-α| ≤ k_min.")
    heldout_accuracy: float | None = Field(
        default=None, description="Greedy accuracy on the held-out benchmark evaluated after this epoch's update."
    )
    heldout_by_category: dict[str, float] = Field(
        default_factory=dict, description="Held-out accuracy per category (for arithmetic: per difficulty level)."
    )
    generated_tasks_so_far: int = Field(default=0, description="Tasks the simulator wrote up to this epoch.")
    mean_response_tokens: float | None = None
    difficulty: dict[str, float] = Field(
        default_factory=dict,
        description="Mean difficulty measures of this epoch's valid tasks (the domain's measures, see "
        "ExperimentSeries.difficulty_measures).",
    )
    valid_tasks: int = Field(default=0, description="Valid tasks of the epoch.")
    repeated_tasks: int = Field(
        default=0, description="Of those, the ones repeating word for word (the domain's canonical form, whitespace "
        "normalised) a valid task of an earlier epoch of the same run.",
    )


class SeedBatch(ReadModel):
    """One seed batch of one member (the n variations of a seed in an epoch × G attempts): what the curriculum
    scored, the unit the paired analysis matches across modes by (replicate, epoch, seed)."""

    epoch: int
    seed_id: str
    group: str | None = Field(default=None, description="The seed's difficulty group (the domain's group_field).")
    k: int = Field(description="Successful attempts.")
    n: int = Field(description="Valid attempts.")
    p_hat: float | None = Field(default=None, description="The score's p̂ (None when no attempt was valid).")
    in_band: bool
    valid_tasks: int = Field(default=0, description="Valid tasks of the batch.")
    difficulty: dict[str, float] = Field(
        default_factory=dict, description="Mean difficulty measures of the batch's valid tasks."
    )
    repeated_tasks: int = Field(
        default=0, description="Valid tasks of the batch that repeat a valid task of an earlier epoch of the run."
    )
    fresh_k: int = Field(default=0, description="Successful attempts at the batch's non-repeated valid tasks.")
    fresh_n: int = Field(default=0, description="Valid attempts at the batch's non-repeated valid tasks.")


class TrainJobSummary(ReadModel):
    """One training job of a member: what it trained on and whether its adapter was used afterwards."""

    epoch: int
    kind: str
    status: str
    adapter_version: int | None = None
    pool_size: int | None = Field(default=None, description="Simulator: generations in D_env.")
    steps: int = Field(default=0, description="Optimiser steps taken.")
    examples_seen: int = Field(default=0, description="Sequences the steps trained on (repeats counted).")
    kl_to_base: float | None = Field(
        default=None, description="Sampled KL to the base model (adapter disabled) in the last step."
    )
    early_stopped: bool = False
    tasks_written: int = Field(
        default=0, description="Tasks (valid or rejected) that this job's adapter generated later in the run."
    )


class MemberSeries(ReadModel):
    """Every closed epoch of one member run, its seed batches and its training jobs."""

    run_id: str
    mode: ModeName
    replicate: int
    status: RunStatus
    epochs: list[MemberEpoch]
    seed_batches: list[SeedBatch] = Field(default_factory=list)
    train_jobs: list[TrainJobSummary] = Field(default_factory=list)


class ModeMean(ReadModel):
    """One number of one mode at one epoch: its mean over the replicates that have it there."""

    mean: float
    n: int = Field(description="Replicates that have the number at this epoch.")


class ModeEpoch(ReadModel):
    """One epoch of one mode across its replicates (a number no replicate has there is absent)."""

    epoch: int
    metrics: dict[str, ModeMean] = Field(
        default_factory=dict,
        description="MemberEpoch's p_hat, in_band_share, heldout_accuracy, mean_response_tokens and "
        "generated_tasks_so_far, each averaged separately.",
    )
    difficulty: dict[str, ModeMean] = Field(default_factory=dict)
    heldout_by_category: dict[str, ModeMean] = Field(default_factory=dict)


class ModeSeries(ReadModel):
    """A mode's per-epoch means over its replicates: what the dashboard draws as the thick line and the report's
    per-epoch tables state (with intervals)."""

    mode: ModeName
    replicates: int = Field(description="Member runs of this mode.")
    epochs: list[ModeEpoch] = Field(default_factory=list)


class ExperimentSeries(ReadModel):
    """What the experiment's report and dashboard page are computed from (GET /v1/experiments/{id}/series)."""

    experiment_id: str
    name: str
    status: ExperimentStatus
    domain: str
    alpha: float
    k_min: float
    epochs: int
    agent_trains: bool = Field(default=True, description="False when the template freezes the agent.")
    heldout_benchmark: str | None = Field(
        default=None, description="The benchmark whose score is heldout_accuracy (the template's first)."
    )
    difficulty_measures: dict[str, str] = Field(
        default_factory=dict, description="Each difficulty measure's name → what it measures."
    )
    members: list[MemberSeries]
    modes: list[ModeSeries] = Field(
        default_factory=list, description="Per mode present, in the report's mode order: the means over replicates."
    )
    heldout_target: float | None = Field(
        default=None,
        description="static_augmentation's final held-out accuracy, mean over its replicates (the data-efficiency "
        "target).",
    )
    level_sides: dict[str, Literal["above", "below"]] = Field(
        default_factory=dict, description="The experiment's pre-registered side of each difficulty group."
    )
