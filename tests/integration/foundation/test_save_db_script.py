"""docs/experiments/save_db.py: the gzipped copy an experiment commits between sessions. --slim drops only what no
reader needs (completed runs' per-token arrays) and keeps every row and every column of a run still to resume."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

from _common import load_file

from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import runs
from genenv.settings import DatabaseSettings
from tests.integration.curriculum.curr_helpers import add_attempt, add_task, make_run

SCRIPT = Path(__file__).resolve().parents[3] / "docs" / "experiments" / "save_db.py"


def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A home with a completed and a running run, each one task with two attempts that carry token arrays."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'genenv.db'}"
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    ids: dict[str, str] = {}
    try:
        with session_scope(make_session_factory(engine)) as s:
            for status in (RunStatus.COMPLETED, RunStatus.RUNNING):
                run_id = make_run(s, domain="arithmetic")
                runs.apply_action(s, run_id, "start")
                if status is RunStatus.COMPLETED:
                    runs.transition(s, run_id, status)
                task = add_task(s, run_id, 0, "s0", 0)
                for attempt in range(2):
                    add_attempt(s, task.id, attempt, "success", response=f"{status} {attempt}",
                                token_ids=[1, 2, 3], token_logprobs=[-0.1, -0.2, -0.3])
                ids[status.value] = run_id
    finally:
        engine.dispose()
    return home, ids


def _rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = sqlite3.connect(db)
    try:
        return {
            "tokens": con.execute("SELECT task.run_id, rollout.response, rollout.token_ids, rollout.token_logprobs "
                                  "FROM rollout JOIN task ON task.id = rollout.task_id ORDER BY rollout.id").fetchall(),
            "counts": [tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone())
                       for t in ("run", "task", "rollout", "verdict")],
        }
    finally:
        con.close()


def _saved(out: Path, tmp_path: Path) -> Path:
    db = tmp_path / f"{out.stem}.restored"
    db.write_bytes(gzip.decompress(out.read_bytes()))
    return db


def test_slim_drops_only_completed_runs_token_arrays(tmp_path: Path) -> None:
    save_db = load_file(SCRIPT)
    home, ids = _home(tmp_path)
    original = _rows(home / "genenv.db")

    full, slim = tmp_path / "full.db.gz", tmp_path / "slim.db.gz"
    assert save_db.save(home, full) == {"completed": 1, "running": 1}
    assert save_db.save(home, slim, slim=True) == {"completed": 1, "running": 1}

    assert _rows(_saved(full, tmp_path)) == original
    restored = _rows(_saved(slim, tmp_path))
    assert restored["counts"] == original["counts"] == [(2,), (2,), (4,), (4,)]
    by_run = {(run, response): (t_ids, t_lps) for run, response, t_ids, t_lps in restored["tokens"]}
    assert by_run[(ids["completed"], "completed 0")] == (None, None)
    assert by_run[(ids["completed"], "completed 1")] == (None, None)
    assert by_run[(ids["running"], "running 0")] == ("[1, 2, 3]", "[-0.1, -0.2, -0.3]")
    assert (home / "genenv.db").stat().st_size > 0 and _rows(home / "genenv.db") == original  # the source untouched
