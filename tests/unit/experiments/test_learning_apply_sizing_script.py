"""docs/experiments/learning/apply_sizing.py makes Part B's commit (docs/experiments/preregistration-learning.md):
the calibrated dose and n_run with its seeds go into the three example files, four lines each and nothing else,
comments kept; an incomplete calibration or an unexpected file is refused before anything is written."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _common import load_file

from genenv.cli.experiments import load_experiment
from genenv.experiments.learning import REGISTERED_SEEDS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_file(ROOT / "docs" / "experiments" / "learning" / "apply_sizing.py")


def _calibration(tmp_path: Path, n_run: int | None = 5, chosen: bool = True) -> Path:
    data = {"decision": {"chosen": {"learning_rate": 5e-5, "steps": 4} if chosen else None},
            "sizing": {"n_run": n_run, "seeds": list(REGISTERED_SEEDS[:n_run or 0])}}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(data))
    return path


def _examples(tmp_path: Path, script: ModuleType) -> Path:
    folder = tmp_path / "examples"
    folder.mkdir()
    for name in script.FILES:
        shutil.copy(ROOT / "examples" / name, folder / name)
    return folder


def test_four_lines_change_in_each_file_and_the_files_read_back(
        script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _examples(tmp_path, script)
    monkeypatch.setattr(sys, "argv", ["apply_sizing.py", str(_calibration(tmp_path)), "--examples", str(folder)])
    script.main()
    for name in script.FILES:
        before = (ROOT / "examples" / name).read_text().splitlines()
        after = (folder / name).read_text().splitlines()
        assert len(before) == len(after)
        changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
        assert len(changed) == 4, name
        body = load_experiment(folder / name)
        assert body.template.agent.learning_rate == 5e-5 and body.template.agent.max_steps_per_epoch == 4
        assert "learning_rate: 5.0e-05" in (folder / name).read_text()  # a YAML float ("5e-05" reads as a string)
        assert body.replicates == 5 and body.random_seeds == list(REGISTERED_SEEDS[:5])
        assert body.template.simulator.learning_rate == 1e-3 and body.template.simulator.max_steps_per_epoch == 4
        assert "# Part B: the calibrated rate" in (folder / name).read_text()
    plan = load_file(ROOT / "docs" / "experiments" / "learning" / "plan.py")
    assert len(plan.replicate_files([load_experiment(folder / n) for n in script.FILES])) == 15


def test_an_incomplete_calibration_or_an_unexpected_file_is_refused_before_writing(
        script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _examples(tmp_path, script)
    originals = {n: (folder / n).read_text() for n in script.FILES}
    for calibration in (_calibration(tmp_path, chosen=False), _calibration(tmp_path, n_run=None)):
        monkeypatch.setattr(sys, "argv", ["apply_sizing.py", str(calibration), "--examples", str(folder)])
        with pytest.raises(SystemExit, match="no chosen dose or no n_run"):
            script.main()
    broken = script.FILES[2]
    (folder / broken).write_text(originals[broken].replace("# placeholder: the calibrated steps", "# set"))
    monkeypatch.setattr(sys, "argv", ["apply_sizing.py", str(_calibration(tmp_path)), "--examples", str(folder)])
    with pytest.raises(SystemExit, match="0 lines match"):
        script.main()
    assert {n: (folder / n).read_text() for n in script.FILES[:2]} == {n: originals[n] for n in script.FILES[:2]}
