"""TRL's GRPOTrainer as the outside agent of an external_agent run (issue 33, item 4): a real embedded stack (the
simulator on SmolLM2 with the local backend writes the tasks, the orchestrator waits for the attempts) and a real
control plane on a loopback socket; genenv.integrations.trl's dataset leases the tasks, GRPOTrainer trains
SmolLM2-135M-Instruct on CPU for a few optimizer steps, and its reward function reports the completions and returns
the service's verdicts. Checks: every reported completion is stored as a rollout of origin client_reply with the
verdict TRL was given, and the trainer stepped."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from genenv.clients.external_agent import ExternalAgentClient
from genenv.contracts.runs import RunConfig
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import RolloutRow, VerdictRow
from genenv.integrations.trl import LeaseSource, ServiceReward, check_grpo_args, leased_dataset
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app
from genenv_control_plane.enqueue import InProcessEnqueuer
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack
from tests.integration.orchestrator.external_helpers import embedded_settings, external_config, no_enqueue
from tests.unit.foundation.external_standin import served

pytestmark = [
    pytest.mark.slow,
    # TRL 1.16 warns that the venv's vLLM (0.32, our serving pin) is newer than it lists; this test does not use it.
    # TRL/transformers/vLLM import and training warnings (torch.jit deprecation, generation config) are theirs.
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning"),
]

G = 2  # rollouts_per_task = GRPO's num_generations: a task's G attempts are one GRPO group
PROMPTS_PER_BATCH = 2
STEPS = 2
CONFIG: dict[str, Any] = external_config(
    G,
    seeds_per_epoch=4,
    # Accelerate holds one batch ahead, so an epoch with too few valid tasks closes at its deadline instead.
    external={"epoch_deadline_s": 60, "min_attempted_share": 0.5},
)


def _train(client: ExternalAgentClient, run_id: str, model_dir: Path, out: Path) -> dict[str, Any]:
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=PROMPTS_PER_BATCH * G,
        num_generations=G, gradient_accumulation_steps=1, max_completion_length=16, shuffle_dataset=False,
        learning_rate=1e-5, logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, seed=0,
    )
    check_grpo_args(args, PROMPTS_PER_BATCH)
    source = LeaseSource(client, run_id, prompts_per_batch=PROMPTS_PER_BATCH, lease_s=60)
    reward = ServiceReward(client, run_id)
    calls: list[tuple[list[float | None], list[Any]]] = []

    def genenv_verdict(**kwargs: Any) -> list[float | None]:
        # What TRL is given, next to the reports made for it.
        before = len(reward.reports)
        scores = reward(**kwargs)
        calls.append((list(scores), reward.reports[before:]))
        return scores

    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[genenv_verdict], args=args,
                          train_dataset=leased_dataset(source))
    trainer.train()
    return {"step": trainer.state.global_step, "log": trainer.state.log_history, "calls": calls,
            "refused": reward.refused, "leased": source.leased}


async def _run(settings: GenEnvSettings, model_dir: Path, out: Path) -> dict[str, Any]:
    async with embedded_stack(settings) as stack:
        run = await stack.control_plane.create_run(RunConfig.model_validate(CONFIG))
        await stack.control_plane.act(run.id, "start")
        app = create_app(settings, enqueuer=InProcessEnqueuer(no_enqueue))
        try:
            with served(app) as url, ExternalAgentClient(url) as client:
                driving = asyncio.create_task(drive(stack.context, run.id))
                trained = await asyncio.to_thread(_train, client, run.id, model_dir, out)
                await stack.control_plane.act(run.id, "cancel")
                trained["status"] = await asyncio.wait_for(driving, timeout=120)
        finally:
            app.state.control_plane.close()
    return trained


def _stored(db_url: str, rollout_ids: list[int]) -> dict[int, tuple[str, float | None]]:
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            rows = s.execute(select(RolloutRow.id, RolloutRow.origin, VerdictRow.score)
                             .join(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
                             .where(RolloutRow.id.in_(rollout_ids))).all()
            return {int(i): (str(o), sc) for i, o, sc in rows}
    finally:
        engine.dispose()


def test_grpo_trainer_trains_on_leased_tasks_with_the_services_verdicts(
    tmp_path: Path, model_dir: Path, benchmarks_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("trl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = embedded_settings(tmp_path, model_dir, benchmarks_dir)
    out = asyncio.run(_run(settings, model_dir, tmp_path / "trl"))

    assert out["step"] == STEPS
    assert [e["step"] for e in out["log"] if "loss" in e] == list(range(1, STEPS + 1))
    assert out["refused"] == []
    calls = out["calls"]
    assert len(calls) == STEPS  # one generation batch per optimizer step
    verdicts = []
    for scores, reports in calls:
        assert len(scores) == PROMPTS_PER_BATCH * G
        given = [v for r in reports for v in r.verdicts]
        assert len(given) == len(scores)  # every completion reported (G attempts leased per task)
        # The reward TRL saw for each completion is its verdict (as a multiset: reports go lease by lease).
        assert sorted(-1.0 if s is None else s for s in scores) == sorted(
            -1.0 if v.score is None else v.score for v in given)
        verdicts += given
    stored = _stored(settings.database.url, [v.rollout_id for v in verdicts])
    assert len(stored) == len(verdicts) == STEPS * PROMPTS_PER_BATCH * G
    for v in verdicts:
        assert stored[v.rollout_id] == ("client_reply", v.score)
    # TRL's own log of the reward agrees with what the service said.
    for (scores, _), entry in zip(calls, [e for e in out["log"] if "loss" in e], strict=True):
        valid = [s for s in scores if s is not None]
        if valid:
            assert math.isclose(entry["rewards/genenv_verdict/mean"], sum(valid) / len(valid), abs_tol=1e-6)
    # One batch more than trained on was leased: accelerate reads a batch ahead (it expires unanswered).
    assert out["leased"] == (STEPS + 1) * PROMPTS_PER_BATCH
    assert out["status"] == "cancelled"
