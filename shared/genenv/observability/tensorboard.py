"""TensorBoard event files with the scalars of each epoch summary (optional; ``paths.tensorboard_dir``).

Layout: ``<log_dir>/<run id>/`` is one TensorBoard run, so ``tensorboard --logdir <log_dir>`` overlays runs
(e.g. genenv against a baseline) under the same tags. Each epoch is one event file with a fixed name, written to a
temporary file and renamed over the old one: re-writing an epoch after a crash replaces it instead of adding a
duplicate point, and a crash mid-write leaves no half-written event file behind.

The writer is the tensorboard package's own record writer. torch's ``SummaryWriter`` wraps the same writer (and
needs the tensorboard package too); using it directly avoids importing torch in the orchestrator and lets the
file name be chosen per epoch.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from genenv.contracts.epochs import EpochSummary

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
# Summary fields written as-is: field → tag.
_FIELDS = {
    "p_hat": "curriculum/p_hat",
    "in_band_share": "curriculum/in_band_share",
    "mean_response_tokens": "length/agent_response_tokens",
    "mean_task_tokens": "length/task_prompt_tokens",
    "tasks_valid": "generations/valid",
    "tasks_rejected": "generations/rejected",
    "tasks_solved": "tasks/solved",
    "tasks_unsolved": "tasks/unsolved",
    "rollouts": "rollouts/count",
    "rollout_errors": "rollouts/errors",
    "verifier_errors": "rollouts/verifier_errors",
    "agent_adapter_version": "adapters/agent_version",
    "simulator_adapter_version": "adapters/simulator_version",
}


def _numbers(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
    """Finite numeric leaves of nested dicts as ``prefix/key/...`` (booleans and text skipped)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _numbers(f"{prefix}/{key}", item)
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        yield prefix, float(value)


def epoch_scalars(summary: EpochSummary) -> dict[str, float]:
    """Tag → value of every number in an epoch summary (unset fields are left out)."""
    scalars = {tag: float(v) for field, tag in _FIELDS.items() if (v := getattr(summary, field)) is not None}
    scalars.update(_numbers("benchmark", summary.benchmark_scores))
    scalars.update(_numbers("phase_seconds", summary.phase_seconds))
    if summary.phase_seconds:
        scalars["phase_seconds/total"] = float(sum(summary.phase_seconds.values()))
    scalars.update(_numbers("train", summary.train_metrics))
    return scalars


def event_file(log_dir: Path, run_id: str, epoch: int) -> Path:
    """The event file of one epoch; the zero-padded epoch keeps TensorBoard's name order equal to step order."""
    if not _SAFE_SEGMENT.match(run_id) or run_id in {".", ".."}:
        raise ValueError(f"run id {run_id!r} cannot name a TensorBoard run directory")
    if epoch < 0:
        raise ValueError(f"epoch must be ≥ 0, got {epoch}")
    return log_dir / run_id / f"events.out.tfevents.{epoch:010d}.genenv-epoch"


def write_epoch_scalars(log_dir: Path, run_id: str, epoch: int, summary: EpochSummary) -> None:
    """Write (or replace) the TensorBoard scalars of epoch ``epoch`` of run ``run_id``; step = epoch."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    target = event_file(log_dir, run_id, epoch)
    target.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    values = [Summary.Value(tag=tag, simple_value=v) for tag, v in sorted(epoch_scalars(summary).items())]
    # Not named *tfevents*: TensorBoard never reads a half-written temporary file.
    tmp = target.with_name(f".epoch-{epoch:010d}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            writer = RecordWriter(fh)
            writer.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
            writer.write(Event(wall_time=now, step=epoch, summary=Summary(value=values)).SerializeToString())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
