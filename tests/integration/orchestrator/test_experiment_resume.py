"""`genenv experiment resume`: an embedded experiment stopped mid-epoch (here: an exception out of the progress
callback as TRAIN of the first member's second epoch starts, as Ctrl-C or a killed process leaves it) goes on from
its stored phase on the real model, and every count is what an uninterrupted experiment stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from genenv.cli.experiments import _drive_members
from genenv.contracts.epochs import EpochPhase
from genenv.contracts.experiments import ExperimentCreate, ExperimentStatus
from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import EpochRow, RolloutRow, TaskRow, TrainJobRow
from genenv_orchestrator.driver import drive
from genenv_orchestrator.runtime import embedded_stack
from tests.conftest import embedded_settings_on

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

EPOCHS, SEEDS, VARIATIONS, G = 2, 2, 2, 4
BODY: dict[str, Any] = {
    "name": "resumed-experiment",
    "modes": ["genenv", "random_simulator"],
    "replicates": 1,
    "template": {
        "domain": "arithmetic", "epochs": EPOCHS, "seeds_per_epoch": SEEDS, "variations_per_seed": VARIATIONS,
        "rollouts_per_task": G, "max_response_tokens": 12, "max_task_tokens": 64, "eval_every": 0,
        "curriculum": {"k_min": 0.5},  # every batch in band: the genenv member's simulator trains
        "agent": {"batch_size": 8, "micro_batch_size": 8, "max_steps_per_epoch": 1},
        "simulator": {"batch_size": 4, "micro_batch_size": 4, "max_steps_per_epoch": 1},
    },
}


class Stopped(Exception):
    """What the interrupted process died of."""


async def test_a_stopped_experiment_resumes_from_its_stored_phase(tmp_path: Path, model_dir: Path,
                                                                  vllm_url: str) -> None:
    settings = embedded_settings_on(tmp_path, model_dir, vllm_url)

    def stop(run_id: str, epoch: int, phase: EpochPhase, event: str) -> None:
        if (epoch, phase, event) == (1, EpochPhase.TRAIN, "start"):
            raise Stopped

    async with embedded_stack(settings) as stack:
        cp = stack.control_plane
        experiment = await cp.create_experiment(ExperimentCreate.model_validate_json(json.dumps(BODY)))
        experiment = await cp.act_experiment(experiment.id, "start")
        first = experiment.members[0].run_id
        with pytest.raises(Stopped):
            await drive(stack.context, first, stop)
        stopped = await cp.get_experiment(experiment.id)
    assert [(m.status, m.current_epoch) for m in stopped.members] == [(RunStatus.RUNNING, 1),
                                                                      (RunStatus.CREATED, 0)]

    experiment, series = await _drive_members(settings, experiment_id=experiment.id)
    assert experiment.status is ExperimentStatus.COMPLETED, [m.error for m in experiment.members]
    assert [m.status for m in experiment.members] == [RunStatus.COMPLETED] * 2
    assert [len(m.epochs) for m in series.members] == [EPOCHS] * 2
    with session_scope(make_session_factory(make_engine(settings.database))) as s:
        for m in experiment.members:
            epochs = list(s.scalars(select(EpochRow).where(EpochRow.run_id == m.run_id)))
            assert sorted(e.index for e in epochs) == list(range(EPOCHS))
            assert {e.phase for e in epochs} == {EpochPhase.CLOSED.value}
            tasks = s.scalar(select(func.count(TaskRow.id)).where(TaskRow.run_id == m.run_id))
            assert tasks == EPOCHS * SEEDS * VARIATIONS  # nothing generated twice for the resumed epoch
            valid = s.scalar(select(func.count(TaskRow.id)).where(TaskRow.run_id == m.run_id,
                                                                  TaskRow.status == "valid"))
            rollouts = s.scalar(select(func.count(RolloutRow.id)).join(TaskRow).where(TaskRow.run_id == m.run_id))
            assert rollouts == (valid or 0) * G
            jobs = list(s.scalars(select(TrainJobRow).where(TrainJobRow.run_id == m.run_id)))
            assert len(jobs) == len({(j.epoch, j.kind) for j in jobs})  # one job per (epoch, kind), done once
            assert {j.status for j in jobs} <= {"done", "skipped"}
