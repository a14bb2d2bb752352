"""`genenv experiment create | list | show | start | cancel | report` against real Postgres (in-process control
plane over the typed client, the same code path as `--url`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.db.migrate import upgrade

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

EXPERIMENT = """
name: cli-experiment
modes: [genenv, static_augmentation]
replicates: 2
template:
  epochs: 2
  eval_every: 1
  eval_benchmarks: [arithmetic]
"""


@pytest.fixture
def runner(new_pg_database: Callable[[], str], redis_url: str, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    url = new_pg_database()
    upgrade(url)
    monkeypatch.setenv("GENENV_DATABASE__URL", url)
    monkeypatch.setenv("GENENV_REDIS__URL", redis_url)
    monkeypatch.setenv("GENENV_SERVICES__CONTROL_PLANE", "inprocess")
    monkeypatch.setenv("GENENV_AUTH__TOKENS", "[]")
    return CliRunner()


def test_experiment_commands_on_postgres(runner: CliRunner, tmp_path: Path) -> None:
    spec = tmp_path / "experiment.yaml"
    spec.write_text(EXPERIMENT)
    created = runner.invoke(app, ["experiment", "create", str(spec), "--json"])
    assert created.exit_code == 0, created.output
    experiment = json.loads(created.output)
    exp_id = experiment["id"]
    assert [(m["mode"], m["replicate"]) for m in experiment["members"]] == [
        ("genenv", 0), ("static_augmentation", 0), ("genenv", 1), ("static_augmentation", 1)
    ]

    listed = runner.invoke(app, ["experiment", "list"])
    assert listed.exit_code == 0 and exp_id in listed.output and "genenv,static_augmentation" in listed.output
    shown = runner.invoke(app, ["experiment", "show", exp_id])
    assert shown.exit_code == 0 and shown.output.count("created") >= 4
    for m in experiment["members"]:  # the member runs are ordinary runs
        assert m["run_id"] in shown.output
        assert runner.invoke(app, ["runs", "show", m["run_id"]]).exit_code == 0

    started = runner.invoke(app, ["experiment", "start", exp_id])
    assert started.exit_code == 0 and "is running" in started.output
    members = json.loads(runner.invoke(app, ["experiment", "show", exp_id, "--json"]).output)["members"]
    assert [m["status"] for m in members] == ["running", "created", "created", "created"]
    again = runner.invoke(app, ["experiment", "start", exp_id])
    assert again.exit_code == 2 and "start is allowed only from: created" in again.output

    cancelled = runner.invoke(app, ["experiment", "cancel", exp_id])
    assert cancelled.exit_code == 0 and "is cancelled" in cancelled.output
    members = json.loads(runner.invoke(app, ["experiment", "show", exp_id, "--json"]).output)["members"]
    assert {m["status"] for m in members} == {"cancelled"}
    for m in members:
        run = json.loads(runner.invoke(app, ["runs", "show", m["run_id"]]).output)
        assert run["status"] == "cancelled"

    report = runner.invoke(app, ["experiment", "report", exp_id, "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "cli-experiment" in text and "not measured" in text  # nothing ran: every verdict says so

    missing = runner.invoke(app, ["experiment", "show", "nope"])
    assert missing.exit_code == 2 and "experiment 'nope' not found" in missing.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("modes: [genenv, genenv]\nreplicates: 0\n")
    invalid = runner.invoke(app, ["experiment", "create", str(bad)])
    assert invalid.exit_code == 2 and "replicates" in invalid.output
