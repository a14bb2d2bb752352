"""The difficulty ledger (SQL GROUP BY in the database) equals a Python reference on the same random data."""

from __future__ import annotations

import random

import pytest
from curr_helpers import make_run, random_run_data
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from genenv.db.engine import session_scope
from genenv.db.models import SeedStatRow, TaskStatRow
from genenv.db.repositories import ledger


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ledger_sql_equals_python_reference(any_sessions: sessionmaker[Session], seed: int) -> None:
    rng = random.Random(seed)
    with session_scope(any_sessions) as s:
        run = make_run(s)
        other = make_run(s)
        ref = random_run_data(s, run, rng)
        random_run_data(s, other, random.Random(seed + 100))  # must not leak into `run`
    with session_scope(any_sessions) as s:
        tasks = ledger.task_ledger(s, run)
        seeds = ledger.seed_ledger(s, run)

    assert [t.task_id for t in tasks] == sorted(ref.task)
    for t in tasks:
        seed_id, epoch, n, k = ref.task[t.task_id]
        assert (t.seed_id, t.epoch, t.n, t.k) == (seed_id, epoch, n, k)
        assert t.p_hat == (pytest.approx(k / n) if n else None)
        assert t.p_beta == pytest.approx((k + 1) / (n + 2))

    want_seeds = ref.seeds()
    assert [x.key for x in seeds] == sorted(want_seeds)
    for x in seeds:
        n, k, n_tasks, n_epochs = want_seeds[x.key]
        assert (x.n, x.k, x.tasks, x.epochs) == (n, k, n_tasks, n_epochs)
        assert x.p_hat == (pytest.approx(k / n) if n else None)
        assert x.p_beta == pytest.approx((k + 1) / (n + 2))


def test_ledger_filters_and_pages(any_sessions: sessionmaker[Session]) -> None:
    with session_scope(any_sessions) as s:
        run = make_run(s)
        ref = random_run_data(s, run, random.Random(7))
    with session_scope(any_sessions) as s:
        full = ledger.task_ledger(s, run)
        epoch1 = ledger.task_ledger(s, run, epoch=1)
        assert [t.task_id for t in epoch1] == sorted(i for i, v in ref.task.items() if v[1] == 1)
        seed = full[0].seed_id
        assert {t.seed_id for t in ledger.task_ledger(s, run, seed_id=seed)} == {seed}
        pages, cursor = [], None
        while True:
            page = ledger.task_ledger_page(s, run, epoch=None, seed_id=None, cursor=cursor, limit=4)
            pages.extend(page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert pages == full
        seed_pages, cursor = [], None
        while True:
            sp = ledger.seed_ledger_page(s, run, cursor=cursor, limit=2)
            seed_pages.extend(sp.items)
            if sp.next_cursor is None:
                break
            cursor = sp.next_cursor
        assert seed_pages == ledger.seed_ledger(s, run)


def test_materialised_epoch_stats_match_and_are_idempotent(any_sessions: sessionmaker[Session]) -> None:
    with session_scope(any_sessions) as s:
        run = make_run(s)
        ref = random_run_data(s, run, random.Random(11))
    for _ in range(2):  # a second materialisation updates in place
        with session_scope(any_sessions) as s:
            ledger.materialise_epoch_stats(s, run, 1)
    with session_scope(any_sessions) as s:
        seed_rows = s.scalars(select(SeedStatRow).where(SeedStatRow.run_id == run)).all()
        assert {(r.seed_id, r.n, r.k) for r in seed_rows} == {(k, v[0], v[1]) for k, v in ref.epoch_seeds(1).items()}
        for r in seed_rows:
            assert r.epoch == 1 and r.p_beta == pytest.approx((r.k + 1) / (r.n + 2))
        task_ids = [i for i, v in ref.task.items() if v[1] == 1]
        task_rows = s.scalars(select(TaskStatRow).where(TaskStatRow.task_id.in_(task_ids))).all()
        assert {(r.task_id, r.n, r.k) for r in task_rows} == {(i, ref.task[i][2], ref.task[i][3]) for i in task_ids}
        assert ledger.epoch_seed_counts(s, run, 1) == sorted((k, v[1], v[0]) for k, v in ref.epoch_seeds(1).items())
