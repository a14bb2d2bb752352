"""Why generations were rejected: counts per reason in the epoch summary, the likely fix under the epoch table and
in the orchestrator's log, and `genenv runs tasks` listing an epoch's generations (SQLite, in-process)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.cli.render import epoch_table, rejection_notes, untrained_notes
from genenv.contracts.epochs import Epoch, EpochPhase, EpochSummary
from genenv.contracts.runs import RunConfig
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import TaskRow
from genenv.db.repositories import epochs as epoch_repo
from genenv.db.repositories import runs as run_repo
from genenv.rejections import REJECTION_HINTS
from genenv.settings import GenEnvSettings
from genenv_orchestrator.summary import compute_summary

TOO_LONG = '{"question": "What is 12 + 7 + ' + " + ".join(str(i) for i in range(60))  # cut off: no closing brace


@pytest.fixture
def db_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A run whose epoch 0 has 1 valid generation and 5 rejected ones (3 too_long, 2 invalid_task)."""
    url = f"sqlite:///{tmp_path / 'rejections.db'}"
    upgrade(url)
    engine = make_engine(GenEnvSettings(database={"url": url}).database)
    with session_scope(make_session_factory(engine)) as s:
        run = run_repo.create(s, RunConfig(name="own domain", epochs=2))
        rows = [("valid", None, '{"question": "2 + 2", "answer": 4}', {"question": "2 + 2", "answer": 4})]
        rows += [("rejected", "too_long", TOO_LONG, None)] * 3
        rows += [("rejected", "invalid_task", '{"question": "4"}', None)] * 2
        for variation, (status, reason, raw, payload) in enumerate(rows):
            s.add(TaskRow(run_id=run.id, epoch=0, seed_id="s1", domain="arithmetic", variation=variation,
                          status=status, payload=payload, rejection_reason=reason, raw_text=raw,
                          rejection_detail="output cut off at max_tokens" if reason == "too_long" else None))
        # Another epoch's rejection is not this epoch's.
        s.add(TaskRow(run_id=run.id, epoch=1, seed_id="s1", domain="arithmetic", variation=0, status="rejected",
                      rejection_reason="not_json", raw_text="no"))
        run_id = run.id
    engine.dispose()
    monkeypatch.setenv("GENENV_DATABASE__URL", url)
    monkeypatch.setenv("GENENV_SERVICES__CONTROL_PLANE", "inprocess")
    monkeypatch.delenv("GENENV_AUTH__TOKENS", raising=False)
    return url, run_id


def _summary(url: str, run_id: str) -> EpochSummary:
    engine = make_engine(GenEnvSettings(database={"url": url}).database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            return compute_summary(s, run_id, 0, {})
    finally:
        engine.dispose()


def test_the_summary_counts_rejections_per_reason(db_run: tuple[str, str]) -> None:
    summary = _summary(*db_run)
    assert summary.tasks_valid == 1 and summary.tasks_rejected == 5
    assert summary.rejections == {"too_long": 3, "invalid_task": 2}
    assert EpochSummary.model_validate_json(summary.model_dump_json()).rejections == summary.rejections


def test_every_rejection_reason_has_a_hint() -> None:
    from genenv.contracts.tasks import RejectionReason

    assert set(REJECTION_HINTS) == {r.value for r in RejectionReason}
    assert "max_task_tokens" in REJECTION_HINTS["too_long"] and "larger base model" in REJECTION_HINTS["too_long"]
    assert "larger base model" in REJECTION_HINTS["invalid_task"]


def _epoch(summary: EpochSummary) -> Epoch:
    return Epoch(run_id="r", index=0, phase=EpochPhase.CLOSED, summary=summary, started_at=datetime.now(UTC))


def test_the_epoch_table_names_the_reasons_and_the_fix(db_run: tuple[str, str]) -> None:
    summary = _summary(*db_run).model_copy(update={"train_metrics": {
        "train_simulator": {"steps": 0, "reason": "no in-band generation"}}})
    epochs = [_epoch(summary)]
    assert rejection_notes(epochs)[:3] == [
        "epoch 0 rejected: too_long 3 · invalid_task 2",
        f"  too_long: {REJECTION_HINTS['too_long']}",
        f"  invalid_task: {REJECTION_HINTS['invalid_task']}",
    ]
    # Not only "no in-band generation": the dominant reason and its fix.
    assert untrained_notes(epochs) == [
        "epoch 0: simulator not trained: no in-band generation; 5 of 6 generations rejected, mostly too_long (3): "
        + REJECTION_HINTS["too_long"]]
    console = Console(width=200, record=True)
    console.print(epoch_table(epochs))
    text = console.export_text()
    assert "too_long 3 · invalid_task 2" in text and "raise simulator max_task_tokens" in text


def test_a_mostly_valid_epoch_gets_no_dominant_reason() -> None:
    summary = EpochSummary(tasks_valid=20, tasks_rejected=4, rejections={"too_long": 4},
                           train_metrics={"train_simulator": {"steps": 0, "reason": "no in-band generation"}})
    assert untrained_notes([_epoch(summary)]) == ["epoch 0: simulator not trained: no in-band generation"]


def test_closing_an_epoch_logs_the_dominant_reason(db_run: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    from genenv_orchestrator.context import OrchestratorContext
    from genenv_orchestrator.loop import _close

    url, run_id = db_run
    settings = GenEnvSettings(database={"url": url}, queue={"eager": True})
    engine = make_engine(settings.database)
    factory = make_session_factory(engine)
    with session_scope(factory) as s:
        run_repo.apply_action(s, run_id, "start")
        epoch_repo.upsert(s, run_id, 0, phase=EpochPhase.CLOSE)
    ctx = OrchestratorContext.__new__(OrchestratorContext)
    ctx.settings, ctx.session_factory = settings, factory
    with caplog.at_level(logging.WARNING, logger="genenv_orchestrator.loop"):
        _close(ctx, run_id, 0)
    engine.dispose()
    assert any("5 of 6 generations rejected, mostly too_long (3): raise simulator max_task_tokens" in r.getMessage()
               for r in caplog.records), caplog.text


def test_runs_tasks_lists_an_epochs_rejected_generations(db_run: tuple[str, str]) -> None:
    _, run_id = db_run
    runner = CliRunner()
    result = runner.invoke(app, ["runs", "tasks", run_id, "--epoch", "0", "--status", "rejected"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    assert [r[3] for r in rows] == ["rejected"] * 5
    assert [r[4].rstrip(":") for r in rows] == ["too_long"] * 3 + ["invalid_task"] * 2
    assert '{"question": "What is 12 + 7' in result.output and "…" in result.output  # the text, shortened
    assert f"too_long: {REJECTION_HINTS['too_long']}" in result.output

    listed = runner.invoke(app, ["runs", "tasks", run_id, "--epoch", "0", "--status", "all", "--limit", "2",
                                 "--json"])
    page = json.loads(listed.output)
    assert [t["status"] for t in page["items"]] == ["valid", "rejected"] and page["next_cursor"]
    assert page["items"][1]["raw_text"] == TOO_LONG
    valid = runner.invoke(app, ["runs", "tasks", run_id, "--epoch", "0", "--status", "valid"])
    assert '{"question": "2 + 2", "answer": 4}' in valid.output and "too_long" not in valid.output

    wrong = runner.invoke(app, ["runs", "tasks", run_id, "--epoch", "0", "--status", "rejectd"])
    assert wrong.exit_code == 2
