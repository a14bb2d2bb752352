"""genenv.experiments.scripted_frontier (issue 34, design (c)): the measures of a run's tasks from the scripted
profile's closed form, the primary (non-repeated) task set, pairing by replicate, the predicted signs per side, the
forced inconclusive verdicts (dose, fewer than two replicates), the null coverage of the interval, and the report."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from pytest import approx

from genenv.domains.arithmetic.scripted_agent import PRESETS
from genenv.experiments.scripted_frontier import (
    PRIMARY_BASELINE,
    FrontierDesign,
    FrontierTask,
    analyse_frontier,
    complete_replicates,
    contrast,
    summarise_run,
    true_p,
)
from genenv.experiments.scripted_frontier_rendering import epoch_means, plot, render_markdown, to_json
from genenv.experiments.stats import INCONCLUSIVE, REFUTED, SUPPORTED

TREATED = "external_agent"
GENERIC = "external_generic_rwr"
ARMS = (TREATED, PRIMARY_BASELINE, GENERIC)
D = FrontierDesign()


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def task(agent: str, arm: str, rep: int, epoch: int, digits: int, ops: int = 1, repeated: bool = False,
         trained: bool | None = None) -> FrontierTask:
    """A task; by default a trained simulator wrote it when the arm trains one and the epoch is ≥ 1."""
    writer = (epoch >= 1 and arm != PRIMARY_BASELINE) if trained is None else trained
    return FrontierTask(agent, arm, rep, epoch, digits, ops, repeated, writer)


def cells(agent: str, arm: str, rep: int, epoch: int, spec: list[tuple[int, int, int]]) -> list[FrontierTask]:
    """``count`` tasks of each (digits, operators, count)."""
    return [task(agent, arm, rep, epoch, d, k) for d, k, n in spec for _ in range(n)]


# capable: p(d, 1) = σ(5 − 2(d − 1)): 0.953 at 2 digits, 0.731 at 3, 0.269 at 4.
# struggling: p(d, k) = σ(1 − 2.5(d − 1) − 0.5(k − 1)): 0.731 at (1, 1), 0.5 at (1, 3), 0.182 at (2, 1).
def toward_alpha(reps: int = 4, shift: int = 6, treated_epoch0: bool = True) -> list[FrontierTask]:
    """Every arm writes 10 tasks per epoch (epochs 0..2). Epoch 0 and both baselines: capable's tasks mostly at 2
    digits (p 0.95), struggling's at 2 digits (p 0.18). The treated simulator moves ``shift`` (+ a replicate-
    dependent 0..2) of the ten toward α from epoch 1: capable to 3 digits, struggling to (1 digit, 3 operators)."""
    rows: list[FrontierTask] = []
    for r in range(1, reps + 1):
        for arm in ARMS:
            for e in range(3):
                moved = shift + r % 3 if arm == TREATED and e >= 1 else 0
                extra = r % 2  # a between-replicate difference every arm shares
                rows += cells("capable", arm, r, e, [(2, 1, 10 - moved - extra), (3, 1, moved), (4, 1, extra)])
                rows += cells("struggling", arm, r, e, [(2, 1, 10 - moved - extra), (1, 3, moved), (1, 1, extra)])
    return rows


def test_measures_of_one_run_come_from_the_profile() -> None:
    s3, s1 = sig(3.0), sig(1.0)  # capable at 2 digits and at 3 digits (4 digits: σ(−1) = 1 − σ(1))
    rows = [task("capable", TREATED, 7, 0, 1), task("capable", TREATED, 7, 0, 2),
            task("capable", TREATED, 7, 1, 2), task("capable", TREATED, 7, 1, 3, trained=False),
            task("capable", TREATED, 7, 2, 4), task("capable", TREATED, 7, 2, 2, repeated=True)]
    run = summarise_run(rows, D)
    assert true_p(PRESETS["capable"], 3, 1) == approx(s1)
    nr = run.non_repeated
    assert nr.tasks == 3
    assert nr.mean_p == approx((s3 + s1 + 1 - s1) / 3)
    assert nr.in_band == approx(2 / 3)  # 0.731 and 0.269 lie within 0.25 of 0.5; 0.953 does not
    assert nr.abs_gap == approx(((s3 - 0.5) + 2 * (s1 - 0.5)) / 3)
    assert run.all.tasks == 4
    assert run.all.mean_p == approx((2 * s3 + 1) / 4)
    assert run.all.in_band == approx(0.5)
    assert run.epoch0.tasks == 2 and run.epoch0.mean_p == approx((sig(5.0) + s3) / 2)
    assert run.repeat_share == approx(0.25)
    assert run.trained_share == approx(0.75)
    assert [(e, n) for e, _, n in run.per_epoch] == [(0, 2), (1, 2), (2, 2)]
    assert run.per_epoch[2][1] == approx((1 - s1 + s3) / 2)


def test_a_run_without_later_tasks_has_no_measures_and_one_run_is_required() -> None:
    run = summarise_run([task("struggling", TREATED, 1, 0, 1)], D)
    assert run.all.mean_p is None and run.all.tasks == 0 and run.trained_share is None
    assert run.epoch0.mean_p == approx(sig(1.0))
    with pytest.raises(ValueError, match="one run"):
        summarise_run([task("capable", TREATED, 1, 1, 2), task("capable", TREATED, 2, 1, 2)], D)


def test_repeated_tasks_are_left_out_of_the_primary_set() -> None:
    """Treated and baseline write the same new tasks; the treated run also repeats easy ones: the primary
    (non-repeated) contrast is 0, the all-tasks contrast is not."""
    rows: list[FrontierTask] = []
    for r in (1, 2):
        for arm in ARMS:
            rows += cells("capable", arm, r, 1, [(3, 1, 4)])
            rows += cells("struggling", arm, r, 1, [(2, 1, 4)])
        rows += [task("capable", TREATED, r, 1, 1, repeated=True) for _ in range(4)]
    result = analyse_frontier(rows, D)
    above = result.primary[0]
    assert above.endpoint == "D-above" and above.paired.differences == approx((0.0, 0.0))
    everything = next(c for c in result.secondary if c.agent == "capable" and c.baseline == PRIMARY_BASELINE
                      and c.measure == "mean_p" and c.task_set == "all")
    assert everything.paired.differences == approx(((sig(5.0) - sig(1.0)) / 2,) * 2)


def test_runs_pair_by_replicate_not_by_order() -> None:
    rows = []
    for r, (t_digits, b_digits) in {3: (3, 2), 1: (4, 2), 5: (3, 3)}.items():
        rows += [task("capable", TREATED, r, 1, t_digits)]
        if r != 5:  # the baseline lacks replicate 5
            rows += [task("capable", PRIMARY_BASELINE, r, 1, b_digits)]
    runs = {(s.agent, s.arm, s.replicate): s for s in
            (summarise_run([t for t in rows if (t.arm, t.replicate) == key], D)
             for key in {(t.arm, t.replicate) for t in rows})}
    c = contrast(runs, "capable", PRIMARY_BASELINE, "mean_p", "non_repeated", [5, 3, 1], D)
    assert c.paired.replicates == (3, 1)
    assert c.paired.differences == approx((sig(1.0) - sig(3.0), sig(-1.0) - sig(3.0)))


def test_complete_replicates_need_every_agent_and_arm() -> None:
    agents = ("capable", "struggling")
    keys = {(g, a, r) for g in agents for a in ARMS for r in (1, 2, 3, 4)}
    keys -= {("struggling", GENERIC, 2), ("capable", TREATED, 4)}
    assert complete_replicates(keys, agents, ARMS) == [1, 3]
    assert complete_replicates(keys, ("capable",), (PRIMARY_BASELINE, GENERIC)) == [1, 2, 3, 4]
    result = analyse_frontier(toward_alpha(reps=4), D, replicates=[1, 3])
    assert result.replicates == (1, 3)
    assert {r.replicate for r in result.runs} == {1, 3}
    assert all(c.paired.replicates == (1, 3) for c in result.primary)
    # Default: the replicates in which every agent × arm run wrote tasks.
    partial = [t for t in toward_alpha(reps=3) if not (t.replicate == 2 and t.arm == GENERIC)]
    assert analyse_frontier(partial, D).replicates == (1, 3)


def test_predicted_signs_follow_each_agents_side() -> None:
    assert [D.predicted("capable", m) for m in ("mean_p", "in_band", "abs_gap")] == [-1, 1, -1]
    assert [D.predicted("struggling", m) for m in ("mean_p", "in_band", "abs_gap")] == [1, 1, -1]
    swapped = FrontierDesign(sides={"capable": "below", "struggling": "above"})
    assert swapped.predicted("capable", "mean_p") == 1 and swapped.predicted("struggling", "mean_p") == -1


def test_treated_moving_toward_alpha_supports_both_primary_endpoints() -> None:
    result = analyse_frontier(toward_alpha(), D)
    above, below = result.primary
    assert (above.endpoint, above.agent, above.baseline) == ("D-above", "capable", PRIMARY_BASELINE)
    assert (below.endpoint, below.agent) == ("D-below", "struggling")
    assert above.paired.interval is not None and above.paired.interval.high < 0
    assert below.paired.interval is not None and below.paired.interval.low > 0
    assert above.decision == SUPPORTED and below.decision == SUPPORTED
    in_band = [c for c in result.secondary if c.measure == "in_band" and c.task_set == "non_repeated"]
    assert len(in_band) == 4 and all(c.decision == SUPPORTED for c in in_band)
    # The A/A check: epoch 0 is the same in every arm, so its differences are exactly 0.
    assert all(a.paired.differences == approx((0.0,) * 4) for a in result.aa)
    # The same data under the opposite sides: the effect goes the other way, so no endpoint is supported.
    swapped = analyse_frontier(toward_alpha(), FrontierDesign(sides={"capable": "below", "struggling": "above"}))
    assert {c.endpoint: c.decision for c in swapped.primary} == {"D-above": REFUTED, "D-below": REFUTED}


def test_a_failed_dose_check_forces_inconclusive() -> None:
    rows = [t if not (t.arm == TREATED and t.replicate == 2 and t.agent == "capable")
            else task(t.agent, t.arm, t.replicate, t.epoch, t.digits, t.operators, t.repeated, trained=False)
            for t in toward_alpha()]
    result = analyse_frontier(rows, D)
    above, below = result.primary
    assert above.decision == INCONCLUSIVE and "dose" in above.reason and "external_agent replicate 2" in above.reason
    assert above.paired.interval is not None  # the interval is still stated
    assert below.decision == SUPPORTED  # the other agent's treated runs had their dose
    # The generic baseline's own dose counts for contrasts against it, and only for those.
    rows = [t if not (t.arm == GENERIC and t.replicate == 3)
            else task(t.agent, t.arm, t.replicate, t.epoch, t.digits, t.operators, t.repeated, trained=False)
            for t in toward_alpha()]
    result = analyse_frontier(rows, D)
    assert all(c.decision == SUPPORTED for c in result.primary)
    generic = [c for c in result.secondary if c.baseline == GENERIC]
    assert generic and all(c.decision == INCONCLUSIVE and f"{GENERIC} replicate 3" in c.reason for c in generic)


def test_fewer_than_two_replicates_is_inconclusive() -> None:
    result = analyse_frontier(toward_alpha(reps=3), D, replicates=[2])
    for c in (*result.primary, *result.secondary):
        assert c.paired.interval is None and c.decision == INCONCLUSIVE and "fewer than two" in c.reason
    assert all(a.paired.interval is None for a in result.aa)


def test_null_coverage_is_nominal() -> None:
    """1,000 experiments of 8 replicates; treated and baseline draw their tasks from one distribution, with a
    replicate effect both arms share and a run effect of their own. The 95 % interval must cover 0 in 93–97 %, and
    D-above must rarely be supported."""
    start = time.perf_counter()
    rng = np.random.default_rng(20240534)
    experiments, reps, tasks = 1000, 8, 12
    covered = supported = 0
    for _ in range(experiments):
        shared = rng.normal(0.0, 0.15, size=reps)
        runs = {}
        for arm in (TREATED, PRIMARY_BASELINE):
            q = np.clip(0.5 + shared + rng.normal(0.0, 0.1, size=reps), 0.02, 0.98)
            digits = 2 + (rng.random((reps, tasks)) < q[:, None])  # 2 or 3 digits: p 0.953 or 0.731
            for r in range(reps):
                rows = [FrontierTask("capable", arm, r, 1, int(d), 1, False, True) for d in digits[r]]
                runs[("capable", arm, r)] = summarise_run(rows, D)
        c = contrast(runs, "capable", PRIMARY_BASELINE, "mean_p", "non_repeated", range(reps), D)
        assert c.paired.interval is not None
        covered += c.paired.interval.low <= 0.0 <= c.paired.interval.high
        supported += c.decision == SUPPORTED
    assert 0.93 <= covered / experiments <= 0.97
    assert supported / experiments <= 0.04
    assert time.perf_counter() - start < 10.0


def test_design_and_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="two agents on side"):
        FrontierDesign(sides={"capable": "above", "strong": "above"})
    with pytest.raises(ValueError, match="no scripted preset"):
        FrontierDesign(sides={"genius": "above"})
    with pytest.raises(ValueError, match="the design has agents"):
        analyse_frontier([task("weak", TREATED, 1, 1, 2)], D)
    with pytest.raises(ValueError, match="the design has agents"):
        analyse_frontier([task("capable", "genenv", 1, 1, 2)], D)


def test_markdown_and_json_state_the_result() -> None:
    result = analyse_frontier(toward_alpha(), D)
    md = render_markdown(result)
    above = result.primary[0]
    assert above.paired.interval is not None
    assert md.index("### D-above") < md.index("### D-below") < md.index("## Secondary contrasts")
    assert f"{above.paired.interval.estimate:+.3f} [{above.paired.interval.low:+.3f}" in md
    assert f"r1: {above.paired.treated[0]:.3f} − {above.paired.baseline[0]:.3f}" in md
    assert "**supported**" in md and "predicted sign: −" in md
    s3, s1 = sig(3.0), sig(1.0)
    epoch0 = ((9 * s3 + 1 - s1) / 10 + s3) / 2  # odd replicates write one 4-digit task of ten
    assert f"capable: epoch-0 mean true p {epoch0:.3f} over 12 runs, above α (as pre-registered)" in md
    assert "capable / external_random_simulator: trained-writer share (epochs ≥ 1) mean 0.000" in md
    assert "## A/A" in md and "| capable | external_random_simulator | mean true p | 4 |" in md
    assert "epoch 2" in md
    swapped = render_markdown(analyse_frontier(toward_alpha(), FrontierDesign(sides={"capable": "below",
                                                                                      "struggling": "above"})))
    assert f"capable: epoch-0 mean true p {epoch0:.3f} over 12 runs, above α (NOT below α as pre-registered)" in swapped
    data = to_json(result)
    text = json.dumps(data, allow_nan=False)
    back = json.loads(text)
    assert [p["endpoint"] for p in back["primary"]] == ["D-above", "D-below"]
    assert back["primary"][0]["decision"] == SUPPORTED
    assert back["primary"][0]["paired"]["differences"] == approx(list(above.paired.differences))
    assert back["design"]["sides"] == {"capable": "above", "struggling": "below"}
    assert len(back["runs"]) == 24 and len(back["secondary"]) == 2 * 2 * 3 * 2 - 2
    series = {(s["agent"], s["arm"]): s["points"] for s in back["epoch_means"]}
    assert series[("capable", TREATED)][0] == [0, approx(epoch_means(result)[("capable", TREATED)][0][1]), 4]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = plot(analyse_frontier(toward_alpha(), D), tmp_path / "frontier.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_the_analysis_imports_neither_matplotlib_nor_the_database() -> None:
    code = ("import sys, genenv.experiments.scripted_frontier, genenv.experiments.scripted_frontier_rendering; "
            "print(sorted(m for m in ('matplotlib', 'sqlalchemy', 'psycopg', 'asyncpg') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
