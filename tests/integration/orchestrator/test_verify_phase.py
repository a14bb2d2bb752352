"""The VERIFY phase applies METHOD.md's rule end to end (embedded stack, SQLite): a reply that does not parse is a
wrong answer that counts in p̂; a failed inference request stays an invalid verdict left out of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select

from genenv.contracts.runs import RunConfig
from genenv.db.engine import session_scope
from genenv.db.models import RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import ledger
from genenv.domains import get_domain
from genenv.settings import GenEnvSettings
from genenv_orchestrator.phases import RunView, verify
from genenv_orchestrator.runtime import embedded_stack


def test_prose_scores_zero_and_counts_while_a_failed_request_stays_invalid(
    tmp_path: Path, model_dir: Path, benchmarks_dir: Path
) -> None:
    settings = GenEnvSettings.model_validate({
        "database": {"url": f"sqlite:///{tmp_path / 'genenv.db'}"},
        "queue": {"eager": True},
        "paths": {"home": tmp_path, "adapter_store": tmp_path / "adapters", "model_cache": model_dir.parent,
                  "benchmarks": benchmarks_dir},
        "inference": {"backend": "local", "base_model": model_dir.name},
    })

    async def scenario() -> tuple[dict[str, tuple[bool, float | None, str | None]], float | None]:
        async with embedded_stack(settings) as stack:
            config = RunConfig()
            run = await stack.control_plane.create_run(config)
            domain = get_domain("arithmetic")
            payload = domain.validate_generation({"expression": "3 + 4"}, None)
            replies = {"right": ("3 + 4 = 7", None), "prose": ("I would rather not say.", None),
                       "failed": (None, "InferenceError: connection refused")}
            with session_scope(stack.sessions) as s:
                task = TaskRow(run_id=run.id, epoch=0, seed_id="s", domain="arithmetic", variation=0,
                               status="valid", payload=payload, raw_text="{}", prompt_messages=[])
                s.add(task)
                s.flush()
                for attempt, (response, error) in enumerate(replies.values()):
                    s.add(RolloutRow(task_id=task.id, attempt=attempt, response=response, error=error,
                                     prompt_messages=domain.agent_messages(payload)))
            await verify(stack.context, RunView(run.id, config), 0)
            with session_scope(stack.sessions) as s:
                rows = s.execute(select(RolloutRow.attempt, VerdictRow.valid, VerdictRow.score, VerdictRow.error_kind)
                                 .join(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
                                 .order_by(RolloutRow.attempt)).all()
                (entry,) = ledger.task_ledger(s, run.id, epoch=0)
            return {name: (r.valid, r.score, r.error_kind) for name, r in zip(replies, rows, strict=True)}, entry.p_hat

    verdicts, p_hat = asyncio.run(scenario())
    assert verdicts["right"] == (True, 1.0, None)
    assert verdicts["prose"] == (True, 0.0, "parse_error")  # a wrong answer, with its reason
    assert verdicts["failed"] == (False, None, "rollout_error")  # not the agent's fault
    assert p_hat == 0.5  # 1 right of the 2 scored attempts: the prose counts, the failed request does not
