"""The AdamW optimiser of a role's adapter, carried from one version to the next.

Each epoch's training job is a new process, but to the method it is the next few steps of one AdamW run. Starting
every job with a fresh optimiser would make every step Adam's first one (bias-corrected m/√v of a single gradient,
i.e. an update of about ``lr·sign(g)`` per weight) whatever the gradient's history. So each adapter version is
saved with its optimiser state, and the job that trains on top of it resumes that state.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

OPTIMIZER_FILE = "optimizer.pt"

log = logging.getLogger(__name__)


def adamw(model: torch.nn.Module, lr: float, parent: Path | None) -> tuple[torch.optim.AdamW, dict[str, Any]]:
    """AdamW over the trainable parameters, resuming the parent version's state when it has one that fits.

    Returns the optimiser and metrics saying whether it resumed and after how many earlier steps. The learning rate
    is always ``lr`` (the run's setting), whatever the saved state says.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    saved = None if parent is None else parent / OPTIMIZER_FILE
    if saved is None or not saved.is_file():
        return optimizer, {"optimizer_resumed": False, "optimizer_prior_steps": 0}
    state = torch.load(saved, map_location="cpu", weights_only=True)
    problem = _mismatch(state, params)
    if problem:
        # A different LoRA layout (e.g. an adapter made by another config): its moments mean nothing here.
        log.warning("not resuming optimiser state from %s: %s", saved, problem)
        return optimizer, {"optimizer_resumed": False, "optimizer_prior_steps": 0, "optimizer_not_resumed": problem}
    optimizer.load_state_dict(state)  # moves the moments to each parameter's device
    for group in optimizer.param_groups:
        group["lr"] = lr
    return optimizer, {"optimizer_resumed": True, "optimizer_prior_steps": prior_steps(optimizer)}


def prior_steps(optimizer: torch.optim.Optimizer) -> int:
    """How many steps the optimiser has taken (Adam's per-parameter step count, the same for all)."""
    counts = [int(s["step"]) for s in optimizer.state.values() if "step" in s]
    return max(counts, default=0)


def save_state(optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Write the optimiser state beside the adapter weights (vLLM ignores the extra file)."""
    torch.save(optimizer.state_dict(), folder / OPTIMIZER_FILE)


def _mismatch(state: dict[str, Any], params: list[torch.nn.Parameter]) -> str | None:
    groups = state.get("param_groups", [])
    if len(groups) != 1 or len(groups[0].get("params", [])) != len(params):
        return f"saved state has {sum(len(g.get('params', [])) for g in groups)} parameters, the model {len(params)}"
    for index, p in zip(groups[0]["params"], params, strict=True):
        moments = state.get("state", {}).get(index, {})
        avg = moments.get("exp_avg")
        if avg is not None and tuple(avg.shape) != tuple(p.shape):
            return f"parameter {index} has shape {tuple(avg.shape)} saved, {tuple(p.shape)} in the model"
    return None
