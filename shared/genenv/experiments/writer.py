"""Writes an experiment's report folder: report.md, report.json and the figures.

Kept apart from analysis.py and rendering.py so that the numbers stay pure (no I/O, no matplotlib) and figures.py
can import them without a cycle.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from genenv.contracts import modes
from genenv.contracts.experiments import ExperimentSeries
from genenv.experiments.analysis import ExperimentResult, Settings, analyse
from genenv.experiments.figures import write_figures
from genenv.experiments.rendering import render_markdown

REPORT_MD = "report.md"
REPORT_JSON = "report.json"


def result_json(series: ExperimentSeries, result: ExperimentResult, figures: list[str]) -> dict[str, Any]:
    """report.json's content: the experiment's settings, every computed number (ExperimentResult as plain data),
    the figure file names and the colour of each mode."""
    return {
        "experiment": {
            "id": series.experiment_id,
            "name": series.name,
            "status": series.status.value,
            "domain": series.domain,
            "alpha": series.alpha,
            "k_min": series.k_min,
            "epochs": series.epochs,
            "agent_trains": series.agent_trains,
            "heldout_benchmark": series.heldout_benchmark,
            "difficulty_measures": dict(series.difficulty_measures),
        },
        "result": dataclasses.asdict(result),
        # The rows every number is computed from: per member its closed epochs, its seed batches (seed, k, n, p̂,
        # in band, difficulty) and its training jobs (pool, steps, examples, KL, tasks its adapter wrote later).
        "members": [m.model_dump(mode="json") for m in series.members],
        "figures": figures,
        "mode_colours": {m.name: m.colour for m in modes.MODES.values()},
    }


def write_report(series: ExperimentSeries, out_dir: Path, settings: Settings | None = None) -> Path:
    """Computes the report, writes the figures, report.md and report.json into ``out_dir``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = analyse(series, settings)
    figures = [p.name for p in write_figures(series, result, out_dir)]
    (out_dir / REPORT_JSON).write_text(
        json.dumps(result_json(series, result, figures), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    md = out_dir / REPORT_MD
    md.write_text(render_markdown(series, result, figures), encoding="utf-8")
    return md
