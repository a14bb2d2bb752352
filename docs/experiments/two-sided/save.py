"""Write an experiment home's database as docs/experiments/two-sided/genenv-partial.db.gz (a consistent copy through
SQLite's backup API, so a WAL left by a stopped process is folded in).

    python docs/experiments/two-sided/save.py HOME
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).with_name("genenv-partial.db.gz")


def main() -> None:
    home = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "genenv.db"
        src, dst = sqlite3.connect(home / "genenv.db"), sqlite3.connect(copy)
        src.backup(dst)
        dst.execute("VACUUM")
        counts = dst.execute("SELECT status, count(*) FROM run GROUP BY status ORDER BY status").fetchall()
        dst.close()
        src.close()
        with copy.open("rb") as f, gzip.open(OUT, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
    print(f"{OUT}: members by status {dict(counts)}")


if __name__ == "__main__":
    main()
