"""TensorBoard event files of epoch summaries: read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from genenv.contracts.epochs import EpochSummary
from genenv.observability.tensorboard import epoch_scalars, event_file, write_epoch_scalars
from genenv.settings import GenEnvSettings

pytest.importorskip("tensorboard", reason="tensorboard comes with the `bench` extra")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

RUN = "3f2a9c0d1e4b4c5d8e7f6a5b4c3d2e1f"


def _summary(epoch: int, p_hat: float) -> EpochSummary:
    return EpochSummary(
        p_hat=p_hat,
        in_band_share=0.5,
        mean_task_tokens=80.0 + epoch,
        mean_response_tokens=None,  # unset: no tag
        tasks_valid=30,
        tasks_rejected=2,
        tasks_solved=4,
        tasks_unsolved=9,
        rollouts=240,
        agent_adapter_version=epoch + 1,
        benchmark_scores={"bfcl": 0.25},
        phase_seconds={"generate": 10.0, "train": 90.5},
        train_metrics={"agent": {"loss": 0.7, "steps": 2, "early_stop": True, "note": "x"}},
    )


def _read(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_scalars_of_a_summary() -> None:
    scalars = epoch_scalars(_summary(2, 0.4))
    assert scalars["curriculum/p_hat"] == 0.4 and scalars["length/task_prompt_tokens"] == 82.0
    assert scalars["benchmark/bfcl"] == 0.25 and scalars["phase_seconds/total"] == 100.5
    assert scalars["train/agent/loss"] == 0.7 and scalars["train/agent/steps"] == 2.0
    assert "length/agent_response_tokens" not in scalars and "adapters/simulator_version" not in scalars
    assert not [t for t in scalars if "early_stop" in t or "note" in t]


def test_event_files_hold_the_scalars_per_epoch_and_rewrites_replace(tmp_path: Path) -> None:
    for epoch in range(3):
        write_epoch_scalars(tmp_path, RUN, epoch, _summary(epoch, 0.1 * (epoch + 1)))
    # A crash after epoch 1's CLOSE wrote its file: CLOSE runs again with the recomputed summary.
    write_epoch_scalars(tmp_path, RUN, 1, _summary(1, 0.55))
    # A crash mid-write leaves only a temporary file, which TensorBoard does not read.
    (tmp_path / RUN / ".epoch-0000000003.999.tmp").write_bytes(b"\x00garbage")

    scalars = _read(tmp_path / RUN)
    expected = set(epoch_scalars(_summary(0, 0.1)))
    assert set(scalars) == expected
    assert [s for s, _ in scalars["curriculum/p_hat"]] == [0, 1, 2]
    assert [v for _, v in scalars["curriculum/p_hat"]] == [pytest.approx(0.1), pytest.approx(0.55), pytest.approx(0.3)]
    assert scalars["adapters/agent_version"] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    assert scalars["phase_seconds/train"] == [(0, 90.5), (1, 90.5), (2, 90.5)]
    assert sorted(p.name for p in (tmp_path / RUN).glob("*tfevents*")) == [
        event_file(tmp_path, RUN, e).name for e in range(3)
    ]


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "", ".."])
def test_run_ids_that_are_not_one_directory_are_refused(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ValueError, match="cannot name a TensorBoard run directory"):
        write_epoch_scalars(tmp_path, run_id, 0, _summary(0, 0.5))
    assert list(tmp_path.iterdir()) == []


def test_tensorboard_dir_setting_is_off_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert GenEnvSettings().paths.tensorboard_dir is None
    monkeypatch.setenv("GENENV_PATHS__TENSORBOARD_DIR", str(tmp_path))
    assert GenEnvSettings().paths.tensorboard_dir == tmp_path
