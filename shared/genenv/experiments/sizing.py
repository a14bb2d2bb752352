"""Sizing an experiment at the unit that was randomised (training runs) from an earlier experiment's replicates.

A replicate's estimate of a paired effect is the mean over its seed-batch pairs, so its variance across replicates
is τ² (how far each trained simulator lands from the mean effect: training randomness) plus σ_w²/m (the pairs'
own spread over the m pairs it has). An earlier experiment gives per-replicate estimates (their variance s²) and
the pairs' within-replicate SD σ_w; τ² = max(0, s² − mean σ_w²/m). A new design with m′ pairs per replicate then
has per-replicate SD √(τ² + σ_w²/m′), and n replicates detect (80 % power, two-sided 5 %) the effect
stats.smallest_detectable gives. With few earlier replicates s² rests on few degrees of freedom, so the upper
confidence bound of s² (chi-square) is given beside the point value and the design is sized on it. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats as scipy_stats

from genenv.experiments.stats import smallest_detectable


@dataclass(frozen=True)
class Spread:
    """What an earlier experiment says about one endpoint's noise."""

    per_replicate: list[float]
    within_sd: float
    """SD of the paired differences within a replicate (pooled over replicates)."""
    pairs_per_replicate: float
    """Mean pairs per replicate behind each estimate."""


@dataclass(frozen=True)
class Plan:
    """Per-replicate SD of the new design and the smallest detectable effect at each number of replicates."""

    between_sd: float
    """τ, point value."""
    between_sd_upper: float
    """τ from the upper confidence bound of the replicates' variance."""
    replicate_sd: float
    replicate_sd_upper: float
    detectable: dict[int, float]
    """Replicates → smallest detectable effect at replicate_sd_upper (the conservative plan)."""
    detectable_point: dict[int, float]


def within_sd(diffs_by_replicate: Mapping[int, Sequence[float]]) -> tuple[float, float]:
    """(pooled within-replicate SD of the pair differences, mean pairs per replicate)."""
    ss = sum(sum((d - sum(v) / len(v)) ** 2 for d in v) for v in diffs_by_replicate.values() if len(v) > 1)
    df = sum(len(v) - 1 for v in diffs_by_replicate.values() if len(v) > 1)
    if df <= 0:
        raise ValueError("need a replicate with at least two pairs")
    sizes = [len(v) for v in diffs_by_replicate.values() if v]
    return math.sqrt(ss / df), sum(sizes) / len(sizes)


def plan(spread: Spread, pairs_per_replicate: float, replicates: Sequence[int], upper_level: float = 0.8) -> Plan:
    """Size a new design with ``pairs_per_replicate`` pairs from ``spread`` (module docstring)."""
    r = spread.per_replicate
    if len(r) < 2 or pairs_per_replicate <= 0:
        raise ValueError("need ≥ 2 earlier replicates and a positive number of planned pairs")
    mean = sum(r) / len(r)
    s2 = sum((x - mean) ** 2 for x in r) / (len(r) - 1)
    df = len(r) - 1
    s2_upper = s2 * df / float(scipy_stats.chi2.ppf(1 - upper_level, df))
    noise = spread.within_sd ** 2 / spread.pairs_per_replicate
    tau2, tau2_upper = max(0.0, s2 - noise), max(0.0, s2_upper - noise)
    new_noise = spread.within_sd ** 2 / pairs_per_replicate
    sd, sd_upper = math.sqrt(tau2 + new_noise), math.sqrt(tau2_upper + new_noise)
    det = {n: d for n in replicates if (d := smallest_detectable(sd_upper, n)) is not None}
    det_point = {n: d for n in replicates if (d := smallest_detectable(sd, n)) is not None}
    return Plan(math.sqrt(tau2), math.sqrt(tau2_upper), sd, sd_upper, det, det_point)
