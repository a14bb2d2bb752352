"""Each run mode completes one epoch at tiny scale in the embedded stack (real SmolLM2, SQLite) and behaves as
the paper's baseline it stands for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from genenv.contracts.runs import RunConfig
from genenv.db.models import AdapterRow, RolloutRow, TaskRow, TrainJobRow, VerdictRow
from genenv.settings import GenEnvSettings
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack

pytestmark = [pytest.mark.slow]

TINY: dict[str, Any] = {
    "domain": "arithmetic",
    "epochs": 1,
    "seeds_per_epoch": 2,
    "variations_per_seed": 2,
    "static_variations": 3,
    "rollouts_per_task": 2,
    "max_response_tokens": 12,
    "max_task_tokens": 64,
    "agent": {"batch_size": 4, "micro_batch_size": 4},
    "simulator": {"batch_size": 4, "micro_batch_size": 4},
}


def _settings(tmp_path: Path, model_dir: Path, benchmarks_dir: Path) -> GenEnvSettings:
    return GenEnvSettings.model_validate(
        {
            "database": {"url": f"sqlite:///{tmp_path / 'genenv.db'}"},
            "queue": {"eager": True},
            "paths": {"home": tmp_path, "adapter_store": tmp_path / "adapters",
                      "model_cache": model_dir.parent, "benchmarks": benchmarks_dir},
            "inference": {"backend": "local", "base_model": model_dir.name},
        }
    )


async def _run_one(settings: GenEnvSettings, mode: str) -> dict[str, Any]:
    async with embedded_stack(settings) as stack:
        run = await stack.control_plane.create_run(RunConfig.model_validate({**TINY, "mode": mode}))
        await stack.control_plane.act(run.id, "start")
        status = await drive(stack.context, run.id)
        with stack.sessions() as s:
            tasks = list(s.scalars(select(TaskRow).where(TaskRow.run_id == run.id)))
            n_roll = s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(TaskRow.run_id == run.id))
            n_verd = s.scalar(select(func.count(VerdictRow.id)).join(RolloutRow).join(TaskRow)
                              .where(TaskRow.run_id == run.id))
            adapters = {(a.role, a.version) for a in s.scalars(select(AdapterRow).where(AdapterRow.run_id == run.id))}
            jobs = {j.kind: j.status for j in s.scalars(select(TrainJobRow).where(TrainJobRow.run_id == run.id))}
        epochs = (await stack.control_plane.list_epochs(run.id)).items
        final = await stack.control_plane.get_run(run.id)
    return {"status": status, "error": final.error, "tasks": tasks, "rollouts": n_roll, "verdicts": n_verd,
            "adapters": adapters, "jobs": jobs, "epochs": epochs}


@pytest.mark.parametrize("mode", ["genenv", "random_simulator", "static_augmentation", "agent_only"])
def test_mode_completes_one_epoch(mode: str, tmp_path: Path, model_dir: Path, benchmarks_dir: Path) -> None:
    out = asyncio.run(_run_one(_settings(tmp_path, model_dir, benchmarks_dir), mode))
    assert out["status"] == "completed", out["error"]
    tasks: list[TaskRow] = out["tasks"]
    valid = [t for t in tasks if t.status == "valid"]
    per_seed = {"genenv": 2, "random_simulator": 2, "static_augmentation": 3, "agent_only": 1}[mode]
    assert len(tasks) == 2 * per_seed  # valid + rejected generations, one row per variation
    assert out["rollouts"] == len(valid) * 2
    assert out["verdicts"] == out["rollouts"]
    # GRPO skips zero-variance groups, so a tiny epoch may have nothing to learn from: then no version is written.
    assert out["jobs"]["train_agent"] in {"done", "skipped"}
    assert (("agent", 1) in out["adapters"]) == (out["jobs"]["train_agent"] == "done")
    if mode == "genenv":
        assert out["jobs"]["train_simulator"] in {"done", "skipped"}
        if out["jobs"]["train_simulator"] == "done":
            assert ("simulator", 1) in out["adapters"]
    else:
        assert "train_simulator" not in out["jobs"]
        assert not any(role == "simulator" for role, _ in out["adapters"])
    if mode == "agent_only":
        assert all(t.variation == 0 and t.generator_adapter is None and t.raw_text == "" for t in tasks)
    (epoch,) = out["epochs"]
    assert epoch.phase.value == "closed" and epoch.summary is not None
    assert epoch.summary.rollouts == out["rollouts"]
    assert epoch.summary.tasks_valid == len(valid)
    assert set(epoch.summary.phase_seconds) >= {"generate", "rollout", "verify", "score", "train", "close"}
