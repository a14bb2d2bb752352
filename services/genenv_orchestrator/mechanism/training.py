"""The project's RWR update (genenv_trainer.training.rwr) applied offline to a list of generations, from the base
model: the mechanism experiments' dose, without the run's KL cap. torch is imported only when a Trainer is built."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from genenv.contracts.runs import LoraConfig, SimulatorTrainConfig
from genenv.experiments.mechanism_pools import Sizes, TrainItem


class Trainer:
    """The project's RWR update (genenv_trainer.training.rwr) on a list of generations, from the base model."""

    def __init__(self, model_path: Path, sizes: Sizes, device: str, threads: int | None) -> None:
        import torch

        from genenv_trainer.training.lora import load_tokenizer, resolve_device

        if threads:
            torch.set_num_threads(threads)
        self.model_path, self.sizes = model_path, sizes
        self.device = resolve_device(device)  # type: ignore[arg-type]
        self.tokenizer = load_tokenizer(model_path)

    def fresh(self, lr: float) -> tuple[Any, Any]:
        """The base model with a new LoRA adapter and its AdamW."""
        from genenv_trainer.training.lora import load_policy
        from genenv_trainer.training.optim import adamw

        lora = LoraConfig(rank=self.sizes.lora_rank, alpha=self.sizes.lora_alpha)
        model = load_policy(self.model_path, lora, None, device=self.device, dtype="auto")
        return model, adamw(model, lr, None)[0]

    def samples(self, items: Sequence[TrainItem]) -> list[Any]:
        """Tokenised pairs (one dropped only if longer than 512 tokens, which arithmetic never is)."""
        from genenv_trainer.records import Generation
        from genenv_trainer.training import rwr

        gens = [Generation(i, "", it.prompt, it.raw_text, it.weight) for i, it in enumerate(items)]
        return rwr.to_samples(gens, self.tokenizer, 512)[0]

    def steps(self, model: Any, optimizer: Any, samples: list[Any], lr: float, steps: int, seed: int
              ) -> dict[str, Any]:
        """``steps`` optimiser steps of RWR in batches of sizes.batch_size, cycling reshuffled passes over a small
        pool; no KL cap (the dose is the experiment's), KL to the base recorded at every step."""
        from genenv_trainer.training import rwr

        passes = max(1, math.ceil(steps * self.sizes.batch_size / max(len(samples), 1)))
        cfg = SimulatorTrainConfig(learning_rate=lr, batch_size=self.sizes.batch_size,
                                   micro_batch_size=self.sizes.micro_batch_size, max_steps_per_epoch=steps,
                                   passes_per_epoch=passes, kl_coef=self.sizes.kl_coef, kl_cap=1e9)
        out = rwr.train_rwr(model, samples, cfg, pad_id=self.tokenizer.pad_token_id, device=self.device,
                            rng=random.Random(seed), optimizer=optimizer)
        per_step = out.get("per_step") or []
        return {"steps": out["steps"], "examples_seen": out["examples_seen"], "seconds": out["seconds"],
                "kl_to_base_last_step": per_step[-1]["kl"] if per_step else None,
                "nll_first": per_step[0]["nll"] if per_step else None,
                "nll_last": per_step[-1]["nll"] if per_step else None}

    def divergence_from_base(self, model: Any, items: Sequence[TrainItem]) -> float:
        """How far an arm moved from the base, measured the same way for every arm: the per-token k3 divergence
        (the trainer's KL estimator, ≥ 0) between the arm and the base on one fixed set of texts, the base
        simulator's own held-out generations. (Not a KL of either model's samples: those texts were decoded under
        the JSON grammar, so a plain log-ratio there can be negative.)"""
        import torch

        from genenv_trainer.training.data import chunks, collate
        from genenv_trainer.training.ops import k3_kl, reference_logprobs, token_logprobs

        model.eval()
        total, tokens = 0.0, 0.0
        with torch.no_grad():
            for micro in chunks(self.samples(items), self.sizes.micro_batch_size):
                b = collate([s.example for s in micro], pad_id=self.tokenizer.pad_token_id).to(self.device)
                k3 = k3_kl(token_logprobs(model, b), reference_logprobs(model, b)) * b.completion_mask
                total += float(k3.sum())
                tokens += float(b.completion_mask.sum())
        model.train()
        return total / max(tokens, 1.0)

    @staticmethod
    def save(model: Any, folder: Path) -> Path:
        """The adapter alone (no optimiser state: nothing resumes it)."""
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(folder))
        return folder
