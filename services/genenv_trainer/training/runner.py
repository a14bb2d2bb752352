"""One training job's torch part: pick the data, load base + adapter, train, report metrics."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from genenv.contracts.runs import GrpoBudget, RunConfig
from genenv.curriculum.selection import select_agent_batch
from genenv.settings import TrainerSettings
from genenv_trainer.records import Generation, RolloutGroup
from genenv_trainer.training import grpo, rwr
from genenv_trainer.training.loop import StepOptions
from genenv_trainer.training.lora import load_policy, load_tokenizer, resolve_device, resolve_dtype
from genenv_trainer.training.ops import peak_memory
from genenv_trainer.training.optim import adamw

StepCallback = Callable[[int, dict[str, float]], None]


@dataclass
class TrainResult:
    """The trained model (None when there was nothing to train on or no step was taken), its metrics, and the
    optimiser to save with it so that the next version resumes it."""

    model: Any | None
    metrics: dict[str, Any]
    optimizer: torch.optim.Optimizer | None = None


def _setup(trainer: TrainerSettings, seed: int) -> torch.device:
    if trainer.torch_threads:
        torch.set_num_threads(trainer.torch_threads)
    torch.manual_seed(seed)
    return resolve_device(trainer.device)


def train_agent(
    *,
    model_path: Path,
    parent: Path | None,
    config: RunConfig,
    fresh: Sequence[RolloutGroup],
    replay: Sequence[RolloutGroup],
    trainer: TrainerSettings,
    seed: int,
    on_step: StepCallback | None = None,
) -> TrainResult:
    """GRPO on the epoch's groups plus replayed groups of earlier epochs (up to curriculum.replay_ratio)."""
    cfg = config.agent
    # budget = tasks: groups without reward variance take their share of the budget (and give no gradient).
    scored_fresh, counts = grpo.score_groups(fresh, keep_zero_variance=cfg.budget is GrpoBudget.TASKS)
    scored_replay, replay_counts = grpo.score_groups(replay)
    rng = random.Random(seed)
    picked_fresh, picked_replay = select_agent_batch(
        scored_fresh, scored_replay, budget=cfg.batch_size * cfg.max_steps_per_epoch,
        replay_ratio=config.curriculum.replay_ratio, size=lambda g: g.size, rng=rng,
    )
    metrics: dict[str, Any] = {
        **counts,
        # Share of the epoch's groups that carry a GRPO signal (some attempts right, some wrong).
        "groups_with_variance": sum(g.signal for g in scored_fresh),
        "budget": cfg.budget.value,
        "replay_candidates": len(scored_replay),
        "replay_groups_zero_variance": replay_counts["groups_zero_variance"],
        "fresh_groups_used": len(picked_fresh),
        "replay_groups_used": len(picked_replay),
    }
    metrics["fresh_groups_used_with_signal"] = sum(g.signal for g in picked_fresh)
    if not any(g.signal for g in picked_fresh) and not picked_replay:
        return TrainResult(None, {**metrics, "steps": 0, "reason": "no group with reward variance"})
    device = _setup(trainer, seed)
    tokenizer = load_tokenizer(model_path)
    fresh_samples, sample_counts = grpo.to_samples(picked_fresh, tokenizer, cfg.max_seq_len)
    replay_samples, replay_sample_counts = grpo.to_samples(picked_replay, tokenizer, cfg.max_seq_len, replayed=True)
    sample_counts = {k: v + replay_sample_counts[k] for k, v in sample_counts.items()}
    samples = [*fresh_samples, *replay_samples]

    def train(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return grpo.train_grpo(model, samples, cfg, pad_id=tokenizer.pad_token_id, device=device, rng=rng,
                               on_step=on_step, optimizer=optimizer,
                               options=_options(trainer, temperature=config.rollout_temperature))

    def reason(result: dict[str, Any]) -> str:
        if not result["steps_without_signal"]:
            return "every sequence was longer than max_seq_len"
        return "no step drew a group with reward variance"

    return _fit(model_path, parent, config, trainer, device, cfg.learning_rate, {**metrics, **sample_counts}, train,
                reason)


def train_simulator(
    *,
    model_path: Path,
    parent: Path | None,
    config: RunConfig,
    generations: Sequence[Generation],
    trainer: TrainerSettings,
    seed: int,
    epoch: int | None = None,
    on_step: StepCallback | None = None,
) -> TrainResult:
    """RWR on the pool D_env (in-band generations of this and earlier epochs), weights from each generation's seed
    batch score; ``epoch`` is the one being trained (its generations count as fresh)."""
    cfg = config.simulator
    weights = [g.weight for g in generations]
    metrics: dict[str, Any] = {
        "pool_size": len(generations),
        "pool_fresh": sum(1 for g in generations if epoch is None or g.epoch == epoch),
        "pool_epochs": len({g.epoch for g in generations}),
        "seed_batches": len({(g.epoch, g.seed_id) for g in generations}),
        # How unequal the RWR weights are (β and λ decide it): with β = 2 in band they differ by ≤ 2 %.
        "weight_min": min(weights, default=None),
        "weight_max": max(weights, default=None),
    }
    if not generations:
        return TrainResult(None, {**metrics, "steps": 0, "reason": "no in-band generation"})
    device = _setup(trainer, seed)
    rng = random.Random(seed)
    tokenizer = load_tokenizer(model_path)
    samples, sample_counts = rwr.to_samples(generations, tokenizer, cfg.max_seq_len, epoch=epoch)

    def train(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return rwr.train_rwr(model, samples, cfg, pad_id=tokenizer.pad_token_id, device=device, rng=rng,
                             on_step=on_step, optimizer=optimizer, options=_options(trainer))

    def reason(result: dict[str, Any]) -> str:
        if result["early_stopped"]:
            return "kl_cap exceeded before the first step"
        return "every generation was longer than max_seq_len"

    return _fit(model_path, parent, config, trainer, device, cfg.learning_rate, {**metrics, **sample_counts}, train,
                reason)


def _options(trainer: TrainerSettings, *, temperature: float = 1.0) -> StepOptions:
    """The trainer's settings of a step, the same for both methods."""
    return StepOptions(temperature=temperature, checkpointing_min_tokens=trainer.checkpointing_min_tokens,
                       fault_nan_at_step=trainer.fault_nan_at_step, step_delay_s=trainer.step_delay_s)


def _fit(
    model_path: Path,
    parent: Path | None,
    config: RunConfig,
    trainer: TrainerSettings,
    device: torch.device,
    learning_rate: float,
    metrics: dict[str, Any],
    train: Callable[[Any, torch.optim.Optimizer], dict[str, Any]],
    reason: Callable[[dict[str, Any]], str],
) -> TrainResult:
    """Load base + adapter and its optimiser, ``train`` them under peak-memory tracking; the model (None, with
    ``reason``, when no step was taken), the metrics and the optimiser."""
    model = load_policy(model_path, config.lora, parent, device=device, dtype=trainer.dtype)
    optimizer, optim_metrics = adamw(model, learning_rate, parent)
    with peak_memory(device) as peak:
        result = train(model, optimizer)
    metrics = {**metrics, **optim_metrics, **result, **_env(device, trainer, peak)}
    if result["steps"] == 0:
        return TrainResult(None, {**metrics, "reason": reason(result)})
    return TrainResult(model, metrics, optimizer)


def _env(device: torch.device, trainer: TrainerSettings, peak: Any) -> dict[str, Any]:
    return {
        "device": device.type,
        "dtype": resolve_dtype(trainer.dtype, device),
        "torch_threads": torch.get_num_threads(),
        "peak_rss_mb": round(peak.rss_mb, 1),
        "peak_cuda_mb": None if peak.cuda_mb is None else round(peak.cuda_mb, 1),
        "peak_cuda_reserved_mb": None if peak.cuda_reserved_mb is None else round(peak.cuda_reserved_mb, 1),
    }
