"""Does the simulator's update move what it writes? The numbers of the shift probe (``genenv experiment mechanism
shift``; its driver is genenv_orchestrator.mechanism.shift): per simulator version, or per difficulty hint, the
valid share, the domain's difficulty measures, the base agent's p̂, |p̂ − α| and the in-band share of its tasks,
each a mean with a 95 % interval over prompts (the prompts are the independent units). Pure."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from genenv.contracts.runs import RunConfig
from genenv.domains.base import Domain
from genenv.experiments.stats import mean_ci


@dataclass
class PromptResult:
    """One prompt under one simulator version."""

    valid: int = 0
    samples: int = 0
    difficulty: list[dict[str, float]] = field(default_factory=list)
    p_hats: list[float] = field(default_factory=list)


STEERING = {"hint: EASIER (1/16 solved)": (1, 16), "hint: similar (8/16)": (8, 16), "hint: HARDER (15/16)": (15, 16)}
"""The difficulty hints the agent's statistics produce when it solves 1, 8 and 15 of 16 attempts."""


def _ci(values: list[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    iv = mean_ci(values)
    return f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def summarise(config: RunConfig, domain: Domain, version: str, results: list[PromptResult]) -> dict[str, Any]:
    """Per-prompt means, then a t interval over prompts (the prompts are the independent units)."""
    alpha, k_min = config.curriculum.alpha, config.curriculum.k_min
    with_tasks = [r for r in results if r.p_hats]
    row: dict[str, Any] = {
        "version": version,
        "valid share": _ci([r.valid / r.samples for r in results]),
        "p̂ (base agent)": _ci([statistics.fmean(r.p_hats) for r in with_tasks]),
        "|p̂ − α|": _ci([statistics.fmean(abs(p - alpha) for p in r.p_hats) for r in with_tasks]),
        "in band": _ci([statistics.fmean(abs(p - alpha) <= k_min + 1e-9 for p in r.p_hats) for r in with_tasks]),
        "tasks": sum(len(r.p_hats) for r in results),
    }
    for measure in domain.difficulty_measures:
        row[measure] = _ci([statistics.fmean(d[measure] for d in r.difficulty) for r in with_tasks])
    return row
