"""Agent attempts per epoch, and the filter baseline matched to genenv on them (issue 35). Pure.

The cheap alternative to training the simulator is to filter the untrained one: let it write more variations per
seed and fill the agent's GRPO budget only from groups with reward variance (``random_simulator`` with
``agent.budget: informative``). A comparison with genenv is fair only at the same cost to the agent, and the cost
the loop pays per epoch is its attempts: every valid task is attempted ``rollouts_per_task`` (G) times
(genenv_orchestrator.phases.rollout expects valid tasks × G). More variations per seed at the same attempts
therefore means fewer seeds: seeds × n × G stays fixed.

What a config fixes is the planned count (every generation valid); the realised count is valid tasks × G and
depends on how many generations each simulator gets right, so an experiment reports it beside the planned one.
"""

from __future__ import annotations

from collections.abc import Mapping

from genenv.contracts.modes import TaskSource
from genenv.contracts.runs import GrpoBudget, RunConfig


def tasks_per_seed(config: RunConfig) -> int:
    """Tasks an epoch holds per seed: the seed itself in agent_only, static_variations in static_augmentation (its
    fixed set is written at epoch 0, each epoch's tasks stored under that epoch), else n."""
    if config.policy.tasks is TaskSource.SEEDS:
        return 1
    if config.policy.tasks is TaskSource.ONCE:
        return config.static_variations
    return config.variations_per_seed


def planned_agent_attempts(config: RunConfig) -> int:
    """Agent attempts per epoch if every generated task is valid: seeds_per_epoch × tasks per seed × G."""
    return config.seeds_per_epoch * tasks_per_seed(config) * config.rollouts_per_task


def realised_agent_attempts(valid_tasks: int, config: RunConfig) -> int:
    """Agent attempts an epoch makes: its valid tasks × G (a rejected generation is never attempted)."""
    if valid_tasks < 0:
        raise ValueError("valid_tasks must be ≥ 0")
    return valid_tasks * config.rollouts_per_task


def filter_arm(genenv: RunConfig, variations_per_seed: int) -> RunConfig:
    """The filter baseline for ``genenv``'s config: random_simulator, budget informative, ``variations_per_seed``
    variations per seed on as many seeds as keep the planned attempts per epoch equal (every other setting kept).

    Raises ValueError when the seeds would not be a whole number (choose an n that divides seeds × n of genenv) or
    when the new n is not larger than genenv's (then it is not the filter baseline)."""
    if variations_per_seed <= genenv.variations_per_seed:
        raise ValueError(f"the filter arm writes more variations per seed than genenv's {genenv.variations_per_seed}; "
                         f"got {variations_per_seed}")
    tasks = genenv.seeds_per_epoch * genenv.variations_per_seed
    seeds, rest = divmod(tasks, variations_per_seed)
    if rest or seeds < 1:
        raise ValueError(f"{variations_per_seed} variations per seed cannot make genenv's {tasks} tasks per epoch "
                         f"({genenv.seeds_per_epoch} seeds × {genenv.variations_per_seed}) on a whole number of seeds; "
                         "choose a divisor of that product")
    agent = genenv.agent.model_copy(update={"budget": GrpoBudget.INFORMATIVE})
    return genenv.model_copy(update={"mode": "random_simulator", "variations_per_seed": variations_per_seed,
                                     "seeds_per_epoch": seeds, "agent": agent})


def check_equal_attempts(arms: Mapping[str, RunConfig]) -> int:
    """The planned agent attempts per epoch the arms share; ValueError naming each arm's count when they differ,
    or when they differ in G (the GRPO groups would not be comparable) or in epochs (the totals would differ)."""
    if not arms:
        raise ValueError("no arms")
    counts = {name: planned_agent_attempts(cfg) for name, cfg in arms.items()}
    groups = {name: cfg.rollouts_per_task for name, cfg in arms.items()}
    epochs = {name: cfg.epochs for name, cfg in arms.items()}
    if len(set(epochs.values())) > 1:
        raise ValueError(f"the arms differ in epochs: {epochs}")
    if len(set(groups.values())) > 1:
        raise ValueError(f"the arms differ in rollouts_per_task (G): {groups}")
    if len(set(counts.values())) > 1:
        raise ValueError(f"the arms' planned agent attempts per epoch differ: {counts} (seeds × tasks per seed × G)")
    return next(iter(counts.values()))
