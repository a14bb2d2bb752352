"""Write an embedded experiment home's database as a gzipped SQLite file to commit (a consistent copy through
SQLite's backup API, so a WAL left by a stopped process is folded in), and print its members by status.

    python docs/experiments/save_db.py HOME OUT.db.gz [--slim]

--slim leaves out the per-token ids and log-probabilities of the rollouts of *completed* runs: the GRPO trainer's
input, which no analysis or report reads, and about 70 % of the compressed size (a calibration database of 7
completed runs: 8.7 MB → 2.5 MB). Every row stays (tasks, replies, verdicts, epochs, evaluations), and so does every
column of a run that is not completed, so `genenv experiment resume` goes on from the saved file as before.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sqlite3
import tempfile
from pathlib import Path

# The token arrays of completed runs' rollouts: never read again (a completed run trains no more).
_SLIM = ("UPDATE rollout SET token_ids = NULL, token_logprobs = NULL WHERE id IN ("
         "SELECT rollout.id FROM rollout JOIN task ON task.id = rollout.task_id "
         "JOIN run ON run.id = task.run_id WHERE run.status = 'completed')")


def save(home: Path, out: Path, *, slim: bool = False) -> dict[str, int]:
    """Copy HOME/genenv.db to OUT (gzip level 9); the members (runs) by status."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "genenv.db"
        src, dst = sqlite3.connect(home / "genenv.db"), sqlite3.connect(copy)
        src.backup(dst)
        if slim:
            dst.execute(_SLIM)
            dst.commit()
        dst.execute("VACUUM")
        counts = dst.execute("SELECT status, count(*) FROM run GROUP BY status ORDER BY status").fetchall()
        dst.close()
        src.close()
        with copy.open("rb") as f, gzip.open(out, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("home", type=Path, help="the embedded home (its genenv.db is saved)")
    parser.add_argument("out", type=Path, help="the gzipped copy to write (genenv-partial.db.gz)")
    parser.add_argument("--slim", action="store_true",
                        help="leave out completed runs' per-token ids and log-probabilities (resumable as before)")
    args = parser.parse_args()
    print(f"{args.out}: members by status {save(args.home, args.out, slim=args.slim)}")


if __name__ == "__main__":
    main()
