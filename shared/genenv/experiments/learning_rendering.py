"""The learning experiment's arm-level report as markdown and JSON (genenv.experiments.learning's result).

Only formatting: every number comes from LearningResult (pure, no I/O; the CLI writes the files).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from genenv.experiments.learning import GENENV, LearningResult
from genenv.experiments.learning_calibration import CalibrationResult
from genenv.experiments.stats import Interval


def _f(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _iv(iv: Interval | None, digits: int = 3, signed: bool = False) -> str:
    if iv is None:
        return "–"
    return f"{_f(iv.estimate, digits, signed)} [{_f(iv.low, digits, signed)}, {_f(iv.high, digits, signed)}]"


def _n(value: int | None) -> str:
    return "–" if value is None else str(value)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_row(header), "|" + "|".join("---" for _ in header) + "|", *(_row(r) for r in rows)]


def _level(confidence: float) -> str:
    return f"{100 * confidence:.2f} %"


def render_learning(result: LearningResult) -> str:
    """report.md of the learning experiment."""
    r = result
    lines = [
        "# The learning experiment: genenv − each baseline (docs/experiments/preregistration-learning.md)",
        "",
        f"Experiments: {', '.join(f'`{e}`' for e in r.experiments)}. Arms: {', '.join(r.arms)}; "
        f"{r.planned_attempts_per_epoch} planned agent attempts per epoch in every arm.",
        f"Replicates analysed (every arm finished): {len(r.analysed_seeds)} — seeds "
        f"{', '.join(map(str, r.analysed_seeds)) or 'none'}.",
    ]
    if r.incomplete:
        lines += ["", "Replicates left out because an arm did not finish them:"]
        lines += [f"- seed {i.seed}: " + "; ".join(f"{arm} — {why}" for arm, why in i.missing.items())
                  for i in r.incomplete]
    lines += ["", "## Manipulation checks", ""]
    lines += [f"- FAILED: {c}" for c in r.checks] or ["- every check passed"]
    lines += [f"- dose, {d}" for d in r.dose_lines]
    lines += [
        "", "## Primary endpoint: final held-out accuracy, genenv − baseline, paired by replicate seed", "",
        f"Interval: t over training runs at {_level(r.confidence)} (Bonferroni over the contrasts; the 95 % interval "
        f"beside it), sign-flip permutation p. Smallest effect of interest {r.smallest_effect:g}.", "",
    ]
    rows = []
    for c in r.contrasts:
        p = "–" if c.interval is None or c.interval.p_value is None else f"{c.interval.p_value:.3g}"
        rows.append([f"genenv − {c.baseline}", str(len(c.differences)), _iv(c.interval, signed=True),
                     _iv(c.interval_95, signed=True), p, _f(c.detectable), f"**{c.decision}**: {c.reason}"])
    lines += _table(["contrast", "n", f"mean [{_level(r.confidence)}]", "mean [95 %]", "p",
                     "detectable (80 %)", "decision"], rows)
    lines += ["", "Per replicate (genenv, baseline, difference):", ""]
    for c in r.contrasts:
        values = ", ".join(f"seed {s}: {_f(g)} − {_f(b)} = {_f(d, signed=True)}"
                           for s, g, b, d in zip(c.seeds, c.genenv, c.baseline_values, c.differences, strict=True))
        lines.append(f"- genenv − {c.baseline}: {values or 'none'}")
    lines += ["", "## Arms (95 % t intervals over replicates)", ""]
    lines += _table(
        ["arm", "final held-out accuracy", "reply validity", "agent attempts / epoch", "× genenv's",
         "groups with variance", "seeds with p̂ history (epochs ≥ 2)", "wall s"],
        [[s.arm, _iv(s.final_accuracy), _iv(s.final_valid_share), _f(s.attempts_per_epoch, 0),
          _f(s.attempts_ratio, 2), _f(s.groups_with_variance_share), _f(s.seed_history_share), _iv(s.wall_s, 0)]
         for s in r.summaries])
    e = r.efficiency
    lines += ["", "## Secondary: data efficiency (descriptive, no verdict)", "",
              "Cumulative realised agent attempts until an arm's held-out accuracy first reaches "
              f"static_augmentation's final accuracy, mean over the analysed replicates: {_f(e.target)}. "
              "Interval: 95 % t over the replicates that reached it.", ""]
    lines += _table(["arm", "reached", "not reached", "attempts", "per replicate"],
                    [[row.arm, str(row.reached), str(row.not_reached), _iv(row.attempts, 0),
                      ", ".join(f"{s}: {'not reached' if v is None else v}" for s, v in row.per_replicate.items())]
                     for row in e.rows])
    lines += ["", "## Secondary: per epoch (descriptive, 95 % t intervals over replicates)", "",
              "Held-out accuracy after the epoch; cumulative realised agent attempts (mean); the mean seed-batch p̂ and "
              "the share of seed batches in the band; the share of valid tasks repeating a valid task of an earlier "
              "epoch of the same run.", ""]
    lines += _table(["arm", "epoch", "held-out accuracy", "attempts so far", "seed-batch p̂", "in-band share",
                     "repeat share"],
                    [[a.arm, str(a.epoch), _iv(a.heldout_accuracy), _f(a.attempts_so_far, 0), _iv(a.batch_p_hat),
                      _iv(a.in_band_share), _iv(a.repeat_share)] for a in r.dynamics])
    if r.levels:
        names = sorted({lv.level for lv in r.levels})
        cell = {(lv.arm, lv.level): lv.final_accuracy for lv in r.levels}
        lines += ["", "## Secondary: final held-out accuracy per level (95 % t intervals over replicates)", ""]
        lines += _table(["level", *r.arms], [[name, *(_iv(cell.get((arm, name))) for arm in r.arms)]
                                             for name in names])
    lines.append("")
    return "\n".join(lines)


def learning_json(result: LearningResult) -> dict[str, Any]:
    """report.json: the result as plain data, with the reference arm named."""
    return {"reference_arm": GENENV, "result": dataclasses.asdict(result)}


def render_calibration(result: CalibrationResult) -> str:
    """The calibration table, the chosen dose and Part B's sizing, as markdown."""
    d, z, base = result.decision, result.sizing, result.base
    lines = ["# Calibrating the agent's dose (docs/experiments/preregistration-learning.md, Parts A and B)", "",
             f"Base agent: held-out accuracy {base.accuracy:.3f}, reply validity {base.valid_share:.3f}.", ""]
    lines += _table(
        ["lr", "steps / epoch", "replicates", "mean accuracy", "mean gain", "accuracy SD", "min validity",
         "collapsed", "qualifies"],
        [[f"{s.learning_rate:g}", str(s.steps), str(s.replicates), _f(s.mean_accuracy), _f(s.mean_gain, signed=True),
          _f(s.accuracy_sd), _f(s.min_valid_share), "yes" if s.collapsed else "no", "yes" if s.qualifies else "no"]
         for s in d.doses])
    chosen = "none" if d.chosen is None else f"lr {d.chosen.learning_rate:g} × {d.chosen.steps} steps per epoch"
    lines += ["", f"**Chosen dose: {chosen}** ({'criterion met' if d.criterion_met else 'CRITERION FAILED'}): "
              f"{d.reason}", ""]
    if result.outcomes:
        lines += ["Per run (dose, replicate seed: final held-out accuracy, reply validity):", ""]
        lines += [f"- lr {o.learning_rate:g} × {o.steps}, seed {o.replicate_seed}: {o.accuracy:.3f}, "
                  f"{o.valid_share:.3f}" for o in sorted(result.outcomes, key=lambda o: (o.steps, o.learning_rate))]
        lines.append("")
    if result.skipped:
        lines += ["Runs left out:", *(f"- {s}" for s in result.skipped), ""]
    w = "unknown (no stored phase seconds)" if z.replicate_wall_s is None else f"{z.replicate_wall_s / 3600:.2f} h"
    lines += [
        "## Sizing (Part B)", "",
        f"- s (SD of the chosen dose's final accuracy over its replicates) = {_f(z.s, 4)}; σ_d = √2 · s = "
        f"{_f(z.sigma_d, 4)}",
        f"- replicates needed for 0.03 at level 1 − 0.05/3, power 0.8: {_n(z.replicates_needed)}",
        f"- mean wall time of the chosen dose's runs {_f(z.run_wall_s, 0)} s; W = 4 × that × 1.2 = {w}",
        f"- n_run = {_n(z.n_run)}"
        f"{' (the 72-hour budget does not fit even 3: 3 run and the budget is exceeded)' if z.budget_exceeded else ''}"
        f"; seeds {', '.join(map(str, z.seeds)) or '–'}",
        f"- smallest detectable effect at n_run: {_f(z.smallest_detectable)}",
        "",
    ]
    return "\n".join(lines)


def calibration_json(result: CalibrationResult) -> dict[str, Any]:
    """calibration.json: the result as plain data."""
    return dataclasses.asdict(result)
