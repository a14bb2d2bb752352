"""Write an experiment home's database as docs/experiments/two-sided/genenv-partial.db.gz (docs/experiments/save_db.py).

    python docs/experiments/two-sided/save.py HOME
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from save_db import save  # a script beside the experiments, not a package

OUT = Path(__file__).with_name("genenv-partial.db.gz")

if __name__ == "__main__":
    print(f"{OUT}: members by status {save(Path(sys.argv[1]), OUT)}")
