"""AdamW state carried across adapter versions: two jobs of one step equal one job of two steps."""

from __future__ import annotations

from pathlib import Path

import torch

from genenv_trainer.training.optim import OPTIMIZER_FILE, adamw, save_state

LR = 1e-2


def _model(seed: int = 0, out: int = 3) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, out))
    model[0].bias.requires_grad_(False)  # a frozen parameter, like the base model under LoRA: not optimised
    return model


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> None:
    torch.manual_seed(100 + step)  # the same batch for step k on every path
    x = torch.randn(16, 4)
    loss = (model(x) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _copy(model: torch.nn.Module) -> torch.nn.Module:
    twin = _model(seed=1)  # other random weights, overwritten: only the loaded state may matter
    twin.load_state_dict(model.state_dict())
    return twin


def test_resumed_optimizer_continues_one_adamw_run(tmp_path: Path) -> None:
    continuous = _model()
    opt, info = adamw(continuous, LR, None)
    assert info == {"optimizer_resumed": False, "optimizer_prior_steps": 0}
    for k in range(3):
        _step(continuous, opt, k)

    # Job 1: one step, saved beside the "adapter"; jobs 2 and 3: a new process loads weights and state.
    version = _model()
    opt, _ = adamw(version, LR, None)
    _step(version, opt, 0)
    for k in (1, 2):
        folder = tmp_path / f"v{k}"
        folder.mkdir()
        save_state(opt, folder)
        version = _copy(version)
        opt, info = adamw(version, LR, folder)
        assert info == {"optimizer_resumed": True, "optimizer_prior_steps": k}
        _step(version, opt, k)

    for a, b in zip(_weights(continuous), _weights(version), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_fresh_optimizer_each_job_is_a_different_trajectory(tmp_path: Path) -> None:
    """Why the state is kept: restarting Adam every epoch changes the weights the run ends with."""
    continuous = _model()
    opt, _ = adamw(continuous, LR, None)
    for k in range(2):
        _step(continuous, opt, k)
    restarted = _model()
    for k in range(2):
        opt, _ = adamw(restarted, LR, None)
        _step(restarted, opt, k)
    diff = max(float((a - b).abs().max()) for a, b in zip(_weights(continuous), _weights(restarted), strict=True))
    assert diff > 1e-4


def test_learning_rate_is_the_runs_not_the_saved_one(tmp_path: Path) -> None:
    model = _model()
    opt, _ = adamw(model, LR, None)
    _step(model, opt, 0)
    save_state(opt, tmp_path)
    opt, info = adamw(_copy(model), LR / 10, tmp_path)
    assert info["optimizer_resumed"] is True
    assert [g["lr"] for g in opt.param_groups] == [LR / 10]


def test_state_of_another_layout_is_not_resumed(tmp_path: Path) -> None:
    other = _model(out=5)  # same parameter count, different shapes
    opt, _ = adamw(other, LR, None)
    _step(other, opt, 0)
    save_state(opt, tmp_path)
    opt, info = adamw(_model(), LR, tmp_path)
    assert info["optimizer_resumed"] is False
    assert "shape" in info["optimizer_not_resumed"]
    assert opt.state == {}


def test_parent_without_saved_state_starts_fresh(tmp_path: Path) -> None:
    assert not (tmp_path / OPTIMIZER_FILE).exists()
    opt, info = adamw(_model(), LR, tmp_path)
    assert info == {"optimizer_resumed": False, "optimizer_prior_steps": 0}
    assert opt.state == {}
