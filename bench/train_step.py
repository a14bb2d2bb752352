"""Trainer speed on CPU, one run, one table.

Seconds per optimiser step and peak RSS of train_agent (GRPO) and train_simulator (RWR) on the real
SmolLM2-135M at sequence 256 × batch 8 (bf16 base, LoRA r16 on q/k/v/o, each job in its own process so the
peaks do not mix), and the time from "adapter written" to "served by vLLM" (POST /v1/load_lora_adapter, then the
first completion through the adapter; also an in-place swap of a new version under the same name).

    python bench/train_step.py [--model DIR] [--threads 2] [--steps 3] [--vllm-url http://127.0.0.1:8100]
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
from pathlib import Path
from typing import Any

import httpx

SEQ, BATCH = 256, 8
TEXT = (
    "The simulator writes a new arithmetic task for the agent. The agent answers with a number. "
    "The verifier checks the answer and the curriculum keeps the tasks near a success rate of one half. "
)


def measure(role: str, model: Path, threads: int, steps: int, store: Path) -> dict[str, Any]:
    """Train ``steps`` optimiser steps of one role on synthetic 256-token sequences; runs in a child process."""
    import random

    import torch

    from genenv.contracts.adapters import Role
    from genenv.contracts.runs import AgentTrainConfig, LoraConfig, SimulatorTrainConfig
    from genenv_trainer.training import grpo, rwr
    from genenv_trainer.training.data import Example
    from genenv_trainer.training.lora import load_policy, load_tokenizer, save_adapter
    from genenv_trainer.training.ops import peak_memory

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tok = load_tokenizer(model)
    ids = tok(TEXT * 20, add_special_tokens=False)["input_ids"]
    half = SEQ // 2
    examples = [Example(ids[i : i + half], ids[i + half : i + SEQ]) for i in range(0, BATCH * 7, 7)]
    device = torch.device("cpu")
    policy = load_policy(model, LoraConfig(), None, device=device, dtype="bfloat16")
    rng = random.Random(0)
    with peak_memory(device) as peak:
        if role == "agent":
            samples = [grpo.GrpoSample(e, 1.0 if i % 2 else -1.0, None) for i, e in enumerate(examples)]
            cfg = AgentTrainConfig(learning_rate=1e-4, batch_size=BATCH, micro_batch_size=BATCH, max_steps_per_epoch=steps)
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
        "threads": threads,
        "steps": len(secs),
        "first_step_s": secs[0],
        "median_rest_s": statistics.median(secs[1:]) if len(secs) > 1 else secs[0],
        "tokens_per_step": out["tokens"] / len(secs),
        "peak_rss_mb": peak.rss_mb,
        "adapter": str(path),
    }


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


def main() -> None:
    """Parse arguments, measure both roles in child processes, time vLLM hot-loading, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path.home() / ".genenv" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--vllm-url", default="http://127.0.0.1:8100")
    parser.add_argument("--measure", choices=["agent", "simulator"], help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.model, args.threads, args.steps, args.store)))
        return

    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as store:
        for role in ("agent", "simulator"):
            cmd = [
                sys.executable,
                __file__,
                "--measure",
                role,
                "--model",
                str(args.model),
                "--threads",
                str(args.threads),
                "--steps",
                str(args.steps),
                "--store",
                store,
            ]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        vllm = served(args.vllm_url, rows[-1]["adapter"])

    print(
        f"\nTrainer step benchmark — SmolLM2-135M bf16, LoRA r16 q/k/v/o, seq {SEQ} × batch {BATCH}, CPU, "
        f"{args.threads} torch thread(s); machine load average {load_before:.1f} → {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores"
    )
    print(f"{'job':<16}{'steps':>6}{'first step s':>14}{'median s/step':>15}{'tokens/step':>13}{'peak RSS MB':>13}")
    for r in rows:
        job = "train_agent" if r["role"] == "agent" else "train_simulator"
        print(
            f"{job:<16}{r['steps']:>6}{r['first_step_s']:>14.2f}{r['median_rest_s']:>15.2f}"
            f"{r['tokens_per_step']:>13.0f}{r['peak_rss_mb']:>13.0f}"
        )
    print(
        f"adapter → vLLM ({args.vllm_url}): load_lora_adapter {vllm['load_s'] * 1000:.0f} ms, written → first "
        f"answer {vllm['written_to_served_s'] * 1000:.0f} ms; in-place swap {vllm['inplace_load_s'] * 1000:.0f} ms, "
        f"swap → first answer {vllm['inplace_to_served_s'] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
