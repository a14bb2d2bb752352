"""Each closed epoch's metrics in MLflow and Weights & Biases, through each library's own API (optional).

The metrics are the TensorBoard scalars (``epoch_scalars``: the same tags, e.g. ``curriculum/p_hat``,
``train/agent/loss``), step = epoch. One tracker run per GenEnv run: MLflow finds its run by the tag
``genenv.run_id``; W&B uses the GenEnv run id as its run id and resumes it each epoch. Both libraries are imported
only when their setting is on (the ``mlflow`` / ``wandb`` extras).

Offline use: MLflow logs to whatever tracking URI is set; ``sqlite:///FILE`` is a local store with no server
(MLflow 3 refuses its older file store by default). W&B's ``offline`` mode writes ``<dir>/wandb/offline-run-*``
folders and needs neither network nor account; ``wandb sync`` uploads them later.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Literal

from genenv.contracts.epochs import EpochSummary
from genenv.observability.tensorboard import epoch_scalars

RUN_TAG = "genenv.run_id"
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _checked(run_id: str) -> str:
    # Run ids are uuid hex (the runs repository); anything else would need quoting in MLflow's filter and W&B ids.
    if not _RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r} cannot name a tracker run")
    return run_id


def log_epoch_mlflow(
    tracking_uri: str, experiment: str, run_id: str, run_name: str, epoch: int, summary: EpochSummary
) -> str:
    """Log epoch ``epoch``'s metrics to the MLflow run of GenEnv run ``run_id`` (created on first use); its id."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    _checked(run_id)
    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{run_id}'", max_results=1)
    mlflow_run = runs[0] if runs else client.create_run(experiment_id, run_name=run_name, tags={RUN_TAG: run_id})
    now_ms = int(time.time() * 1000)
    metrics = [Metric(key, value, now_ms, epoch) for key, value in sorted(epoch_scalars(summary).items())]
    client.log_batch(mlflow_run.info.run_id, metrics=metrics)
    return str(mlflow_run.info.run_id)


def log_epoch_wandb(
    project: str,
    mode: Literal["offline", "online"],
    directory: Path,
    run_id: str,
    run_name: str,
    epoch: int,
    summary: EpochSummary,
) -> Path | None:
    """Log epoch ``epoch``'s metrics to the W&B run ``run_id`` of ``project``; the offline run folder, if any."""
    import wandb

    _checked(run_id)
    directory.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True, disable_code=True)
    run = wandb.init(
        project=project, id=run_id, name=run_name, mode=mode, dir=str(directory), resume="allow", settings=settings
    )
    try:
        run.log(epoch_scalars(summary), step=epoch)
    finally:
        run.finish()
    return Path(run.dir).parent if mode == "offline" else None
