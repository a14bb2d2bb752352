"""`genenv runs plot`: the run's curves as a PNG, with one point per summarised epoch."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from fnd_helpers import insert_run_with_epochs, sample_summary
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import epochs as epoch_repo
from genenv.db.repositories import runs as run_repo
from genenv.settings import GenEnvSettings

pytest.importorskip("matplotlib", reason="matplotlib comes with the `bench` extra")

from genenv.observability.plot import build_figure


@pytest.fixture
def db_with_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A migrated SQLite file holding a running run with 4 summarised epochs (+1 in progress); the CLI uses it."""
    url = f"sqlite:///{tmp_path / 'plot.db'}"
    upgrade(url)
    engine = make_engine(GenEnvSettings(database={"url": url}).database)
    with session_scope(make_session_factory(engine)) as s:
        run_id = insert_run_with_epochs(s, name="plotted", closed=4)
    engine.dispose()
    monkeypatch.setenv("GENENV_DATABASE__URL", url)
    monkeypatch.setenv("GENENV_SERVICES__CONTROL_PLANE", "inprocess")
    monkeypatch.delenv("GENENV_AUTH__TOKENS", raising=False)
    return url, run_id


def test_figure_has_one_point_per_summarised_epoch(db_with_run: tuple[str, str]) -> None:
    url, run_id = db_with_run
    engine = make_engine(GenEnvSettings(database={"url": url}).database)
    with session_scope(make_session_factory(engine)) as s:
        run = run_repo.to_contract(run_repo.get(s, run_id))
        epochs = epoch_repo.list_epochs(s, run_id).items
    engine.dispose()

    fig = build_figure(run, epochs)
    lines = {line.get_gid(): line for ax in fig.axes for line in ax.get_lines() if line.get_gid()}
    p_hat = lines["curve:p_hat"].get_xydata()
    assert p_hat.tolist() == [[i, pytest.approx(sample_summary(i).p_hat)] for i in range(4)]
    for field in ("in_band_share", "mean_response_tokens", "mean_task_tokens", "tasks_valid", "tasks_rejected",
                  "tasks_solved", "tasks_unsolved", "agent_adapter_version", "simulator_adapter_version"):
        assert len(lines[f"curve:{field}"].get_xdata()) == 4, field
    assert lines["benchmark:bfcl"].get_xydata().tolist() == [[1, pytest.approx(0.15)], [3, pytest.approx(0.25)]]
    band = next(p for p in fig.axes[0].patches if p.get_gid() == "band")
    ys = sorted({y for _, y in band.get_path().transformed(band.get_patch_transform()).vertices})
    assert ys == [pytest.approx(0.4), pytest.approx(0.6)]
    bars = [p for p in fig.axes[7].patches if p.get_gid() == "phase:train"]
    assert [b.get_height() for b in bars] == [pytest.approx(95.0)] * 4


def test_runs_plot_writes_a_png(db_with_run: tuple[str, str], tmp_path: Path) -> None:
    _, run_id = db_with_run
    target = tmp_path / "curves.png"
    result = CliRunner().invoke(app, ["runs", "plot", run_id, "--out", str(target)])
    assert result.exit_code == 0, result.output
    assert "4 summarised epoch(s) of 5" in result.output
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1300, 1300) and len(data) > 50_000

    missing = CliRunner().invoke(app, ["runs", "plot", "nope", "--out", str(tmp_path / "x.png")])
    assert missing.exit_code == 2 and "run 'nope' not found" in missing.output
    assert not (tmp_path / "x.png").exists()
