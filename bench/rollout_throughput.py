"""Rollout worker throughput versus driving the same vLLM server directly (target: ratio ≥ 0.90).

One run prints one table. Both paths send the same chat requests (N arithmetic tasks × G attempts, the run's
temperature and max tokens, logprobs + token ids) with the same concurrency:

- direct: a bare httpx loop posting /v1/chat/completions under a semaphore;
- worker: ``genenv_rollout.worker.rollout_epoch`` — reads tasks from the database, calls the OpenAI client,
  stores every rollout (response, token ids, logprobs) as results arrive.

Throughput = completion tokens / wall-clock seconds. Rounds alternate which path goes first (ABBA) so slow drifts
in machine load hit both paths alike; each row sums its rounds.

    python bench/rollout_throughput.py --url http://127.0.0.1:8100 --tasks 16 --g 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GeneratedTask, TaskStatus
from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories import tasks as task_repo
from genenv.domains import get_domain
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import DatabaseSettings, InferenceSettings
from genenv_rollout.worker import rollout_epoch


async def direct(url: str, prompts: list[list[dict[str, str]]], cfg: RunConfig, concurrency: int) -> tuple[int, float]:
    """Completion tokens and seconds for the prompts sent straight to vLLM."""
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one(messages: list[dict[str, str]]) -> int:
            body = {
                "model": "base",
                "messages": messages,
                "temperature": cfg.rollout_temperature,
                "max_tokens": cfg.max_response_tokens,
                "logprobs": True,
                "top_logprobs": 0,
                "return_token_ids": True,
            }
            async with sem:
                r = await client.post("/v1/chat/completions", json=body)
            r.raise_for_status()
            return int(r.json()["usage"]["completion_tokens"])

        start = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(p) for p in prompts)))
        return tokens, time.perf_counter() - start


def main() -> None:
    """Parse arguments, run the rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("GENENV_TEST_VLLM_URL", "http://127.0.0.1:8100"))
    parser.add_argument("--tasks", type=int, default=16, help="N tasks")
    parser.add_argument("--g", type=int, default=8, help="G attempts per task")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4, help="rounds, each path first in every other one")
    parser.add_argument("--db", default=None, help="database URL (default: a temporary SQLite file)")
    args = parser.parse_args()

    tmp = tempfile.TemporaryDirectory()
    db_url = args.db or f"sqlite:///{Path(tmp.name) / 'bench.db'}"
    migrate.upgrade(db_url)
    engine = make_engine(DatabaseSettings(url=db_url))
    sessions = make_session_factory(engine)
    domain = get_domain("arithmetic")
    seeds = domain.load_seeds(None, "train")
    picked = [seeds[i * len(seeds) // args.tasks] for i in range(args.tasks)]  # spread over the levels
    cfg = RunConfig(rollouts_per_task=args.g, max_response_tokens=args.max_tokens, rollout_temperature=args.temperature)
    with session_scope(sessions) as s:
        run_id = run_repo.create(s, cfg).id
        for epoch in range(args.rounds):
            tasks = [
                GeneratedTask(
                    seed_id=sd.id, domain="arithmetic", variation=0, payload=sd.payload, status=TaskStatus.VALID
                )
                for sd in picked
            ]
            task_repo.store_generated(s, run_id, epoch, tasks)
    prompts = [domain.agent_messages(sd.payload) for sd in picked for _ in range(args.g)]
    settings = InferenceSettings(max_concurrency=args.concurrency, request_timeout_s=600)

    async def run() -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        await direct(args.url, prompts[: args.concurrency], cfg, args.concurrency)  # warm-up
        d_rows, w_rows = [], []

        async def worker(epoch: int) -> None:
            backend = OpenAIBackend(args.url, settings)
            try:
                result = await rollout_epoch(sessions, backend, run_id, epoch)
            finally:
                await backend.aclose()
            assert result.created == len(prompts) and result.errors == 0, result
            w_rows.append((result.completion_tokens, result.seconds))

        for epoch in range(args.rounds):
            # ABBA order: each path goes first in every other round.
            if epoch % 2 == 0:
                d_rows.append(await direct(args.url, prompts, cfg, args.concurrency))
                await worker(epoch)
            else:
                await worker(epoch)
                d_rows.append(await direct(args.url, prompts, cfg, args.concurrency))
        return d_rows, w_rows

    d_rows, w_rows = asyncio.run(run())
    engine.dispose()
    tmp.cleanup()
    d_tok, d_s = sum(t for t, _ in d_rows), sum(s for _, s in d_rows)
    w_tok, w_s = sum(t for t, _ in w_rows), sum(s for _, s in w_rows)
    table = Table(
        title=f"Rollout throughput: {args.tasks} tasks × G={args.g}, concurrency {args.concurrency}, "
        f"T={args.temperature}, max_tokens={args.max_tokens}, {args.rounds} round(s), {args.url}"
    )
    for col in ("path", "requests", "completion tokens", "seconds", "tokens/s"):
        table.add_column(col, justify="right" if col != "path" else "left")
    n = len(prompts) * args.rounds
    table.add_row("vLLM direct (httpx)", str(n), str(d_tok), f"{d_s:.1f}", f"{d_tok / d_s:.1f}")
    table.add_row("rollout worker (stored)", str(n), str(w_tok), f"{w_s:.1f}", f"{w_tok / w_s:.1f}")
    table.add_row("ratio worker / direct", "", "", "", f"{(w_tok / w_s) / (d_tok / d_s):.3f}")
    Console().print(table)


if __name__ == "__main__":
    main()
