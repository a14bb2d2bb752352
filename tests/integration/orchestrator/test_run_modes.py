"""Each run mode completes several epochs at tiny scale in the embedded stack (real SmolLM2, SQLite) and behaves as
the paper's method or the baseline it stands for (METHOD.md): who writes each epoch's tasks, the simulator's
pool, agent replay, the statistics in the simulator's prompt, and the static set written before training."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from genenv.contracts.adapters import adapter_name
from genenv.contracts.runs import RunConfig
from genenv.db.models import AdapterRow, RolloutRow, SeedRow, TaskRow, TrainJobRow, VerdictRow
from genenv.domains import get_domain
from genenv.settings import GenEnvSettings
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack
from genenv_orchestrator.seeds import sample_seeds

pytestmark = [pytest.mark.slow]

# genenv runs three epochs (its pool must grow twice); the baselines two (enough to show what they do after
# epoch 0), which keeps the CI cost of the four runs down.
EPOCHS = {"genenv": 3, "random_simulator": 2, "static_augmentation": 2, "agent_only": 2}
TINY: dict[str, Any] = {
    "domain": "arithmetic",
    "seeds_per_epoch": 2,
    "variations_per_seed": 2,
    "static_variations": 3,
    "rollouts_per_task": 4,
    "max_response_tokens": 12,
    "max_task_tokens": 64,
    # Every scored batch in band, so the simulator has data to train on each epoch (this tests the mechanism, not
    # the band); replay may match the fresh share so that one fresh group of 4 admits one replayed group.
    "curriculum": {"k_min": 0.5, "replay_ratio": 0.5},
    "agent": {"batch_size": 8, "micro_batch_size": 8},
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


async def _run_one(settings: GenEnvSettings, mode: str, **overrides: Any) -> dict[str, Any]:
    async with embedded_stack(settings) as stack:
        config = RunConfig.model_validate({**TINY, "mode": mode, "epochs": EPOCHS[mode], **overrides})
        run = await stack.control_plane.create_run(config)
        await stack.control_plane.act(run.id, "start")
        status = await drive(stack.context, run.id)
        with stack.sessions() as s:
            tasks = list(s.scalars(select(TaskRow).where(TaskRow.run_id == run.id)))
            for t in tasks:
                s.expunge(t)
            n_roll = s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(TaskRow.run_id == run.id))
            first_rollout = s.scalar(select(func.min(RolloutRow.created_at)).join(TaskRow)
                                     .where(TaskRow.run_id == run.id))
            n_verd = s.scalar(select(func.count(VerdictRow.id)).join(RolloutRow).join(TaskRow)
                              .where(TaskRow.run_id == run.id))
            adapters = {(a.role, a.version) for a in s.scalars(select(AdapterRow).where(AdapterRow.run_id == run.id))}
            jobs = {(j.kind, j.epoch): (j.status, dict(j.metrics))
                    for j in s.scalars(select(TrainJobRow).where(TrainJobRow.run_id == run.id))}
            seeds = {(r.epoch, r.seed_id): r.context
                     for r in s.scalars(select(SeedRow).where(SeedRow.run_id == run.id))}
            rollout_adapters = set(s.scalars(select(RolloutRow.agent_adapter).join(TaskRow)
                                             .where(TaskRow.run_id == run.id)))
        epochs = (await stack.control_plane.list_epochs(run.id)).items
        final = await stack.control_plane.get_run(run.id)
    return {"run_id": run.id, "status": status, "error": final.error, "tasks": tasks, "rollouts": n_roll,
            "first_rollout": first_rollout, "verdicts": n_verd, "adapters": adapters, "jobs": jobs,
            "epochs": epochs, "seeds": seeds, "rollout_adapters": rollout_adapters}


def _check_common(mode: str, out: dict[str, Any]) -> None:
    n_epochs = EPOCHS[mode]
    assert out["status"] == "completed", out["error"]
    tasks: list[TaskRow] = out["tasks"]
    valid = [t for t in tasks if t.status == "valid"]
    per_seed = {"genenv": 2, "random_simulator": 2, "static_augmentation": 3, "agent_only": 1}[mode]
    assert len(tasks) == n_epochs * 2 * per_seed  # valid + rejected generations, one row per variation
    assert out["rollouts"] == len(valid) * 4
    assert out["verdicts"] == out["rollouts"]
    epochs = out["epochs"]
    assert [e.index for e in epochs] == list(range(n_epochs))
    assert all(e.phase.value == "closed" and e.summary is not None for e in epochs)
    assert sum(e.summary.rollouts for e in epochs) == out["rollouts"]
    assert [e.summary.rollouts_so_far for e in epochs] == [
        sum(e.summary.rollouts for e in epochs[: i + 1]) for i in range(n_epochs)]
    assert set(epochs[0].summary.phase_seconds) >= {"generate", "rollout", "verify", "score", "train", "close"}
    for e in range(n_epochs):
        # GRPO skips zero-variance groups, so a tiny epoch may have nothing to learn from: then no version is written.
        assert out["jobs"][("train_agent", e)][0] in {"done", "skipped"}


@pytest.mark.parametrize("mode", ["genenv", "random_simulator", "static_augmentation", "agent_only"])
def test_mode_runs_its_epochs_as_the_method_says(
    mode: str, tmp_path: Path, model_dir: Path, benchmarks_dir: Path
) -> None:
    out = asyncio.run(_run_one(_settings(tmp_path, model_dir, benchmarks_dir), mode))
    _check_common(mode, out)
    n_epochs = EPOCHS[mode]
    tasks: list[TaskRow] = out["tasks"]
    summaries = [e.summary for e in out["epochs"]]
    sim_jobs = {e: out["jobs"].get(("train_simulator", e)) for e in range(n_epochs)}
    if mode == "genenv":
        # Epoch e+1's tasks were written by the simulator version trained at epoch e (k_min 0.5: always in band).
        for e in range(n_epochs):
            status, metrics = sim_jobs[e]
            assert status == "done", metrics
            assert metrics["pool_epochs"] == e + 1 and metrics["examples_seen"] > 0
            want = None if e == 0 else adapter_name(out["run_id"], "simulator", e)
            assert {t.generator_adapter for t in tasks if t.epoch == e} == {want}
        # The pool D_env grows: each epoch trains on its own in-band generations and every earlier epoch's.
        pools = [sim_jobs[e][1]["pool_size"] for e in range(n_epochs)]
        assert pools[0] < pools[1] < pools[2], pools
        assert sim_jobs[2][1]["pool_fresh"] < pools[2]
    else:
        assert all(job is None for job in sim_jobs.values())
        assert not any(role == "simulator" for role, _ in out["adapters"])
        assert all(t.generator_adapter is None for t in tasks)
    if mode in {"genenv", "random_simulator"}:
        # From epoch 1 on every simulator prompt carries the agent's recent success statistics.
        assert summaries[0].prompts_with_stats_share == 0.0
        assert all(s.prompts_with_stats_share == 1.0 for s in summaries[1:])
        assert all(out["seeds"][(e, sid)] is not None for (e, sid) in out["seeds"] if e > 0)
        assert [s.generated_tasks_so_far for s in summaries] == [4 * (e + 1) for e in range(n_epochs)]
    if mode != "agent_only":
        # The agent replays earlier groups whenever an earlier epoch left one with reward variance.
        for e in range(1, n_epochs):
            status, metrics = out["jobs"][("train_agent", e)]
            if status == "done" and metrics["replay_candidates"] and metrics["fresh_groups_used"]:
                assert metrics["replay_groups_used"] > 0 and metrics["replayed_seen"] > 0, metrics
    if mode == "static_augmentation":
        # The whole fixed set was written before any training, for the same seeds the other modes draw.
        assert max(t.created_at for t in tasks) <= out["first_rollout"]
        assert [s.generated_tasks_so_far for s in summaries] == [len(tasks)] * n_epochs
        drawn = {e: sorted(sid for (ep, sid) in out["seeds"] if ep == e) for e in range(n_epochs)}
        rng_seeds = {e: sorted(s.id for s in sample_seeds(get_domain("arithmetic").load_seeds(None), 2, 0, e))
                     for e in range(n_epochs)}
        assert drawn == rng_seeds
        assert {e: sorted({t.seed_id for t in tasks if t.epoch == e}) for e in range(n_epochs)} == rng_seeds
        assert all(s.prompts_with_stats_share == 0.0 for s in summaries)  # nothing was known before training
    if mode == "agent_only":
        assert all(t.variation == 0 and t.generator_adapter is None and t.raw_text == "" for t in tasks)
        assert all(s.prompts_with_stats_share is None and s.generated_tasks_so_far == 0 for s in summaries)


def test_design_controls_frozen_agent_no_hint_stratified_seeds(
    tmp_path: Path, model_dir: Path, benchmarks_dir: Path
) -> None:
    """The experiment controls of the simulator-mechanism issue: agent.train = false (no GRPO job, no agent
    adapter, rollouts by the base model), curriculum.prompt_stats = false (no statistics in any prompt), and
    stratified seeds (one per level here, 2 seeds of 2 levels)."""
    overrides = {"agent": {**TINY["agent"], "train": False},
                 "curriculum": {**TINY["curriculum"], "prompt_stats": False}, "seed_sampling": "stratified"}
    out = asyncio.run(_run_one(_settings(tmp_path, model_dir, benchmarks_dir), "genenv", **overrides))
    assert out["status"] == "completed", out["error"]
    assert not any(kind == "train_agent" for kind, _ in out["jobs"])
    assert not any(role == "agent" for role, _ in out["adapters"])
    assert out["rollout_adapters"] == {None} and out["rollouts"] > 0
    assert all(context is None for context in out["seeds"].values())
    assert all(e.summary.prompts_with_stats_share == 0.0 for e in out["epochs"])
    assert out["jobs"][("train_simulator", 0)][0] == "done"  # the simulator still trains
    for e in range(EPOCHS["genenv"]):
        drawn = sorted(sid for (ep, sid) in out["seeds"] if ep == e)
        assert len({sid.rsplit("-", 1)[0] for sid in drawn}) == 2, drawn  # two seeds, two different levels
