"""Rich renderings of the mechanism experiments (``genenv experiment mechanism …``): Exp 0's calibration table,
the sizing pool's occupancy, Exp 1's arms, endpoints and decisions, and the shift probe's tables."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from genenv.cli.common import out as console
from genenv.experiments.mechanism import ArmSummary, CalibrationRow, Contrast, Criterion
from genenv.experiments.mechanism_pools import MARKER
from genenv.experiments.two_sided_sizing import REPLICATES, Design, EndpointSizing, WallTime


def print_calibration(result: dict[str, Any]) -> None:
    """Exp 0's table."""
    table = Table(title=f"Exp 0 · calibration on the marker '{MARKER}' · seed {result['seed']} · "
                        f"{result['eval_prompts']} held-out prompts × {result['samples']} · "
                        f"train pool {result['train_pool']} generations")
    for col in ("lr", "steps", "marker share", "gap closed", "valid share", "distinct share", "KL to base", "passes"):
        table.add_column(col, justify="right")
    base: CalibrationRow = result["base"]
    crit: Criterion = result["criterion"]
    table.add_row("base", "0", f"{base.marker_share:.3f}", "–", f"{base.valid_share:.3f}",
                  f"{base.distinct_share:.3f}", "0", "–")
    for r in result["rows"]:
        closed = (r.marker_share - base.marker_share) / max(1 - base.marker_share, 1e-9)
        table.add_row(f"{r.lr:g}", str(r.steps), f"{r.marker_share:.3f}", f"{closed:.0%}", f"{r.valid_share:.3f}",
                      f"{r.distinct_share:.3f}", "–" if r.kl_to_base is None else f"{r.kl_to_base:.3g}",
                      "yes" if crit.passes(r, base) else "no")
    console.print(table)
    console.print(f"chosen dose: {result['reason']}")


def print_pool(result: dict[str, Any]) -> None:
    """The pool's occupancy and throughput."""
    console.print(result["pool"])
    console.print(f"mean seed-batch p̂ by group: { {g: round(v, 3) for g, v in result['p_hat_by_group'].items()} }")
    console.print(f"{result['generations']} generations and {result['attempts']} attempts in "
                  f"{result['seconds']:.0f} s")


def _iv(iv: Any, digits: int = 3) -> str:
    return "–" if iv is None else f"{iv.estimate:.{digits}f} [{iv.low:.{digits}f}, {iv.high:.{digits}f}]"


def print_offline(result: dict[str, Any]) -> None:
    """Exp 1's tables: arms, endpoints with their checks and decisions, secondary contrasts."""
    a = result["analysis"]
    table = Table(title=f"Exp 1 · arms on held-out prompts (pooled over replicates {result['seeds']}) · "
                        "mean [95 % t interval over prompts]")
    for col in ("arm", "prompts", "trained on", "k3 to base", "valid share", "distinct share", "copies", "p̂",
                "|p̂ − α|", "tasks in band"):
        table.add_column(col, justify="right")
    for arm, s in a["summaries"].items():
        s_: ArmSummary = s
        kl = a["divergence_to_base"].get(arm)
        table.add_row(arm, str(s_.prompts), str(a["train_sizes"].get(arm, "–")),
                      "–" if kl is None else f"{kl:.3g}", _iv(s_.valid_share), _iv(s_.distinct_share),
                      "–" if s_.copy_share is None else f"{s_.copy_share:.3f}", _iv(s_.p_hat), _iv(s_.abs_gap),
                      _iv(s_.task_in_band))
    console.print(table)
    ends = Table(title="Exp 1 · pre-registered endpoints (paired by prompt) and decisions")
    for col in ("endpoint", "difference", "p", "per replicate", "manipulation check", "decision"):
        ends.add_column(col)
    for e in a["endpoints"]:
        c: Contrast = e["contrast"]
        d = c.difference
        ends.add_row(c.name, _iv(d, 4), "–" if d is None or d.p_value is None else f"{d.p_value:.3g}",
                     ", ".join(f"{r}: {v:+.4f}" for r, v in c.per_replicate.items()),
                     "passed" if e["check"].passed else "; ".join(e["check"].failures), e["decision"][0])
    console.print(ends)
    for e in a["endpoints"]:
        console.print(f"{e['contrast'].name}: {e['decision'][0]} — {e['decision'][1]}")
    for c in a["secondary"]:
        console.print(f"secondary {c.name}: {_iv(c.difference, 4)}")


def print_shift(title: str, data: list[dict[str, Any]]) -> None:
    """One of the shift probe's tables: a row per simulator version or per hint."""
    table = Table(title=f"{title} · mean [95 % bootstrap interval over prompts]")
    for col in data[0]:
        table.add_column(col, justify="right")
    for row in data:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)


def print_sizing(design: Design, pairs: dict[str, int], sized: dict[str, list[EndpointSizing]], wall: WallTime,
                 seeds_exp2: int, epochs_exp2: int) -> None:
    """``genenv experiment sizing``'s plain-text report: per task selection and endpoint, Exp 2's spread and the
    plans, then the wall time."""
    for tasks, endpoints in sized.items():
        print(f"\n## {tasks} tasks: {pairs[tasks]} pairs (epochs ≥ 1)")
        for e in endpoints:
            print(f"\n{e.name}: per replicate " + ", ".join(f"r{r} {v:+.4f}" for r, v in e.per_replicate.items())
                  + f"; within-replicate SD {e.within_sd:.4f} over {e.pairs_per_replicate:.0f} pairs per replicate")
            for seeds in design.seeds:
                p = e.plans[seeds]
                print(f"  {seeds} seeds/epoch × {design.epochs - 1} effect epochs → {e.planned_pairs[seeds]:.0f} "
                      f"pairs/replicate: τ {p.between_sd:.4f} (upper 80 % {p.between_sd_upper:.4f}), per-replicate SD "
                      f"{p.replicate_sd:.4f} (conservative {p.replicate_sd_upper:.4f}); smallest detectable "
                      + ", ".join(f"n={n}: {p.detectable_point[n]:.3f} ({p.detectable[n]:.3f})" for n in REPLICATES))
    print(f"\n## wall time (Exp 2: {seeds_exp2} seeds/epoch × {epochs_exp2} epochs)")
    print(f"  generate+rollout+verify+score {wall.seconds_per_seed:.2f} s per seed; genenv's RWR job "
          f"{wall.train_seconds_per_epoch:.0f} s per epoch "
          f"(random_simulator's skipped job {wall.skipped_train_seconds:.1f} s)")
    for seeds in design.seeds:
        for reps in (5, 6, 8):
            print(f"  {seeds} seeds × {design.epochs} epochs, {reps} replicates × 3 arms: "
                  f"{wall.member_hours(seeds, design.epochs, reps):.1f} h of "
                  f"member time (start-up and held-out evaluation not included)")
    print("\n" + json.dumps({"seconds_per_seed": round(wall.seconds_per_seed, 3),
                             "train_seconds_per_epoch": round(wall.train_seconds_per_epoch, 1)}))
