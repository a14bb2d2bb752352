"""Paired comparisons of seed batches, and each genenv member's dose: the numbers the restated hypotheses rest on.

Replicate r of every mode draws the same seeds in every epoch, so a seed batch of genenv and the batch of the same
(replicate, epoch, seed) in a baseline differ only by who wrote the tasks (and sampling noise). Comparing them pair
by pair removes the seed-to-seed spread, which is most of the variance. Epoch 0 is the same process in genenv and
random_simulator (neither simulator has been trained yet): it is an A/A check, reported on its own and left out of
every effect.

What the intervals mean: seed batches are the units, so an interval is conditional on the simulators these
replicates trained; each replicate's own estimate is listed beside it, because training randomness between
replicates is not in the interval (with 2–3 replicates no interval could carry it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from genenv.contracts import modes
from genenv.contracts.experiments import ExperimentSeries, MemberSeries, SeedBatch
from genenv.curriculum.reward import in_band
from genenv.experiments.stats import (
    DEFAULT_CONFIDENCE,
    Interval,
    mcnemar_p,
    mean_ci,
    paired_diff_ci,
    replicate_ci,
)

GENENV = "genenv"


@dataclass(frozen=True)
class BatchPair:
    """The same (replicate, epoch, seed) under genenv (``a``) and a baseline (``b``)."""

    replicate: int
    epoch: int
    seed_id: str
    a: SeedBatch
    b: SeedBatch


@dataclass(frozen=True)
class ReplicateEffect:
    """One replicate's paired estimates (no interval: its spread is what the pooled interval cannot carry)."""

    replicate: int
    pairs: int
    in_band_diff: float
    abs_gap_diff: float
    toward_frontier: float
    below_alpha: float | None = None
    """Mean p̂_genenv − p̂_baseline over this replicate's pairs below α (None without one)."""
    above_alpha: float | None = None
    """The same over its pairs above α."""


@dataclass(frozen=True)
class PairedComparison:
    """genenv − baseline over paired seed batches of the given epochs."""

    baseline: str
    epochs: str
    """'0' (the A/A check) or '≥ 1' (the effects)."""
    pairs: int
    in_band_genenv: float | None
    in_band_baseline: float | None
    in_band_diff: Interval | None
    """Mean of (in band under genenv) − (in band under the baseline), 0/1 per pair; its p_value is the McNemar test."""
    genenv_only_in_band: int
    baseline_only_in_band: int
    abs_gap_diff: Interval | None
    """Mean of |p̂_genenv − α| − |p̂_baseline − α|: below 0 means genenv's batches sit closer to α."""
    toward_frontier: Interval | None
    """Mean of (p̂_genenv − p̂_baseline) × sign(α − the pair's mean p̂): above 0 means genenv's tasks were easier
    where the pair is below α and harder where it is above. The side is read off the pair's mean, not the
    baseline's own p̂, which would make regression to the mean look like an effect."""
    below_alpha: Interval | None
    """Mean p̂_genenv − p̂_baseline over pairs whose mean p̂ < α (expected > 0: easier tasks)."""
    above_alpha: Interval | None
    """The same over pairs whose mean p̂ > α (expected < 0: harder tasks)."""
    difficulty_below: dict[str, Interval]
    difficulty_above: dict[str, Interval]
    per_replicate: list[ReplicateEffect]
    replicate_level: dict[str, Interval | None] = field(default_factory=dict)
    """The primary intervals, at the unit that was randomised: per measure (in_band_diff, abs_gap_diff,
    toward_frontier, below_alpha, above_alpha), the t interval over the per-replicate estimates (paired by replicate
    seed; stats.replicate_ci), None with fewer than two replicates that have the measure. The seed-batch intervals
    above are secondary: they are conditional on the simulators these replicates trained."""


REPLICATE_MEASURES: Final = ("in_band_diff", "abs_gap_diff", "toward_frontier", "below_alpha", "above_alpha")


@dataclass(frozen=True)
class Dose:
    """How much a genenv member's simulator was trained before the tasks it wrote (METHOD.md, "Dose")."""

    run_id: str
    replicate: int
    updates: int
    """Simulator training jobs that took at least one step."""
    used_updates: int
    """Of those, the ones whose adapter (or a later version built on it) wrote tasks afterwards."""
    used_steps: int
    used_examples: int
    pool_sizes: list[int]
    kl_to_base: float | None
    """Sampled KL to the base simulator in the last step of the newest adapter that wrote tasks."""
    trained_tasks: int
    """Tasks written by a trained simulator adapter."""
    total_tasks: int
    early_stops: int
    mode: str = GENENV
    """genenv, or generic_rwr (the control trained at the same dose)."""


def _valid(batch: SeedBatch) -> bool:
    return batch.p_hat is not None and batch.n > 0


def pair_batches(series: ExperimentSeries, baseline: str) -> list[BatchPair]:
    """Every (replicate, epoch, seed) scored under both genenv and ``baseline``, p̂ defined on both sides."""
    by_rep: dict[str, dict[int, MemberSeries]] = {}
    for m in series.members:
        by_rep.setdefault(m.mode, {})[m.replicate] = m
    pairs: list[BatchPair] = []
    for rep, a_member in sorted(by_rep.get(GENENV, {}).items()):
        b_member = by_rep.get(baseline, {}).get(rep)
        if b_member is None:
            continue
        b_batches = {(b.epoch, b.seed_id): b for b in b_member.seed_batches if _valid(b)}
        for a in a_member.seed_batches:
            b = b_batches.get((a.epoch, a.seed_id))
            if b is not None and _valid(a):
                pairs.append(BatchPair(rep, a.epoch, a.seed_id, a, b))
    return pairs


def _p(batch: SeedBatch) -> float:
    assert batch.p_hat is not None
    return batch.p_hat


def _side(pair: BatchPair, alpha: float) -> float:
    mid = (_p(pair.a) + _p(pair.b)) / 2
    return 0.0 if mid == alpha else (1.0 if mid < alpha else -1.0)


def _ci(values: Sequence[float], confidence: float) -> Interval | None:
    return mean_ci(values, confidence) if values else None


def _diff(a: Sequence[float], b: Sequence[float], confidence: float) -> Interval | None:
    return paired_diff_ci(a, b, confidence) if a else None


def _difficulty(pairs: Sequence[BatchPair], confidence: float) -> dict[str, Interval]:
    measures = sorted({k for p in pairs for k in p.a.difficulty if k in p.b.difficulty})
    out: dict[str, Interval] = {}
    for k in measures:
        both = [(p.a.difficulty[k], p.b.difficulty[k]) for p in pairs if k in p.a.difficulty and k in p.b.difficulty]
        if both:
            out[k] = paired_diff_ci([x for x, _ in both], [y for _, y in both], confidence)
    return out


def compare(
    pairs: Sequence[BatchPair], baseline: str, alpha: float, k_min: float, *, epochs: str,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedComparison:
    """genenv − baseline on in-band share, |p̂ − α|, the frontier-signed p̂ difference and difficulty, paired."""
    def band(b: SeedBatch) -> float:
        return float(in_band(_p(b), alpha=alpha, k_min=k_min))

    a_in = [band(p.a) for p in pairs]
    b_in = [band(p.b) for p in pairs]
    a_only = sum(1 for x, y in zip(a_in, b_in, strict=True) if x > y)
    b_only = sum(1 for x, y in zip(a_in, b_in, strict=True) if y > x)
    band_diff = _diff(a_in, b_in, confidence)
    if band_diff is not None:  # the p-value of paired binary outcomes is McNemar's, not the sign-flip test's
        band_diff = Interval(band_diff.estimate, band_diff.low, band_diff.high, band_diff.n, None,
                             band_diff.degenerate, mcnemar_p(a_only, b_only))
    gaps_a = [abs(_p(p.a) - alpha) for p in pairs]
    gaps_b = [abs(_p(p.b) - alpha) for p in pairs]
    signed = [(_p(p.a) - _p(p.b)) * _side(p, alpha) for p in pairs]
    below = [p for p in pairs if _side(p, alpha) > 0]
    above = [p for p in pairs if _side(p, alpha) < 0]
    reps = sorted({p.replicate for p in pairs})
    per_rep = []
    for r in reps:
        mine = [i for i, p in enumerate(pairs) if p.replicate == r]
        below_r = [_p(p.a) - _p(p.b) for p in below if p.replicate == r]
        above_r = [_p(p.a) - _p(p.b) for p in above if p.replicate == r]
        per_rep.append(ReplicateEffect(
            replicate=r, pairs=len(mine),
            in_band_diff=sum(a_in[i] - b_in[i] for i in mine) / len(mine),
            abs_gap_diff=sum(gaps_a[i] - gaps_b[i] for i in mine) / len(mine),
            toward_frontier=sum(signed[i] for i in mine) / len(mine),
            below_alpha=sum(below_r) / len(below_r) if below_r else None,
            above_alpha=sum(above_r) / len(above_r) if above_r else None,
        ))
    level: dict[str, Interval | None] = {}
    for key in REPLICATE_MEASURES:
        values = [v for r in per_rep if (v := getattr(r, key)) is not None]
        level[key] = replicate_ci(values, confidence)
    return PairedComparison(
        baseline=baseline, epochs=epochs, pairs=len(pairs),
        in_band_genenv=sum(a_in) / len(a_in) if a_in else None,
        in_band_baseline=sum(b_in) / len(b_in) if b_in else None,
        in_band_diff=band_diff, genenv_only_in_band=a_only, baseline_only_in_band=b_only,
        abs_gap_diff=_diff(gaps_a, gaps_b, confidence),
        toward_frontier=_ci(signed, confidence),
        below_alpha=_diff([_p(p.a) for p in below], [_p(p.b) for p in below], confidence),
        above_alpha=_diff([_p(p.a) for p in above], [_p(p.b) for p in above], confidence),
        difficulty_below=_difficulty(below, confidence),
        difficulty_above=_difficulty(above, confidence),
        per_replicate=per_rep,
        replicate_level=level,
    )


def paired_comparisons(
    series: ExperimentSeries, baselines: Sequence[str], confidence: float = DEFAULT_CONFIDENCE
) -> tuple[list[PairedComparison], list[PairedComparison]]:
    """(effects over epochs ≥ 1, the epoch-0 A/A checks), one of each per baseline present with genenv."""
    effects: list[PairedComparison] = []
    checks: list[PairedComparison] = []
    for baseline in baselines:
        pairs = pair_batches(series, baseline)
        if not pairs:
            continue
        later = [p for p in pairs if p.epoch >= 1]
        first = [p for p in pairs if p.epoch == 0]
        if later:
            effects.append(compare(later, baseline, series.alpha, series.k_min, epochs="≥ 1", confidence=confidence))
        if first:
            checks.append(compare(first, baseline, series.alpha, series.k_min, epochs="0", confidence=confidence))
    return effects, checks


def member_dose(member: MemberSeries) -> Dose:
    """The RWR updates a genenv member's later tasks were written with (an adapter version builds on the ones
    before it, so every update up to the newest adapter that wrote tasks counts)."""
    sim = sorted((j for j in member.train_jobs if j.kind == "train_simulator"), key=lambda j: j.epoch)
    trained = [j for j in sim if j.steps > 0 and j.adapter_version is not None]
    writers = [j for j in trained if j.tasks_written > 0]
    last = max((j.adapter_version or 0 for j in writers), default=0)
    used = [j for j in trained if (j.adapter_version or 0) <= last] if writers else []
    newest = max(writers, key=lambda j: j.adapter_version or 0) if writers else None
    total = max((e.generated_tasks_so_far for e in member.epochs), default=0)
    return Dose(
        run_id=member.run_id, replicate=member.replicate, updates=len(trained), used_updates=len(used),
        used_steps=sum(j.steps for j in used), used_examples=sum(j.examples_seen for j in used),
        pool_sizes=[j.pool_size or 0 for j in used], kl_to_base=newest.kl_to_base if newest else None,
        trained_tasks=sum(j.tasks_written for j in trained), total_tasks=total,
        early_stops=sum(j.early_stopped for j in sim), mode=member.mode,
    )


def doses(series: ExperimentSeries) -> list[Dose]:
    """The dose of every member whose simulator trains (genenv, then generic_rwr), by replicate."""
    trained = [m for m in series.members if m.mode in modes.MODES and modes.policy(m.mode).trains_simulator]
    return [member_dose(m) for m in sorted(trained, key=lambda m: (modes.mode_order(m.mode), m.replicate))]


def _who(d: Dose) -> str:
    return "" if d.mode == GENENV else f"{d.mode} "


def dose_line(d: Dose) -> str:
    """One sentence per genenv (or generic_rwr) member for the report."""
    if not d.used_updates:
        return (f"{_who(d)}replicate {d.replicate} (`{d.run_id}`): no trained simulator wrote tasks — {d.updates} "
                f"update(s) took steps, none was used before the run ended; {d.mode} was the random simulator here")
    kl = "–" if d.kl_to_base is None else f"{d.kl_to_base:.3g}"
    return (f"{_who(d)}replicate {d.replicate} (`{d.run_id}`): {d.used_steps} RWR step(s) on {d.used_examples} "
            f"examples in "
            f"{d.used_updates} update(s) whose adapters wrote tasks (pools {', '.join(map(str, d.pool_sizes))}); "
            f"{d.trained_tasks} of {d.total_tasks} tasks written by a trained simulator; KL to the base simulator "
            f"{kl}; {d.updates - d.used_updates} update(s) never used; {d.early_stops} stopped by the KL cap")


# ------------------------------------------------------------------------------------------- repeats, both sides


def fresh_series(series: ExperimentSeries) -> ExperimentSeries:
    """The series on non-repeated tasks: every seed batch's k, n and p̂ over its valid tasks that do not repeat a
    valid task of an earlier epoch of the run (p̂ None when none of them was attempted, so the pair is left out)."""
    members = [
        m.model_copy(update={"seed_batches": [
            b.model_copy(update={"k": b.fresh_k, "n": b.fresh_n,
                                 "p_hat": b.fresh_k / b.fresh_n if b.fresh_n else None,
                                 "valid_tasks": b.valid_tasks - b.repeated_tasks, "repeated_tasks": 0})
            for b in m.seed_batches]})
        for m in series.members
    ]
    return series.model_copy(update={"members": members})


@dataclass(frozen=True)
class SideEffect:
    """genenv − baseline p̂ on the seed batches of the difficulty groups pre-registered on one side of α."""

    baseline: str
    side: str
    """'above' (predicted < 0: harder tasks) or 'below' (predicted > 0: easier tasks)."""
    tasks: str
    """'non-repeated' (the primary) or 'all'."""
    pairs: int
    per_replicate: dict[int, float]
    replicate_level: Interval | None
    """The primary interval: t over the per-replicate estimates (stats.replicate_ci)."""
    seed_batches: Interval | None
    """Secondary: paired over the seed batches."""


def side_effects(
    pairs: Sequence[BatchPair], baseline: str, sides: Mapping[str, str], tasks: str,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[SideEffect]:
    """Per side of α (by each pair's seed group's pre-registered side, never by its outcome), the p̂ difference."""
    out: list[SideEffect] = []
    for side in ("above", "below"):
        mine = [p for p in pairs if p.a.group is not None and sides.get(p.a.group) == side]
        per_rep: dict[int, float] = {}
        for r in sorted({p.replicate for p in mine}):
            d = [_p(p.a) - _p(p.b) for p in mine if p.replicate == r]
            per_rep[r] = sum(d) / len(d)
        out.append(SideEffect(
            baseline=baseline, side=side, tasks=tasks, pairs=len(mine), per_replicate=per_rep,
            replicate_level=replicate_ci(list(per_rep.values()), confidence),
            seed_batches=_diff([_p(p.a) for p in mine], [_p(p.b) for p in mine], confidence),
        ))
    return out
