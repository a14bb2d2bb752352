"""`genenv experiment learning report | calibration` end to end on SQLite: small stored experiments written through the
repositories (experiments.create, runs, epochs, tasks, evaluations, train jobs) in two embedded homes, read back by
the commands and paired by replicate seed across the experiments (docs/experiments/preregistration-learning.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv.cli.experiments import load_experiment
from genenv.cli.main import app
from genenv.contracts.adapters import JobKind, JobStatus, Role, adapter_name
from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.experiments import ExperimentCreate
from genenv.contracts.runs import RunStatus
from genenv.contracts.tasks import GeneratedTask, TaskStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import epochs, experiments, runs, tasks, train_jobs
from genenv.db.repositories.evaluations import create_evaluation
from genenv.experiments.agent_calibration import calibration_grid
from genenv.experiments.learning import REGISTERED_SEEDS
from genenv.experiments.learning_calibration import CALIBRATION_SEEDS
from genenv.settings import DatabaseSettings

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EPOCHS = 2
SEEDS = list(REGISTERED_SEEDS[:3])
ITEMS = 534
# (experiment file, mode) → final held-out accuracy per replicate seed (None: the member failed); after epoch 0
# every member scores 0.40.
FINALS: dict[tuple[str, str], list[float | None]] = {
    ("experiment-cpu-learning.yaml", "genenv"): [0.50, 0.52, 0.55],
    ("experiment-cpu-learning.yaml", "static_augmentation"): [0.45, 0.48, 0.49],
    ("experiment-cpu-learning-filter.yaml", "random_simulator"): [0.40, 0.41, None],
    ("experiment-cpu-learning-progress.yaml", "random_simulator"): [0.44, 0.50, 0.53],
}


def _body(path: Path, seeds: list[int]) -> ExperimentCreate:
    body = load_experiment(path)
    template = {**body.template.model_dump(), "epochs": EPOCHS}
    return ExperimentCreate.model_validate({**body.model_dump(), "replicates": len(seeds), "random_seeds": seeds,
                                            "template": template})


def _metrics(accuracy: float, malformed: int = 5) -> dict[str, object]:
    return {"headline": "accuracy", "score": accuracy,
            "overall": {"n": ITEMS, "solved": round(accuracy * ITEMS), "accuracy": accuracy, "malformed": malformed}}


def _store(home: Path, bodies: list[tuple[ExperimentCreate, dict[str, list[float | None]]]]) -> list[str]:
    """Experiments with every member played out as given: per epoch its valid tasks (seeds × tasks per seed), a
    closed epoch with a summary, the held-out evaluation; genenv's simulator trained after epoch 0 and its adapter
    wrote epoch 1's tasks."""
    home.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{home / 'genenv.db'}"
    upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    ids: list[str] = []
    try:
        with session_scope(make_session_factory(engine)) as s:
            for body, finals in bodies:
                row = experiments.create(s, body)
                ids.append(row.id)
                for m in experiments.members(s, row.id):
                    cfg = runs.config_of(m)
                    final = finals[cfg.mode][m.replicate or 0]
                    runs.apply_action(s, m.id, "start")
                    per_epoch = cfg.seeds_per_epoch * (cfg.static_variations if cfg.mode == "static_augmentation"
                                                       else cfg.variations_per_seed)
                    for epoch in range(EPOCHS):
                        if final is None and epoch == EPOCHS - 1:
                            break
                        writer = adapter_name(m.id, Role.SIMULATOR, 1) if cfg.mode == "genenv" and epoch else None
                        tasks.store_generated(s, m.id, epoch, [
                            GeneratedTask(seed_id=f"s{i}", domain="arithmetic", variation=0, status=TaskStatus.VALID,
                                          payload={"expression": f"{i} + {epoch + 1}"}, generator_adapter=writer)
                            for i in range(per_epoch)])
                        acc = 0.40 if epoch < EPOCHS - 1 else final
                        assert acc is not None
                        create_evaluation(s, benchmark="arithmetic", split="heldout", adapter=None,
                                          metrics=_metrics(acc), n_items=ITEMS, run_id=m.id, epoch=epoch)
                        epochs.upsert(s, m.id, epoch, phase=EpochPhase.CLOSED, summary=EpochSummary(
                            tasks_valid=per_epoch, generated_tasks_so_far=per_epoch * (epoch + 1),
                            groups_with_variance_share=0.5,
                            phase_seconds={"generate": 10.0, "rollout": 20.0}))
                        if cfg.mode == "genenv" and epoch == 0:
                            job = train_jobs.create_or_get_job(s, m.id, 0, JobKind.TRAIN_SIMULATOR)
                            train_jobs.move_job(s, job.id, JobStatus.RUNNING)
                            train_jobs.move_job(s, job.id, JobStatus.DONE, adapter_version=1, metrics={
                                "steps": 4, "examples_seen": 64, "pool_size": 120, "per_step": [{"kl": 0.01}]})
                    runs.transition(s, m.id, RunStatus.FAILED if final is None else RunStatus.COMPLETED)
    finally:
        engine.dispose()
    return ids


def _finals(name: str) -> dict[str, list[float | None]]:
    return {mode: values for (file, mode), values in FINALS.items() if file == name}


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Path, Path]:
    """Home A holds genenv and static_augmentation; home B the filter and learning-progress experiments."""
    a, b = tmp_path / "home-a", tmp_path / "home-b"
    _store(a, [(_body(EXAMPLES / "experiment-cpu-learning.yaml", SEEDS), _finals("experiment-cpu-learning.yaml"))])
    _store(b, [(_body(EXAMPLES / name, SEEDS), _finals(name))
               for name in ("experiment-cpu-learning-filter.yaml", "experiment-cpu-learning-progress.yaml")])
    return a, b


def test_the_report_pairs_arms_across_homes_by_replicate_seed(homes: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = homes
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["experiment", "learning", "report", "--home", str(a), "--home", str(b),
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "genenv − static_augmentation: +0.045" in result.output
    data = json.loads((out / "learning-report.json").read_text())["result"]
    assert data["analysed_seeds"] == SEEDS[:2]  # the filter arm's third member failed: that replicate is left out
    assert data["incomplete"] == [{"seed": SEEDS[2], "missing": {"filter": "failed after 1 closed epoch(s)"}}]
    assert data["planned_attempts_per_epoch"] == 1280 and data["checks"] == []
    diffs = {c["baseline"]: c["differences"] for c in data["contrasts"]}
    assert diffs == {"static_augmentation": pytest.approx([0.05, 0.04]), "filter": pytest.approx([0.10, 0.11]),
                     "learning_progress": pytest.approx([0.06, 0.02])}
    assert {len(c["seeds"]) for c in data["contrasts"]} == {2}
    arms = {s["arm"]: s for s in data["summaries"]}
    assert arms["filter"]["attempts_per_epoch"] == 1280 and arms["genenv"]["groups_with_variance_share"] == 0.5
    assert arms["genenv"]["final_valid_share"]["estimate"] == pytest.approx(1 - 5 / ITEMS)
    assert arms["genenv"]["wall_s"]["estimate"] == pytest.approx(60.0)
    assert len(data["dose_lines"]) == 2 and "4 RWR step(s) on 64 examples" in data["dose_lines"][0]
    # data efficiency: static_augmentation's mean final accuracy over the two replicates, 0.465, is reached by
    # genenv after epoch 1 (2 × 1280 attempts) and never by the filter arm
    eff = {r["arm"]: r for r in data["efficiency"]["rows"]}
    assert data["efficiency"]["target"] == pytest.approx(0.465)
    assert eff["genenv"]["per_replicate"] == {str(SEEDS[0]): 2560, str(SEEDS[1]): 2560}
    assert eff["filter"]["not_reached"] == 2
    text = (out / "learning-report.md").read_text()
    assert "seed 14488: filter — failed after 1 closed epoch(s)" in text and "genenv − learning_progress" in text
    # the secondary per-epoch numbers come from the stored epochs: 160 valid tasks × G 8 per epoch in every arm
    dyn = {(a["arm"], a["epoch"]): a for a in data["dynamics"]}
    assert dyn[("genenv", 1)]["attempts_so_far"] == 2 * 1280 and dyn[("genenv", 0)]["heldout_accuracy"]["estimate"] \
        == pytest.approx(0.40)
    for name in ("learning-contrasts.png", "learning-dynamics.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "learning-contrasts.png" in result.output


def test_the_report_refuses_members_that_cannot_be_paired(homes: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = homes
    runner = CliRunner()
    only_a = runner.invoke(app, ["experiment", "learning", "report", "--home", str(a), "--out", str(tmp_path / "x")])
    assert only_a.exit_code == 2 and "arm(s) filter, learning_progress have no member" in only_a.output
    fewer = runner.invoke(app, ["experiment", "learning", "report", "--home", str(a), "--arm", "genenv", "--arm",
                                "static_augmentation", "--out", str(tmp_path / "y")])
    assert fewer.exit_code == 0 and "over 3 replicate(s)" in fewer.output
    twice = runner.invoke(app, ["experiment", "learning", "report", "--home", str(a), "--home", str(a), "--home",
                                str(b), "--out", str(tmp_path / "z")])
    assert twice.exit_code == 2 and "two members of arm genenv ran with replicate seed 70157" in twice.output
    other = tmp_path / "home-c"
    _store(other, [(_body(EXAMPLES / "experiment-cpu-learning.yaml", [1, 2]), _finals("experiment-cpu-learning.yaml"))])
    foreign = runner.invoke(app, ["experiment", "learning", "report", "--home", str(other), "--home", str(b),
                                  "--out", str(tmp_path / "w")])
    assert foreign.exit_code == 2 and "outside the pre-registered replicate seeds" in foreign.output
    missing = runner.invoke(app, ["experiment", "learning", "report", "--home", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no GenEnv database" in missing.output


def test_the_calibration_command_reads_the_grid_and_the_stored_base(tmp_path: Path) -> None:
    body = _body(EXAMPLES / "experiment-cpu-learning-calibration.yaml", list(CALIBRATION_SEEDS))
    grid = calibration_grid(body, [1e-4], [1, 2])
    gains = {1: [0.34, 0.36, 0.38], 2: [0.42, 0.44, 0.46]}
    home = tmp_path / "calibration"
    _store(home, [(e, {"static_augmentation": list(gains[e.template.agent.max_steps_per_epoch])}) for e in grid])
    url = f"sqlite:///{home / 'genenv.db'}"
    engine = make_engine(DatabaseSettings(url=url))
    try:
        with session_scope(make_session_factory(engine)) as s:  # `genenv bench evaluate arithmetic --split heldout`
            create_evaluation(s, benchmark="arithmetic", split="heldout", adapter=None, metrics=_metrics(0.30, 20),
                              n_items=ITEMS)
    finally:
        engine.dispose()
    runner = CliRunner()
    result = runner.invoke(app, ["experiment", "learning", "calibration", "--db", url, "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert "Base agent: held-out accuracy 0.300" in result.output
    assert "Chosen dose: lr 0.0001 × 1 steps per epoch" in result.output  # gain 0.06 ≥ 0.05 at the fewest steps
    data = json.loads((tmp_path / "c" / "calibration.json").read_text())
    assert data["sizing"]["s"] == pytest.approx(0.02) and data["sizing"]["replicates_needed"] == 12
    assert len(data["outcomes"]) == len(grid) * len(CALIBRATION_SEEDS) == 6  # every run, per replicate
    assert (tmp_path / "c" / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["sizing"]["run_wall_s"] == pytest.approx(60.0)
    given = runner.invoke(app, ["experiment", "learning", "calibration", "--db", url, "--base-accuracy", "0.40",
                                "--base-valid-share", "0.99"])
    assert given.exit_code == 0 and "Chosen dose: lr 0.0001 × 2 steps per epoch" in given.output
    refused = runner.invoke(app, ["experiment", "learning", "calibration", "--db", url, "--base-accuracy", "0.4"])
    assert refused.exit_code == 2
