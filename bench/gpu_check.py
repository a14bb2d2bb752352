"""What a GPU does for GenEnv, in one command of a few minutes: one table, one JSON file.

Rows, most needed first (each one's failure is recorded and the next runs; an out-of-memory is a row, not a crash):
  env        Python, torch, CUDA, the card, and which optional packages import.
  ceiling    the bf16 matmul ceiling (8192³ products), TFLOP/s.
  bandwidth  device memory bandwidth (a 2 GiB device-to-device copy, bytes read + written), TB/s.
  parity     the trainer's completion log-probs and LoRA gradients on the GPU against the CPU, same weights
             (a tiny random Qwen2; float32 with TF32 off, then bfloat16).
  train      the trainer's GRPO step and RWR step (genenv_trainer.training: train_grpo / train_rwr, attach_lora)
             at the Qwen2.5-7B shape, random-init bf16 weights built on the GPU from
             shared/genenv/models/configs/qwen2.5-7b-instruct.json, LoRA r16 on q/k/v/o as
             examples/paper-scale-qwen7b.yaml; one sequence per step of 1,024 / 4,096 / 9,000 tokens (the last
             1,024 of them completion), gradient checkpointing off and on: peak CUDA memory (allocated and reserved),
             seconds per step (median after the first), tokens/s, and the share of the ceiling (useful FLOPs:
             policy forward + input-gradient backward + reference forward; recomputation not counted).
  decode     the local backend (genenv.inference.local) decoding on the GPU at the Qwen2.5-0.5B shape (random
             bf16 weights, byte tokenizer), batches of 1 / 8 / 32 at T = 0.7: tokens/s against the memory-bandwidth
             bound (batch × bandwidth / weight bytes per decoding step).

    python bench/gpu_check.py --out gpu_check.json [--budget-s 420] [--only train,decode]
    python bench/gpu_check.py --smoke                 # every row at toy sizes on the CPU (CI)

Runs from the source tree (shared/ and services/ are put on sys.path): it needs torch, transformers, peft,
accelerate, safetensors, tokenizers, numpy and pydantic (deploy/gpu/requirements-gpu-check.txt), no database,
queue or web stack. ``--budget-s`` bounds the whole run, start-up included: a row whose estimate does not fit what
is left is skipped and says so, and a watchdog ends the process at the budget after writing what it has. The JSON
is rewritten after every row, so a run killed from outside still leaves its finished rows. docs/deployment.md
("A GPU check") says how to run it on a borrowed GPU machine and how to read it.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # the budget counts from here: imports below take seconds

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
for _sub in ("services", "shared"):  # the source tree, not an installed copy: the GPU machine cannot pip-install it
    if str(REPO / _sub) not in sys.path:
        sys.path.insert(0, str(REPO / _sub))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

GiB = 2**30
# fp32 parity holds to float32 rounding; bf16 only to bf16's 8-bit mantissa compounded over the layers.
TOLERANCES = {"float32": {"logprob": 1e-4, "grad_rel": 1e-3}, "bfloat16": {"logprob": 0.1, "grad_rel": 0.1}}


@dataclass
class Sizes:
    """Every size a run uses; --smoke shrinks them all."""

    matmul_n: int = 8192
    matmul_reps: int = 50
    copy_bytes: int = 2 * GiB
    copy_reps: int = 20
    seq_lens: tuple[int, ...] = (1024, 4096, 9000)
    completion_tokens: int = 1024
    steps: int = 2
    decode_batches: tuple[int, ...] = (1, 8, 32)
    decode_tokens: int = 64
    shrink: bool = False


SMOKE = Sizes(matmul_n=256, matmul_reps=3, copy_bytes=16 * 2**20, copy_reps=3, seq_lens=(32, 64, 96),
              completion_tokens=16, steps=1, decode_batches=(1, 2), decode_tokens=8, shrink=True)


@dataclass
class Row:
    """One line of the table and one object of the JSON."""

    name: str
    group: str
    status: str = "pending"  # ok, mismatch, oom, error, skipped, killed, not selected
    seconds: float | None = None
    result: dict[str, Any] = field(default_factory=dict)
    note: str = ""


class Check:
    """Runs rows in order within the budget, records each, rewrites the JSON after each."""

    def __init__(self, args: argparse.Namespace, sizes: Sizes, device: torch.device) -> None:
        self.args, self.sizes, self.device = args, sizes, device
        self.rows: list[Row] = []
        self.meta: dict[str, Any] = {"argv": sys.argv[1:], "budget_s": args.budget_s, "smoke": args.smoke,
                                     "device": str(device)}
        self.only = {g.strip() for g in args.only.split(",")} if args.only else None
        self.current: Row | None = None
        self.lock = threading.Lock()
        self.ceiling_flops: float | None = None
        self.bandwidth: float | None = None
        self.step_seconds: dict[tuple[str, bool, int], float] = {}

    # ---- budget ------------------------------------------------------------------------------------------------

    def left(self) -> float:
        return self.args.budget_s - (time.monotonic() - STARTED)

    def watchdog(self) -> None:
        """End the process at the budget, after recording the row that was running and writing the JSON."""
        time.sleep(max(0.0, self.left() - 1.0))
        with self.lock:
            if self.current is not None:
                self.current.status = "killed"
                self.current.note = f"still running at the {self.args.budget_s:.0f} s budget"
            for row in self.rows:
                if row.status == "pending":
                    row.status, row.note = "skipped", "budget spent"
            self.write()
            self.print_table()
        print(f"gpu_check: budget of {self.args.budget_s:.0f} s reached; stopped", flush=True)
        os._exit(3)

    # ---- rows --------------------------------------------------------------------------------------------------

    def run(self, name: str, group: str, estimate_s: float, fn: Callable[[Row], None]) -> Row:
        """Run one row unless it is not selected or would not fit the budget; never raises."""
        row = Row(name, group)
        with self.lock:
            self.rows.append(row)
        if self.only is not None and group not in self.only:
            row.status = "not selected"
            return row
        left = self.left() - self.args.reserve_s
        if estimate_s > left:
            row.status, row.note = "skipped", f"needs ≈ {estimate_s:.0f} s, {max(left, 0):.0f} s left"
            self.write()
            print(f"[{self.elapsed():6.1f} s] {name}: skipped ({row.note})", flush=True)
            return row
        start = time.monotonic()
        with self.lock:
            self.current = row
        error: str | None = None
        try:
            fn(row)
            if row.status == "pending":
                row.status = "ok"
        except torch.OutOfMemoryError as exc:
            row.status, error = "oom", str(exc).splitlines()[0][:300]
        except Exception as exc:  # one row's failure must not cost the others their (scarce) GPU time
            row.status, error = "error", f"{type(exc).__name__}: {exc}"[:500]
            row.result["traceback"] = traceback.format_exc()[-2000:]
        with self.lock:
            self.current = None
            row.seconds = time.monotonic() - start
            if error:
                row.note = (row.note + "; " if row.note else "") + error
        free_memory()
        self.write()
        print(f"[{self.elapsed():6.1f} s] {name}: {row.status} in {row.seconds:.1f} s {summary(row)}", flush=True)
        return row

    def elapsed(self) -> float:
        return time.monotonic() - STARTED

    # ---- output ------------------------------------------------------------------------------------------------

    def write(self) -> None:
        """Rewrite the JSON atomically (a reader never sees half a file)."""
        out = Path(self.args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        body = {"meta": {**self.meta, "elapsed_s": round(self.elapsed(), 2)},
                "rows": [row.__dict__ for row in self.rows]}
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(body, indent=1, default=str))
        os.replace(tmp, out)

    def print_table(self) -> None:
        head = f"{'row':<34}{'status':<9}{'s':>7}  {'result':<60}{'peak GiB alloc/resv':>20}{'share':>7}"
        print("\n" + head + "\n" + "-" * len(head))
        for row in self.rows:
            if row.status == "not selected":
                continue
            r = row.result
            peak = ""
            if r.get("peak_cuda_gib") is not None:
                peak = f"{r['peak_cuda_gib']:.1f}/{r['peak_cuda_reserved_gib']:.1f}"
            elif r.get("peak_rss_gib") is not None:
                peak = f"RSS {r['peak_rss_gib']:.2f}"
            share = f"{r['share']:.3f}" if isinstance(r.get("share"), float) else ""
            secs = f"{row.seconds:.1f}" if row.seconds is not None else ""
            text, note = summary(row), row.note
            if not text:
                text, note = note, ""
            print(f"{row.name:<34}{row.status:<9}{secs:>7}  {text[:60]:<60}{peak:>20}{share:>7}")
            if note:
                print(f"{'':<52}{note[:160]}")
        print(f"\n{self.meta.get('card', self.device)} · torch {torch.__version__} · {self.elapsed():.0f} s of "
              f"{self.args.budget_s:.0f} · JSON: {self.args.out}", flush=True)


def summary(row: Row) -> str:
    """The result column: what the row measured, in words and numbers."""
    r = row.result
    if "tflops" in r:
        return f"{r['tflops']:.3g} TFLOP/s bf16 (n = {r['n']})"
    if "tb_per_s" in r:
        return f"{r['tb_per_s']:.3g} TB/s ({r['bytes'] / GiB:.3g} GiB copied)"
    if "logprob_max_abs_diff" in r:
        return (f"logp Δ {r['logprob_max_abs_diff']:.1e} (≤ {r['tol_logprob']:.0e}), grad rel "
                f"{r['grad_rel_l2']:.1e} (≤ {r['tol_grad_rel']:.0e})")
    if "params" in r and "build_s" in r:
        return f"{r['params'] / 1e6:,.1f} M params, {r['weight_gib']:.3g} GiB, {r.get('detail', '')}"
    if "seconds_per_step" in r:
        return (f"{r['seconds_per_step']:.3g} s/step, {r['tokens_per_s']:,.0f} tok/s, "
                f"{r['achieved_tflops']:.3g} TFLOP/s")
    if "decode_tokens_per_s" in r:
        bound = r["bound_tokens_per_s"]
        return f"{r['decode_tokens_per_s']:,.0f} tok/s" + (f" (bound {bound:,.0f})" if bound else "")
    if "python" in r:
        return f"Python {r['python']}, torch {r['torch']}, {r.get('card', 'no GPU')}"
    if "allocated_gib" in r:
        return f"{r['allocated_gib']:.2f} GiB still allocated"
    return ""


def free_memory() -> None:
    """Drop what a finished row left: Python garbage first (it holds tensors), then the allocator's cached blocks."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- the rows --------------------------------------------------------------------------------------------------


def environment(check: Check, row: Row) -> None:
    """Versions, the card, and which optional imports work (what the later rows rely on)."""
    import importlib

    r: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                         "cuda_runtime": torch.version.cuda, "cpu_count": os.cpu_count(),
                         "matmul_precision": torch.get_float32_matmul_precision()}
    if check.device.type == "cuda":
        props = torch.cuda.get_device_properties(check.device)
        r.update(card=props.name, sm=f"{props.major}.{props.minor}", multiprocessors=props.multi_processor_count,
                 memory_gib=round(props.total_memory / GiB, 1), bf16=torch.cuda.is_bf16_supported(),
                 cudnn=torch.backends.cudnn.version(), flash_sdp=torch.backends.cuda.flash_sdp_enabled())
        check.meta["card"] = props.name
    for name in ("transformers", "peft", "accelerate", "safetensors", "tokenizers", "numpy", "pydantic",
                 "pydantic_settings", "xgrammar", "gguf", "genenv.contracts.runs", "genenv_trainer.training.grpo",
                 "genenv.inference.local"):
        try:
            module = importlib.import_module(name)
            r[f"import {name}"] = getattr(module, "__version__", "ok")
        except Exception as exc:  # record, do not stop: a later row says what it needed
            r[f"import {name}"] = f"FAILED: {type(exc).__name__}: {exc}"[:200]
    row.result = r
    failed = [k[7:] for k, v in r.items() if k.startswith("import ") and str(v).startswith("FAILED")]
    if failed:
        row.note = "cannot import " + ", ".join(failed)


def ceiling(check: Check, row: Row) -> None:
    """bf16 n×n×n matrix products on random data, after three warm-ups."""
    n, reps, device = check.sizes.matmul_n, check.sizes.matmul_reps, check.device
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        c = a @ b
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        c = a @ b
    sync(device)
    dt = time.perf_counter() - t0
    del c
    check.ceiling_flops = 2 * n**3 * reps / dt
    row.result = {"tflops": check.ceiling_flops / 1e12, "n": n, "reps": reps}


def bandwidth(check: Check, row: Row) -> None:
    """A device-to-device copy of ``copy_bytes``, counting bytes read and written."""
    device, nbytes, reps = check.device, check.sizes.copy_bytes, check.sizes.copy_reps
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src)
    sync(device)
    dt = time.perf_counter() - t0
    check.bandwidth = 2 * nbytes * reps / dt
    row.result = {"tb_per_s": check.bandwidth / 1e12, "bytes": nbytes, "reps": reps}


def parity_row(check: Check, row: Row, dtype: str, config: dict[str, Any]) -> None:
    from genenv_trainer.training.devcheck import parity

    out = parity(config, device=check.device, dtype=dtype)
    tol = TOLERANCES[dtype]
    out.update(tol_logprob=tol["logprob"], tol_grad_rel=tol["grad_rel"])
    row.result = out
    if out["logprob_max_abs_diff"] > tol["logprob"] or out["grad_rel_l2"] > tol["grad_rel"]:
        row.status = "mismatch"
    if check.device.type == "cpu":
        row.note = "CPU against CPU (no GPU here): exercises the code, compares nothing"


class Trainer:
    """The 7B model, built once, shared by the train rows."""

    def __init__(self, check: Check, config: dict[str, Any]) -> None:
        self.check, self.config = check, config
        self.model: Any = None

    def build(self, row: Row) -> None:
        from genenv.contracts.runs import LoraConfig
        from genenv.models.synthetic import random_model
        from genenv_trainer.training.devcheck import with_lora

        t0 = time.perf_counter()
        lora = paper_scale_lora() or LoraConfig()
        base = random_model(self.config, device=str(self.check.device), dtype="bfloat16", seed=0)
        self.model = with_lora(base, lora)
        sync(self.check.device)
        params = sum(p.numel() for p in self.model.parameters())
        weight_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
        row.result = {"params": params, "weight_gib": weight_bytes / GiB, "build_s": time.perf_counter() - t0,
                      "lora_rank": lora.rank, "lora_targets": list(lora.target_modules),
                      "detail": f"attention {getattr(base.config, '_attn_implementation', '?')}, LoRA r{lora.rank}",
                      "trainable": sum(p.numel() for p in self.model.parameters() if p.requires_grad)}

    def estimate(self, kind: str, ckpt: bool, seq: int) -> float:
        """Seconds the row would take: its steps (plus the first) at a per-step time scaled from the nearest row
        measured, by useful FLOPs (a third more with checkpointing); before any, from the ceiling at 25 %."""
        from genenv_trainer.training.devcheck import step_flops

        sizes = self.check.sizes
        flops = step_flops(self.config, seq, min(sizes.completion_tokens, seq // 2))
        known = list(self.check.step_seconds.items())
        if known:
            (_, k_ckpt, k_seq), secs = min(known, key=lambda kv: (kv[0][1] != ckpt, abs(kv[0][2] - seq)))
            ratio = flops / step_flops(self.config, k_seq, min(sizes.completion_tokens, k_seq // 2))
            per_step = secs * ratio * (1.35 if ckpt and not k_ckpt else 1 / 1.35 if k_ckpt and not ckpt else 1.0)
        elif self.check.ceiling_flops:
            per_step = flops / (0.25 * self.check.ceiling_flops)
        else:
            per_step = 10.0
        return (sizes.steps + 1) * per_step * 1.5 + 5.0

    def step_row(self, row: Row, kind: str, ckpt: bool, seq: int) -> None:
        from genenv_trainer.training.devcheck import run_steps, step_flops, synthetic_examples

        if self.model is None:
            row.status, row.note = "skipped", "no model (the build row failed or was skipped)"
            return
        sizes, device = self.check.sizes, self.check.device
        completion = min(sizes.completion_tokens, seq // 2)
        examples = synthetic_examples(sizes.steps + 1, seq, completion, int(self.config["vocab_size"]), seed=seq)
        agent, simulator = paper_scale_train_configs()
        try:
            res = run_steps(self.model, "grpo" if kind == "grpo" else "rwr", examples, device=device,
                            checkpointing=ckpt, agent=agent, simulator=simulator)
        finally:
            self.model.zero_grad(set_to_none=True)
        per_step = res.steady_seconds
        self.check.step_seconds[(kind, ckpt, seq)] = per_step
        flops = step_flops(self.config, seq, completion)
        row.result = {
            "seq": seq, "completion_tokens": completion, "checkpointing": ckpt, "steps": len(res.seconds),
            "first_step_s": res.seconds[0], "seconds_per_step": per_step,
            "tokens_per_s": res.tokens_per_step / per_step, "step_tflop": flops / 1e12,
            "achieved_tflops": flops / per_step / 1e12,
            "share": (flops / per_step / self.check.ceiling_flops) if self.check.ceiling_flops else None,
            "peak_cuda_gib": None if res.peak_cuda_mb is None else res.peak_cuda_mb / 1024,
            "peak_cuda_reserved_gib": None if res.peak_cuda_reserved_mb is None else res.peak_cuda_reserved_mb / 1024,
            "model_gib": None if res.cuda_before_mb is None else res.cuda_before_mb / 1024,
            "peak_rss_gib": res.peak_rss_mb / 1024,
        }

    def drop(self, row: Row) -> None:
        self.model = None
        free_memory()
        if self.check.device.type == "cuda":
            row.result = {"allocated_gib": torch.cuda.memory_allocated(self.check.device) / GiB}


def paper_scale_lora() -> Any:
    """examples/paper-scale-qwen7b.yaml's LoRA block (None when the example or pyyaml is missing)."""
    data = _paper_scale()
    if data is None:
        return None
    from genenv.contracts.runs import LoraConfig

    return LoraConfig.model_validate(data.get("lora", {}))


def paper_scale_train_configs() -> tuple[Any, Any]:
    """The example's agent (GRPO) and simulator (RWR) blocks: clip ratio, KL coefficients, learning rates."""
    from genenv.contracts.runs import AgentTrainConfig, SimulatorTrainConfig

    data = _paper_scale() or {}
    return (AgentTrainConfig.model_validate(data.get("agent", {})),
            SimulatorTrainConfig.model_validate(data.get("simulator", {})))


def _paper_scale() -> dict[str, Any] | None:
    try:
        import yaml
    except ImportError:
        return None
    path = REPO / "examples" / "paper-scale-qwen7b.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else None


class Decode:
    """The local backend on a random-init model folder of the 0.5B shape."""

    def __init__(self, check: Check, config: dict[str, Any]) -> None:
        self.check, self.config = check, config
        self.folder: Path | None = None
        self.backend: Any = None
        self.weight_bytes = 0

    def build(self, row: Row) -> None:
        from genenv.inference.base import SamplingParams
        from genenv.inference.local import LocalBackend
        from genenv.models.synthetic import save_random_model

        tmp = Path(tempfile.mkdtemp(prefix="gpu-check-decode-"))
        t0 = time.perf_counter()
        self.folder = save_random_model(self.config, tmp / "model", dtype="bfloat16", device=str(self.check.device))
        saved = time.perf_counter() - t0
        self.backend = LocalBackend(self.folder, max_batch=max(self.check.sizes.decode_batches), seed=0,
                                    device="cuda" if self.check.device.type == "cuda" else "cpu")
        asyncio.run(self.backend.complete("warm up", sampling=SamplingParams(max_tokens=2, temperature=0.7)))
        base = self.backend._base
        self.weight_bytes = sum(p.numel() * p.element_size() for p in base.parameters())
        row.result = {"params": sum(p.numel() for p in base.parameters()), "weight_gib": self.weight_bytes / GiB,
                      "build_s": time.perf_counter() - t0, "saved_s": saved,
                      "detail": f"{self.backend.device} {self.backend.dtype}"}

    def decode_row(self, row: Row, batch: int) -> None:
        if self.backend is None:
            row.status, row.note = "skipped", "no backend (its build row failed or was skipped)"
            return
        from genenv.inference.base import SamplingParams

        sampling = SamplingParams(max_tokens=self.check.sizes.decode_tokens, temperature=0.7)
        prompt = "The simulator writes a new task for the agent: "

        async def go() -> tuple[float, list[Any]]:
            t0 = time.perf_counter()
            outs = await asyncio.gather(*(self.backend.complete(prompt, sampling=sampling) for _ in range(batch)))
            return time.perf_counter() - t0, list(outs)

        seconds, outs = asyncio.run(go())
        made = sum(o.completion_tokens for o in outs)
        # Each decoding step reads every weight once (the tied embedding once, as the LM head); the KV cache of a
        # short prompt is small beside 1 GB of weights.
        bound = batch * self.check.bandwidth / self.weight_bytes if self.check.bandwidth else None
        rate = made / seconds
        row.result = {"batch": batch, "tokens": made, "seconds": seconds, "decode_tokens_per_s": rate,
                      "bound_tokens_per_s": bound, "share": rate / bound if bound else None,
                      "device": self.backend.device, "dtype": self.backend.dtype}
        if bound is None:
            row.note = "no bandwidth row: no bound"

    def close(self, row: Row) -> None:
        if self.backend is not None:
            asyncio.run(self.backend.aclose())
        self.backend = None
        if self.folder is not None:
            import shutil

            shutil.rmtree(self.folder.parent, ignore_errors=True)


def main() -> None:
    """Parse arguments, run the rows in order within the budget, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="Every row at toy sizes on the CPU (CI).")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="Seconds the whole run may take, start-up included (default 420; smoke 300).")
    parser.add_argument("--reserve-s", type=float, default=5.0, help="Kept back from the budget for the output.")
    parser.add_argument("--out", default="gpu_check.json", help="Where the JSON goes (rewritten after every row).")
    parser.add_argument("--only", default="", help="Comma-separated groups: env,ceiling,bandwidth,parity,train,decode.")
    parser.add_argument("--seq-lens", default=None, help="Tokens per sequence of the train rows (1024,4096,9000).")
    parser.add_argument("--steps", type=int, default=None, help="Timed steps per train row after the first (2).")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="auto: CUDA when torch sees it (smoke: always the CPU).")
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else Sizes()
    if args.seq_lens:
        sizes.seq_lens = tuple(int(x) for x in args.seq_lens.split(","))
    if args.steps:
        sizes.steps = args.steps
    if args.budget_s is None:
        args.budget_s = 300.0 if args.smoke else 420.0
    want_cuda = args.device == "cuda" or (args.device == "auto" and not args.smoke and torch.cuda.is_available())
    device = torch.device("cuda" if want_cuda else "cpu")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-tensor bars would fill the little output a device call returns
    check = Check(args, sizes, device)
    threading.Thread(target=check.watchdog, name="budget", daemon=True).start()
    print(f"gpu_check: {device}, budget {args.budget_s:.0f} s, {check.elapsed():.1f} s spent importing", flush=True)

    from genenv.models.synthetic import QWEN_05B, QWEN_7B, load_config, shrink

    big, small = load_config(QWEN_7B), load_config(QWEN_05B)
    if sizes.shrink:
        big, small = shrink(big), shrink(small)
    check.meta.update(train_config=QWEN_7B, decode_config=QWEN_05B, sizes=sizes.__dict__)

    check.run("environment", "env", 1, lambda row: environment(check, row))
    check.run(f"bf16 matmul ceiling {sizes.matmul_n}³", "ceiling", 5, lambda row: ceiling(check, row))
    check.run("memory bandwidth (copy)", "bandwidth", 5, lambda row: bandwidth(check, row))
    tiny = shrink(load_config(QWEN_7B))
    for dtype in ("float32", "bfloat16"):
        check.run(f"parity {dtype} ({device.type} vs cpu)", "parity", 15,
                  lambda row, dtype=dtype: parity_row(check, row, dtype, tiny))

    trainer = Trainer(check, big)
    check.run("7B shape: build on device", "train", 60 if not sizes.shrink else 5, trainer.build)
    for kind in ("grpo", "rwr"):
        for seq in sizes.seq_lens:
            for ckpt in (False, True):
                label = f"{kind} {seq:,} tok, ckpt {'on' if ckpt else 'off'}"
                check.run(label, "train", trainer.estimate(kind, ckpt, seq),
                          lambda row, kind=kind, seq=seq, ckpt=ckpt: trainer.step_row(row, kind, ckpt, seq))
    check.run("7B shape: free", "train", 0, trainer.drop)  # estimate 0: a cleanup always runs

    decode = Decode(check, small)
    check.run("0.5B shape: build local backend", "decode", 40 if not sizes.shrink else 10, decode.build)
    for batch in sizes.decode_batches:
        check.run(f"decode batch {batch}", "decode", 20 if not sizes.shrink else 5,
                  lambda row, batch=batch: decode.decode_row(row, batch))
    check.run("0.5B shape: close", "decode", 0, decode.close)

    check.write()
    check.print_table()


if __name__ == "__main__":
    main()
