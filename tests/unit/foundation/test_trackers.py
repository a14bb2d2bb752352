"""Each closed epoch's metrics in MLflow (a local sqlite store) and W&B (offline run folders), read back.

The orchestrator's hook (``_export_epoch``) is driven with the settings a user sets; MLflow is read back through
its own client, W&B's offline ``.wandb`` files through a small reader of their record format (W&B ships none).
"""

from __future__ import annotations

import json
import logging
import struct
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from genenv.contracts.epochs import EpochSummary
from genenv.observability.tensorboard import epoch_scalars
from genenv.observability.trackers import RUN_TAG, log_epoch_mlflow, log_epoch_wandb
from genenv.settings import GenEnvSettings
from genenv_orchestrator.context import OrchestratorContext
from genenv_orchestrator.loop import _export_epoch

RUN = "3f2a9c0d1e4b4c5d8e7f6a5b4c3d2e1f"


def _summary(epoch: int) -> EpochSummary:
    return EpochSummary(
        p_hat=0.25 + 0.1 * epoch,
        in_band_share=0.5,
        tasks_valid=30 - epoch,
        tasks_rejected=2,
        rollouts=240,
        agent_adapter_version=epoch + 1,
        benchmark_scores={"bfcl": 0.25},
        phase_seconds={"generate": 10.0, "train": 90.5},
        train_metrics={"agent": {"loss": 0.7 - 0.1 * epoch, "steps": 2}},
    )


def _ctx(tmp_path: Path, **observability: Any) -> OrchestratorContext:
    settings = GenEnvSettings.model_validate({"paths": {"home": tmp_path}, "observability": observability})
    return cast(OrchestratorContext, SimpleNamespace(settings=settings))


def test_trackers_are_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    obs = GenEnvSettings().observability
    assert obs.mlflow_tracking_uri is None and obs.wandb_project is None and obs.wandb_mode == "offline"
    monkeypatch.setenv("GENENV_OBSERVABILITY__WANDB_PROJECT", "mine")
    monkeypatch.setenv("GENENV_OBSERVABILITY__MLFLOW_TRACKING_URI", "sqlite:////tmp/x.db")
    obs = GenEnvSettings().observability
    assert (obs.wandb_project, obs.mlflow_tracking_uri) == ("mine", "sqlite:////tmp/x.db")


# ---------------------------------------------------------------- MLflow

needs_mlflow = pytest.mark.skipif(find_spec("mlflow") is None, reason="mlflow-skinny: the `mlflow` extra (and `dev`)")
needs_wandb = pytest.mark.skipif(find_spec("wandb") is None, reason="wandb: the `wandb` extra (and `dev`)")


@needs_mlflow
def test_epochs_land_in_an_mlflow_store_with_the_tensorboard_keys_and_epoch_steps(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ctx = _ctx(tmp_path, mlflow_tracking_uri=uri, mlflow_experiment="exp-a")
    for epoch in (0, 1, 2):
        _export_epoch(ctx, RUN, epoch, "arith-1", _summary(epoch))
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("exp-a")
    (run,) = client.search_runs([experiment.experiment_id])  # one MLflow run per GenEnv run, found again each epoch
    assert run.info.run_name == "arith-1" and run.data.tags[RUN_TAG] == RUN
    expected = epoch_scalars(_summary(0))
    assert set(run.data.metrics) == set(expected)
    history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "curriculum/p_hat")}
    assert history == pytest.approx({0: 0.25, 1: 0.35, 2: 0.45})
    loss = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/agent/loss")}
    assert loss == pytest.approx({0: 0.7, 1: 0.6, 2: 0.5})
    # A second GenEnv run is a second MLflow run.
    log_epoch_mlflow(uri, "exp-a", "0" * 32, "other", 0, _summary(0))
    assert len(client.search_runs([experiment.experiment_id])) == 2


@needs_mlflow
def test_a_failing_tracker_is_a_warning_not_a_failed_epoch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ctx = _ctx(tmp_path, mlflow_tracking_uri="nosuchscheme://nowhere")
    with caplog.at_level(logging.WARNING, logger="genenv_orchestrator.loop"):
        _export_epoch(ctx, RUN, 0, "arith-1", _summary(0))
    assert f"run {RUN} epoch 0: logging to MLflow at nosuchscheme://nowhere failed" in caplog.text


@needs_mlflow
def test_run_ids_that_cannot_name_a_tracker_run_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot name a tracker run"):
        log_epoch_mlflow(f"sqlite:///{tmp_path / 'm.db'}", "e", "x' OR '1'='1", "n", 0, _summary(0))


# ---------------------------------------------------------------- Weights & Biases

_BLOCK = 32768  # the .wandb file: a LevelDB-style log of protobuf Records in 32 KiB blocks after a 7-byte header
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _wandb_records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a record header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        buf = chunk if kind in (_FULL, _FIRST) else buf + chunk
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buf)
            yield record
            buf = b""


def _wandb_flushed(root: Path, timeout_s: float = 20.0) -> list[Path]:
    """The run files under ``root`` once each holds its exit record: ``run.finish()`` can return before W&B's
    service process has flushed the file (seen with wandb 0.31: 7 bytes, the header only, for a fraction of a
    second), so a reader waits for the writer, as ``wandb sync`` would run later."""
    deadline = time.monotonic() + timeout_s
    while True:
        paths = sorted(root.rglob("offline-run-*/run-*.wandb"))
        done = [any(r.WhichOneof("record_type") == "exit" for r in _wandb_records(p)) for p in paths]
        if (paths and all(done)) or time.monotonic() > deadline:
            return paths
        time.sleep(0.1)


def _wandb_history(root: Path) -> tuple[set[str], list[dict[str, Any]]]:
    run_ids: set[str] = set()
    rows: list[dict[str, Any]] = []
    for path in _wandb_flushed(root):
        for record in _wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run_ids.add(record.run.run_id)
            elif kind == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
    return run_ids, rows


@needs_wandb
def test_epochs_land_in_offline_wandb_runs_with_the_tensorboard_keys_and_epoch_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_DISABLE_CODE", "true")
    ctx = _ctx(tmp_path, wandb_project="genenv-test", wandb_dir=tmp_path / "tracking")
    for epoch in (0, 1):
        _export_epoch(ctx, RUN, epoch, "arith-1", _summary(epoch))
    run_ids, rows = _wandb_history(tmp_path / "tracking" / "wandb")
    assert run_ids == {RUN}  # every epoch resumes the one W&B run whose id is the GenEnv run id
    assert [row["_step"] for row in rows] == [0, 1]
    for epoch, row in enumerate(rows):
        expected = epoch_scalars(_summary(epoch))
        assert {k: v for k, v in row.items() if not k.startswith("_")} == pytest.approx(expected)


@needs_wandb
def test_wandb_defaults_to_offline_under_the_genenv_home(tmp_path: Path) -> None:
    _export_epoch(_ctx(tmp_path, wandb_project="genenv-test"), RUN, 3, "arith-1", _summary(3))
    _, rows = _wandb_history(tmp_path / "wandb")
    assert [row["_step"] for row in rows] == [3]
    folder = log_epoch_wandb("genenv-test", "offline", tmp_path / "b", RUN, "arith-1", 4, _summary(4))
    assert folder is not None and folder.parent == tmp_path / "b" / "wandb" and folder.name.startswith("offline-run-")
