"""Write an embedded experiment home's database as a gzipped SQLite file to commit (a consistent copy through
SQLite's backup API, so a WAL left by a stopped process is folded in), and print its members by status.

    python docs/experiments/save_db.py HOME OUT.db.gz
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path


def save(home: Path, out: Path) -> dict[str, int]:
    """Copy HOME/genenv.db to OUT (gzip level 9); the members (runs) by status."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "genenv.db"
        src, dst = sqlite3.connect(home / "genenv.db"), sqlite3.connect(copy)
        src.backup(dst)
        dst.execute("VACUUM")
        counts = dst.execute("SELECT status, count(*) FROM run GROUP BY status ORDER BY status").fetchall()
        dst.close()
        src.close()
        with copy.open("rb") as f, gzip.open(out, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
    return dict(counts)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out = Path(sys.argv[2])
    print(f"{out}: members by status {save(Path(sys.argv[1]), out)}")


if __name__ == "__main__":
    main()
