"""docs/experiments/learning-calibration/grid.py writes the pre-registered nine doses (docs/experiments/
preregistration-learning.md, Part A) in run.sh's order: fewest steps first, then the lowest rate; nothing but the
dose differs from the grid's first point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from _common import load_file

from genenv.cli.experiments import load_experiment

ROOT = Path(__file__).resolve().parents[3]


def test_grid_writes_the_nine_doses_in_run_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    grid = load_file(ROOT / "docs" / "experiments" / "learning-calibration" / "grid.py")
    monkeypatch.setattr(sys, "argv", ["grid.py", str(tmp_path)])
    grid.main()
    files = sorted(tmp_path.glob("*.yaml"), key=lambda p: int(p.name.split("-", 1)[0]))
    bodies = [load_experiment(p) for p in files]
    doses = [(b.template.agent.max_steps_per_epoch, b.template.agent.learning_rate) for b in bodies]
    assert doses == [(s, lr) for s in (1, 2, 4) for lr in (5e-5, 1e-4, 2e-4)]
    assert len({b.name for b in bodies}) == 9
    first = load_experiment(ROOT / "examples" / "experiment-cpu-learning-calibration.yaml")
    for body in bodies:
        assert body.modes == ["static_augmentation"] and body.random_seeds == [15745, 80132, 44812]
        same = body.template.model_copy(update={"name": first.template.name, "agent": first.template.agent.model_copy(
            update={"learning_rate": 5e-5, "max_steps_per_epoch": 1})})
        assert same == first.template
    assert [yaml.safe_load(p.read_text())["name"] for p in files] == [b.name for b in bodies]
