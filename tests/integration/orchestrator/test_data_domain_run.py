"""A data-defined function-calling domain, from a small toolset written for this test (not BFCL), registered through
the control plane and run for two epochs in the embedded stack on the real SmolLM2 model: every count exact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from genenv.contracts.domains import DomainCreate
from genenv.contracts.runs import RunConfig
from genenv.db.models import EvaluationRow, RolloutRow, SeedRow, TaskRow, VerdictRow
from genenv.settings import GenEnvSettings
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack
from tests.conftest import embedded_settings_on

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

ROOM = {"type": "function", "function": {
    "name": "book_room", "description": "Book a meeting room for a number of hours",
    "parameters": {"type": "object", "properties": {
        "room": {"type": "string", "enum": ["orion", "vega", "lyra"]},
        "hours": {"type": "integer", "minimum": 1, "maximum": 8}}, "required": ["room", "hours"]}}}
INVITE = {"type": "function", "function": {
    "name": "send_invite", "description": "Invite a colleague by email",
    "parameters": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}}}


def _row(text: str, calls: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **extra: Any) -> str:
    return json.dumps({"tools": tools or [ROOM], "messages": [{"role": "user", "content": text}], "calls": calls,
                       **extra})


SEED_FILE = "\n".join([
    _row("Book orion for 2 hours", [{"name": "book_room", "arguments": {"room": "orion", "hours": 2}}], split="train"),
    _row("Reserve vega for 3 hours", [{"name": "book_room", "arguments": {"room": "vega", "hours": 3}}],
         split="train"),
    _row("Invite ana@example.com", [{"name": "send_invite", "arguments": {"email": "ana@example.com"}}],
         tools=[ROOM, INVITE], split="train"),
    _row("What is the capital of France?", [], split="train"),
    _row("Book lyra for 1 hour", [{"name": "book_room", "arguments": {"room": "lyra", "hours": 1}}], split="eval"),
]) + "\n"

EPOCHS, SEEDS, VARIATIONS, G = 2, 2, 2, 4


async def _run(settings: GenEnvSettings) -> dict[str, Any]:
    async with embedded_stack(settings) as stack:
        info = await stack.control_plane.create_domain(
            DomainCreate(name="meeting_tools", kind="function_calling", content=SEED_FILE))
        config = RunConfig.model_validate({
            "domain": "meeting_tools", "mode": "genenv", "epochs": EPOCHS, "seeds_per_epoch": SEEDS,
            "variations_per_seed": VARIATIONS, "rollouts_per_task": G, "max_response_tokens": 32,
            "max_task_tokens": 160, "curriculum": {"k_min": 0.5},
            # held-out evaluation on the seed file's eval rows, every epoch
            "eval_every": 1, "eval_benchmarks": ["domain:meeting_tools"],
            "agent": {"batch_size": 8, "micro_batch_size": 8, "max_steps_per_epoch": 1},
            "simulator": {"batch_size": 4, "micro_batch_size": 4, "max_steps_per_epoch": 1},
        })
        run = await stack.control_plane.create_run(config)
        await stack.control_plane.act(run.id, "start")
        status = await drive(stack.context, run.id)
        final = await stack.control_plane.get_run(run.id)
        epochs = (await stack.control_plane.list_epochs(run.id)).items
        with stack.sessions() as s:
            tasks = [(t.epoch, t.seed_id, t.status, t.domain, dict(t.payload or {}), t.rejection_reason)
                     for t in s.scalars(select(TaskRow).where(TaskRow.run_id == run.id))]
            seeds = [(r.epoch, r.seed_id) for r in s.scalars(select(SeedRow).where(SeedRow.run_id == run.id))]
            rollouts = s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(TaskRow.run_id == run.id))
            verdicts = list(s.scalars(select(VerdictRow).join(RolloutRow).join(TaskRow)
                                      .where(TaskRow.run_id == run.id)))
            valid_verdicts = sum(1 for v in verdicts if v.valid)
            evaluations = [(e.epoch, e.benchmark, e.split, e.n_items, dict(e.metrics)) for e in s.scalars(
                select(EvaluationRow).where(EvaluationRow.run_id == run.id).order_by(EvaluationRow.epoch))]
    return {"info": info, "status": status, "error": final.error, "epochs": epochs, "tasks": tasks,
            "seeds": seeds, "rollouts": rollouts, "verdicts": len(verdicts), "valid_verdicts": valid_verdicts,
            "evaluations": evaluations}


def test_data_defined_function_calling_domain_runs_two_epochs(tmp_path: Path, model_dir: Path, vllm_url: str) -> None:
    out = asyncio.run(_run(embedded_settings_on(tmp_path, model_dir, vllm_url)))
    assert (out["info"].train_rows, out["info"].eval_rows) == (4, 1)
    assert out["status"] == "completed", out["error"]
    assert [e.index for e in out["epochs"]] == [0, 1]
    assert all(e.phase.value == "closed" for e in out["epochs"])
    # seeds come from the train rows only; the eval row is never a seed
    assert len(out["seeds"]) == EPOCHS * SEEDS
    assert {sid for _, sid in out["seeds"]} <= {"meeting_tools-1", "meeting_tools-2", "meeting_tools-3",
                                                 "meeting_tools-4"}
    tasks = out["tasks"]
    assert len(tasks) == EPOCHS * SEEDS * VARIATIONS  # one row per variation, valid or rejected with its reason
    valid = [t for t in tasks if t[2] == "valid"]
    assert all(t[3] == "meeting_tools" for t in tasks)
    assert all(t[4]["data_kind"] == "function_calling" and t[4]["functions"] for t in valid)
    assert all(t[5] for t in tasks if t[2] == "rejected")
    assert out["rollouts"] == len(valid) * G
    assert out["verdicts"] == out["rollouts"]
    assert out["valid_verdicts"] == out["verdicts"]  # scored by the BFCL checker through the payload's kind
    assert sum(e.summary.rollouts for e in out["epochs"]) == out["rollouts"]
    # each epoch evaluated the agent on the one eval row, with the domain's prompt and checker
    assert [(e, b, sp, n) for e, b, sp, n, _ in out["evaluations"]] == [
        (0, "domain:meeting_tools", "eval", 1), (1, "domain:meeting_tools", "eval", 1)]
    for *_, metrics in out["evaluations"]:
        overall = metrics["overall"]
        assert overall["n"] == 1 and overall["invalid"] == 0 and overall["accuracy"] in (0.0, 1.0)
