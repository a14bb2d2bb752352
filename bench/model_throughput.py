"""vLLM throughput of the catalogue's base models, measured in one run on this machine.

For each model the benchmark starts ``genenv serve vllm --role both --model NAME`` (the launcher's defaults: its
served context, thread binding, dtype, grouped-LoRA plugin on CPU), sends the rollout worker's requests (one per
task with ``n = G``, log-probs and token ids) straight to it, without and with a rank-16 adapter (B small and random:
full LoRA compute, outputs close to the base model's; see rollout_throughput.make_adapter), at two shapes:

- arithmetic: 16 arithmetic seed tasks × G = 8, 24 response tokens (the experiments' arithmetic shape);
- BFCL: 16 function-calling seed tasks × G = 8, 96 response tokens (long prompts: the functions' docs).

It prints one table (rollouts/s, generated tokens/s, prefilled tokens/s, fraction of the machine's bf16 matmul
limit at the model's MLP shape) and the ratios: adapter / base per model, and each model against the first.

    python bench/model_throughput.py                    # both models, ≈ 10 minutes on 2 cores
    python bench/model_throughput.py --models smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import load_adapter, vllm
from rich.console import Console
from rich.table import Table
from rollout_throughput import Shape, direct, make_adapter, matmul_limit

from genenv.domains import get_domain
from genenv.models.catalogue import CATALOGUE
from genenv.models.prepare import prepare_model
from genenv.settings import get_settings

SHAPES = {
    "arithmetic": Shape("arithmetic 16×8", 16, 8, 24),
    "function_calling": Shape("BFCL 16×8", 16, 8, 96),
}


@dataclass
class Measured:
    model: str
    shape: str
    adapter: bool
    rollouts: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    limit_tokens_per_s: float

    @property
    def per_s(self) -> float:
        return self.rollouts / self.seconds

    @property
    def of_limit(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.seconds / self.limit_tokens_per_s


def prompts_for(domain_name: str, benchmarks: Path, count: int) -> list[list[dict[str, str]]]:
    """The agent prompts of the domain's first ``count`` training seeds (the same for every model)."""
    domain = get_domain(domain_name)
    seeds = domain.load_seeds(benchmarks if domain_name != "arithmetic" else None, "train")[:count]
    return [[dict(m) for m in domain.agent_messages(s.payload)] for s in seeds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(CATALOGUE), help="Comma-separated catalogue names.")
    parser.add_argument("--port", type=int, default=8191, help="Port of the servers the benchmark starts.")
    parser.add_argument("--concurrency", type=int, default=16, help="Requests in flight.")
    parser.add_argument("--temperature", type=float, default=0.7, help="Sampling temperature.")
    args = parser.parse_args()

    console = Console(width=150)
    settings = get_settings()
    tmp = Path(tempfile.mkdtemp(prefix="genenv-model-bench-"))
    prompts = {d: prompts_for(d, settings.paths.benchmarks, s.tasks) for d, s in SHAPES.items()}
    rows: list[Measured] = []
    startup: dict[str, float] = {}
    for name in args.models.split(","):
        model_dir = prepare_model(settings.paths.model_cache, name)
        mcfg = json.loads((model_dir / "config.json").read_text())
        gflops = max(matmul_limit(mcfg["hidden_size"], mcfg["intermediate_size"]).values())
        params = sum(f.stat().st_size for f in model_dir.glob("*.safetensors")) / 2  # bf16: 2 bytes per parameter
        limit = gflops * 1e9 / (2 * params)
        adapter = make_adapter(model_dir, 16, tmp / f"adapter-{name}")
        console.log(f"{name}: limit {gflops:.0f} GFLOP/s → {limit:.0f} tokens/s; starting its server")
        started = time.monotonic()
        with vllm(args.port, tmp / f"vllm-{name}.log", model=model_dir) as server:
            startup[name] = time.monotonic() - started
            url = server.url
            load_adapter(url, "bench-adapter", adapter)
            for domain_name, shape in SHAPES.items():
                for with_adapter in (False, True):
                    served = "bench-adapter" if with_adapter else settings.inference.served_model_name
                    n, p, c, s = asyncio.run(direct(url, served, prompts[domain_name], shape, args.temperature,
                                                    args.concurrency, per_attempt=False))  # fmt: skip
                    rows.append(Measured(name, shape.name, with_adapter, n, p, c, s, limit))
                    console.log(f"{name} · {shape.name} · {'adapter' if with_adapter else 'base'}: "
                                f"{n / s:.2f} rollouts/s")  # fmt: skip

    table = Table(title="vLLM throughput per base model (one run)")
    for col in ("model", "shape", "adapter", "rollouts/s", "gen tok/s", "prefill tok/s", "of limit"):
        table.add_column(col, justify="right" if col not in ("model", "shape") else "left")
    for r in rows:
        table.add_row(r.model, r.shape, "rank 16" if r.adapter else "–", f"{r.per_s:.2f}",
                      f"{r.completion_tokens / r.seconds:.1f}", f"{r.prompt_tokens / r.seconds:.0f}",
                      f"{r.of_limit:.1%}")  # fmt: skip
    console.print(table)
    ratios = Table(title="ratios (rollouts/s)")
    for col in ("model", "shape", "adapter / base", "base / first model's base"):
        ratios.add_column(col)
    first = rows[0].model
    by_key: dict[tuple[str, str, bool], Measured] = {(r.model, r.shape, r.adapter): r for r in rows}
    for (model, shape, with_adapter), r in by_key.items():
        if with_adapter:
            continue
        ratio_adapter = by_key[(model, shape, True)].per_s / r.per_s
        ratio_model = r.per_s / by_key[(first, shape, False)].per_s
        ratios.add_row(model, shape, f"{ratio_adapter:.2f}", f"{ratio_model:.2f}")
    console.print(ratios)
    console.print("server start-up (s): " + ", ".join(f"{k} {v:.0f}" for k, v in startup.items()))
    summary: dict[str, Any] = {"rows": [r.__dict__ | {"per_s": r.per_s} for r in rows], "startup_s": startup}
    (tmp / "model_throughput.json").write_text(json.dumps(summary, indent=1))
    console.print(f"raw numbers: {tmp / 'model_throughput.json'}")


if __name__ == "__main__":
    main()
