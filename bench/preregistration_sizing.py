"""Sizes the two-sided pre-registration (docs/experiments/preregistration-two-sided.md, design (a)) from Exp 2's
stored runs: each endpoint's per-replicate estimates and within-replicate spread, the per-replicate SD of the new
design, its smallest detectable effect at 5–10 replicates, and the wall time from Exp 2's measured phase times.

    gunzip -c docs/experiments/mechanism/exp2/genenv.db.gz > /tmp/exp2.db
    python bench/preregistration_sizing.py --db /tmp/exp2.db

Exp 2 ran at α = 0.5 with the band toward easier tasks everywhere, so its effects say nothing about design (a)'s
outcome; only its noise is used: how far two training runs of the same arm land apart, and how much seed batches
spread within a run. The sides of the levels are design (a)'s (fixed from the earlier pilot, docs/experiments/
preregistration.md), applied to Exp 2's pairs only to measure that noise on the same groups of levels.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from genenv.contracts.experiments import ExperimentSeries
from genenv.curriculum.reward import in_band
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import EpochRow, ExperimentRow
from genenv.db.repositories.experiments import series_records
from genenv.domains.arithmetic.domain import ArithmeticDomain
from genenv.experiments.paired import BatchPair, fresh_series, pair_batches
from genenv.experiments.sizing import Spread, plan, within_sd
from genenv.settings import DatabaseSettings

ALPHA, K_MIN = 0.15, 0.10
"""Design (a)'s band."""
SIDES = {"1d-add": "above", "1d-mul": "above", "1d-addsub": "above",
         "2d-add": "below", "1d-3op": "below", "2d-3op": "below", "3d-add": "below"}
"""Pilot p̂ by level (docs/experiments/preregistration.md): 0.29, 0.33, 0.23 above α = 0.15; 0.09, 0.11, 0.08, 0.06
below."""
LEVELS = 7
REPLICATES = (5, 6, 8, 10)


def _p(b: object) -> float:
    p = b.p_hat
    assert p is not None
    return float(p)


def _endpoints(pairs: list[BatchPair]) -> dict[str, dict[int, list[float]]]:
    """Per endpoint, per replicate, the pair differences (genenv − random_simulator)."""
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in pairs:
        side = SIDES.get(p.a.group or "")
        d = _p(p.a) - _p(p.b)
        if side is not None:
            out[f"D-{side}: Δp̂ on levels {side} α"][p.replicate].append(d)
        out["in-band share (band [0.05, 0.25])"][p.replicate].append(
            float(in_band(_p(p.a), alpha=ALPHA, k_min=K_MIN)) - float(in_band(_p(p.b), alpha=ALPHA, k_min=K_MIN)))
        out["|p̂ − α| at α = 0.15"][p.replicate].append(abs(_p(p.a) - ALPHA) - abs(_p(p.b) - ALPHA))
    return out


def _share(side: str | None) -> float:
    levels = sum(1 for s in SIDES.values() if s == side) if side else LEVELS
    return levels / LEVELS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, required=True, help="Exp 2's genenv.db (gunzipped)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[28, 35, 42], help="planned seeds per epoch")
    ap.add_argument("--epochs", type=int, default=5, help="planned epochs (epoch 0 is the A/A check)")
    ap.add_argument("--fresh-share", type=float, default=0.9,
                    help="share of seed batches expected to keep a non-repeated attempted task")
    args = ap.parse_args()
    engine = make_engine(DatabaseSettings(url=f"sqlite:///{args.db.resolve()}"))
    sessions = make_session_factory(engine)
    with session_scope(sessions) as s:
        exp_id = s.query(ExperimentRow.id).scalar()
        records = series_records(s, exp_id)
        phases = [(r.run_id, r.index, (r.summary or {}).get("phase_seconds") or {})
                  for r in s.query(EpochRow).all()]
    from genenv.experiments.series import build_series

    series: ExperimentSeries = build_series(records, ArithmeticDomain())
    mode_of = {m.run_id: m.mode for m in series.members}
    seeds_exp2 = records.spec.template.seeds_per_epoch
    epochs_exp2 = records.spec.template.epochs
    result: dict[str, object] = {"experiment": exp_id, "exp2_seeds_per_epoch": seeds_exp2}
    for tasks, source in (("non-repeated", fresh_series(series)), ("all", series)):
        pairs = [p for p in pair_batches(source, "random_simulator") if p.epoch >= 1]
        print(f"\n## {tasks} tasks: {len(pairs)} pairs (epochs ≥ 1)")
        rows = {}
        for name, by_rep in sorted(_endpoints(pairs).items()):
            per_rep = {r: statistics.fmean(v) for r, v in sorted(by_rep.items())}
            sd_w, m = within_sd(by_rep)
            side = "above" if "above" in name else "below" if "below" in name else None
            spread = Spread(list(per_rep.values()), sd_w, m)
            print(f"\n{name}: per replicate " + ", ".join(f"r{r} {v:+.4f}" for r, v in per_rep.items())
                  + f"; within-replicate SD {sd_w:.4f} over {m:.0f} pairs per replicate")
            plans = {}
            for seeds in args.seeds:
                planned = seeds * (args.epochs - 1) * _share(side) * args.fresh_share
                p = plan(spread, planned, REPLICATES)
                plans[seeds] = p
                print(f"  {seeds} seeds/epoch × {args.epochs - 1} effect epochs → {planned:.0f} pairs/replicate: "
                      f"τ {p.between_sd:.4f} (upper 80 % {p.between_sd_upper:.4f}), per-replicate SD "
                      f"{p.replicate_sd:.4f} (conservative {p.replicate_sd_upper:.4f}); smallest detectable "
                      + ", ".join(f"n={n}: {p.detectable_point[n]:.3f} ({p.detectable[n]:.3f})" for n in REPLICATES))
            rows[name] = {"per_replicate": per_rep, "within_sd": sd_w, "pairs_per_replicate": m,
                          "plans": {k: v.__dict__ for k, v in plans.items()}}
        result[tasks] = rows
    # Wall time from Exp 2's measured phase times.
    per_epoch: dict[str, list[float]] = defaultdict(list)
    train: dict[str, list[float]] = defaultdict(list)
    for run_id, _, ph in phases:
        mode = mode_of.get(run_id, "?")
        per_epoch[mode].append(sum(float(v) for k, v in ph.items() if k != "train"))
        train[mode].append(float(ph.get("train", 0.0)))
    print(f"\n## wall time (Exp 2: {seeds_exp2} seeds/epoch × {epochs_exp2} epochs)")
    gen = statistics.fmean(per_epoch["genenv"] + per_epoch["random_simulator"]) / seeds_exp2
    trn = statistics.fmean(train["genenv"])
    print(f"  generate+rollout+verify+score {gen:.2f} s per seed; genenv's RWR job {trn:.0f} s per epoch "
          f"(random_simulator's skipped job {statistics.fmean(train['random_simulator']):.1f} s)")
    for seeds in args.seeds:
        for reps in (5, 6, 8):
            member = args.epochs * seeds * gen
            total = reps * (3 * member + 2 * args.epochs * trn)  # genenv and generic_rwr train, random does not
            print(f"  {seeds} seeds × {args.epochs} epochs, {reps} replicates × 3 arms: {total / 3600:.1f} h of "
                  f"member time (start-up and held-out evaluation not included)")
    result["seconds_per_seed"] = gen
    result["train_seconds_per_epoch"] = trn
    print("\n" + json.dumps({"seconds_per_seed": round(gen, 3), "train_seconds_per_epoch": round(trn, 1)}))
    engine.dispose()


if __name__ == "__main__":
    main()
