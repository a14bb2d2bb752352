"""How design (c)'s presets capable and struggling were chosen (preregistration-two-sided-scripted.md):
from the untrained simulator's epoch-0 tasks of design (a)'s stored members only, by the pre-registered grid rule.

    python docs/experiments/two-sided-scripted/pilot.py     # prints the pilot and the chosen profiles

Reads docs/experiments/two-sided/genenv-partial.db.gz (epoch 0 is before any simulator training in every arm).
"""

from __future__ import annotations

import collections
import gzip
import itertools
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

from genenv.domains.arithmetic.scripted_agent import PRESETS, Profile, TaskFeatures
from genenv.experiments.scripted_frontier import measures as frontier_measures

DB = Path(__file__).resolve().parents[1] / "two-sided" / "genenv-partial.db.gz"
ALPHA, K_MIN = 0.5, 0.25
TARGETS = {"capable": 0.80, "struggling": 0.20}
GRID = list(itertools.product([b / 2 for b in range(-4, 13)], [1.0, 1.5, 2.0, 2.5], [0.5, 1.0, 1.5]))


def pilot_cells() -> collections.Counter[tuple[int, int]]:
    """(digits, operators) of every valid epoch-0 task."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "genenv.db"
        with gzip.open(DB, "rb") as src, db.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        with sqlite3.connect(db) as c:
            rows = c.execute("SELECT payload FROM task WHERE status = 'valid' AND epoch = 0").fetchall()
    payloads = [json.loads(p) for (p,) in rows]
    return collections.Counter((int(p["max_digits"]), int(p["operators"])) for p in payloads)


def measures(profile: Profile, cells: collections.Counter[tuple[int, int]]) -> tuple[float, float]:
    """Pilot mean true p and the share of tasks with true p in the band (the analysis's own measures)."""
    ps = [profile.probability(TaskFeatures(d, k)) for (d, k), count in cells.items() for _ in range(count)]
    m = frontier_measures(ps, ALPHA, K_MIN)
    assert m.mean_p is not None and m.in_band is not None, "the pilot has tasks"
    return m.mean_p, m.in_band


def choose(cells: collections.Counter[tuple[int, int]], target: float) -> tuple[float, float, float]:
    """The rule: pilot mean within 0.02 of the target, band share in [0.15, 0.35], band share nearest 0.25."""
    kept = []
    for bias, w_d, w_k in GRID:
        mean, band = measures(Profile("grid", bias, w_d, w_k), cells)
        if abs(mean - target) <= 0.02 and 0.15 <= band <= 0.35:
            kept.append((abs(band - 0.25), abs(mean - target), (bias, w_d, w_k)))
    return min(kept)[2]


def main() -> None:
    cells = pilot_cells()
    n = sum(cells.values())
    print(f"pilot: {n} valid epoch-0 tasks; (digits, operators) shares:")
    for cell, count in cells.most_common(8):
        print(f"  {cell}: {count / n:.3f}")
    for name, target in TARGETS.items():
        chosen = choose(cells, target)
        preset = PRESETS[name]  # type: ignore[index]
        mean, band = measures(preset, cells)
        same = chosen == (preset.bias, preset.digit_weight, preset.operator_weight)
        print(f"{name}: rule chooses bias, w_d, w_k = {chosen}; preset {'matches' if same else 'DIFFERS'}; "
              f"pilot mean true p {mean:.3f}, band share {band:.3f}")


if __name__ == "__main__":
    main()
