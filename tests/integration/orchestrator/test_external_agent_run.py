"""A whole external_agent run in the embedded stack (issue 33): the real simulator (SmolLM2, local backend, as the
other run-mode tests) writes each epoch's tasks, this test plays the outside agent over the control plane's
leases and attempts endpoints, and the orchestrator scores, trains the simulator by RWR and closes the epochs.

Epoch 0 is attempted in full and closes as soon as every task has its attempts; epoch 1 leaves one task unattempted
and closes at external.epoch_deadline_s, with the task counted in the summary. Every report is sent twice with
its Idempotency-Key (a client's retry), and a report on epoch 0's lease during epoch 1 is refused (409)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from genenv.clients.base import ApiError
from genenv.contracts.leases import AttemptIn, AttemptsRecorded, AttemptsReport, Lease, LeaseRequest
from genenv.contracts.runs import RunConfig
from genenv.db.models import RolloutRow, TaskRow, TrainJobRow, VerdictRow
from genenv.settings import GenEnvSettings
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import EmbeddedStack, embedded_stack
from tests.integration.orchestrator.external_helpers import embedded_settings, external_config

pytestmark = [pytest.mark.slow]

G = 4
DEADLINE_S = 10.0
CONFIG: dict[str, Any] = external_config(
    G,
    # Every scored batch in band (the agent below succeeds at half its attempts), so the simulator trains each epoch.
    curriculum={"k_min": 0.5},
    external={"epoch_deadline_s": DEADLINE_S, "min_attempted_share": 0.5},
)


class OutsideAgent:
    """Leases the current epoch's tasks and answers half of each task's attempts right (it reads the answers from
    the database: a stand-in for an agent at p = ½). In epoch 1 it never answers the task with the highest id."""

    def __init__(self, stack: EmbeddedStack, run_id: str) -> None:
        self.stack, self.run_id = stack, run_id
        self.sent: dict[int, int] = {}  # attempts recorded per epoch
        self.skipped: int | None = None
        self.first_lease: str | None = None
        self.closed_epoch_error: ApiError | None = None

    def _answers(self, epoch: int) -> dict[int, int]:
        with self.stack.sessions() as s:
            rows = s.execute(select(TaskRow.id, TaskRow.payload).where(
                TaskRow.run_id == self.run_id, TaskRow.epoch == epoch, TaskRow.status == "valid"))
            return {int(t): int((p or {})["answer"]) for t, p in rows}

    async def _post(self, report: AttemptsReport, key: str) -> AttemptsRecorded:
        cp = self.stack.control_plane
        path = f"/v1/runs/{self.run_id}/attempts"
        # ServiceClient.request sends no custom header; its httpx client does.
        headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
        first = await cp._http.post(path, content=report.model_dump_json(), headers=headers)
        again = await cp._http.post(path, content=report.model_dump_json(), headers=headers)
        assert first.status_code == 200, first.text
        assert again.json() == first.json()
        return AttemptsRecorded.model_validate(first.json())

    async def play(self) -> None:
        cp = self.stack.control_plane
        n = 0
        while True:
            try:
                lease = await cp.request("POST", f"/v1/runs/{self.run_id}/leases", Lease,
                                         body=LeaseRequest(limit=64, lease_s=120))
            except ApiError as exc:  # the run completed: 409 run_not_running
                assert exc.status_code == 409 and exc.error.code == "run_not_running", exc
                return
            if not lease.items:
                await asyncio.sleep(lease.retry_after_s or 0.2)
                continue
            assert lease.lease_id is not None
            if lease.epoch == 0 and self.first_lease is None:
                self.first_lease = lease.lease_id
            if lease.epoch == 1 and self.closed_epoch_error is None and self.first_lease is not None:
                try:
                    await cp.request("POST", f"/v1/runs/{self.run_id}/attempts", AttemptsRecorded,
                                     body=AttemptsReport(lease_id=self.first_lease,
                                                         attempts=[AttemptIn(task_id=1, reply="0")]))
                except ApiError as exc:
                    self.closed_epoch_error = exc
            answers = self._answers(lease.epoch)
            if lease.epoch == 1 and len(answers) >= 2:
                self.skipped = max(answers)
            attempts = [AttemptIn(task_id=item.task_id, reply=str(answers[item.task_id]) if a % 2 == 0 else "-1")
                        for item in lease.items if item.task_id != self.skipped for a in range(item.attempts)]
            if attempts:
                n += 1
                recorded = await self._post(AttemptsReport(lease_id=lease.lease_id, attempts=attempts), f"r{n}")
                self.sent[lease.epoch] = self.sent.get(lease.epoch, 0) + recorded.recorded


async def _run(settings: GenEnvSettings) -> dict[str, Any]:
    async with embedded_stack(settings) as stack:
        run = await stack.control_plane.create_run(RunConfig.model_validate(CONFIG))
        await stack.control_plane.act(run.id, "start")
        agent = OutsideAgent(stack, run.id)
        playing = asyncio.create_task(agent.play())
        status = await drive(stack.context, run.id)
        await asyncio.wait_for(playing, timeout=60)
        epochs = (await stack.control_plane.list_epochs(run.id)).items
        final = await stack.control_plane.get_run(run.id)
        with stack.sessions() as s:
            rollouts = s.execute(select(TaskRow.epoch, RolloutRow.origin, VerdictRow.valid)
                                 .join(RolloutRow, RolloutRow.task_id == TaskRow.id)
                                 .outerjoin(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
                                 .where(TaskRow.run_id == run.id)).all()
            jobs = {(j.kind, j.epoch): j.status
                    for j in s.scalars(select(TrainJobRow).where(TrainJobRow.run_id == run.id))}
    return {"status": status, "error": final.error, "epochs": epochs, "rollouts": rollouts, "jobs": jobs,
            "agent": agent}


def test_an_outside_agent_drives_two_epochs_to_completion(tmp_path: Path, model_dir: Path,
                                                          benchmarks_dir: Path) -> None:
    out = asyncio.run(_run(embedded_settings(tmp_path, model_dir, benchmarks_dir)))
    assert out["status"] == "completed", out["error"]
    agent: OutsideAgent = out["agent"]
    epochs = out["epochs"]
    assert [e.phase.value for e in epochs] == ["closed", "closed"]
    first, second = (e.summary for e in epochs)
    # Epoch 0: every valid task attempted G times; the retried reports recorded nothing twice.
    assert first.tasks_unattempted == 0 and first.rollouts == first.tasks_valid * G == agent.sent[0]
    assert first.p_hat == 0.5 and first.in_band_share == 1.0
    # Epoch 1: one task left out, the epoch closed at its deadline, scored on the others.
    if first.tasks_valid and second.tasks_valid >= 2:
        assert second.tasks_unattempted == 1 and second.rollouts == (second.tasks_valid - 1) * G == agent.sent[1]
        assert second.phase_seconds["rollout"] >= DEADLINE_S
    # Stored as rollouts with the checker's verdicts, marked as the client's replies.
    assert {(o, v) for _, o, v in out["rollouts"]} == {("client_reply", True)}
    # The simulator is trained (RWR), the agent never (it is not ours).
    assert not any(kind == "train_agent" for kind, _ in out["jobs"])
    assert {out["jobs"][("train_simulator", e)] for e in (0, 1)} <= {"done", "skipped"}
    # A report on epoch 0's lease during epoch 1: 409.
    err = agent.closed_epoch_error
    assert err is not None and err.status_code == 409 and err.error.code == "epoch_closed"
