"""bench/scripted_agent.py: its command line, and a whole multi-epoch play against the client tests' stand-in app
(the real control plane's endpoints are exercised in tests/integration once they exist)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from genenv.clients.control_plane import ControlPlaneClient
from genenv.clients.external_agent import AsyncExternalAgentClient, RetryPolicy
from genenv.contracts.runs import RunStatus
from genenv.domains.arithmetic.scripted_agent import ScriptedAgent
from tests.unit.bench import scripts
from tests.unit.foundation.external_standin import ATTEMPTS, EXPRESSIONS, RUN, TOKEN, Fake, app, served

SCRIPT = scripts.BENCH / "scripted_agent.py"


def test_help_and_a_missing_url() -> None:
    ok = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "--preset" in ok.stdout and "GENENV_URL" in ok.stdout
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    bad = subprocess.run([sys.executable, str(SCRIPT), "--run-id", "r"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert bad.returncode == 2 and "GENENV_URL" in bad.stderr


def test_parse_args_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = scripts.load("scripted_agent")
    monkeypatch.setenv("GENENV_URL", "http://cp:8000")
    monkeypatch.setenv("GENENV_TOKEN", "t")
    args = driver.parse_args(["--run-id", "r", "--preset", "strong"])
    assert (args.url, args.token, args.preset, args.run_id) == ("http://cp:8000", "t", "strong", "r")


async def test_plays_every_epoch_to_the_end_with_one_line_each() -> None:
    driver = scripts.load("scripted_agent")
    fake = Fake(epochs=3, empty_leases=1)
    transport = httpx.ASGITransport(app=app(fake))
    lines: list[str] = []
    async with (AsyncExternalAgentClient("http://cp", token=TOKEN, transport=transport,
                                         retry=RetryPolicy(backoff_s=0.0)) as client,
                ControlPlaneClient("http://cp", token=TOKEN, transport=transport) as control):
        status, tallies = await driver.play(ScriptedAgent("weak", seed=3), client, control, RUN, limit=3,
                                            out=lines.append)
    assert status == RunStatus.COMPLETED
    assert [t.epoch for t in tallies] == [0, 1, 2]
    for tally in tallies:
        assert tally.attempts == tally.verdicts == ATTEMPTS * len(EXPRESSIONS)
        assert len(tally.task_p) == len(EXPRESSIONS) and tally.invalid == 0
        assert tally.stats.reported == tally.attempts
        # The stand-in's p̂ is the same measure as the driver's success rate: its line shows both alike.
        assert fake.summaries[tally.epoch].p_hat == pytest.approx(tally.success)
    epoch_lines = [line for line in lines if line.startswith("epoch ")]
    assert len(epoch_lines) == 3
    assert f"success {tallies[1].success:.2f}" in epoch_lines[1]
    assert f"service p̂ {tallies[1].success:.2f}" in epoch_lines[1]
    assert lines[0].startswith("weak agent on run") and lines[-1].startswith(f"run {RUN} is completed")


def test_epoch_line_without_a_stored_summary() -> None:
    driver = scripts.load("scripted_agent")
    tally = driver.EpochTally(epoch=4, alpha=0.5, k_min=0.1)
    tally.add_attempt(1, 0.55)
    tally.add_attempt(2, 0.85)
    line = driver.epoch_line(tally, None)
    assert line.startswith("epoch 4: 2 attempts on 2 tasks · success n/a")
    assert "true p̄ 0.70, true in-band 0.50" in line and "service summary not stored yet" in line


def test_main_plays_over_a_socket_and_exits_0_when_the_run_completed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    driver = scripts.load("scripted_agent")
    fake = Fake(epochs=2)
    written = tmp_path / "epochs.json"
    with served(app(fake)) as url:
        assert driver.main(["--run-id", RUN, "--url", url, "--token", TOKEN, "--preset", "strong", "--limit", "5",
                            "--json", str(written)]) == 0
        assert driver.main(["--run-id", "nope", "--url", url, "--token", TOKEN]) == 2  # 404: the envelope's message
    out, err = capsys.readouterr()
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("epoch ")] == ["epoch 0", "epoch 1"]
    assert out.splitlines()[-1] == f"run {RUN} is completed"
    assert err.strip() == "error [run_id]: no run nope"
    # --json: the same epochs, with the numbers of their lines.
    record = json.loads(written.read_text())
    assert record["run_id"] == RUN and record["preset"] == "strong" and record["status"] == "completed"
    assert [e["epoch"] for e in record["epochs"]] == [0, 1]
    for e in record["epochs"]:
        assert e["attempts"] == e["verdicts"] > 0 and 0.0 <= e["true_p"] <= 1.0
        assert e["service_p_hat"] is not None and e["overhead_s_per_1000"] > 0
