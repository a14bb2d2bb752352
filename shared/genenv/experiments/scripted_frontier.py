"""Issue 34's design (c): does the trained simulator move its tasks toward the α frontier of a scripted agent whose
success probability is known in closed form? Pure (no database): rows in, a result out.

Every run is played by one scripted preset (genenv.domains.arithmetic.scripted_agent.PRESETS), so each task's true
p is the profile's probability of its (digits, operators): no sampling noise from attempts, only from which tasks
the simulator wrote. Three arms share replicate r's seed: the treated arm (external_agent: trained by RWR on the α
band), the untrained simulator (external_random_simulator) and the fine-tuning control (external_generic_rwr:
trained on a random, size-matched selection). Epoch 0 of every run is written by the untrained simulator, so the
effects use epochs ≥ 1 and epoch 0 is an A/A check.

Measures of a run's tasks: mean true p, in-band share (|p − α| ≤ k_min) and mean |p − α|, on non-repeated tasks
(primary: a task repeated word for word from an earlier epoch is the simulator copying, not writing toward the
frontier) and on all tasks. Contrasts are treated − baseline per replicate, with a t interval over replicates (the
training run is the randomised unit) and the pre-registered ``classify``. The two primary endpoints are D-above and
D-below: mean true p on non-repeated tasks against the untrained simulator, for the agent whose untrained tasks sit
above α (p should fall) and the one below (p should rise). Rendering: genenv.experiments.scripted_frontier_rendering.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from genenv.contracts import modes
from genenv.curriculum.reward import in_band
from genenv.domains.arithmetic.scripted_agent import PRESETS, Profile, TaskFeatures
from genenv.experiments.stats import INCONCLUSIVE, Decision, Interval, classify, replicate_ci, smallest_detectable

Side = Literal["above", "below"]
Measure = Literal["mean_p", "in_band", "abs_gap"]
TaskSet = Literal["non_repeated", "all"]
Group = Literal["non_repeated", "all", "epoch0"]
MEASURES: Final[tuple[Measure, ...]] = ("mean_p", "in_band", "abs_gap")
TASK_SETS: Final[tuple[TaskSet, ...]] = ("non_repeated", "all")
PRIMARY_BASELINE: Final = "external_random_simulator"
DEFAULT_SIDES: Final[Mapping[str, Side]] = {"capable": "above", "struggling": "below"}
DEFAULT_SMALLEST: Final[Mapping[str, float]] = {"mean_p": 0.03, "in_band": 0.05, "abs_gap": 0.02}

RunKey = tuple[str, str, int]
"""(agent, arm, replicate)."""


@dataclass(frozen=True)
class FrontierTask:
    """One valid task the simulator wrote in one run."""

    agent: str
    """The scripted preset that played the run ("capable", "struggling", ...)."""
    arm: str
    """The run's mode."""
    replicate: int
    """The replicate's random seed: it pairs the arms."""
    epoch: int
    digits: int
    """The longest operand's digits (the payload's max_digits)."""
    operators: int
    repeated: bool
    """It repeats, word for word, a valid task of an earlier epoch of the same run."""
    trained_writer: bool
    """A trained simulator adapter wrote it (generator_adapter is not null)."""


@dataclass(frozen=True)
class FrontierDesign:
    """The pre-registered settings: the band, the arms, each agent's side of α and the smallest effects."""

    alpha: float = 0.5
    k_min: float = 0.25
    treated: str = "external_agent"
    baselines: tuple[str, ...] = (PRIMARY_BASELINE, "external_generic_rwr")
    sides: Mapping[str, Side] = field(default_factory=lambda: dict(DEFAULT_SIDES))
    """Side of α where the untrained simulator's tasks sit for each agent, fixed before the run."""
    smallest_effects: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SMALLEST))
    confidence: float = 0.95
    seed: int = 0
    """The sign-flip test's random stream (exact, hence unused, up to 13 replicates)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0 or self.k_min < 0:
            raise ValueError("alpha must lie in (0, 1) and k_min be ≥ 0")
        if set(self.sides.values()) - {"above", "below"}:
            raise ValueError(f"a side is 'above' or 'below', got {sorted(set(self.sides.values()))}")
        for side in ("above", "below"):
            if sum(1 for s in self.sides.values() if s == side) > 1:
                raise ValueError(f"two agents on side {side!r}: each primary endpoint names one agent")
        unknown = [a for a in self.sides if a not in PRESETS]
        if unknown:
            raise ValueError(f"agent(s) {unknown} are no scripted preset ({', '.join(PRESETS)})")
        if missing := [m for m in MEASURES if m not in self.smallest_effects]:
            raise ValueError(f"no smallest effect for {missing}")

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents, in the order of ``sides``."""
        return tuple(self.sides)

    @property
    def arms(self) -> tuple[str, ...]:
        """The treated arm, then the baselines."""
        return (self.treated, *self.baselines)

    def predicted(self, agent: str, measure: Measure) -> int:
        """The sign treated − baseline should have: toward α means p falls from above and rises from below, more
        tasks in band, and a smaller distance to α."""
        if measure == "mean_p":
            return -1 if self.sides[agent] == "above" else 1
        return 1 if measure == "in_band" else -1


# ---------------------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class Measures:
    """One set of tasks: mean true p, in-band share, mean |p − α| (None without tasks) and the task count."""

    mean_p: float | None
    in_band: float | None
    abs_gap: float | None
    tasks: int

    def get(self, measure: Measure) -> float | None:
        """The named measure."""
        return {"mean_p": self.mean_p, "in_band": self.in_band, "abs_gap": self.abs_gap}[measure]


@dataclass(frozen=True)
class RunSummary:
    """One run (agent, arm, replicate)."""

    agent: str
    arm: str
    replicate: int
    non_repeated: Measures
    """Epochs ≥ 1, tasks that repeat no earlier epoch's (the primary set)."""
    all: Measures
    """Epochs ≥ 1, every valid task."""
    epoch0: Measures
    """Epoch 0, written by the untrained simulator in every arm (the A/A check)."""
    repeat_share: float | None
    """Share of epochs ≥ 1 tasks that repeat an earlier epoch's."""
    trained_share: float | None
    """Share of epochs ≥ 1 tasks a trained simulator wrote (the dose check; None: no such tasks)."""
    per_epoch: tuple[tuple[int, float, int], ...]
    """(epoch, mean true p of all its tasks, tasks) for every epoch with tasks."""

    def group(self, group: Group) -> Measures:
        """The measures of one task set of epochs ≥ 1, or of epoch 0."""
        return {"non_repeated": self.non_repeated, "all": self.all, "epoch0": self.epoch0}[group]


@functools.lru_cache(maxsize=4096)
def true_p(profile: Profile, digits: int, operators: int) -> float:
    """The profile's success probability on a task (cached: a run has few distinct cells, and many tasks)."""
    return profile.probability(TaskFeatures(digits, operators))


def profile_of(agent: str) -> Profile:
    """The scripted preset ``agent`` names; ValueError for a name that is none."""
    profile = next((p for name, p in PRESETS.items() if name == agent), None)
    if profile is None:
        raise ValueError(f"{agent!r} is no scripted preset ({', '.join(PRESETS)})")
    return profile


def measures(ps: Sequence[float], alpha: float, k_min: float) -> Measures:
    """The three measures of tasks with true p ``ps``."""
    if not ps:
        return Measures(None, None, None, 0)
    n = len(ps)
    # The band is the curriculum's own rule (reward.in_band), so "in band" means here what it means to the loop.
    return Measures(sum(ps) / n, sum(in_band(p, alpha=alpha, k_min=k_min) for p in ps) / n,
                    sum(abs(p - alpha) for p in ps) / n, n)


def summarise_run(tasks: Sequence[FrontierTask], design: FrontierDesign) -> RunSummary:
    """The measures of one run's tasks (all of one agent, arm and replicate)."""
    keys = {(t.agent, t.arm, t.replicate) for t in tasks}
    if len(keys) != 1:
        raise ValueError(f"one run's tasks expected, got runs {sorted(keys)}")
    agent, arm, replicate = keys.pop()
    profile = profile_of(agent)
    scored = [(t, true_p(profile, t.digits, t.operators)) for t in tasks]
    later = [(t, p) for t, p in scored if t.epoch >= 1]
    a, k = design.alpha, design.k_min
    epochs = sorted({t.epoch for t in tasks})
    per_epoch = tuple((e, sum(ps) / len(ps), len(ps)) for e in epochs if (ps := [p for t, p in scored if t.epoch == e]))
    return RunSummary(
        agent=agent, arm=arm, replicate=replicate,
        non_repeated=measures([p for t, p in later if not t.repeated], a, k),
        all=measures([p for _, p in later], a, k),
        epoch0=measures([p for t, p in scored if t.epoch == 0], a, k),
        repeat_share=sum(1 for t, _ in later if t.repeated) / len(later) if later else None,
        trained_share=sum(1 for t, _ in later if t.trained_writer) / len(later) if later else None,
        per_epoch=per_epoch,
    )


def complete_replicates(complete: Iterable[RunKey], agents: Sequence[str], arms: Sequence[str]) -> list[int]:
    """The replicates in which every agent × arm run is complete (the pre-registered analysis set), ascending.

    ``complete`` holds the (agent, arm, replicate) keys of the runs that completed: completion is the run's status,
    which this pure module does not read.
    """
    done = set(complete)
    replicates = {r for _, _, r in done}
    return sorted(r for r in replicates if all((g, m, r) in done for g in agents for m in arms))


# ----------------------------------------------------------------------------------------------------- contrasts


@dataclass(frozen=True)
class Paired:
    """treated − baseline per replicate, over the replicates where both runs have the measure."""

    replicates: tuple[int, ...]
    treated: tuple[float, ...]
    baseline: tuple[float, ...]
    differences: tuple[float, ...]
    interval: Interval | None
    """t interval over replicates with the sign-flip p; None with fewer than two pairs."""


@dataclass(frozen=True)
class Contrast:
    """One agent × baseline × measure × task set on epochs ≥ 1, with its pre-registered decision."""

    agent: str
    baseline: str
    measure: Measure
    task_set: TaskSet
    predicted: int
    paired: Paired
    detectable: float | None
    """The smallest true difference these pairs detect with 80 % power at the observed SD."""
    decision: Decision
    reason: str
    endpoint: str | None = None
    """"D-above" / "D-below" for a primary endpoint; None for a secondary contrast."""


@dataclass(frozen=True)
class AAContrast:
    """treated − baseline on epoch 0, where both were written by the untrained simulator: no verdict, an interval
    that should cover 0."""

    agent: str
    baseline: str
    measure: Measure
    paired: Paired


def pair(runs: Mapping[RunKey, RunSummary], agent: str, baseline: str, replicates: Sequence[int], group: Group,
         measure: Measure, design: FrontierDesign) -> Paired:
    """Pair treated and baseline runs of ``agent`` by replicate on one measure of one group of tasks (a task set of
    epochs ≥ 1, or epoch 0); a replicate where either run is missing or has no such tasks is left out."""
    rows: list[tuple[int, float, float]] = []
    for r in replicates:
        t, b = runs.get((agent, design.treated, r)), runs.get((agent, baseline, r))
        if t is None or b is None:
            continue
        tv, bv = t.group(group).get(measure), b.group(group).get(measure)
        if tv is not None and bv is not None:
            rows.append((r, tv, bv))
    diffs = tuple(tv - bv for _, tv, bv in rows)
    return Paired(tuple(r for r, _, _ in rows), tuple(tv for _, tv, _ in rows), tuple(bv for _, _, bv in rows),
                  diffs, replicate_ci(diffs, design.confidence, design.seed))


def no_dose(runs: Mapping[RunKey, RunSummary], agent: str, baseline: str, replicates: Sequence[int],
            design: FrontierDesign) -> list[str]:
    """Runs with no epochs ≥ 1 task by a trained simulator, among the treated runs and (for a baseline that trains
    its simulator, generic_rwr) the baseline's, in replicates where both runs exist: without the dose, a contrast
    does not measure training."""
    arms = [design.treated]
    known = modes.MODES.get(baseline)
    if known is not None and known.trains_simulator:
        arms.append(baseline)
    both = [r for r in replicates if (agent, design.treated, r) in runs and (agent, baseline, r) in runs]
    return [f"{arm} replicate {r}" for r in both for arm in arms if not runs[(agent, arm, r)].trained_share]


def contrast(runs: Mapping[RunKey, RunSummary], agent: str, baseline: str, measure: Measure, task_set: TaskSet,
             replicates: Sequence[int], design: FrontierDesign) -> Contrast:
    """One contrast and its decision: ``classify`` with the predicted sign, forced to inconclusive when the dose
    check failed in a paired replicate or fewer than two replicates pair."""
    p = pair(runs, agent, baseline, replicates, task_set, measure, design)
    predicted = design.predicted(agent, measure)
    detectable = None
    if len(p.differences) >= 2:
        detectable = smallest_detectable(statistics.stdev(p.differences), len(p.differences), design.confidence)
    decision: Decision
    if missing := no_dose(runs, agent, baseline, replicates, design):
        decision, reason = INCONCLUSIVE, ("dose check failed: no epochs ≥ 1 task written by a trained simulator in "
                                          + ", ".join(missing))
    elif p.interval is None:
        decision, reason = INCONCLUSIVE, (f"fewer than two replicates pair ({len(p.differences)}): one run per arm "
                                          "says nothing about training runs")
    else:
        decision, reason = classify(p.interval, predicted, design.smallest_effects[measure], p.differences)
    endpoint = None
    if baseline == PRIMARY_BASELINE and measure == "mean_p" and task_set == "non_repeated":
        endpoint = f"D-{design.sides[agent]}"
    return Contrast(agent, baseline, measure, task_set, predicted, p, detectable, decision, reason, endpoint)


# ---------------------------------------------------------------------------------------------------------- main


@dataclass(frozen=True)
class FrontierResult:
    """Everything the design (c) report states."""

    design: FrontierDesign
    replicates: tuple[int, ...]
    """The replicates analysed (given, or those where every agent × arm run has tasks)."""
    runs: tuple[RunSummary, ...]
    primary: tuple[Contrast, ...]
    """D-above then D-below (of the sides the design names)."""
    secondary: tuple[Contrast, ...]
    aa: tuple[AAContrast, ...]


def analyse_frontier(tasks: Iterable[FrontierTask], design: FrontierDesign | None = None,
                     replicates: Sequence[int] | None = None) -> FrontierResult:
    """The design (c) analysis of the runs' tasks over ``replicates`` (default: every replicate in which each agent ×
    arm run wrote tasks; pass ``complete_replicates`` of the completed runs for the pre-registered set). A task of
    an agent or arm the design does not name is refused, not silently dropped."""
    d = design or FrontierDesign()
    by_run: dict[RunKey, list[FrontierTask]] = {}
    for t in tasks:
        if t.agent not in d.sides or t.arm not in d.arms:
            raise ValueError(f"a task of agent {t.agent!r}, arm {t.arm!r}: the design has agents {list(d.agents)} "
                             f"and arms {list(d.arms)}")
        by_run.setdefault((t.agent, t.arm, t.replicate), []).append(t)
    runs = {key: summarise_run(rows, d) for key, rows in by_run.items()}
    chosen = complete_replicates(runs, d.agents, d.arms) if replicates is None else sorted(set(replicates))
    analysed = tuple(runs[k] for k in sorted(runs, key=lambda k: (d.agents.index(k[0]), d.arms.index(k[1]), k[2]))
                     if k[2] in chosen)
    contrasts = [contrast(runs, g, b, m, s, chosen, d) for g in d.agents for b in d.baselines for s in TASK_SETS
                 for m in MEASURES]
    primary = sorted((c for c in contrasts if c.endpoint), key=lambda c: c.endpoint != "D-above")
    aa = tuple(AAContrast(g, b, m, pair(runs, g, b, chosen, "epoch0", m, d))
               for g in d.agents for b in d.baselines for m in MEASURES)
    return FrontierResult(d, tuple(chosen), analysed, tuple(primary), tuple(c for c in contrasts if not c.endpoint),
                          aa)
