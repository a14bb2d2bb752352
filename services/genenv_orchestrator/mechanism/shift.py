"""The shift probe's driver: for one genenv run, the simulator prompts of its first epoch (one per seed) written
from by the base simulator and every simulator adapter the run trained, then by the base simulator steered by each
difficulty hint; every valid task attempted by the BASE agent (the run's rollout temperature), so every version's
tasks are judged by the same student. The numbers: genenv.experiments.shift."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.progress import Progress
from sqlalchemy import select

from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import Seed
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import AdapterRow, RunRow, SeedRow, TaskRow
from genenv.domains import get_domain
from genenv.domains.base import Domain, TaskRejected
from genenv.experiments.shift import STEERING, PromptResult, summarise
from genenv.inference.base import SamplingParams
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import get_settings
from genenv_orchestrator.mechanism.engine import console, load_adapter
from genenv_simulator.generation import extract_json

Rows = list[dict[str, Any]]


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


async def run_probe(db_url: str, run_id: str, url: str, prompts_n: int, samples: int, attempts: int
                    ) -> tuple[Rows, Rows]:
    """One row per simulator version (base first), then one per steering hint."""
    config, prompts, adapters, seeds = load_run(db_url, run_id)
    prompts, seeds = prompts[:prompts_n], seeds[:prompts_n]
    domain = get_domain(config.domain)
    versions: list[tuple[str, str | None]] = [("base", None)]
    for version, path in adapters:
        name = f"shift-{run_id[:8]}-sim-v{version}"
        load_adapter(url, name, Path(path))
        versions.append((f"v{version}", name))
    backend = OpenAIBackend(url, get_settings().inference)
    rows, steering = [], []
    try:
        with Progress(console=console, transient=True) as progress:
            bar = progress.add_task("simulator versions, then hints", total=len(versions) + len(STEERING))
            for label, adapter in versions:
                results = await probe_version(backend, domain, config, prompts, adapter, samples, attempts)
                rows.append(summarise(config, domain, label, results))
                progress.advance(bar)
            for label, stats in STEERING.items():
                hinted = [domain.simulator_messages(seed, config.variations_per_seed,
                                                    target_success=config.curriculum.alpha, stats=stats)
                          for seed in seeds]
                results = await probe_version(backend, domain, config, hinted, None, samples, attempts)
                steering.append(summarise(config, domain, label, results))
                progress.advance(bar)
    finally:
        await backend.aclose()
    return rows, steering
