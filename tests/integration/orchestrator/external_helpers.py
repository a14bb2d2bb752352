"""What the external_agent run tests share: an embedded stack's settings (SQLite, eager queue, the real SmolLM2 on
the local backend) and the base of their run configs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv.settings import GenEnvSettings


def embedded_settings(tmp_path: Path, model_dir: Path, benchmarks_dir: Path) -> GenEnvSettings:
    return GenEnvSettings.model_validate({
        "database": {"url": f"sqlite:///{tmp_path / 'genenv.db'}"},
        "queue": {"eager": True},
        "orchestrator": {"poll_interval_s": 0.2},
        "paths": {"home": tmp_path, "adapter_store": tmp_path / "adapters", "model_cache": model_dir.parent,
                  "benchmarks": benchmarks_dir},
        "inference": {"backend": "local", "base_model": model_dir.name},
    })


def external_config(rollouts_per_task: int, **overrides: Any) -> dict[str, Any]:
    """A 2-epoch arithmetic external_agent run with tiny batches; ``overrides`` replace top-level fields."""
    return {
        "mode": "external_agent",
        "domain": "arithmetic",
        "epochs": 2,
        "seeds_per_epoch": 2,
        "variations_per_seed": 2,
        "rollouts_per_task": rollouts_per_task,
        "max_task_tokens": 64,
        "simulator": {"batch_size": 4, "micro_batch_size": 4},
        **overrides,
    }


async def no_enqueue(_run_id: str) -> None:
    """An enqueuer for a second control plane on the same database: the test's own driver advances the run."""
    return None
