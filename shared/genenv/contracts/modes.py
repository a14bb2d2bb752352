"""Run modes as one policy table: the method and its baselines, each declared once with everything that differs.

Every reader of a mode — RunConfig's checks, the orchestrator's GENERATE and TRAIN phases, the epoch summary, the
trainer's simulator pool, the experiment analysis, the report's figures and the dashboard (GET /v1/modes and the
generated /dashboard/modes.css) — looks its mode up here at call time, so adding a mode that combines existing
behaviours is one entry of ``MODES`` plus its docs. Lookups go through ``MODES`` as a module attribute (never a
copy taken at import), so a test can swap in a table with an extra mode and see every reader pick it up.
"""

from __future__ import annotations

import enum
from typing import Annotated, Final

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints

from genenv.contracts.base import ReadModel

ModeName = Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[a-z][a-z0-9_]*$")]


class TaskSource(enum.StrEnum):
    """How an epoch's tasks come to be."""

    EACH_EPOCH = "each_epoch"
    """The simulator writes variations_per_seed tasks per seed at the start of every epoch."""
    ONCE = "once"
    """The simulator writes static_variations tasks per seed for every epoch's seeds at epoch 0, before training."""
    SEEDS = "seeds"
    """No simulator: the epoch's seeds are the tasks."""


class SimulatorPool(enum.StrEnum):
    """How the simulator's training pool D_env is chosen (genenv.curriculum.pool); NONE: it is not trained."""

    BAND_RWR = "band_rwr"
    """Valid generations of in-band seed batches, each with its batch's RWR weight (paper Algorithm 1)."""
    RANDOM_SIZE_MATCHED = "random_size_matched"
    """A random selection of valid generations, as many per epoch as the band selects, weight 1 (a control)."""
    NONE = "none"


class AgentData(enum.StrEnum):
    """What the agent's GRPO batch is made of (besides replayed groups of earlier epochs)."""

    GENERATED = "generated"
    """The epoch's simulator-written tasks (each epoch's, or the fixed set written at epoch 0)."""
    SEEDS = "seeds"
    """The seeds themselves."""


class AttemptSource(enum.StrEnum):
    """Who makes the agent's attempts."""

    ROLLOUT_WORKERS = "rollout_workers"
    """The rollout workers, with the agent's latest adapter."""
    EXTERNAL = "external"
    """An outside agent, trained by its owner elsewhere: it leases the epoch's tasks and reports its attempts over
    the control plane (genenv.contracts.leases). We never train it, roll it out or evaluate it."""


class ModePolicy(ReadModel):
    """One run mode: what it generates, trains and reports."""

    model_config = ConfigDict(frozen=True)

    name: ModeName = Field(description="The mode's name, as in a run config's `mode`.")
    tasks: TaskSource = Field(description="each_epoch | once (all epochs' tasks at epoch 0) | seeds (no simulator).")
    simulator_pool: SimulatorPool = Field(
        description="How the simulator's training pool is chosen: band_rwr | random_size_matched | none (the "
        "simulator is not trained)."
    )
    agent_trains_on: AgentData = Field(description="generated | seeds.")
    attempts: AttemptSource = Field(
        description="Who makes the agent's attempts: rollout_workers | external (an outside agent over the leases "
        "and attempts endpoints; we do not train it)."
    )
    label: str = Field(min_length=1, max_length=80, description="The mode's name in reports and legends.")
    colour: str = Field(pattern=r"^#[0-9a-f]{6}$", description="The mode's colour in every figure and the dashboard.")
    summary: str = Field(description="One line: what the mode is for.")
    baseline_rank: int | None = Field(
        default=None,
        description="Place among the baselines the report's effects table compares genenv with (null: not compared).",
    )

    @property
    def uses_simulator(self) -> bool:
        """Whether a simulator writes the tasks (every mode but those training on the seeds themselves)."""
        return self.tasks is not TaskSource.SEEDS

    @property
    def external_agent(self) -> bool:
        """Whether the agent is outside: its attempts come over the control plane and we never train it."""
        return self.attempts is AttemptSource.EXTERNAL

    @property
    def trains_simulator(self) -> bool:
        """Whether the simulator is updated each epoch (a train_simulator job)."""
        return self.simulator_pool is not SimulatorPool.NONE


def _mode(
    name: str, tasks: TaskSource, pool: SimulatorPool, agent: AgentData, colour: str, summary: str,
    baseline_rank: int | None = None, attempts: AttemptSource = AttemptSource.ROLLOUT_WORKERS,
) -> ModePolicy:
    return ModePolicy(name=name, tasks=tasks, simulator_pool=pool, agent_trains_on=agent,
                      attempts=attempts, label=name, colour=colour, summary=summary,
                      baseline_rank=baseline_rank)


MODES: dict[str, ModePolicy] = {
    m.name: m
    for m in (
        _mode("genenv", TaskSource.EACH_EPOCH, SimulatorPool.BAND_RWR, AgentData.GENERATED, "#1f77b4",
              "The method: the simulator writes each epoch's tasks and is trained by RWR on the α band."),
        _mode("random_simulator", TaskSource.EACH_EPOCH, SimulatorPool.NONE, AgentData.GENERATED, "#ff7f0e",
              "The simulator writes each epoch's tasks and is never trained.", baseline_rank=0),
        _mode("static_augmentation", TaskSource.ONCE, SimulatorPool.NONE, AgentData.GENERATED, "#2ca02c",
              "A fixed augmented set, written once at epoch 0 by the untrained simulator.", baseline_rank=2),
        _mode("agent_only", TaskSource.SEEDS, SimulatorPool.NONE, AgentData.SEEDS, "#7f7f7f",
              "No simulator: the agent trains on the seeds themselves."),
        _mode("generic_rwr", TaskSource.EACH_EPOCH, SimulatorPool.RANDOM_SIZE_MATCHED, AgentData.GENERATED, "#9467bd",
              "The control for any fine-tuning on its own samples: the simulator trained at genenv's dose on a random, "
              "size-matched selection of its own valid generations, weight 1.", baseline_rank=1),
        _mode("external_agent", TaskSource.EACH_EPOCH, SimulatorPool.BAND_RWR, AgentData.GENERATED, "#d62728",
              "Co-evolution with an outside agent: the simulator writes each epoch's tasks for a client that leases "
              "them and reports its attempts, and is trained by RWR on the α band.",
              attempts=AttemptSource.EXTERNAL),
        _mode("external_random_simulator", TaskSource.EACH_EPOCH, SimulatorPool.NONE, AgentData.GENERATED, "#8c564b",
              "The outside agent's baseline: the simulator writes each epoch's tasks for the client and is never "
              "trained (what the outside agent would get from the untrained simulator).",
              attempts=AttemptSource.EXTERNAL),
        _mode("external_generic_rwr", TaskSource.EACH_EPOCH, SimulatorPool.RANDOM_SIZE_MATCHED, AgentData.GENERATED,
              "#e377c2",
              "The outside agent's control for any fine-tuning: the simulator trained at external_agent's dose on a "
              "random, size-matched selection of its own valid generations, weight 1.",
              attempts=AttemptSource.EXTERNAL),
    )
}
"""The run modes, in report order (the order of every per-mode table, legend and figure)."""

DEFAULT_MODE: Final = "genenv"
FALLBACK_COLOUR: Final = "#9467bd"
"""The colour of a mode this table does not know (a record written by a newer version)."""


def mode_names() -> list[str]:
    """The modes' names, in report order."""
    return list(MODES)


def known_mode(name: str) -> str:
    """``name`` when the table has that mode; ValueError naming the known modes otherwise (read at call time, so a
    test may extend the table)."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}; choose from {' | '.join(MODES)}")
    return name


KnownMode = Annotated[ModeName, AfterValidator(known_mode)]
"""A mode of the table: an unknown name is a validation error at its own place (e.g. ``modes.0``)."""


def policy(name: str) -> ModePolicy:
    """The policy of mode ``name``; KeyError naming the known modes when there is none."""
    try:
        return MODES[name]
    except KeyError:
        raise KeyError(f"unknown run mode {name!r}; choose from {' | '.join(MODES)}") from None


def colour(name: str) -> str:
    """The mode's colour (an unknown mode gets FALLBACK_COLOUR)."""
    known = MODES.get(name)
    return FALLBACK_COLOUR if known is None else known.colour


def label(name: str) -> str:
    """The mode's name in reports (an unknown mode is shown by its name)."""
    known = MODES.get(name)
    return name if known is None else known.label


def baselines() -> list[str]:
    """The modes the report compares genenv with, in the effects table's order."""
    ranked = [m for m in MODES.values() if m.baseline_rank is not None]
    return [m.name for m in sorted(ranked, key=lambda m: (m.baseline_rank or 0, m.name))]


def mode_order(name: str) -> int:
    """The mode's place in report order (an unknown mode after every known one)."""
    order = list(MODES)
    return order.index(name) if name in MODES else len(order)
