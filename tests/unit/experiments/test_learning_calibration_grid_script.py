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


def test_grid_imports_only_what_the_pinned_code_defines() -> None:
    """run.sh runs grid.py under the code pinned at the calibration's start: a name grid.py imports from genenv
    that the pin lacks stops every later session's resume (it did once: write_experiment_files, added after)."""
    import ast
    import re
    import subprocess

    here = ROOT / "docs" / "experiments" / "learning-calibration"
    pin = re.search(r"^pin=(\w+)", (here / "run.sh").read_text(), re.M)
    assert pin is not None
    for node in ast.walk(ast.parse((here / "grid.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("genenv"):
            path = f"shared/{node.module.replace('.', '/')}.py"
            shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{pin[1]}:{path}"], capture_output=True, text=True)
            if shown.returncode != 0:
                pytest.skip(f"commit {pin[1]} is not in this clone's history")
            defined = {n.name for n in ast.walk(ast.parse(shown.stdout))
                       if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)}
            defined |= {a.asname or a.name for n in ast.walk(ast.parse(shown.stdout)) if isinstance(n, ast.ImportFrom)
                        for a in n.names}
            missing = {a.name for a in node.names} - defined
            assert not missing, f"{node.module} at {pin[1]} lacks {sorted(missing)}"
