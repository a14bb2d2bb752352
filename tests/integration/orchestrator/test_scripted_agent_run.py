"""bench/scripted_agent.py's play() drives a whole external_agent run in the embedded stack (issue 33, items 4-5):
the real simulator (SmolLM2, local backend) writes each epoch's tasks, the typed client leases them and reports
the scripted weak agent's replies, the orchestrator scores, trains the simulator and closes the epochs, and the
driver prints one line per epoch whose success rate is the service's own p̂."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from genenv.clients.external_agent import AsyncExternalAgentClient
from genenv.contracts.adapters import Role
from genenv.contracts.runs import RunConfig, RunStatus
from genenv.domains.arithmetic.scripted_agent import ScriptedAgent
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app
from genenv_control_plane.enqueue import InProcessEnqueuer
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack
from tests.integration.orchestrator.external_helpers import embedded_settings, external_config, no_enqueue
from tests.unit.bench import scripts

pytestmark = [pytest.mark.slow]

G = 4
CONFIG: dict[str, Any] = external_config(G)


async def _run(settings: GenEnvSettings, config: dict[str, Any] = CONFIG) -> dict[str, Any]:
    driver = scripts.load("scripted_agent")
    lines: list[str] = []
    async with embedded_stack(settings) as stack:
        run = await stack.control_plane.create_run(RunConfig.model_validate(config))
        await stack.control_plane.act(run.id, "start")
        # The outside agent's own way in: a control plane on the same database, as a client elsewhere would see.
        app = create_app(settings, enqueuer=InProcessEnqueuer(no_enqueue))
        try:
            async with AsyncExternalAgentClient("http://cp", transport=httpx.ASGITransport(app=app)) as client:
                playing = asyncio.create_task(driver.play(ScriptedAgent("weak", seed=11), client,
                                                          stack.control_plane, run.id, limit=8, out=lines.append))
                status = await drive(stack.context, run.id)
                final, tallies = await asyncio.wait_for(playing, timeout=120)
        finally:
            app.state.control_plane.close()
        epochs = (await stack.control_plane.list_epochs(run.id)).items
        simulators = (await stack.control_plane.list_adapters(run.id, role=Role.SIMULATOR)).items
    return {"status": status, "final": final, "tallies": tallies, "epochs": epochs, "lines": lines,
            "simulators": simulators}


def test_the_scripted_agent_plays_a_two_epoch_run_to_completion(tmp_path: Path, model_dir: Path,
                                                              benchmarks_dir: Path) -> None:
    out = asyncio.run(_run(embedded_settings(tmp_path, model_dir, benchmarks_dir)))
    assert out["status"] == "completed" and out["final"] == RunStatus.COMPLETED
    assert [e.phase.value for e in out["epochs"]] == ["closed", "closed"]
    # An epoch whose generations were all rejected has nothing to lease: the driver never sees it.
    summaries = [e.summary for e in out["epochs"] if e.summary.tasks_valid]
    tallies = out["tallies"]
    assert [t.epoch for t in tallies] == [e.index for e in out["epochs"] if e.summary.tasks_valid]
    assert tallies, "the simulator wrote no valid task in either epoch"
    for tally, summary in zip(tallies, summaries, strict=True):
        # Every valid task attempted G times; the service's p̂ is the success rate of its verdicts the driver tallied.
        assert tally.verdicts == tally.attempts == summary.rollouts == summary.tasks_valid * G
        assert summary.tasks_unattempted == 0
        assert summary.p_hat == pytest.approx(tally.success)
    epoch_lines = [line for line in out["lines"] if line.startswith("epoch ")]
    assert len(epoch_lines) == len(tallies)
    for line, summary in zip(epoch_lines, summaries, strict=True):
        assert f"service p̂ {summary.p_hat:.2f}" in line
    print("\n".join(out["lines"]))


def test_the_generic_control_trains_the_outside_agents_simulator(tmp_path: Path, model_dir: Path,
                                                                  benchmarks_dir: Path) -> None:
    # external_generic_rwr: the same protocol, and the simulator is trained (on a random size-matched selection of
    # its own generations). Every batch in band (k_min 0.5), so the band's size — what the control matches — is
    # every valid generation of the epoch.
    config = {**CONFIG, "mode": "external_generic_rwr", "curriculum": {"k_min": 0.5}}
    out = asyncio.run(_run(embedded_settings(tmp_path, model_dir, benchmarks_dir), config))
    assert out["status"] == "completed" and out["final"] == RunStatus.COMPLETED
    assert [e.phase.value for e in out["epochs"]] == ["closed", "closed"]
    trained = [e.index for e in out["epochs"] if e.summary.tasks_valid]
    assert trained, "the simulator wrote no valid task in either epoch"
    # One simulator version per epoch that had tasks to select from (a mode that never trains would have none).
    versions = sorted(a.version for a in out["simulators"])
    assert versions == list(range(1, len(trained) + 1))
