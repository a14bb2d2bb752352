"""The table and figure of issue 33's scripted-agent runs, from the JSON files run.sh wrote.

    python docs/experiments/external-agent/summarize.py [DIR]     # default: this folder

Prints a markdown table (one row per preset × mode × epoch) and the protocol overhead per 1,000 attempts, and
writes DIR/scripted-agents.png: per epoch, the service's p̂ and the share of tasks whose TRUE p (the scripted
agent's known probability) lies in α ± k_min, for each preset and mode.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

PRESETS = ("weak", "strong")
MODES = ("external_agent", "external_random_simulator")
ALPHA, K_MIN = 0.5, 0.1  # examples/external-agent-arithmetic.yaml, which run.sh starts from


def _load(folder: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    return {(p, m): json.loads((folder / f"{p}-{m}.json").read_text())["epochs"] for p in PRESETS for m in MODES}


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def table(runs: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """One row per epoch: preset, mode, tasks, attempts, service p̂, |p̂ − α|, true p̄, true in-band, overhead."""
    lines = ["| agent | simulator | epoch | tasks | attempts | p̂ (service) | true p̄ | true in-band | "
             "service in-band | lease+report s per 1,000 attempts |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (preset, mode), epochs in runs.items():
        for e in epochs:
            lines.append(f"| {preset} | {mode} | {e['epoch']} | {e['tasks']} | {e['attempts']} | "
                         f"{_f(e['service_p_hat'])} | {_f(e['true_p'])} | {_f(e['true_in_band'])} | "
                         f"{_f(e['service_in_band'])} | {_f(e['overhead_s_per_1000'])} |")
    return "\n".join(lines)


def overhead(runs: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """The protocol's own wall time per 1,000 attempts over every epoch of every run (median and range)."""
    per = [e["overhead_s_per_1000"] for epochs in runs.values() for e in epochs if e["overhead_s_per_1000"]]
    return (f"lease + report wall time per 1,000 attempts over {len(per)} epochs: median "
            f"{statistics.median(per):.1f} s, range {min(per):.1f}–{max(per):.1f} s")


def figure(runs: dict[tuple[str, str], list[dict[str, Any]]], out: Path) -> None:
    """p̂ and true in-band share per epoch, one panel per preset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for col, preset in enumerate(PRESETS):
        for mode, colour in zip(MODES, ("#d62728", "#8c564b"), strict=True):
            epochs = runs[(preset, mode)]
            xs = [e["epoch"] for e in epochs]
            axes[0][col].plot(xs, [e["service_p_hat"] for e in epochs], "o-", color=colour, label=mode)
            axes[1][col].plot(xs, [e["true_in_band"] for e in epochs], "o-", color=colour, label=mode)
        axes[0][col].axhspan(ALPHA - K_MIN, ALPHA + K_MIN, color="#dddddd", zorder=0)
        axes[0][col].set_title(f"{preset} scripted agent")
        axes[0][col].set_ylim(0, 1)
        axes[1][col].set_ylim(0, 1)
        axes[1][col].set_xlabel("epoch")
        axes[1][col].set_xticks([e["epoch"] for e in runs[(preset, MODES[0])]])
    axes[0][0].set_ylabel("p̂ (service; band α ± k_min shaded)")
    axes[1][0].set_ylabel("share of tasks with true p in band")
    axes[0][1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    runs = _load(folder)
    print(table(runs))
    print()
    print(overhead(runs))
    figure(runs, folder / "scripted-agents.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
