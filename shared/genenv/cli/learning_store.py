"""The thin reader of ``genenv experiment learning``: stored experiments → genenv.experiments.learning's members.

Everything read goes through the repositories the control plane's series route uses (experiments.series_records,
experiments.members, the catalogue's domain, evaluations.latest_base) and the pure series builder; the analysis
itself (genenv.experiments.learning) never sees a database.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from genenv.contracts.experiment_records import ExperimentRecords
from genenv.contracts.experiments import MemberSeries
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.experiments.agent_calibration import BaseOutcome
from genenv.experiments.budget import realised_agent_attempts
from genenv.experiments.learning import EpochPoint, HeldOut, LearningMember, seed_history_share
from genenv.experiments.paired import dose_line, member_dose
from genenv.experiments.series import build_series

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from genenv.domains.base import Domain

HOME_DATABASE = "genenv.db"


class StoreError(ValueError):
    """A database or experiment that cannot be read as asked."""


def home_url(home: Path) -> str:
    """The SQLite URL of an embedded home's database (StoreError when it has none)."""
    db = home / HOME_DATABASE
    if not db.is_file():
        raise StoreError(f"no GenEnv database in {home} (expected {db})")
    return f"sqlite:///{db.resolve()}"


def heldout_split(config: RunConfig) -> tuple[str | None, str | None]:
    """(benchmark, split) of the held-out accuracy: the first eval benchmark and its split (its evaluator's default
    when the config names none)."""
    if not config.eval_benchmarks:
        return None, None
    benchmark = config.eval_benchmarks[0]
    split = config.eval_splits.get(benchmark)
    if split is None:
        from genenv.domains.evaluators import get_evaluator

        try:
            split = get_evaluator(benchmark).default_split
        except Exception:  # a domain:NAME held-out or an unknown name: the config's "default" is what is compared
            split = "default"
    return benchmark, split


@dataclass(frozen=True)
class _Final:
    items: int | None
    valid_share: float | None


def _final_numbers(records: ExperimentRecords, run_id: str, epoch: int) -> _Final:
    """The final evaluation's item count and reply validity (1 − malformed / n)."""
    found = [e for e in records.evaluations if e.run_id == run_id and e.epoch == epoch]
    if not found:
        return _Final(None, None)
    numbers = found[-1].metrics.overall.numbers()  # a later evaluation of the same epoch wins, as in the series
    n, malformed = numbers.get("n"), numbers.get("malformed")
    items = int(n) if n is not None else None
    valid = 1.0 - float(malformed) / items if items and malformed is not None else None
    return _Final(items, valid)


def to_member(records: ExperimentRecords, series: MemberSeries, config: RunConfig, status: RunStatus) -> LearningMember:
    """One stored member as the analysis reads it."""
    benchmark, split = heldout_split(config)
    final = _final_numbers(records, series.run_id, config.epochs - 1)
    summaries = {e.epoch: e.summary for e in records.epochs if e.run_id == series.run_id}
    batch_p: dict[int, list[float]] = {}
    for b in series.seed_batches:
        if b.p_hat is not None:
            batch_p.setdefault(b.epoch, []).append(b.p_hat)
    points = tuple(
        EpochPoint(epoch=e.epoch, heldout_accuracy=e.heldout_accuracy,
                   agent_attempts=realised_agent_attempts(e.valid_tasks, config),
                   groups_with_variance_share=summaries[e.epoch].groups_with_variance_share
                   if e.epoch in summaries else None,
                   batch_p_hat=statistics.fmean(batch_p[e.epoch]) if e.epoch in batch_p else None,
                   in_band_share=e.in_band_share, valid_tasks=e.valid_tasks, repeated_tasks=e.repeated_tasks,
                   heldout_by_level=dict(e.heldout_by_category))
        for e in sorted(series.epochs, key=lambda e: e.epoch))
    used: bool | None = None
    dose: str | None = None
    if config.trains_simulator:
        d = member_dose(series)
        used, dose = d.used_updates > 0, dose_line(d)
    wall = sum(sum(s.phase_seconds.values()) for s in summaries.values())
    return LearningMember(
        experiment_id=records.experiment_id, run_id=series.run_id, seed=config.random_seed, config=config,
        status=status, epochs=points,
        heldout=HeldOut(benchmark, split, config.eval_limit, final.items), final_valid_share=final.valid_share,
        simulator_used=used, dose=dose,
        seed_history_share=seed_history_share((b.epoch, b.seed_id, b.p_hat is not None) for b in series.seed_batches),
        wall_s=wall if summaries else None,
    )


def read_members(url: str, experiment_ids: Sequence[str] = ()) -> tuple[list[LearningMember], list[str]]:
    """The members of the experiments stored at ``url`` (all of them, or those of ``experiment_ids`` found there),
    and the ids found."""
    from genenv import catalogue
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.repositories import experiments, runs
    from genenv.settings import DatabaseSettings

    engine = make_engine(DatabaseSettings(url=url))
    read: list[tuple[ExperimentRecords, Domain, dict[str, tuple[RunConfig, RunStatus]]]] = []
    try:
        with session_scope(make_session_factory(engine)) as s:
            ids = _experiment_ids(s, experiment_ids)
            for experiment_id in ids:
                records = experiments.series_records(s, experiment_id)
                domain = catalogue.resolve(s, records.spec.template.domain)
                configs = {row.id: (runs.config_of(row), RunStatus(row.status))
                           for row in experiments.members(s, experiment_id)}
                read.append((records, domain, configs))
    finally:
        engine.dispose()
    out: list[LearningMember] = []
    for records, domain, configs in read:
        series = build_series(records, domain)
        out += [to_member(records, m, *configs[m.run_id]) for m in series.members]
    return out, [r.experiment_id for r, _, _ in read]


def _experiment_ids(session: Session, wanted: Sequence[str]) -> list[str]:
    from genenv.db.repositories import experiments

    found: list[str] = []
    cursor: str | None = None
    while True:
        page = experiments.list_experiments(session, cursor=cursor, limit=500)
        found += [e.id for e in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    found.reverse()  # oldest first: the order they were run in
    return [i for i in found if i in wanted] if wanted else found


def read_all(urls: Sequence[str], experiment_ids: Sequence[str] = ()) -> list[LearningMember]:
    """Members of every database; StoreError when an asked-for experiment is in none of them."""
    members: list[LearningMember] = []
    seen: list[str] = []
    for url in urls:
        found, ids = read_members(url, experiment_ids)
        members += found
        seen += ids
    missing = [i for i in experiment_ids if i not in seen]
    if missing:
        raise StoreError(f"experiment(s) {', '.join(missing)} are in none of the databases read")
    return members


def read_base(urls: Sequence[str], benchmark: str, split: str) -> BaseOutcome | None:
    """The newest base-model evaluation (``genenv bench evaluate``) on ``benchmark``'s ``split`` in the databases,
    as accuracy and reply validity; None when none was stored."""
    from genenv.contracts.evaluations import EvaluationMetrics
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.repositories.common import as_utc
    from genenv.db.repositories.evaluations import latest_base
    from genenv.settings import DatabaseSettings

    best: tuple[datetime, BaseOutcome] | None = None
    for url in urls:
        engine = make_engine(DatabaseSettings(url=url))
        try:
            with session_scope(make_session_factory(engine)) as s:
                row = latest_base(s, benchmark, split)
                if row is None:
                    continue
                numbers = EvaluationMetrics.parse(row.metrics).overall.numbers()
                accuracy, n, malformed = numbers.get("accuracy"), numbers.get("n"), numbers.get("malformed")
                if accuracy is None or not n or malformed is None:
                    continue
                outcome = BaseOutcome(float(accuracy), 1.0 - float(malformed) / float(n))
                when = as_utc(row.created_at)
                if best is None or when > best[0]:
                    best = (when, outcome)
        finally:
            engine.dispose()
    return None if best is None else best[1]
