"""Trainer speed and memory on the CPU or a CUDA GPU, one run, two tables.

1. Seconds per optimiser step and peak memory of train_agent (GRPO) and train_simulator (RWR) on the real
   SmolLM2-135M at sequence 256 × batch 8 (bf16 base, LoRA r16 on q/k/v/o, each job in its own process so the
   peaks do not mix), and the time from "adapter written" to "served by vLLM" (POST /v1/load_lora_adapter, then
   the first completion through the adapter; also an in-place swap of a new version under the same name).
2. Peak training memory of one GRPO step (batch 1) at 256, 1,024 and 2,048 tokens per sequence, above the loaded
   model, its ratio to the 256-token figure, and the linear limit (the ratio of the lengths). Chunked log-probs and
   gradient checkpointing keep it at or under linear: no [T, vocab] fp32 logits, no per-layer activations kept for
   the whole sequence.

Memory is the process's RSS on the CPU and the CUDA allocator's peak (allocated; reserved beside it) on a GPU:
``--device auto`` takes the GPU when torch sees one. The 7B shape on a GPU is bench/gpu_check.py's.

    python bench/train_step.py [--model DIR] [--device auto] [--threads 2] [--steps 3]
                               [--vllm-url http://127.0.0.1:8100] [--seq-lens 256,1024,2048] [--no-vllm]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

SEQ, BATCH = 256, 8
TEXT = (
    "The simulator writes a new arithmetic task for the agent. The agent answers with a number. "
    "The verifier checks the answer and the curriculum keeps the tasks near a success rate of one half. "
)


def _examples(tok: Any, n: int, seq: int) -> list[Any]:
    """n (prompt, completion) examples of exactly ``seq`` tokens, half prompt and half completion."""
    from genenv_trainer.training.data import Example

    ids = tok(TEXT * 8, add_special_tokens=False)["input_ids"]
    stream = (ids * (1 + (seq + 7 * n) // len(ids)))[: seq + 7 * n]
    half = seq // 2
    return [Example(stream[i : i + half], stream[i + half : i + seq]) for i in range(0, 7 * n, 7)]


def _device(setting: str, threads: int) -> Any:
    """The torch device for ``--device`` (the trainer's own rule); CPU threads only matter on the CPU."""
    import torch

    from genenv_trainer.training.lora import resolve_device

    device = resolve_device(setting)  # type: ignore[arg-type]
    if device.type == "cpu":
        torch.set_num_threads(threads)
    return device


def _peak_mb(peak: Any) -> dict[str, float | None]:
    """What the table reports as a job's peak: CUDA allocated (and reserved) on a GPU, else RSS."""
    if peak.cuda_mb is not None:
        return {"peak_mb": peak.cuda_mb, "peak_reserved_mb": peak.cuda_reserved_mb, "peak_rss_mb": peak.rss_mb}
    return {"peak_mb": peak.rss_mb, "peak_reserved_mb": None, "peak_rss_mb": peak.rss_mb}


def measure(role: str, model: Path, threads: int, steps: int, store: Path, device_setting: str = "auto"
            ) -> dict[str, Any]:
    """Train ``steps`` optimiser steps of one role on synthetic 256-token sequences; runs in a child process."""
    import random

    import torch

    from genenv.contracts.adapters import Role
    from genenv.contracts.runs import AgentTrainConfig, LoraConfig, SimulatorTrainConfig
    from genenv_trainer.training import grpo, rwr
    from genenv_trainer.training.lora import load_policy, load_tokenizer, save_adapter
    from genenv_trainer.training.ops import peak_memory

    device = _device(device_setting, threads)
    torch.manual_seed(0)
    tok = load_tokenizer(model)
    # One pass over BATCH × steps sequences in batches of BATCH: exactly ``steps`` optimiser steps.
    examples = _examples(tok, BATCH * steps, SEQ)
    policy = load_policy(model, LoraConfig(), None, device=device, dtype="bfloat16")
    rng = random.Random(0)
    with peak_memory(device) as peak:
        if role == "agent":
            samples = [grpo.GrpoSample(e, 1.0 if i % 2 else -1.0, None) for i, e in enumerate(examples)]
            cfg = AgentTrainConfig(learning_rate=1e-4, batch_size=BATCH, micro_batch_size=BATCH,
                                   max_steps_per_epoch=steps)
            out = grpo.train_grpo(policy, samples, cfg, pad_id=tok.pad_token_id, device=device, rng=rng)
        else:
            rsamples = [rwr.RwrSample(e, 1.5 if i % 2 else 0.5) for i, e in enumerate(examples)]
            scfg = SimulatorTrainConfig(
                learning_rate=1e-4, batch_size=BATCH, micro_batch_size=BATCH, max_steps_per_epoch=steps, kl_cap=1e9
            )
            out = rwr.train_rwr(policy, rsamples, scfg, pad_id=tok.pad_token_id, device=device, rng=rng)
    path = save_adapter(policy, store, "bench", Role(role), 1)
    secs = [s["seconds"] for s in out["per_step"]]
    return {
        "role": role,
        "device": device.type,
        "threads": threads,
        "steps": len(secs),
        "first_step_s": secs[0],
        "median_rest_s": statistics.median(secs[1:]) if len(secs) > 1 else secs[0],
        "tokens_per_step": out["tokens"] / len(secs),
        **_peak_mb(peak),
        "adapter": str(path),
    }


def measure_memory(model: Path, threads: int, seq: int, checkpointing_min_tokens: int, device_setting: str = "auto"
                   ) -> dict[str, Any]:
    """Peak memory of one GRPO step on one ``seq``-token sequence, above the memory with the model loaded."""
    import random

    import torch

    from genenv.contracts.runs import AgentTrainConfig, LoraConfig
    from genenv_trainer.training import grpo
    from genenv_trainer.training.loop import StepOptions
    from genenv_trainer.training.lora import load_policy, load_tokenizer
    from genenv_trainer.training.ops import current_rss_mb, peak_memory

    device = _device(device_setting, threads)
    torch.manual_seed(0)
    tok = load_tokenizer(model)
    policy = load_policy(model, LoraConfig(), None, device=device, dtype="bfloat16")
    samples = [grpo.GrpoSample(e, 1.0, None) for e in _examples(tok, 1, seq)]
    cfg = AgentTrainConfig(learning_rate=1e-4, batch_size=1, micro_batch_size=1, max_steps_per_epoch=1,
                           max_seq_len=max(seq, 32))
    options = StepOptions(temperature=0.7, checkpointing_min_tokens=checkpointing_min_tokens)
    on_cuda = device.type == "cuda"
    loaded = torch.cuda.memory_allocated(device) / 2**20 if on_cuda else current_rss_mb()
    start = time.perf_counter()
    with peak_memory(device, interval_s=0.01) as peak:
        grpo.train_grpo(policy, samples, cfg, pad_id=tok.pad_token_id, device=device, rng=random.Random(0),
                        options=options)
    top = peak.cuda_mb if on_cuda else peak.rss_mb
    return {"seq": seq, "device": device.type, "loaded_mb": loaded, "peak_mb": top, "above_mb": top - loaded,
            "peak_reserved_mb": peak.cuda_reserved_mb, "seconds": time.perf_counter() - start}


def served(vllm_url: str, adapter: str) -> dict[str, float]:
    """Seconds from a written adapter to its first answer through vLLM, and for an in-place version swap."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    body = {"model": name, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8, "temperature": 0}
    with httpx.Client(base_url=vllm_url, timeout=300) as http:
        t0 = time.perf_counter()
        http.post("/v1/load_lora_adapter", json={"lora_name": name, "lora_path": adapter}).raise_for_status()
        t1 = time.perf_counter()
        http.post("/v1/chat/completions", json=body).raise_for_status()
        t2 = time.perf_counter()
        http.post(
            "/v1/load_lora_adapter", json={"lora_name": name, "lora_path": adapter, "load_inplace": True}
        ).raise_for_status()
        t3 = time.perf_counter()
        http.post("/v1/chat/completions", json=body).raise_for_status()
        t4 = time.perf_counter()
        http.post("/v1/unload_lora_adapter", json={"lora_name": name})
    return {
        "load_s": t1 - t0,
        "written_to_served_s": t2 - t0,
        "inplace_load_s": t3 - t2,
        "inplace_to_served_s": t4 - t2,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``--measure`` is the child process's)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path.home() / ".genenv" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: a CUDA GPU when torch sees one (the trainer's rule), else the CPU.")
    parser.add_argument("--threads", type=int, default=2, help="torch threads on the CPU.")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--vllm-url", default="http://127.0.0.1:8100")
    parser.add_argument("--seq-lens", default="256,1024,2048", help="Sequence lengths of the memory table.")
    parser.add_argument("--checkpointing-min-tokens", type=int, default=1024,
                        help="Gradient checkpointing from this sequence length on (the trainer's default; 0 = off).")
    parser.add_argument("--no-vllm", action="store_true", help="Skip the adapter → vLLM timing (no server needed).")
    parser.add_argument("--measure", choices=["agent", "simulator", "memory"], help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _child(*extra: str) -> dict[str, Any]:
    """This script as a child process measuring one thing (a fresh process: its peak memory is its own)."""
    cmd = [sys.executable, __file__, *extra]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@dataclass
class Measured:
    """Both roles' training steps, the memory table's rows, the vLLM timing (None when skipped) and the load."""

    rows: list[dict[str, Any]]
    memory: list[dict[str, Any]]
    vllm: dict[str, float] | None
    load_before: float


def measure_all(args: argparse.Namespace) -> Measured:
    """Each role's steps and each sequence length's memory in a child process; then the adapter → vLLM timing."""
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as store:
        for role in ("agent", "simulator"):
            rows.append(_child("--measure", role, "--model", str(args.model), "--threads", str(args.threads),
                               "--device", args.device, "--steps", str(args.steps), "--store", store))
        vllm = None if args.no_vllm else served(args.vllm_url, rows[-1]["adapter"])
    memory = [
        _child("--measure", "memory", "--model", str(args.model), "--threads", str(args.threads), "--device",
               args.device, "--seq", str(seq), "--checkpointing-min-tokens", str(args.checkpointing_min_tokens))
        for seq in [int(x) for x in args.seq_lens.split(",")]
    ]
    return Measured(rows, memory, vllm, load_before)


def render(args: argparse.Namespace, m: Measured) -> None:
    """The step table, the memory table and the vLLM line, as plain text."""
    rows, memory, vllm = m.rows, m.memory, m.vllm
    on = rows[0]["device"]
    where = f"CPU, {args.threads} torch thread(s)" if on == "cpu" else "CUDA"
    kind = "RSS" if on == "cpu" else "CUDA alloc"
    print(
        f"\nTrainer step benchmark — SmolLM2-135M bf16, LoRA r16 q/k/v/o, seq {SEQ} × batch {BATCH}, {where}; "
        f"machine load average {m.load_before:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"{'job':<16}{'steps':>6}{'first step s':>14}{'median s/step':>15}{'tokens/step':>13}"
          f"{'peak ' + kind + ' MB':>20}")
    for r in rows:
        job = "train_agent" if r["role"] == "agent" else "train_simulator"
        print(
            f"{job:<16}{r['steps']:>6}{r['first_step_s']:>14.2f}{r['median_rest_s']:>15.2f}"
            f"{r['tokens_per_step']:>13.0f}{r['peak_mb']:>20.0f}"
        )
    base = memory[0]
    print(f"\nPeak {kind} memory of one GRPO step, batch 1 (gradient checkpointing from "
          f"{args.checkpointing_min_tokens} tokens; log-probs in chunks of 1,024 positions)")
    print(f"{'tokens/seq':>10}{'model MB':>10}{'peak MB':>10}{'above model MB':>16}{'ratio':>8}{'linear':>8}{'s':>7}")
    for mem in memory:
        print(f"{mem['seq']:>10}{mem['loaded_mb']:>10.0f}{mem['peak_mb']:>10.0f}{mem['above_mb']:>16.0f}"
              f"{mem['above_mb'] / max(base['above_mb'], 1e-9):>8.2f}{mem['seq'] / base['seq']:>8.2f}"
              f"{mem['seconds']:>7.1f}")
    if vllm is None:
        return
    print(
        f"adapter → vLLM ({args.vllm_url}): load_lora_adapter {vllm['load_s'] * 1000:.0f} ms, written → first "
        f"answer {vllm['written_to_served_s'] * 1000:.0f} ms; in-place swap {vllm['inplace_load_s'] * 1000:.0f} ms, "
        f"swap → first answer {vllm['inplace_to_served_s'] * 1000:.0f} ms"
    )


def main() -> None:
    """Parse arguments, measure both roles in child processes, time vLLM hot-loading, print the table."""
    args = parse_args()
    if args.measure == "memory":
        print(json.dumps(measure_memory(args.model, args.threads, args.seq, args.checkpointing_min_tokens,
                                        args.device)))
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.model, args.threads, args.steps, args.store, args.device)))
        return
    render(args, measure_all(args))


if __name__ == "__main__":
    main()
