"""Sizing the two-sided pre-registration (docs/experiments/preregistration-two-sided.md, design (a)) from Exp 2's
stored runs (``genenv experiment sizing``): each endpoint's per-replicate estimates and within-replicate spread,
the per-replicate SD of the new design and its smallest detectable effect, and the wall time from Exp 2's measured
phase times.

Exp 2 ran at α = 0.5 with the band toward easier tasks everywhere, so its effects say nothing about design (a)'s
outcome; only its noise is used: how far two training runs of the same arm land apart, and how much seed batches
spread within a run. The sides of the levels are design (a)'s (fixed from the earlier pilot, docs/experiments/
preregistration.md), applied to Exp 2's pairs only to measure that noise on the same groups of levels. Pure.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from genenv.contracts.experiments import ExperimentSeries, SeedBatch
from genenv.curriculum.reward import in_band
from genenv.experiments.paired import BatchPair, fresh_series, pair_batches
from genenv.experiments.sizing import Plan, Spread, plan, within_sd

ALPHA, K_MIN = 0.15, 0.10
"""Design (a)'s band."""
SIDES = {"1d-add": "above", "1d-mul": "above", "1d-addsub": "above",
         "2d-add": "below", "1d-3op": "below", "2d-3op": "below", "3d-add": "below"}
"""Pilot p̂ by level (docs/experiments/preregistration.md): 0.29, 0.33, 0.23 above α = 0.15; 0.09, 0.11, 0.08, 0.06
below."""
LEVELS = 7
REPLICATES = (5, 6, 8, 10)


def _p(b: SeedBatch) -> float:
    p = b.p_hat
    assert p is not None
    return float(p)


def endpoints(pairs: Sequence[BatchPair]) -> dict[str, dict[int, list[float]]]:
    """Per endpoint, per replicate, the pair differences (genenv − random_simulator)."""
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in pairs:
        side = SIDES.get(p.a.group or "")
        d = _p(p.a) - _p(p.b)
        if side is not None:
            out[f"D-{side}: Δp̂ on levels {side} α"][p.replicate].append(d)
        out["in-band share (band [0.05, 0.25])"][p.replicate].append(
            float(in_band(_p(p.a), alpha=ALPHA, k_min=K_MIN)) - float(in_band(_p(p.b), alpha=ALPHA, k_min=K_MIN)))
        out["|p̂ − α| at α = 0.15"][p.replicate].append(abs(_p(p.a) - ALPHA) - abs(_p(p.b) - ALPHA))
    return out


def level_share(side: str | None) -> float:
    """The share of the levels an endpoint covers (all of them for the pooled endpoints)."""
    levels = sum(1 for s in SIDES.values() if s == side) if side else LEVELS
    return levels / LEVELS


@dataclass(frozen=True)
class Design:
    """The planned design: seeds per epoch (each a variant), epochs, and the share of fresh seed batches."""

    seeds: Sequence[int]
    epochs: int
    fresh_share: float


@dataclass(frozen=True)
class EndpointSizing:
    """One endpoint of one task selection: Exp 2's spread and a plan per planned number of seeds."""

    name: str
    per_replicate: dict[int, float]
    within_sd: float
    pairs_per_replicate: float
    planned_pairs: dict[int, float]
    plans: dict[int, Plan]


def size_endpoints(pairs: Sequence[BatchPair], design: Design) -> list[EndpointSizing]:
    """Every endpoint's spread in ``pairs`` and its plan at each planned number of seeds, by name."""
    out = []
    for name, by_rep in sorted(endpoints(pairs).items()):
        per_rep = {r: statistics.fmean(v) for r, v in sorted(by_rep.items())}
        sd_w, m = within_sd(by_rep)
        side = "above" if "above" in name else "below" if "below" in name else None
        spread = Spread(list(per_rep.values()), sd_w, m)
        planned = {seeds: seeds * (design.epochs - 1) * level_share(side) * design.fresh_share
                   for seeds in design.seeds}
        plans = {seeds: plan(spread, planned[seeds], REPLICATES) for seeds in design.seeds}
        out.append(EndpointSizing(name, per_rep, sd_w, m, planned, plans))
    return out


def effect_pairs(series: ExperimentSeries) -> dict[str, list[BatchPair]]:
    """The pairs of epochs ≥ 1 (epoch 0 is the A/A check) on non-repeated tasks and on all tasks."""
    return {tasks: [p for p in pair_batches(source, "random_simulator") if p.epoch >= 1]
            for tasks, source in (("non-repeated", fresh_series(series)), ("all", series))}


@dataclass(frozen=True)
class WallTime:
    """Exp 2's measured phase times: everything but training per seed, and a training job per epoch."""

    seconds_per_seed: float
    train_seconds_per_epoch: float
    skipped_train_seconds: float
    """random_simulator's skipped job per epoch (the overhead of a job that does not train)."""

    def member_hours(self, seeds: int, epochs: int, replicates: int) -> float:
        """Member time of ``replicates`` × 3 arms: genenv and generic_rwr train, random_simulator does not."""
        member = epochs * seeds * self.seconds_per_seed
        return replicates * (3 * member + 2 * epochs * self.train_seconds_per_epoch) / 3600


def wall_time(phases: Sequence[tuple[str, Mapping[str, Any]]], mode_of: Mapping[str, str], seeds_per_epoch: int
              ) -> WallTime:
    """From each epoch's (run id, phase seconds) and the runs' modes."""
    per_epoch: dict[str, list[float]] = defaultdict(list)
    train: dict[str, list[float]] = defaultdict(list)
    for run_id, ph in phases:
        mode = mode_of.get(run_id, "?")
        per_epoch[mode].append(sum(float(v) for k, v in ph.items() if k != "train"))
        train[mode].append(float(ph.get("train", 0.0)))
    gen = statistics.fmean(per_epoch["genenv"] + per_epoch["random_simulator"]) / seeds_per_epoch
    return WallTime(gen, statistics.fmean(train["genenv"]), statistics.fmean(train["random_simulator"]))
