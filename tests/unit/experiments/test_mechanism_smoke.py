"""``genenv experiment mechanism smoke``: Exp 0 and Exp 1 end to end at tiny sizes on the real SmolLM2 (in-process
backend on the CPU, the project's RWR), their JSON, and the resume from cached phases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv.cli.mechanism import run_and_render
from genenv_orchestrator.mechanism.runs import smoke_options

pytestmark = [pytest.mark.slow]


def test_smoke_runs_both_experiments_and_resumes_from_its_caches(tmp_path: Path, model_dir: Path) -> None:
    cal_opts, off_opts = smoke_options(tmp_path)
    cal = run_and_render(cal_opts)
    assert [(r.lr, r.steps) for r in cal["rows"]] == [(0.001, 1), (0.001, 2)]
    assert 0.0 <= cal["base"].valid_share <= 1.0 and cal["eval_prompts"] == 3
    saved = json.loads((tmp_path / "exp0" / "calibrate.json").read_text())
    assert saved["criterion"]["gap_closure"] == 0.5 and len(saved["rows"]) == 2

    off = run_and_render(off_opts)
    analysis = off["analysis"]
    assert set(analysis["summaries"]) == {"base", "A", "C", "D", "E"}
    names = [e["contrast"].name for e in analysis["endpoints"]]
    assert names == ["E1: A − C on |p̂ − α|", "E2: E − D on p̂"]
    assert all(e["decision"][0] in {"supported", "refuted at this scale", "inconclusive"}
               for e in analysis["endpoints"])
    rep = off["train"][1]
    trained = [arm for arm in ("A", "C", "D", "E") if rep[arm] is not None]
    assert trained and all(rep[arm]["steps"] == 1 for arm in trained)  # the dose: 1 step
    assert off["pools"][1]["matched"]["A, C"] == rep["A"]["generations"] == rep["C"]["generations"]
    first = (tmp_path / "exp1" / "offline.json").read_text()
    assert json.loads(first)["analysis"]["endpoints"][0]["decision"][0] in {"supported", "refuted at this scale",
                                                                            "inconclusive"}
    # A second run reads every phase from its cache: the same prompts, generations and verdicts.
    again = run_and_render(off_opts)
    assert again["analysis"]["endpoints"][0]["contrast"] == analysis["endpoints"][0]["contrast"]
