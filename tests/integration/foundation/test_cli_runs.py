"""The CLI: `genenv db ...`, `genenv runs ...` (in-process and over HTTP) and `genenv serve control-plane`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fnd_helpers import served_control_plane
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.db import migrate

TOKEN = "cli-token"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("GENENV_DATABASE__URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("GENENV_SERVICES__CONTROL_PLANE", "inprocess")
    monkeypatch.delenv("GENENV_AUTH__TOKENS", raising=False)
    return CliRunner()


def test_db_upgrade_current_downgrade(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    result = runner.invoke(app, ["db", "upgrade", "--url", url])
    assert result.exit_code == 0, result.output
    assert migrate.current_revision(url) == migrate.head_revision()
    assert f"current: {migrate.head_revision()}" in runner.invoke(app, ["db", "current", "--url", url]).output
    assert runner.invoke(app, ["db", "downgrade", "base", "--url", url]).exit_code == 0
    assert migrate.current_revision(url) is None


@pytest.mark.postgres
def test_db_upgrade_on_postgres(runner: CliRunner, new_pg_database: Callable[[], str]) -> None:
    url = new_pg_database()
    result = runner.invoke(app, ["db", "upgrade", "--url", url])
    assert result.exit_code == 0, result.output
    assert migrate.current_revision(url) == migrate.head_revision()


def test_runs_commands_in_process(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"name": "cli run", "curriculum": {"alpha": 0.3}}))
    created = runner.invoke(app, ["runs", "create", str(config), "--json"])
    assert created.exit_code == 0, created.output
    run = json.loads(created.output)
    assert run["name"] == "cli run" and run["config"]["curriculum"]["alpha"] == 0.3

    wrapped = tmp_path / "wrapped.yaml"
    wrapped.write_text("config:\n  name: from yaml\n  rollouts_per_task: 4\n")
    assert runner.invoke(app, ["runs", "create", str(wrapped)]).exit_code == 0

    listed = json.loads(runner.invoke(app, ["runs", "list", "--json"]).output)
    assert [r["name"] for r in listed["items"]] == ["from yaml", "cli run"]
    assert "from yaml" in runner.invoke(app, ["runs", "list"]).output
    shown = json.loads(runner.invoke(app, ["runs", "show", run["id"]]).output)
    assert shown["id"] == run["id"]

    # In-process with the eager queue nothing would execute a started run: refused, the run stays created.
    started = runner.invoke(app, ["runs", "start", run["id"]])
    assert started.exit_code == 2 and "no control plane configured: set GENENV_URL" in started.output
    assert json.loads(runner.invoke(app, ["runs", "show", run["id"]]).output)["status"] == "created"
    cancelled = runner.invoke(app, ["runs", "cancel", run["id"]])
    assert cancelled.exit_code == 0 and "is cancelled" in cancelled.output
    again = runner.invoke(app, ["runs", "cancel", run["id"]])
    assert again.exit_code == 2 and "cancel is allowed only from" in again.output
    missing = runner.invoke(app, ["runs", "show", "nope"])
    assert missing.exit_code == 2 and "run 'nope' not found" in missing.output


def test_runs_create_rejects_a_bad_config_with_the_field(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"curriculum": {"beta": 0}, "rollouts_per_task": 1}))
    result = runner.invoke(app, ["runs", "create", str(bad)])
    assert result.exit_code == 2
    assert "curriculum.beta: Input should be greater than 0" in result.output
    assert "rollouts_per_task: Input should be greater than or equal to 2" in result.output


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`genenv serve control-plane` as a real process (uvicorn, SQLite auto-migrated, auth on)."""
    with served_control_plane(f"sqlite:///{tmp_path / 'served.db'}", TOKEN, tmp_path / "server.log") as url:
        yield url
    assert TOKEN not in (tmp_path / "server.log").read_text()


def test_serve_control_plane_and_talk_to_it_over_http(served: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert httpx.get(f"{served}/readyz").json() == {"status": "ready", "checks": {"database": "ok"}}
    assert httpx.get(f"{served}/v1/runs").status_code == 401
    monkeypatch.setenv("GENENV_AUTH__CLIENT_TOKEN", TOKEN)
    config = tmp_path / "run.json"
    config.write_text("{}")
    runner = CliRunner()
    created = runner.invoke(app, ["runs", "create", str(config), "--url", served, "--json"])
    assert created.exit_code == 0, created.output
    run_id = json.loads(created.output)["id"]
    listed = runner.invoke(app, ["runs", "list", "--url", served, "--json"])
    assert [r["id"] for r in json.loads(listed.output)["items"]] == [run_id]
    monkeypatch.setenv("GENENV_AUTH__CLIENT_TOKEN", "wrong")
    denied = runner.invoke(app, ["runs", "list", "--url", served])
    assert denied.exit_code == 2 and "bearer token not accepted" in denied.output
    metrics = httpx.get(f"{served}/metrics").text
    assert 'genenv_http_requests_total{method="GET",route="/v1/runs",status="403"} 1.0' in metrics


def test_runs_watch_says_what_a_run_waits_on(runner: CliRunner, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from sqlalchemy import create_engine, update

    from genenv.db.models import RunRow

    config = tmp_path / "run.json"
    config.write_text(json.dumps({"name": "waits"}))
    run = json.loads(runner.invoke(app, ["runs", "create", str(config), "--json"]).output)
    waiting = {"dependency": "simulator", "since": datetime(2026, 1, 2, 12, 3, 10, tzinfo=UTC).isoformat(),
               "last_error": "ApiError: connection_error: simulator did not answer", "attempts": 4, "epoch": 0,
               "phase": "generate"}
    engine = create_engine(f"sqlite:///{tmp_path / 'cli.db'}")
    with engine.begin() as conn:
        # At rest (paused): watch draws once and ends.
        conn.execute(update(RunRow).where(RunRow.id == run["id"]).values(waiting_on=waiting, status="paused"))
    engine.dispose()
    watched = runner.invoke(app, ["runs", "watch", run["id"], "--interval", "0.2"])
    assert watched.exit_code == 0, watched.output
    assert ("waiting on simulator since 12:03:10 UTC (4 tries; generate of epoch 0): ApiError: connection_error: "
            "simulator did not answer") in " ".join(watched.output.split())
    shown = json.loads(runner.invoke(app, ["runs", "show", run["id"]]).output)
    assert shown["waiting_on"]["attempts"] == 4
