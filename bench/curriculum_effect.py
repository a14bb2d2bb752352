"""Does training the simulator move its tasks toward the α band? One run per mode, one table.

Runs `genenv quickstart` (the embedded stack, real SmolLM2-135M, real training) once in `genenv` mode and once in
`random_simulator` mode (the paper's baseline: the simulator is never updated) with the same seeds, epochs and
batch sizes, then prints, per epoch, the agent's success rate p̂ on the generated tasks, its distance to α and the
share of seed batches inside the band, and the genenv / random_simulator ratios over the epochs in which a trained
simulator could have written the tasks (epoch ≥ 1). Both modes train the agent, so the difference is the simulator's.

    python bench/curriculum_effect.py [--epochs 4] [--seeds 6] [--variations 4] [--rollouts 6] [--k-min 0.25]
                                      [--out DIR]

At this scale (a 135M model on CPU, a few dozen tasks per epoch) one run is noisy; the table reports what was
measured, nothing more.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, select

from genenv.db.models import EpochRow, RunRow

MODES = ("genenv", "random_simulator")


def run_mode(mode: str, home: Path, args: argparse.Namespace) -> float:
    """One quickstart run in its own process; returns its wall time in seconds."""
    cmd = [sys.executable, "-m", "genenv.cli.main", "quickstart", "--mode", mode, "--home", str(home),
           "--epochs", str(args.epochs), "--seeds", str(args.seeds), "--variations", str(args.variations),
           "--rollouts", str(args.rollouts), "--k-min", str(args.k_min), "--backend", args.backend]
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    return time.monotonic() - started


def summaries(home: Path) -> tuple[float, list[dict[str, Any]]]:
    """α of the run and each epoch's stored summary, in order."""
    engine = create_engine(f"sqlite:///{home / 'genenv.db'}")
    try:
        with engine.connect() as c:
            config = c.scalar(select(RunRow.config))
            rows = c.execute(select(EpochRow.index, EpochRow.summary).order_by(EpochRow.index)).all()
    finally:
        engine.dispose()
    alpha = float((config or {}).get("curriculum", {}).get("alpha", 0.5))
    return alpha, [dict(summary or {}) for _, summary in rows]


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (≥ 3 so a trained simulator writes)")
    parser.add_argument("--seeds", type=int, default=6, help="seeds per epoch")
    parser.add_argument("--variations", type=int, default=4, help="tasks per seed (n)")
    parser.add_argument("--rollouts", type=int, default=6, help="attempts per task (G)")
    parser.add_argument("--k-min", type=float, default=0.25, help="band half-width (the quickstart's default)")
    parser.add_argument("--backend", default="auto", help="quickstart backend: auto | vllm | local")
    parser.add_argument("--out", type=Path, default=None, help="folder for both runs (default: a temp folder)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="genenv-curriculum-"))
    walls, results = {}, {}
    for mode in MODES:
        walls[mode] = run_mode(mode, out / mode, args)
        results[mode] = summaries(out / mode)
    alpha = results["genenv"][0]

    table = Table(title=f"Curriculum effect: genenv vs random_simulator (α = {alpha})", header_style="bold")
    for col in ("epoch", "p̂ genenv", "p̂ random", "|p̂−α| genenv", "|p̂−α| random", "in-band genenv",
                "in-band random", "sim v genenv"):
        table.add_column(col, justify="right")
    per_mode: dict[str, dict[str, list[float | None]]] = {m: {"dist": [], "band": []} for m in MODES}
    for epoch, (g, r) in enumerate(zip(results["genenv"][1], results["random_simulator"][1], strict=False)):
        row = [str(epoch)]
        dists = {}
        for mode, s in (("genenv", g), ("random_simulator", r)):
            p = s.get("p_hat")
            dists[mode] = None if p is None else abs(p - alpha)
            if epoch >= 1:
                per_mode[mode]["dist"].append(dists[mode])
                per_mode[mode]["band"].append(s.get("in_band_share"))
        row += [_f(g.get("p_hat")), _f(r.get("p_hat")), _f(dists["genenv"]), _f(dists["random_simulator"]),
                _f(g.get("in_band_share")), _f(r.get("in_band_share")),
                str(g.get("simulator_adapter_version") or "—")]
        table.add_row(*row)
    console = Console()
    console.print(table)

    ratios = Table(title="Epochs ≥ 1, genenv / random_simulator", header_style="bold")
    for col in ("measure", "genenv", "random_simulator", "ratio"):
        ratios.add_column(col, justify="right")
    report: dict[str, Any] = {"out": str(out), "wall_s": {m: round(w) for m, w in walls.items()}}
    for key, label in (("dist", "mean |p̂−α| (lower is better)"), ("band", "mean in-band share (higher is better)")):
        a, b = _mean(per_mode["genenv"][key]), _mean(per_mode["random_simulator"][key])
        ratio = None if a is None or not b else a / b
        ratios.add_row(label, _f(a), _f(b), _f(ratio))
        report[key] = {"genenv": a, "random_simulator": b, "ratio": ratio}
    ratios.add_row("wall seconds", f"{walls['genenv']:.0f}", f"{walls['random_simulator']:.0f}",
                   _f(walls["genenv"] / walls["random_simulator"]))
    console.print(ratios)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
