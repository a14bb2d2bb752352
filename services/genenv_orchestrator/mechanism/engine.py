"""The base model serving both roles for the mechanism experiments: the simulator writes tasks for seeds, the
frozen base agent attempts them; served by a vLLM server (started here unless a URL is given) or in process."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from genenv.contracts.runs import SeedSampling
from genenv.contracts.tasks import Seed
from genenv.devstack import free_port
from genenv.domains.base import Domain, TaskRejected
from genenv.experiments.mechanism_pools import ALPHA, Sizes
from genenv.inference.base import InferenceBackend, SamplingParams
from genenv.inference.factory import build_local_backend
from genenv.inference.launcher import LaunchError, started
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import GenEnvSettings
from genenv_orchestrator.seeds import sample_seeds
from genenv_simulator.generation import extract_json

console = Console(width=None if sys.stdout.isatty() else 160)
Backend = Literal["vllm", "local"]


def load_adapter(url: str, name: str, path: Path) -> None:
    """Load a LoRA adapter into a running vLLM server (one already loaded under ``name`` is fine)."""
    r = httpx.post(f"{url}/v1/load_lora_adapter", json={"lora_name": name, "lora_path": str(path)}, timeout=300)
    if r.status_code >= 400 and "already" not in r.text:
        raise SystemExit(f"cannot load adapter {name}: HTTP {r.status_code} {r.text[:300]}")


@contextmanager
def vllm_server(log_name: str) -> Iterator[str]:
    """``genenv serve vllm --role both`` (the settings' base model) for the ``with`` block, logging to
    <the temp folder>/<log_name>-<port>.log; yields its URL."""
    port = free_port()
    log = Path(tempfile.gettempdir()) / f"{log_name}-{port}.log"
    argv = [sys.executable, "-m", "genenv.cli.main", "serve", "vllm", "--role", "both", "--port", str(port)]
    try:
        with started(argv, f"http://127.0.0.1:{port}", path="/health", timeout_s=600.0, log=log,
                     env=dict(os.environ)) as server:
            yield server.url
    except LaunchError as exc:
        raise SystemExit(str(exc)) from exc


class Engine:
    """The base model serving both roles, with the arms' simulator adapters loaded under names of their own."""

    def __init__(self, backend: InferenceBackend, url: str | None, domain: Domain, sizes: Sizes) -> None:
        self.backend, self.url, self.domain, self.sizes = backend, url, domain, sizes
        self.schema = domain.task_json_schema()

    async def load(self, name: str, path: Path) -> None:
        """Make ``name`` servable (vLLM's runtime LoRA loading, or the local backend's)."""
        if self.url is not None:
            load_adapter(self.url, name, path)
        else:
            await self.backend.load_adapter(name, str(path))  # type: ignore[attr-defined]

    async def write(self, seed: Seed, n: int, adapter: str | None) -> list[dict[str, Any]]:
        """n generations for one seed's simulator prompt (no success statistics: the hint is off)."""
        messages = self.domain.simulator_messages(seed, n, target_success=ALPHA, stats=None)
        completions = await self.backend.chat_many(
            messages, n, adapter=adapter, sampling=SamplingParams(
                temperature=self.sizes.simulator_temperature, max_tokens=self.sizes.max_task_tokens,
                json_schema=self.schema))
        out = []
        for c in completions:
            try:
                payload: dict[str, Any] | None = self.domain.validate_generation(extract_json(c.text, c.finish_reason),
                                                                                 seed)
            except TaskRejected:
                payload = None
            out.append({"raw_text": c.text, "payload": payload})
        return out

    async def judge(self, payload: dict[str, Any], attempts: int) -> tuple[int, int]:
        """The base agent's (successes, valid attempts) on one task."""
        replies = await self.backend.chat_many(
            self.domain.agent_messages(payload), attempts, adapter=None,
            sampling=SamplingParams(temperature=self.sizes.agent_temperature,
                                    max_tokens=self.sizes.max_response_tokens))
        verdicts = [self.domain.verify(payload, r.text) for r in replies]
        scored = [v for v in verdicts if v.valid]
        return sum(bool(v.success) for v in scored), len(scored)


def local_engine(settings: GenEnvSettings, domain: Domain, sizes: Sizes, device: str, concurrency: int) -> Engine:
    """The in-process model; ``concurrency`` is its batch (a GPU wants hundreds of rows per decoding step, a CPU a
    few dozen)."""
    local = settings.model_copy(update={"inference": settings.inference.model_copy(
        update={"local_device": device, "local_max_batch": max(settings.inference.local_max_batch, concurrency)})})
    return Engine(build_local_backend(local), None, domain, sizes)


def served_engine(settings: GenEnvSettings, url: str, domain: Domain, sizes: Sizes, concurrency: int) -> Engine:
    """A vLLM server's model, ``concurrency`` requests in flight."""
    inference = settings.inference.model_copy(update={"max_concurrency": concurrency})
    return Engine(OpenAIBackend(url, inference), url, domain, sizes)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


async def gather(label: str, jobs: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run coroutine factories concurrently (the backend bounds what is in flight) with one progress bar."""
    with _progress() as progress:
        bar = progress.add_task(label, total=len(jobs))

        async def one(job: Callable[[], Awaitable[Any]]) -> Any:
            result = await job()
            progress.advance(bar)
            return result

        return list(await asyncio.gather(*(one(j) for j in jobs)))


async def write_and_judge(engine: Engine, seeds: Sequence[Seed], n: int, adapter: str | None, label: str,
                          attempts: int = 0) -> list[dict[str, Any]]:
    """Per seed: its n generations, each valid one attempted ``attempts`` times by the base agent (k, n)."""

    async def one(seed: Seed) -> dict[str, Any]:
        gens = await engine.write(seed, n, adapter)
        if attempts:
            results = await asyncio.gather(*(engine.judge(g["payload"], attempts) for g in gens
                                             if g["payload"] is not None))
            it = iter(results)
            for g in gens:
                if g["payload"] is not None:
                    g["k"], g["n"] = next(it)
        return {"seed_id": seed.id, "group": engine.domain.difficulty_group(seed.payload),
                "prompt": engine.domain.simulator_messages(seed, n, target_success=ALPHA, stats=None),
                "generations": gens}

    return await gather(label, [lambda s=s: one(s) for s in seeds])  # type: ignore[misc]


def split_seeds(domain: Domain, pool: int, heldout: int, seed: int) -> tuple[list[Seed], list[Seed]]:
    """Stratified pool seeds and stratified held-out seeds, disjoint, both from the training split."""
    train = domain.load_seeds(None, "train")
    first = sample_seeds(train, pool, seed, 0, strategy=SeedSampling.STRATIFIED, group_of=domain.difficulty_group)
    chosen = {s.id for s in first}
    rest = [s for s in train if s.id not in chosen]
    second = sample_seeds(rest, heldout, seed, 1, strategy=SeedSampling.STRATIFIED, group_of=domain.difficulty_group)
    return first, second


# ----------------------------------------------------------------------------------------------- caching, io


def cached(path: Path) -> Any | None:
    """A phase's cached JSON, or None when the phase has not finished."""
    return json.loads(path.read_text()) if path.exists() else None


def save(path: Path, value: Any) -> Any:
    """Write ``value`` as JSON (dataclasses as dicts) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1, default=_jsonable))
    os.replace(tmp, path)  # a phase's cache exists whole or not at all
    return value


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")
