"""An experiment's series from its stored rows: every member's epochs, seed batches and training jobs, and per mode
the per-epoch means over replicates — the one aggregation the report and the dashboard both use.

Pure: takes the rows genenv.db.repositories.experiments.series_records read and the experiment's Domain (whose
measures say how hard a task is); imports no database, client or service. The report adds intervals to the same
per-epoch values (``epoch_values``); the dashboard draws ``ExperimentSeries.modes`` as it is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from genenv.contracts import modes
from genenv.contracts.adapters import JobKind, Role, adapter_name
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.contracts.experiment_records import ExperimentRecords, PayloadRecord, TrainJobRecord
from genenv.contracts.experiments import (
    ExperimentSeries,
    MemberEpoch,
    MemberSeries,
    ModeEpoch,
    ModeMean,
    ModeSeries,
    SeedBatch,
    TrainJobSummary,
)
from genenv.curriculum.repeats import repeat_flags, repeat_key

if TYPE_CHECKING:  # the plug-in interface only: measuring needs the caller's resolved Domain, never the registry
    from genenv.domains.base import Domain

STATIC: Final = "static_augmentation"
"""The arm whose final held-out accuracy is the data-efficiency target."""
# Per-epoch numbers of a member, in table order: (key, label in the report).
EPOCH_METRICS: Final[tuple[tuple[str, str], ...]] = (
    ("p_hat", "p̂"),
    ("in_band_share", "in-band share"),
    ("heldout_accuracy", "held-out acc."),
    ("mean_response_tokens", "response tokens"),
    ("generated_tasks_so_far", "generated tasks"),
)
ROLE_OF_JOB: Final = {JobKind.TRAIN_AGENT.value: Role.AGENT, JobKind.TRAIN_SIMULATOR.value: Role.SIMULATOR}

EpochKey = tuple[str, int]
"""(run id, epoch)."""


# ------------------------------------------------------------------------------------------------------ difficulty


@dataclass
class Measured:
    """Sums of the domain's difficulty measures over some tasks, and how many tasks."""

    sums: dict[str, float] = field(default_factory=dict)
    count: int = 0

    def add(self, measures: Mapping[str, float]) -> None:
        """Count one task."""
        for name, value in measures.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
        self.count += 1

    def means(self) -> dict[str, float]:
        """Each measure's mean ({} without tasks)."""
        return {k: v / self.count for k, v in self.sums.items()} if self.count else {}


@dataclass
class EpochDifficulty:
    """What the domain says about one epoch of one run: its valid tasks' measures, the same per seed batch, and
    each seed's difficulty group."""

    tasks: Measured = field(default_factory=Measured)
    batches: dict[str, Measured] = field(default_factory=dict)
    groups: dict[str, str | None] = field(default_factory=dict)
    keyed: list[tuple[str, str, int, int]] = field(default_factory=list)
    """Each valid task as (seed id, repeat key, k, n): what the repeat measure compares across epochs."""


def measure(tasks: Iterable[PayloadRecord], seeds: Iterable[PayloadRecord], domain: Domain) -> dict[
        EpochKey, EpochDifficulty]:
    """Every (run, epoch) the payloads belong to, measured through the domain plug-in."""
    out: dict[EpochKey, EpochDifficulty] = {}
    for t in tasks:
        d = out.setdefault((t.run_id, t.epoch), EpochDifficulty())
        values = domain.difficulty(t.payload)
        d.tasks.add(values)
        d.batches.setdefault(t.seed_id, Measured()).add(values)
        d.keyed.append((t.seed_id, repeat_key(domain.canonical_task(t.payload)), t.k, t.n))
    for s in seeds:
        out.setdefault((s.run_id, s.epoch), EpochDifficulty()).groups[s.seed_id] = domain.difficulty_group(s.payload)
    return out


class DifficultyMemo:
    """Difficulty of closed epochs, kept for the life of a process (the control plane's, which the dashboard polls
    every 3 s).

    Why this is safe: an epoch closes after its last task and seed are written, and a closed epoch never reopens,
    so its measures cannot change; and a domain name keeps the tasks it was run with (data-defined domains cannot be
    re-registered with another seed file). Only closed epochs are kept: an open epoch's seed batches are measured
    afresh on every read. Bounded by runs, least recently read first out.
    """

    def __init__(self, max_runs: int = 2000) -> None:
        self._runs: OrderedDict[str, dict[int, EpochDifficulty]] = OrderedDict()
        self._max_runs = max_runs
        self._lock = threading.Lock()  # sync routes run in a thread pool

    def recall(self, run_ids: Iterable[str]) -> dict[EpochKey, EpochDifficulty]:
        """The measured closed epochs of these runs (their keys are series_records' ``known``)."""
        with self._lock:
            out: dict[EpochKey, EpochDifficulty] = {}
            for run_id in run_ids:
                if run_id in self._runs:
                    self._runs.move_to_end(run_id)
                    out.update({(run_id, e): d for e, d in self._runs[run_id].items()})
            return out

    def resolve(
        self, records: ExperimentRecords, domain: Domain, recalled: Mapping[EpochKey, EpochDifficulty]
    ) -> dict[EpochKey, EpochDifficulty]:
        """Measures of every epoch in ``records``: the ``recalled`` ones (whose payloads were not read) as they are,
        the rest measured from the payloads read, remembering those whose epoch is closed."""
        out = measure(records.tasks, records.seeds, domain)
        with self._lock:
            for key in ((e.run_id, e.epoch) for e in records.epochs if (e.run_id, e.epoch) not in recalled):
                # Its payloads were read, so a closed epoch that measured nothing has no valid task and no seed.
                out[key] = out.get(key) or EpochDifficulty()
                self._runs.setdefault(key[0], {})[key[1]] = out[key]
                self._runs.move_to_end(key[0])
            while len(self._runs) > self._max_runs:
                self._runs.popitem(last=False)
        out.update(recalled)
        return out


# --------------------------------------------------------------------------------------------------------- repeats


@dataclass
class Repeats:
    """One run's repeats: per epoch (valid tasks, repeated tasks); per (epoch, seed) (repeated, fresh k, fresh n)."""

    epochs: dict[int, tuple[int, int]] = field(default_factory=dict)
    batches: dict[tuple[int, str], tuple[int, int, int]] = field(default_factory=dict)


def run_repeats(run_id: str, measured: Mapping[EpochKey, EpochDifficulty]) -> Repeats:
    """Which of a run's valid tasks repeat a valid task of an earlier epoch (genenv.curriculum.repeats), counted
    per epoch and per seed batch with the success counts of the batch's other (non-repeated) tasks."""
    tasks = [(epoch, seed, key, k, n) for (run, epoch), d in sorted(measured.items()) if run == run_id
             for seed, key, k, n in d.keyed]
    flags = repeat_flags([(run_id, epoch, key) for epoch, _, key, _, _ in tasks])
    out = Repeats()
    for (epoch, seed, _, k, n), repeated in zip(tasks, flags, strict=True):
        valid, rep = out.epochs.get(epoch, (0, 0))
        out.epochs[epoch] = (valid + 1, rep + repeated)
        r, fk, fn = out.batches.get((epoch, seed), (0, 0, 0))
        out.batches[(epoch, seed)] = (r + 1, fk, fn) if repeated else (r, fk + k, fn + n)
    return out


# --------------------------------------------------------------------------------------------------------- members


def _member_epochs(
    records: ExperimentRecords, run_id: str, measured: Mapping[EpochKey, EpochDifficulty], repeats: Repeats
) -> list[MemberEpoch]:
    evals: dict[int, EvaluationMetrics] = {e.epoch: e.metrics for e in records.evaluations if e.run_id == run_id}
    out: list[MemberEpoch] = []
    for e in sorted((e for e in records.epochs if e.run_id == run_id), key=lambda e: e.epoch):
        metrics = evals.get(e.epoch, EvaluationMetrics())
        difficulty = measured.get((run_id, e.epoch))
        out.append(MemberEpoch(
            epoch=e.epoch,
            p_hat=e.summary.p_hat,
            in_band_share=e.summary.in_band_share,
            heldout_accuracy=metrics.overall.accuracy,
            heldout_by_category=metrics.category_accuracies(),
            generated_tasks_so_far=e.summary.generated_tasks_so_far,
            mean_response_tokens=e.summary.mean_response_tokens,
            difficulty=difficulty.tasks.means() if difficulty else {},
            valid_tasks=repeats.epochs.get(e.epoch, (0, 0))[0],
            repeated_tasks=repeats.epochs.get(e.epoch, (0, 0))[1],
        ))
    return out


def _seed_batches(
    records: ExperimentRecords, run_id: str, measured: Mapping[EpochKey, EpochDifficulty], repeats: Repeats
) -> list[SeedBatch]:
    out: list[SeedBatch] = []
    for s in (s for s in records.scores if s.run_id == run_id):
        d = measured.get((run_id, s.epoch), EpochDifficulty())
        batch = d.batches.get(s.seed_id, Measured())
        repeated, fresh_k, fresh_n = repeats.batches.get((s.epoch, s.seed_id), (0, 0, 0))
        out.append(SeedBatch(epoch=s.epoch, seed_id=s.seed_id, group=d.groups.get(s.seed_id), k=s.k, n=s.n,
                             p_hat=s.p_hat, in_band=s.in_band, valid_tasks=batch.count, difficulty=batch.means(),
                             repeated_tasks=repeated, fresh_k=fresh_k, fresh_n=fresh_n))
    return out


def _train_job(job: TrainJobRecord, written: Mapping[str, int]) -> TrainJobSummary:
    m = job.metrics
    per_step = m.get("per_step") or []
    last_kl = per_step[-1].get("kl") if per_step and isinstance(per_step[-1], dict) else None
    adapter = None if job.adapter_version is None else adapter_name(job.run_id, ROLE_OF_JOB[job.kind],
                                                                     job.adapter_version)
    return TrainJobSummary(
        epoch=job.epoch, kind=job.kind, status=job.status, adapter_version=job.adapter_version,
        pool_size=m.get("pool_size"), steps=int(m.get("steps") or 0), examples_seen=int(m.get("examples_seen") or 0),
        kl_to_base=float(last_kl) if isinstance(last_kl, int | float) else None,
        early_stopped=bool(m.get("early_stopped", False)),
        tasks_written=0 if adapter is None else int(written.get(adapter, 0)),
    )


def build_series(
    records: ExperimentRecords, domain: Domain, measured: Mapping[EpochKey, EpochDifficulty] | None = None
) -> ExperimentSeries:
    """The ExperimentSeries of the rows; ``measured`` (DifficultyMemo.resolve) defaults to measuring them now."""
    if measured is None:
        measured = measure(records.tasks, records.seeds, domain)
    template = records.spec.template
    repeats = {m.run_id: run_repeats(m.run_id, measured) for m in records.members}
    members = [
        MemberSeries(
            run_id=m.run_id, mode=m.mode, replicate=m.replicate, status=m.status,
            epochs=_member_epochs(records, m.run_id, measured, repeats[m.run_id]),
            seed_batches=_seed_batches(records, m.run_id, measured, repeats[m.run_id]),
            train_jobs=[_train_job(j, records.written.get(m.run_id, {}))
                        for j in records.train_jobs if j.run_id == m.run_id],
        )
        for m in records.members
    ]
    return ExperimentSeries(
        experiment_id=records.experiment_id, name=records.name, status=records.status, domain=template.domain,
        alpha=template.curriculum.alpha, k_min=template.curriculum.k_min, epochs=template.epochs,
        agent_trains=template.agent.train,
        heldout_benchmark=template.eval_benchmarks[0] if template.eval_benchmarks else None,
        difficulty_measures=dict(domain.difficulty_measures), members=members,
        modes=mode_series(members), heldout_target=heldout_target(members),
        level_sides=dict(records.spec.level_sides),
    )


# ----------------------------------------------------------------------------------------------- across replicates


def modes_present(members: Sequence[MemberSeries]) -> list[str]:
    """The modes the members have, in the report's order."""
    present = {m.mode for m in members}
    return sorted(present, key=lambda m: (modes.mode_order(m), m))


def members_of(members: Sequence[MemberSeries], mode: str) -> list[MemberSeries]:
    """The members of one mode by replicate."""
    return sorted((m for m in members if m.mode == mode), key=lambda m: (m.replicate, m.run_id))


@dataclass(frozen=True)
class EpochValues:
    """One epoch of one mode: each number's values over the replicates that have it there (metrics: every key of
    EPOCH_METRICS, possibly empty; difficulty and categories: the ones some replicate has)."""

    epoch: int
    metrics: dict[str, list[float]]
    difficulty: dict[str, list[float]]
    heldout_by_category: dict[str, list[float]]


def epoch_values(members: Sequence[MemberSeries]) -> list[EpochValues]:
    """Per epoch (ascending), the replicates' values of every number; x and y of a curve are collected separately,
    so a replicate without a held-out score still counts toward the mean of its generated tasks."""
    by_epoch: dict[int, list[MemberEpoch]] = {}
    for member in members:
        for e in member.epochs:
            by_epoch.setdefault(e.epoch, []).append(e)
    out: list[EpochValues] = []
    for epoch in sorted(by_epoch):
        rows = by_epoch[epoch]
        metrics = {key: [float(v) for e in rows if (v := getattr(e, key)) is not None] for key, _ in EPOCH_METRICS}
        measures = sorted({k for e in rows for k in e.difficulty})
        categories = sorted({k for e in rows for k in e.heldout_by_category})
        out.append(EpochValues(
            epoch=epoch,
            metrics=metrics,
            difficulty={k: [e.difficulty[k] for e in rows if k in e.difficulty] for k in measures},
            heldout_by_category={k: [e.heldout_by_category[k] for e in rows if k in e.heldout_by_category]
                                 for k in categories},
        ))
    return out


def _means(values: Mapping[str, list[float]]) -> dict[str, ModeMean]:
    return {k: ModeMean(mean=sum(v) / len(v), n=len(v)) for k, v in values.items() if v}


def mode_series(members: Sequence[MemberSeries]) -> list[ModeSeries]:
    """Per mode present: its replicate count and per-epoch means (what the dashboard's thick lines are)."""
    out: list[ModeSeries] = []
    for mode in modes_present(members):
        group = members_of(members, mode)
        epochs = [ModeEpoch(epoch=v.epoch, metrics=_means(v.metrics), difficulty=_means(v.difficulty),
                            heldout_by_category=_means(v.heldout_by_category)) for v in epoch_values(group)]
        out.append(ModeSeries(mode=mode, replicates=len(group), epochs=epochs))
    return out


def final_heldout(member: MemberSeries) -> tuple[int, float] | None:
    """(epoch, accuracy) of the member's last held-out score."""
    scored = sorted((e.epoch, e.heldout_accuracy) for e in member.epochs if e.heldout_accuracy is not None)
    return scored[-1] if scored else None


def heldout_target(members: Sequence[MemberSeries]) -> float | None:
    """static_augmentation's final held-out accuracy, mean over its replicates that have one."""
    finals = [f[1] for m in members_of(members, STATIC) if (f := final_heldout(m)) is not None]
    return sum(finals) / len(finals) if finals else None
