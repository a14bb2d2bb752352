"""Where rollout and generation time goes, and how close each path is to the machine's limit (issue 11).

One run prints one table. The benchmark starts the servers itself (``genenv serve vllm --role both``): the
baseline's for row (c0), then this checkout's for every other row (``--url`` uses one running server for all).
Every row sends the run's sampling settings (temperature, max tokens, log-probs + token ids), at two shapes: the README
quickstart's (24 tasks × G = 6, 24 response tokens) and 16 tasks × G = 8.

- (a) vLLM direct, base model: one request per task with ``n = G`` (what the worker sends), and, for reference,
  one request per attempt (what the worker sent before);
- (b) vLLM direct with an agent LoRA adapter (rank ``--lora-rank``, B small and random rather than PEFT's B = 0: the
  adapter adds its full compute — the plugin skips a slot of zeros, so B = 0 would understate its cost — and moves
  the outputs, hence lengths, only slightly from the base model's);
- (c) the rollout worker with that adapter, reading tasks from the database and storing every rollout;
- (c0) the same with the code before this issue (``--baseline-rev``, a git worktree): its worker, which sends one
  request per attempt, against its own server launcher (vLLM's default thread binding, no grouped-LoRA plugin);
- (d) simulator generation (``generate_tasks``: n variations per seed, guided JSON, the quickstart's 96 task
  tokens) without and with a simulator adapter, and (d') without guided decoding (its cost);
- the limit: a torch matmul at the model's MLP shapes (bf16 and fp32, the faster counts), as GFLOP/s, turned
  into tokens/s with 2 × parameters FLOPs per token. Each row's "of limit" is its processed tokens (prompt once
  per request + completion) per second as a fraction of that.

    python bench/rollout_throughput.py                                  # ≈ 7 minutes on 2 cores
    python bench/rollout_throughput.py --baseline-rev none --rounds 1   # this checkout only, ≈ 2 minutes
    GENENV_VLLM_GROUPED_LORA=ops python bench/rollout_throughput.py ... # the plugin's first level only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from _common import ROOT, load_adapter, vllm
from rich.console import Console
from rich.table import Table

from genenv.contracts.adapters import Role, adapter_name
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GeneratedTask, GenerateRequest, InlineSeed, TaskStatus
from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.domains import get_domain
from genenv.inference.openai_client import OpenAIBackend
from genenv.models.prepare import resolve_model
from genenv.settings import DatabaseSettings, InferenceSettings, get_settings
from genenv_rollout.worker import rollout_epoch
from genenv_simulator.generation import generate_tasks

# The commit before issue 11: its worker sends one request per attempt.
DEFAULT_BASELINE_REV = "0b81221"


SIM_BASE = "(d) simulator generation, base"
SIM_ADAPTER = "(d) simulator generation, adapter"
SIM_FREE = "(d') simulator generation, base, no guided decoding"
ROW_ORDER = ["(a) ", "(a') ", "(b) ", "(b') ", "(c) ", "(c0)", SIM_BASE, SIM_ADAPTER, SIM_FREE]


@dataclass(frozen=True)
class Shape:
    name: str
    tasks: int
    g: int
    max_tokens: int


@dataclass
class Row:
    path: str
    shape: str
    units: int  # rollouts or generated tasks
    prompt_tokens: int  # prefilled tokens (once per request)
    completion_tokens: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.units / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds

    def fraction_of(self, limit_tokens_per_s: float) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.seconds / limit_tokens_per_s


# ---------------------------------------------------------------- the machine's limit


def matmul_limit(hidden: int, intermediate: int, tokens: int = 256, repeats: int = 20) -> dict[str, float]:
    """GFLOP/s of [tokens × hidden] @ [hidden × intermediate] in bf16 and fp32 (all cores, as torch sets them)."""
    import torch

    out: dict[str, float] = {}
    for dtype in (torch.bfloat16, torch.float32):
        a = torch.randn(tokens, hidden, dtype=dtype)
        b = torch.randn(hidden, intermediate, dtype=dtype)
        for _ in range(3):
            a @ b
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        seconds = time.perf_counter() - start
        out[str(dtype).removeprefix("torch.")] = 2 * tokens * hidden * intermediate * repeats / seconds / 1e9
    return out


# ---------------------------------------------------------------- rollouts


async def direct(
    url: str, model: str, prompts: list[list[dict[str, str]]], shape: Shape, temperature: float, concurrency: int,
    per_attempt: bool,
) -> tuple[int, int, int, float]:
    """(rollouts, prompt tokens, completion tokens, seconds) sending the tasks straight to vLLM."""
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=900, limits=limits) as client:

        async def one(messages: list[dict[str, str]], n: int) -> tuple[int, int, int]:
            body = {
                "model": model, "messages": messages, "temperature": temperature, "max_tokens": shape.max_tokens,
                "logprobs": True, "top_logprobs": 0, "return_token_ids": True, "n": n,
            }
            async with sem:
                r = await client.post("/v1/chat/completions", json=body)
            r.raise_for_status()
            usage = r.json()["usage"]
            return n, int(usage["prompt_tokens"]), int(usage["completion_tokens"])

        jobs = [(p, 1) for p in prompts for _ in range(shape.g)] if per_attempt else [(p, shape.g) for p in prompts]
        start = time.perf_counter()
        results = await asyncio.gather(*(one(p, n) for p, n in jobs))
        seconds = time.perf_counter() - start
    return sum(r[0] for r in results), sum(r[1] for r in results), sum(r[2] for r in results), seconds


def _stored_prompt_tokens(db_url: str, run_id: str, epoch: int, g: int) -> int:
    """Prompt tokens prefilled by a worker row: once per task when sent with n = G, else once per attempt."""
    from sqlalchemy import func, select

    from genenv.db.models import RolloutRow, TaskRow

    engine = make_engine(DatabaseSettings(url=db_url))
    try:
        with engine.connect() as conn:
            total = conn.execute(
                select(func.sum(RolloutRow.prompt_tokens)).join(TaskRow, TaskRow.id == RolloutRow.task_id).where(
                    TaskRow.run_id == run_id, TaskRow.epoch == epoch
                )
            ).scalar_one()
    finally:
        engine.dispose()
    return int(total or 0)


BASELINE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from genenv.db.engine import make_engine, make_session_factory
    from genenv.inference.openai_client import OpenAIBackend
    from genenv.settings import DatabaseSettings, InferenceSettings
    from genenv_rollout.worker import rollout_epoch
    db_url, url, run_id, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    sessions = make_session_factory(make_engine(DatabaseSettings(url=db_url)))
    async def main():
        backend = OpenAIBackend(url, InferenceSettings(request_timeout_s=900))
        try:
            r = await rollout_epoch(sessions, backend, run_id, epoch)
        finally:
            await backend.aclose()
        print(json.dumps({"created": r.created, "errors": r.errors, "tokens": r.completion_tokens,
                          "seconds": r.seconds}))
    asyncio.run(main())
    """
)


def baseline_worktree(rev: str, where: Path) -> Path:
    """A git worktree of ``rev`` (created once, reused)."""
    if not (where / "shared").exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True,
                       capture_output=True)
    return where


def run_baseline(tree: Path, db_url: str, url: str, run_id: str, epoch: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'shared'}{os.pathsep}{tree / 'services'}"}
    out = subprocess.run(
        [sys.executable, "-c", BASELINE_SCRIPT, db_url, url, run_id, str(epoch)],
        env=env, check=False, capture_output=True, text=True, cwd=tree,
    )
    if out.returncode != 0:
        raise SystemExit(f"the baseline worker ({tree}) failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- adapters


def make_adapter(model_dir: Path, rank: int, where: Path) -> Path:
    """A PEFT LoRA adapter on the attention projections (the run default). B ~ N(0, 1e-3²) instead of PEFT's zeros:
    every matrix nonzero, so the server computes the whole LoRA term, as for a trained adapter."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    model = get_peft_model(
        base, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                         task_type="CAUSAL_LM"),
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 1e-3)
    model.save_pretrained(str(where))
    return where


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=None,
                        help="A running vLLM server for every row (default: the benchmark starts this checkout's "
                             "server, and the baseline's own server for row (c0)).")
    parser.add_argument("--port", type=int, default=8190, help="Port of the servers the benchmark starts.")
    parser.add_argument("--model", default=None, help="Model folder or cache name (default: settings).")
    parser.add_argument("--temperature", type=float, default=0.7, help="The quickstart's rollout temperature.")
    parser.add_argument("--lora-rank", type=int, default=16, help="Rank of the served adapters (run default 16).")
    parser.add_argument("--concurrency", type=int, default=InferenceSettings().max_concurrency,
                        help="Requests in flight (the worker's inference.max_concurrency).")
    parser.add_argument("--baseline-rev", default=DEFAULT_BASELINE_REV,
                        help="Commit whose rollout worker (and server launcher) is row (c0); 'none' skips it.")
    parser.add_argument("--sim-seeds", type=int, default=6, help="Simulator seeds (quickstart 6).")
    parser.add_argument("--sim-n", type=int, default=4, help="Variations per seed (quickstart 4).")
    parser.add_argument("--sim-max-tokens", type=int, default=96, help="Task tokens (quickstart 96).")
    parser.add_argument("--skip-per-attempt", action="store_true", help="Leave out the per-attempt direct rows.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Passes of rows (a)–(d), alternating; each row is the total over its passes.")
    return parser.parse_args(argv)


SHAPES = [Shape("quickstart 24×6", 24, 6, 24), Shape("16 tasks × G=8", 16, 8, 24)]


@dataclass(frozen=True)
class Limit:
    """The machine's limit: matmul GFLOP/s per dtype at the model's MLP shapes, and the model's parameters."""

    gflops: dict[str, float]
    params: int

    @property
    def tokens_per_s(self) -> float:
        return max(self.gflops.values()) * 1e9 / (2 * self.params)


def measure_limit(model_dir: Path) -> Limit:
    """matmul_limit at the model's MLP shapes, and its parameter count (2 × parameters FLOPs per token)."""
    with (model_dir / "config.json").open() as f:
        mcfg = json.load(f)
    gflops = matmul_limit(mcfg["hidden_size"], mcfg["intermediate_size"])
    from transformers import AutoModelForCausalLM

    params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())
    return Limit(gflops, params)


class Bench:
    """The rows of one benchmark run and what measuring them needs: a scratch database, the arithmetic seeds, the
    served model and agent adapter, and the baseline's worktree (None when skipped)."""

    def __init__(self, args: argparse.Namespace, console: Console, model_dir: Path, tmp: Path) -> None:
        self.args, self.console, self.model_dir, self.tmp = args, console, model_dir, tmp
        self.served = get_settings().inference.served_model_name
        self.db_url = f"sqlite:///{tmp / 'bench.db'}"
        migrate.upgrade(self.db_url)
        self.sessions = make_session_factory(make_engine(DatabaseSettings(url=self.db_url)))
        self.domain = get_domain("arithmetic")
        self.seeds = self.domain.load_seeds(None, "train")
        self.url = args.url or f"http://127.0.0.1:{args.port}"
        self.adapter_path = make_adapter(model_dir, args.lora_rank, tmp / "adapter")
        self.rows: list[Row] = []
        self.tree = None if args.baseline_rev == "none" else baseline_worktree(args.baseline_rev, tmp / "baseline")

    def picked_for(self, shape: Shape) -> list[Any]:
        return [self.seeds[i * len(self.seeds) // shape.tasks] for i in range(shape.tasks)]  # spread over levels

    def add(self, label: str, shape: str, units: int, prompt: int, completion: int, seconds: float) -> None:
        """Sum a pass into its row (rows over several rounds are totals)."""
        row = next((r for r in self.rows if r.path == label and r.shape == shape), None)
        if row is None:
            self.rows.append(Row(label, shape, units, prompt, completion, seconds))
            return
        row.units += units
        row.prompt_tokens += prompt
        row.completion_tokens += completion
        row.seconds += seconds

    def _stored_run(self, baseline: bool, shape: Shape, epoch: int) -> str:
        """A fresh run with its agent adapter and ``shape.tasks`` valid tasks of ``epoch``; its id."""
        cfg = RunConfig(name="bench", rollouts_per_task=shape.g, max_response_tokens=shape.max_tokens,
                        rollout_temperature=self.args.temperature)
        with session_scope(self.sessions) as s:
            row = run_repo.create(s, cfg)
            if baseline:
                # Only the fields set here: the baseline's RunConfig forbids fields added since (eval_splits, …).
                row.config = cfg.model_dump(mode="json", exclude_unset=True)
            run_id = row.id
            adapter_repo.create_adapter(s, run_id=run_id, role=Role.AGENT, version=1, path=str(self.adapter_path),
                                        parent_version=None, metrics={})
            tasks = [GeneratedTask(seed_id=sd.id, domain="arithmetic", variation=0, payload=sd.payload,
                                   status=TaskStatus.VALID) for sd in self.picked_for(shape)]
            task_repo.store_generated(s, run_id, epoch, tasks)
        return run_id

    async def worker_row(self, label: str, baseline: bool, shape: Shape, epoch: int) -> None:
        """Row (c) or (c0) at one shape: a fresh run with its adapter and tasks, rolled out and stored."""
        run_id = self._stored_run(baseline, shape, epoch)
        load_adapter(self.url, adapter_name(run_id, Role.AGENT, 1), self.adapter_path)
        self.console.log(f"{shape.name}: {label}")
        if baseline:
            assert self.tree is not None
            r = await asyncio.to_thread(run_baseline, self.tree, self.db_url, self.url, run_id, epoch)
            created, errors, tokens, secs = r["created"], r["errors"], r["tokens"], r["seconds"]
        else:
            backend = OpenAIBackend(self.url, InferenceSettings(max_concurrency=self.args.concurrency,
                                                                request_timeout_s=900))
            try:
                res = await rollout_epoch(self.sessions, backend, run_id, epoch)
            finally:
                await backend.aclose()
            created, errors, tokens, secs = res.created, res.errors, res.completion_tokens, res.seconds
        assert created == shape.tasks * shape.g and errors == 0, (label, created, errors)
        prefill = _stored_prompt_tokens(self.db_url, run_id, epoch, shape.g)
        if not baseline:
            prefill //= shape.g  # n = G: each task's prompt is prefilled once
        self.add(label, shape.name, created, prefill, tokens, secs)

    async def warm_up(self) -> None:
        warm = [self.domain.agent_messages(self.seeds[0].payload)]
        await direct(self.url, self.served, warm, Shape("warm", 1, 4, 8), self.args.temperature, 4, False)

    async def direct_rows(self, rnd: int, shape: Shape, agent_adapter: str) -> None:
        """Rows (a)–(b') at one shape, one round."""
        args = self.args
        prompts = [self.domain.agent_messages(sd.payload) for sd in self.picked_for(shape)]
        for label, model, per_attempt in [
            ("(a) vLLM direct, base, n=G", self.served, False),
            ("(a') vLLM direct, base, one request per attempt", self.served, True),
            ("(b) vLLM direct, adapter, n=G", agent_adapter, False),
            ("(b') vLLM direct, adapter, one request per attempt", agent_adapter, True),
        ]:
            if per_attempt and args.skip_per_attempt:
                continue
            self.console.log(f"{shape.name}: {label} (round {rnd + 1}/{args.rounds})")
            n, p, c, secs = await direct(self.url, model, prompts, shape, args.temperature, args.concurrency,
                                         per_attempt)
            self.add(label, shape.name, n, p, c, secs)

    async def simulator_rows(self, agent_adapter: str) -> None:
        """Rows (d) and (d'): short runs in the same rounds, alternating (base, adapter, free, base, …), summed."""
        args, seeds = self.args, self.seeds
        sim_seeds = [InlineSeed(id=sd.id, payload=sd.payload) for sd in seeds[:: max(1, len(seeds) // args.sim_seeds)]]
        sim_seeds = sim_seeds[: args.sim_seeds]
        sim_shape = f"{len(sim_seeds)} seeds × n={args.sim_n}"
        totals: dict[str, list[float]] = {}
        for label, adapter in args.rounds * [(SIM_BASE, None), (SIM_ADAPTER, agent_adapter), (SIM_FREE, None)]:
            request = GenerateRequest(domain="arithmetic", seeds=sim_seeds, n=args.sim_n, target_success=0.5,
                                      adapter=adapter, temperature=1.0, max_tokens=args.sim_max_tokens)
            guided = label != SIM_FREE
            backend = OpenAIBackend(self.url, InferenceSettings(max_concurrency=args.concurrency,
                                                                request_timeout_s=900))
            self.console.log(f"{sim_shape}: {label}")
            start = time.perf_counter()
            try:
                tasks = await generate_tasks(backend, self.domain, request, request.seeds, guided=guided)
            finally:
                await backend.aclose()
            secs = time.perf_counter() - start
            errors = sum(t.rejection_reason is not None and t.rejection_reason.value == "generation_error"
                         for t in tasks)
            assert errors == 0, f"{errors} generation errors"
            total = totals.setdefault(label, [0, 0, 0, 0.0])
            total[0] += len(tasks)
            total[1] += sum(t.prompt_tokens or 0 for t in tasks) // args.sim_n
            total[2] += sum(t.completion_tokens or 0 for t in tasks)
            total[3] += secs
        for label, (units, prompt, completion, secs) in totals.items():
            self.rows.append(Row(label, sim_shape, int(units), int(prompt), int(completion), secs))

    async def current_rows(self) -> None:
        """Rows (a)–(d) of this checkout."""
        await self.warm_up()
        agent_adapter = "bench-agent"
        load_adapter(self.url, agent_adapter, self.adapter_path)
        # Rounds alternate the rows (a, b, c, a, b, c, …) so that a slow spell of the machine hits every row alike.
        for rnd in range(self.args.rounds):
            for i, shape in enumerate(SHAPES):
                await self.direct_rows(rnd, shape, agent_adapter)
                await self.worker_row("(c) rollout worker, adapter, stored", False, shape, rnd * len(SHAPES) + i)
        await self.simulator_rows(agent_adapter)

    async def baseline_rows(self) -> None:
        """Row (c0): one round (the baseline is several times slower)."""
        await self.warm_up()
        for epoch, shape in enumerate(SHAPES):
            await self.worker_row("(c0) baseline worker, adapter, stored", True, shape, epoch)

    def measure(self) -> None:
        """Every row, on the servers the benchmark starts (or on ``--url``'s)."""
        if self.args.url is not None:
            if self.tree is not None:
                asyncio.run(self.baseline_rows())
            asyncio.run(self.current_rows())
            return
        if self.tree is not None:
            # The baseline's own launcher and server settings, without this checkout's vLLM plugin.
            self.console.log(f"starting the baseline's vLLM server ({self.args.baseline_rev})")
            with vllm(self.args.port, self.tmp / "vllm-baseline.log", tree=self.tree,
                      env={"GENENV_VLLM_GROUPED_LORA": "0"}):
                asyncio.run(self.baseline_rows())
        self.console.log("starting this checkout's vLLM server")
        with vllm(self.args.port, self.tmp / "vllm.log"):
            asyncio.run(self.current_rows())


def sort_rows(rows: list[Row]) -> None:
    """Shapes in SHAPES' order, then rows in ROW_ORDER's."""
    order = {shape.name: i for i, shape in enumerate(SHAPES)}
    rows.sort(key=lambda r: (order.get(r.shape, len(order)), next(i for i, p in enumerate(ROW_ORDER)
                                                                  if r.path.startswith(p))))


def ratio(rows: list[Row], num: str, den: str, shape: str) -> str:
    """Per-second ratio of two rows at one shape ("n/a" when either is missing)."""
    a = next((r for r in rows if r.path.startswith(num) and r.shape == shape), None)
    b = next((r for r in rows if r.path.startswith(den) and r.shape == shape), None)
    return "n/a" if a is None or b is None else f"{a.per_s / b.per_s:.2f}"


def render(console: Console, args: argparse.Namespace, rows: list[Row], limit: Limit, model_name: str) -> None:
    """The throughput table, the limit, the ratios and the simulator's adapter cost."""
    where = args.url or "servers started per row group"
    table = Table(title=f"Rollout and generation throughput: {os.cpu_count()} cores, {where}, {model_name}, "
                        f"T={args.temperature}, concurrency {args.concurrency}, LoRA rank {args.lora_rank}, "
                        f"{args.rounds} rounds")
    for col in ["path", "shape", "rollouts / tasks", "seconds", "per s", "gen tokens/s", "of limit"]:
        table.add_column(col, justify="left" if col in {"path", "shape"} else "right")
    for r in rows:
        table.add_row(r.path, r.shape, str(r.units), f"{r.seconds:.1f}", f"{r.per_s:.2f}", f"{r.tokens_per_s:.1f}",
                      f"{r.fraction_of(limit.tokens_per_s):.1%}")
    console.print(table)
    console.print(
        f"limit: matmul {limit.gflops['bfloat16']:.1f} GFLOP/s bf16, {limit.gflops['float32']:.1f} GFLOP/s fp32 "
        f"({os.cpu_count()} threads) → {limit.tokens_per_s:,.0f} tokens/s at 2 × {limit.params / 1e6:.0f}M "
        "FLOPs/token"
    )
    ratios = Table(title="Ratios (same run)")
    for col in ["shape", "(c)/(b)  ≥ 0.9", "(c)/(a)  ≥ 0.8", "(c)/(c0)  ≥ 3", "(b)/(a) adapter cost"]:
        ratios.add_column(col, justify="left" if col == "shape" else "right")
    for shape in SHAPES:
        ratios.add_row(shape.name, ratio(rows, "(c) ", "(b) ", shape.name), ratio(rows, "(c) ", "(a) ", shape.name),
                       ratio(rows, "(c) ", "(c0)", shape.name), ratio(rows, "(b) ", "(a) ", shape.name))
    console.print(ratios)
    sim = {r.path: r for r in rows if r.path in (SIM_BASE, SIM_ADAPTER)}
    if len(sim) == 2:
        with_adapter = sim[SIM_ADAPTER].per_s / sim[SIM_BASE].per_s
        console.print(f"simulator generation with / without adapter: {with_adapter:.2f} (target ≥ 0.8)")


def main() -> None:
    args = parse_args()
    console = Console(width=160)
    settings = get_settings()
    model_dir = resolve_model(args.model or settings.inference.base_model, settings.paths.model_cache)
    tmp = Path(tempfile.mkdtemp(prefix="genenv-bench-"))
    console.log(f"limit: matmul at the model's MLP shapes ({model_dir.name})")
    limit = measure_limit(model_dir)
    bench = Bench(args, console, model_dir, tmp)
    bench.measure()
    sort_rows(bench.rows)
    render(console, args, bench.rows, limit, model_dir.name)
    if bench.tree is not None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(bench.tree)], check=False)


if __name__ == "__main__":
    main()
