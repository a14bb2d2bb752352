"""Simulated members of the learning experiment for the unit tests: the pre-registered arms' configs (from the
example files) with held-out curves and agent attempts given by the test."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from genenv.cli.experiments import load_experiment
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.experiments.learning import FILTER, GENENV, LEARNING_PROGRESS, STATIC, EpochPoint, HeldOut, LearningMember

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
HELDOUT = HeldOut("arithmetic", "heldout", None, 534)
FILES = {GENENV: "experiment-cpu-learning.yaml", STATIC: "experiment-cpu-learning.yaml",
         FILTER: "experiment-cpu-learning-filter.yaml", LEARNING_PROGRESS: "experiment-cpu-learning-progress.yaml"}


@cache
def arm_config(arm: str) -> RunConfig:
    """The arm's run config as its example file has it (the mode set for the two-mode file)."""
    template = load_experiment(EXAMPLES / FILES[arm]).template
    mode = {GENENV: "genenv", STATIC: "static_augmentation"}.get(arm, "random_simulator")
    return template.model_copy(update={"mode": mode})


def member(arm: str, seed: int, curve: Sequence[float | None], *, attempts: int = 1280,
           status: RunStatus = RunStatus.COMPLETED, heldout: HeldOut = HELDOUT, config: RunConfig | None = None,
           simulator_used: bool | None = None, experiment: str | None = None) -> LearningMember:
    """One member whose held-out accuracy after epoch e is curve[e] (the curve's length is its closed epochs)."""
    cfg = (config or arm_config(arm)).model_copy(update={"random_seed": seed})
    if simulator_used is None and arm == GENENV:
        simulator_used = True
    points = tuple(EpochPoint(e, acc, attempts) for e, acc in enumerate(curve))
    return LearningMember(
        experiment_id=experiment or FILES[arm], run_id=f"{arm}-{seed}", seed=seed, config=cfg, status=status,
        epochs=points, heldout=heldout, final_valid_share=0.99, simulator_used=simulator_used,
        dose="2 RWR step(s)" if arm == GENENV else None)


def finals(arm: str, seeds: Sequence[int], values: Sequence[float], epochs: int = 6) -> list[LearningMember]:
    """Members whose held-out accuracy is 0.3 until the last epoch, then ``values``."""
    return [member(arm, s, [0.3] * (epochs - 1) + [v]) for s, v in zip(seeds, values, strict=True)]
