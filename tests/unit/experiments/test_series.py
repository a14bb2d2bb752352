"""genenv.experiments.series: the ExperimentSeries from stored rows, its per-mode means and the difficulty memo.

Every expected number is computed by hand from the rows below (the same experiment the dashboard's browser test
draws: two modes × two replicates, one member with an epoch missing its evaluation).
"""

from __future__ import annotations

from typing import Any

import pytest
from pytest import approx

from genenv.contracts.adapters import Role, adapter_name
from genenv.contracts.epochs import EpochSummary
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.contracts.experiment_records import (
    ClosedEpochRecord,
    EvaluationRecord,
    ExperimentRecords,
    MemberRecord,
    PayloadRecord,
    ScoreRecord,
    TrainJobRecord,
)
from genenv.contracts.experiments import ExperimentCreate, ExperimentSeries, ExperimentStatus, ModeSeries
from genenv.contracts.runs import RunStatus
from genenv.domains.arithmetic.domain import ArithmeticDomain
from genenv.experiments.series import DifficultyMemo, build_series, epoch_values, heldout_target

# (mode, replicate) -> per epoch (p̂, in-band share, held-out accuracy or None, generated tasks, response tokens,
# operand digits of its one valid task)
DATA: dict[tuple[str, int], list[tuple[float, float, float | None, int, float, int]]] = {
    ("genenv", 0): [(0.2, 0.0, 0.2, 8, 10.0, 1), (0.4, 0.5, 0.3, 16, 15.0, 2), (0.5, 1.0, 0.5, 24, 20.0, 3)],
    ("genenv", 1): [(0.3, 0.25, 0.4, 6, 12.0, 1), (0.6, 0.75, None, 12, 18.0, 2)],
    ("random_simulator", 0): [(0.1, 0.0, 0.1, 10, 30.0, 1), (0.3, 0.0, 0.2, 20, 40.0, 1)],
    ("static_augmentation", 0): [(0.3, 0.5, 0.3, 10, 34.0, 1), (0.2, 0.25, 0.4, 20, 44.0, 2)],
    ("static_augmentation", 1): [(0.3, 0.5, 0.6, 10, 34.0, 1)],
}


def _run_id(mode: str, replicate: int) -> str:
    return f"{mode}-{replicate}"


def _records(data: dict[tuple[str, int], list[Any]] = DATA, *, tasks: bool = True) -> ExperimentRecords:
    members, epochs, evals, task_rows = [], [], [], []
    for (mode, r), rows in data.items():
        run = _run_id(mode, r)
        members.append(MemberRecord(run, mode, r, RunStatus.COMPLETED))
        for epoch, (p_hat, share, acc, written, tokens, digits) in enumerate(rows):
            summary = EpochSummary(p_hat=p_hat, in_band_share=share, generated_tasks_so_far=written,
                                   mean_response_tokens=tokens)
            epochs.append(ClosedEpochRecord(run, epoch, summary))
            if acc is not None:
                evals.append(EvaluationRecord(run, epoch, EvaluationMetrics.parse(
                    {"overall": {"accuracy": acc}, "categories": {"1d": {"accuracy": acc / 2}, "2d": {}}})))
            task_rows.append(PayloadRecord(run, epoch, "s", {"expression": "1 + 2", "max_digits": digits}))
    spec = ExperimentCreate.model_validate(
        {"name": "e", "modes": ["genenv", "random_simulator", "static_augmentation"], "replicates": 2,
         "template": {"name": "t", "epochs": 3, "eval_benchmarks": ["arithmetic"]}})
    return ExperimentRecords(experiment_id="x", name="e", status=ExperimentStatus.RUNNING, spec=spec,
                             members=members, epochs=epochs, evaluations=evals, tasks=task_rows if tasks else [])


def _mode(series: ExperimentSeries, mode: str) -> ModeSeries:
    return next(m for m in series.modes if m.mode is mode)


def _means(mode: ModeSeries, key: str) -> dict[int, tuple[float, int]]:
    return {e.epoch: (e.metrics[key].mean, e.metrics[key].n) for e in mode.epochs if key in e.metrics}


def test_members_read_summaries_evaluations_and_difficulty() -> None:
    series = build_series(_records(), ArithmeticDomain())
    assert series.heldout_benchmark == "arithmetic" and series.alpha == 0.5
    assert set(series.difficulty_measures) == {"operand_digits", "operators", "has_mul"}
    g1 = next(m for m in series.members if m.run_id == "genenv-1")
    assert [e.heldout_accuracy for e in g1.epochs] == [0.4, None]
    assert g1.epochs[0].heldout_by_category == {"1d": 0.2}  # a category without an accuracy is left out
    assert [e.difficulty["operand_digits"] for e in g1.epochs] == [1.0, 2.0]
    assert g1.epochs[1].difficulty == {"operand_digits": 2.0, "operators": 1.0, "has_mul": 0.0}


def test_mode_means_over_the_replicates_that_have_the_number() -> None:
    series = build_series(_records(), ArithmeticDomain())
    assert [m.mode for m in series.modes] == ["genenv", "random_simulator", "static_augmentation"]
    assert [m.replicates for m in series.modes] == [2, 1, 2]
    genenv = _mode(series, "genenv")
    assert _means(genenv, "p_hat") == {0: (approx(0.25), 2), 1: (approx(0.5), 2), 2: (approx(0.5), 1)}
    assert _means(genenv, "in_band_share") == {0: (approx(0.125), 2), 1: (approx(0.625), 2), 2: (approx(1.0), 1)}
    # replicate 1 has no evaluation after epoch 1: the mean there is replicate 0's alone
    assert _means(genenv, "heldout_accuracy") == {0: (approx(0.3), 2), 1: (approx(0.3), 1), 2: (approx(0.5), 1)}
    # ... while its generated tasks still count toward that epoch's x (the data-efficiency curve)
    assert _means(genenv, "generated_tasks_so_far") == {0: (approx(7.0), 2), 1: (approx(14.0), 2), 2: (24.0, 1)}
    assert {e.epoch: e.difficulty["operand_digits"].mean for e in genenv.epochs} == {0: 1.0, 1: 2.0, 2: 3.0}
    assert genenv.epochs[0].heldout_by_category["1d"].mean == approx(0.15)
    static = _mode(series, "static_augmentation")
    assert _means(static, "mean_response_tokens") == {0: (approx(34.0), 2), 1: (approx(44.0), 1)}
    # static_augmentation's final held-out accuracies: 0.4 (r0, epoch 1) and 0.6 (r1, epoch 0)
    assert series.heldout_target == approx(0.5)
    assert heldout_target(series.members) == series.heldout_target


def test_epoch_values_list_every_metric_even_without_values() -> None:
    series = build_series(_records(), ArithmeticDomain())
    values = epoch_values([m for m in series.members if m.mode == "genenv"])
    assert values[2].metrics["p_hat"] == [0.5] and values[1].metrics["heldout_accuracy"] == [0.3]
    only_r1 = epoch_values([m for m in series.members if m.run_id == "genenv-1"])
    assert only_r1[1].metrics["heldout_accuracy"] == []  # the report states None, the contract leaves it out
    assert "heldout_accuracy" not in next(m for m in build_series(
        _records({("genenv", 1): DATA[("genenv", 1)]}), ArithmeticDomain()).modes).epochs[1].metrics


def test_seed_batches_groups_and_train_jobs() -> None:
    base = _records({("genenv", 0): DATA[("genenv", 0)][:1]}, tasks=False)
    run = "genenv-0"
    tasks = [PayloadRecord(run, 0, "a", {"expression": "12 * 3"}), PayloadRecord(run, 0, "a", {"expression": "1 + 2"}),
             PayloadRecord(run, 0, "b", {"expression": "4 - 1"})]
    seeds = [PayloadRecord(run, 0, "a", {"level": "2d-mul"}), PayloadRecord(run, 0, "b", {})]
    scores = [ScoreRecord(run, 0, "a", 3, 8, 0.375, False), ScoreRecord(run, 0, "b", 4, 8, 0.5, True),
              ScoreRecord(run, 0, "c", 0, 0, None, False)]
    jobs = [TrainJobRecord(run, 0, "train_simulator", "done", 1,
                           {"pool_size": 6, "steps": 2, "examples_seen": 12, "per_step": [{"kl": 0.1}, {"kl": 0.03}]}),
            TrainJobRecord(run, 0, "train_agent", "failed", None, {})]
    written = {run: {adapter_name(run, Role.SIMULATOR, 1): 5, adapter_name(run, Role.AGENT, 1): 7}}
    records = ExperimentRecords(**{**base.__dict__, "tasks": tasks, "seeds": seeds, "scores": scores,
                                   "train_jobs": jobs, "written": written})
    member = build_series(records, ArithmeticDomain()).members[0]
    a, b, c = member.seed_batches
    assert (a.group, a.valid_tasks, a.difficulty) == ("2d-mul", 2, {"operand_digits": 1.5, "operators": 1.0,
                                                                    "has_mul": 0.5})
    assert (b.group, b.valid_tasks, b.in_band, b.p_hat) == (None, 1, True, 0.5)
    assert (c.valid_tasks, c.difficulty, c.p_hat) == (0, {}, None)
    assert member.epochs[0].difficulty["operand_digits"] == approx(4 / 3)
    sim, agent = member.train_jobs
    assert (sim.kl_to_base, sim.pool_size, sim.steps, sim.tasks_written) == (0.03, 6, 2, 5)
    assert (agent.adapter_version, agent.tasks_written, agent.kl_to_base) == (None, 0, None)


class CountingDomain(ArithmeticDomain):
    """Counts the payloads measured, to see what the memo spares."""

    calls = 0

    def difficulty(self, payload: dict[str, Any]) -> dict[str, float]:
        CountingDomain.calls += 1
        return super().difficulty(payload)


def test_memo_measures_a_closed_epoch_once() -> None:
    memo, domain = DifficultyMemo(), CountingDomain()
    records = _records()
    CountingDomain.calls = 0
    first = build_series(records, domain, memo.resolve(records, domain, memo.recall(m.run_id for m in records.members)))
    assert CountingDomain.calls == len(records.tasks) == 10
    recalled = memo.recall(m.run_id for m in records.members)
    assert set(recalled) == {(e.run_id, e.epoch) for e in records.epochs}
    # What series_records returns when told these epochs are known: no payloads of them.
    again = ExperimentRecords(**{**records.__dict__, "tasks": []})
    second = build_series(again, domain, memo.resolve(again, domain, recalled))
    assert CountingDomain.calls == 10 and second == first


def test_memo_keeps_only_closed_epochs_and_is_bounded() -> None:
    memo, domain = DifficultyMemo(max_runs=1), ArithmeticDomain()
    records = _records({("genenv", 0): DATA[("genenv", 0)][:1]})
    open_task = PayloadRecord("genenv-0", 1, "s", {"expression": "1 + 2"})  # epoch 1 is not closed
    measured = memo.resolve(ExperimentRecords(**{**records.__dict__, "tasks": [*records.tasks, open_task]}), domain, {})
    assert set(measured) == {("genenv-0", 0), ("genenv-0", 1)}
    assert set(memo.recall(["genenv-0"])) == {("genenv-0", 0)}
    other = _records({("genenv", 1): DATA[("genenv", 1)]})
    memo.resolve(other, domain, {})
    assert memo.recall(["genenv-0"]) == {} and set(memo.recall(["genenv-1"])) == {("genenv-1", 0), ("genenv-1", 1)}


@pytest.mark.parametrize(("raw", "score"), [
    ({"score": 0.7, "accuracy": 0.1}, 0.7), ({"accuracy": 0.4}, 0.4), ({"overall": 0.3}, 0.3), ({"em": 0.2}, 0.2),
    ({"acc": 0.1}, None), (None, None), ({"overall": {"accuracy": 0.9}, "score": "x"}, None),
])
def test_evaluation_metrics_are_read_one_way(raw: dict[str, Any] | None, score: float | None) -> None:
    assert EvaluationMetrics.parse(raw).headline_score() == score


def test_repeats_of_earlier_epochs_are_counted_and_left_out_of_the_fresh_counts() -> None:
    run = "genenv-0"
    tasks = [
        PayloadRecord(run, 0, "a", {"expression": "1 + 2"}, k=3, n=8),
        PayloadRecord(run, 0, "a", {"expression": "2 + 2"}, k=1, n=8),
        PayloadRecord(run, 1, "a", {"expression": "1+2"}, k=8, n=8),  # the same canonical form as epoch 0's
        PayloadRecord(run, 1, "a", {"expression": "3 + 4"}, k=2, n=8),
        PayloadRecord(run, 1, "b", {"expression": "2 + 2"}, k=6, n=7),  # another seed, still a repeat of the run
        PayloadRecord(run, 2, "b", {"expression": "5 * 5"}, k=0, n=8),
        PayloadRecord("random_simulator-0", 1, "a", {"expression": "9 + 9"}, k=4, n=8),
    ]
    records = _records({("genenv", 0): DATA[("genenv", 0)],
                        ("random_simulator", 0): DATA[("random_simulator", 0)]}, tasks=False)
    records.tasks.extend(tasks)
    records.scores.extend([ScoreRecord(run, 1, "a", 10, 16, 10 / 16, False), ScoreRecord(run, 1, "b", 6, 7, 6 / 7,
                                                                                        False),
                           ScoreRecord(run, 2, "b", 0, 8, 0.0, False)])
    series = build_series(records, ArithmeticDomain())
    g = next(m for m in series.members if m.run_id == run)
    assert [(e.valid_tasks, e.repeated_tasks) for e in g.epochs] == [(2, 0), (3, 2), (1, 0)]
    batches = {(b.epoch, b.seed_id): b for b in g.seed_batches}
    a1, b1 = batches[(1, "a")], batches[(1, "b")]
    assert (a1.repeated_tasks, a1.fresh_k, a1.fresh_n) == (1, 2, 8)  # only "3 + 4" is new
    assert (b1.repeated_tasks, b1.fresh_k, b1.fresh_n) == (1, 0, 0)
    assert (batches[(2, "b")].repeated_tasks, batches[(2, "b")].fresh_n) == (0, 8)
