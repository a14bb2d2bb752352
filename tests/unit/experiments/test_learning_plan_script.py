"""docs/experiments/learning/plan.py writes Part C's run files (docs/experiments/preregistration-learning.md):
replicate by replicate, the three experiment files in the table's order, each one replicate with its seed; files
that disagree on seeds or agent attempts, or seeds off the registered list, are refused before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from _common import load_file

from genenv.cli.experiments import load_experiment
from genenv.experiments.learning import REGISTERED_SEEDS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def plan() -> ModuleType:
    return load_file(ROOT / "docs" / "experiments" / "learning" / "plan.py")


def test_plan_runs_replicate_by_replicate_with_the_examples_seeds(
        plan: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["plan.py", str(tmp_path)])
    plan.main()
    printed = [Path(p) for p in capsys.readouterr().out.split()]
    assert printed == sorted(tmp_path.glob("*.yaml"))  # printed in run order, and the names sort the same way
    bodies = [load_experiment(p) for p in printed]
    examples = [load_experiment(ROOT / "examples" / name) for name in plan.FILES]
    seeds = examples[0].random_seeds
    assert seeds is not None and len(bodies) == 3 * len(seeds)
    for i, body in enumerate(bodies):
        r, example = divmod(i, 3)
        assert body.name == f"{examples[example].name}-r{r + 1}"
        assert body.replicates == 1 and body.random_seeds == [seeds[r]] == [REGISTERED_SEEDS[r]]
        assert body.modes == examples[example].modes and body.template == examples[example].template


def test_plan_refuses_files_that_disagree(plan: ModuleType) -> None:
    bodies = [load_experiment(ROOT / "examples" / name) for name in plan.FILES]
    assert len(plan.replicate_files(bodies)) == 3 * len(bodies[0].random_seeds or [])
    fewer = bodies[1].model_copy(update={"random_seeds": (bodies[1].random_seeds or [])[:3], "replicates": 3})
    with pytest.raises(ValueError, match="random_seeds differ"):
        plan.replicate_files([bodies[0], fewer, bodies[2]])
    unregistered = [b.model_copy(update={"random_seeds": [1, 2, 3], "replicates": 3}) for b in bodies]
    with pytest.raises(ValueError, match="not the first 3 pre-registered seeds"):
        plan.replicate_files(unregistered)
    wider = bodies[1].model_copy(update={"template": bodies[1].template.model_copy(update={"seeds_per_epoch": 40})})
    with pytest.raises(ValueError, match="planned agent attempts per epoch differ"):
        plan.replicate_files([bodies[0], wider, bodies[2]])
