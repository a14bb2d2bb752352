"""Design (c)'s report from the driver's database: report.md, report.json and frontier.png
(docs/experiments/preregistration-two-sided-scripted.md; the analysis is genenv.experiments.scripted_frontier).

    python docs/experiments/two-sided-scripted/report.py --home .genenv/two-sided-scripted --out DIR

The replicates analysed are those whose six runs (2 agents × 3 arms) all completed, as pre-registered; --replicates
names them instead (for a smoke run). Repeats: a valid task whose canonical form, whitespace normalised, equals a
valid task of an earlier epoch of the same run (genenv.curriculum.repeats).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from genenv.curriculum.repeats import repeat_flags
from genenv.domains import get_domain
from genenv.experiments.scripted_frontier import FrontierDesign, FrontierTask, analyse_frontier, complete_replicates
from genenv.experiments.scripted_frontier_rendering import plot, render_markdown, to_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import AGENTS, ARMS, SEEDS  # the driver beside this file: its names and seeds

RunKey = tuple[str, str, int]


def parse_name(name: str) -> RunKey | None:
    """(agent, arm, replicate seed) of a run the driver named AGENT-ARM-rR; None for any other run."""
    agent, _, rest = name.partition("-")
    arm, _, r = rest.rpartition("-r")
    if agent not in AGENTS or arm not in ARMS or not r.isdigit() or not 1 <= int(r) <= len(SEEDS):
        return None
    return agent, arm, SEEDS[int(r) - 1]


def read(db: Path) -> tuple[list[FrontierTask], set[RunKey]]:
    """Every valid task of the driver's runs, and the runs that completed."""
    domain = get_domain("arithmetic")
    with sqlite3.connect(db) as c:
        runs = {rid: (key, status) for rid, name, status in c.execute("SELECT id, name, status FROM run")
                if (key := parse_name(name)) is not None}
        rows = c.execute("SELECT run_id, epoch, payload, generator_adapter FROM task WHERE status = 'valid' "
                         "ORDER BY run_id, epoch, id").fetchall()
    rows = [r for r in rows if r[0] in runs]
    payloads = [json.loads(r[2]) for r in rows]
    flags = repeat_flags([(r[0], int(r[1]), domain.canonical_task(p)) for r, p in zip(rows, payloads, strict=True)])
    tasks = [FrontierTask(agent=runs[r[0]][0][0], arm=runs[r[0]][0][1], replicate=runs[r[0]][0][2], epoch=int(r[1]),
                          digits=int(p["max_digits"]), operators=int(p["operators"]), repeated=flag,
                          trained_writer=r[3] is not None)
             for r, p, flag in zip(rows, payloads, flags, strict=True)]
    return tasks, {key for key, status in runs.values() if status == "completed"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", type=Path, required=True, help="The driver's folder (its genenv.db).")
    p.add_argument("--out", type=Path, required=True, help="Folder for report.md, report.json, frontier.png.")
    p.add_argument("--replicates", type=int, nargs="*", help="Replicate seeds to analyse (default: the complete).")
    args = p.parse_args()
    tasks, completed = read(args.home / "genenv.db")
    design = FrontierDesign()
    chosen = args.replicates if args.replicates else complete_replicates(completed, design.agents, design.arms)
    result = analyse_frontier(tasks, design, chosen)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(render_markdown(result), encoding="utf-8")
    (args.out / "report.json").write_text(json.dumps(to_json(result), indent=1, allow_nan=False) + "\n")
    plot(result, args.out / "frontier.png")
    print(f"{len(chosen)} replicate(s) analysed, {len(tasks)} valid tasks read; wrote {args.out}/report.md")


if __name__ == "__main__":
    main()
