"""The trainer's own steps on synthetic sequences: timed and measured on one device, and compared across two.

bench/gpu_check.py and the ``gpu`` tests use these, so what they measure is the trainer's real code
(train_grpo/train_rwr, token_logprobs, the LoRA attachment), not a re-implementation: only the data is synthetic
(random token ids of a chosen length, half of them completion at most) because speed and memory depend on the
shapes alone.
"""

from __future__ import annotations

import copy
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from genenv.contracts.runs import AgentTrainConfig, LoraConfig, SimulatorTrainConfig
from genenv_trainer.training import grpo, rwr
from genenv_trainer.training.data import Example, collate
from genenv_trainer.training.loop import StepOptions
from genenv_trainer.training.lora import attach_lora
from genenv_trainer.training.ops import peak_memory, token_logprobs

Kind = Literal["grpo", "rwr"]
PAD_ID = 0


def synthetic_examples(n: int, seq_len: int, completion_tokens: int, vocab: int, *, seed: int = 0) -> list[Example]:
    """``n`` (prompt, completion) pairs of exactly ``seq_len`` tokens, the last ``completion_tokens`` of them the
    completion (ids drawn uniformly from 1..vocab-1, so none is the pad id)."""
    if not 0 < completion_tokens < seq_len:
        raise ValueError(f"completion_tokens must be in 1..{seq_len - 1}, got {completion_tokens}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = [rng.randrange(1, vocab) for _ in range(seq_len)]
        out.append(Example(ids[: seq_len - completion_tokens], ids[seq_len - completion_tokens :]))
    return out


def flops_per_pass(config: dict[str, Any], seq_len: int, completion_tokens: int) -> float:
    """Approximate FLOPs of one forward pass over one sequence: 2 per block weight per token, causal attention
    (QKᵀ and AV over half the square), and the LM head at the completion positions only (token_logprobs)."""
    from genenv.models.synthetic import parameter_count

    counts = parameter_count(config)
    attention = 2 * config["num_hidden_layers"] * seq_len * seq_len * config["hidden_size"]
    head = 2 * config["hidden_size"] * config["vocab_size"] * completion_tokens
    return float(2 * counts["blocks"] * seq_len + attention + head)


def step_flops(config: dict[str, Any], seq_len: int, completion_tokens: int) -> float:
    """Useful FLOPs of one GRPO or RWR step on one sequence: the policy's forward, its backward (input gradients
    only, the base being frozen: about one forward's matmuls, twice the attention's), and the reference forward
    with the adapter off. Recomputation under gradient checkpointing is not counted: it is the price of memory."""
    forward = flops_per_pass(config, seq_len, completion_tokens)
    attention = 2 * config["num_hidden_layers"] * seq_len * seq_len * config["hidden_size"]
    return 3 * forward + attention


def with_lora(base: Any, lora: LoraConfig, *, seed: int = 0, random_b: bool = False) -> Any:
    """``base`` with the trainer's LoRA attachment (attach_lora); ``random_b`` gives B small random values instead
    of PEFT's zeros, so that the gradient of A is not identically zero when gradients are compared."""
    model = attach_lora(base, lora, None)
    if random_b:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32).mul_(0.02).to(p.dtype))
    return model


@dataclass(frozen=True)
class StepResult:
    """Seconds of each optimiser step (the first includes one-off start-up costs), tokens per step, peaks in MiB."""

    seconds: list[float]
    tokens_per_step: float
    completion_tokens_per_step: float
    peak_rss_mb: float
    peak_cuda_mb: float | None
    peak_cuda_reserved_mb: float | None
    cuda_before_mb: float | None

    @property
    def steady_seconds(self) -> float:
        """Median seconds of the steps after the first (the first when there is only one)."""
        rest = self.seconds[1:] or self.seconds
        return float(statistics.median(rest))


def run_steps(
    model: Any,
    kind: Kind,
    examples: Sequence[Example],
    *,
    device: torch.device,
    checkpointing: bool,
    micro_batch_size: int = 1,
    agent: AgentTrainConfig | None = None,
    simulator: SimulatorTrainConfig | None = None,
) -> StepResult:
    """One pass of train_grpo or train_rwr over ``examples`` in steps of ``micro_batch_size`` sequences (one
    micro-batch per step), with gradient checkpointing on or off, under the trainer's own peak-memory tracking.

    GRPO gets alternating advantages ±1 and no recorded logprobs (ratio 1); RWR weights 0.5/1.5 and no KL cap."""
    steps = -(-len(examples) // micro_batch_size)
    seq = max(len(e.prompt_ids) + len(e.completion_ids) for e in examples)
    min_tokens = 1 if checkpointing else 0
    cuda_before = torch.cuda.memory_allocated(device) / 2**20 if device.type == "cuda" else None
    with peak_memory(device) as peak:
        if kind == "grpo":
            cfg = (agent or AgentTrainConfig()).model_copy(update={
                "batch_size": micro_batch_size, "micro_batch_size": micro_batch_size, "max_steps_per_epoch": steps,
                "max_seq_len": max(seq, 32)})
            samples = [grpo.GrpoSample(e, 1.0 if i % 2 else -1.0, None) for i, e in enumerate(examples)]
            out = grpo.train_grpo(model, samples, cfg, pad_id=PAD_ID, device=device, rng=random.Random(0),
                                  options=StepOptions(temperature=1.0, checkpointing_min_tokens=min_tokens))
        else:
            scfg = (simulator or SimulatorTrainConfig()).model_copy(update={
                "batch_size": micro_batch_size, "micro_batch_size": micro_batch_size, "max_steps_per_epoch": steps,
                "max_seq_len": max(seq, 32), "kl_cap": 1e9})
            rsamples = [rwr.RwrSample(e, 1.5 if i % 2 else 0.5) for i, e in enumerate(examples)]
            out = rwr.train_rwr(model, rsamples, scfg, pad_id=PAD_ID, device=device, rng=random.Random(0),
                                options=StepOptions(checkpointing_min_tokens=min_tokens))
    per_step = out["per_step"]
    return StepResult(
        seconds=[float(s["seconds"]) for s in per_step],
        tokens_per_step=float(micro_batch_size * seq),
        completion_tokens_per_step=float(statistics.mean(s["tokens"] for s in per_step)),
        peak_rss_mb=peak.rss_mb,
        peak_cuda_mb=peak.cuda_mb,
        peak_cuda_reserved_mb=peak.cuda_reserved_mb,
        cuda_before_mb=cuda_before,
    )


def _loss_and_grads(model: Any, examples: Sequence[Example], device: torch.device) -> tuple[torch.Tensor, dict]:
    """Completion log-probs (no gradient) and the LoRA gradients of one GRPO micro-batch, on ``device``."""
    batch = collate(list(examples), pad_id=PAD_ID).to(device)
    with torch.no_grad():
        logp = token_logprobs(model, batch, temperature=1.0)
    model.zero_grad(set_to_none=True)
    samples = [grpo.GrpoSample(e, 1.0 if i % 2 else -1.0, None) for i, e in enumerate(examples)]
    grpo.grpo_loss_backward(model, samples, micro_batch_size=len(samples), clip_ratio=0.2, kl_coef=0.05,
                            pad_id=PAD_ID, device=device)
    grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
    mask = batch.completion_mask.bool()
    return logp[mask].float().cpu(), grads


def parity(
    config: dict[str, Any],
    *,
    device: torch.device,
    reference: torch.device | None = None,
    dtype: str = "float32",
    seq_lens: Sequence[int] = (48, 33),
    seed: int = 0,
) -> dict[str, Any]:
    """The trainer's completion log-probs and LoRA gradients (one GRPO micro-batch of sequences of different lengths,
    so padding is exercised) on ``reference`` (the CPU by default) and on ``device``, from the same weights.

    Returns the largest log-prob difference, the relative L2 error of all LoRA gradients together (‖g_dev − g_ref‖ /
    ‖g_ref‖) and the worst single-tensor relative error."""
    reference = reference or torch.device("cpu")
    # TF32 matmuls on the GPU would compare a 10-bit mantissa with the CPU's float32: hold "highest" meanwhile.
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        return _parity(config, device=device, reference=reference, dtype=dtype, seq_lens=seq_lens, seed=seed)
    finally:
        torch.set_float32_matmul_precision(precision)


def _parity(config: dict[str, Any], *, device: torch.device, reference: torch.device, dtype: str,
            seq_lens: Sequence[int], seed: int) -> dict[str, Any]:
    from genenv.models.synthetic import random_model

    base = random_model(config, device="cpu", dtype=dtype, seed=seed)
    model_ref = with_lora(base, LoraConfig(rank=8, alpha=16.0), seed=seed, random_b=True)
    model_dev = copy.deepcopy(model_ref).to(device)
    model_ref = model_ref.to(reference)
    vocab = int(config["vocab_size"])
    examples = [synthetic_examples(1, n, max(1, n // 2), vocab, seed=seed + i)[0] for i, n in enumerate(seq_lens)]
    logp_ref, g_ref = _loss_and_grads(model_ref, examples, reference)
    logp_dev, g_dev = _loss_and_grads(model_dev, examples, device)
    if set(g_ref) != set(g_dev) or not g_ref:
        raise RuntimeError(f"gradients on different parameters: {len(g_ref)} on {reference}, {len(g_dev)} on {device}")
    diff = torch.sqrt(sum(((g_dev[n] - g_ref[n]) ** 2).sum() for n in g_ref))
    norm = torch.sqrt(sum((g_ref[n] ** 2).sum() for n in g_ref))
    worst = max(float((g_dev[n] - g_ref[n]).norm() / g_ref[n].norm().clamp(min=1e-30)) for n in g_ref)
    return {
        "reference": str(reference),
        "device": str(device),
        "dtype": dtype,
        "positions": int(logp_ref.numel()),
        "lora_tensors": len(g_ref),
        "logprob_max_abs_diff": float((logp_dev - logp_ref).abs().max()),
        "logprob_mean": float(logp_ref.mean()),
        "grad_rel_l2": float(diff / norm.clamp(min=1e-30)),
        "grad_worst_tensor_rel": worst,
        "grad_norm": float(norm),
    }
