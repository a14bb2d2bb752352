"""How long the stack's vLLM server takes from start to answering, and where the time goes (issue 31, item 3).

    python bench/vllm_restart.py --starts 3                   # the server as ``genenv up`` starts it
    python bench/vllm_restart.py --starts 3 --json out.json

Each start runs ``genenv serve vllm --role both`` exactly as ``genenv up`` (shared/genenv/devstack.py) does, one at a
time, and times every line of its output as it arrives. The stages are the first line of each milestone vLLM logs
(the API server's first line = imports done, the engine core's model load, the KV cache, the health endpoint
answering) and one completion through the base model after ``/health`` (the first request a worker sends). Then what
is served, to show a start-up cut changes none of it: the greedy text of a prompt, and 16 concurrent greedy
completions of 32 tokens three times (the best tokens/s, the fewest server CPU seconds per 1,000 tokens), through the
base model and, with ``--adapter DIR``, through a LoRA adapter loaded at runtime as the trainers publish theirs.
Each row carries the 1-minute load average at its start, since on a shared machine the numbers move with it. The
server is stopped (its whole process group) after each start; nothing is left running.

    python bench/vllm_restart.py --starts 1 --env VLLM_ENABLE_V1_MULTIPROCESSING=1   # vLLM's own worker process
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx
import psutil

# Milestones: a stage ends at the first output line matching its pattern (vLLM 0.32's own log lines).
STAGES = (
    ("python imports", re.compile(r"vLLM API server version|non-default args")),
    ("engine config", re.compile(r"Initializing a V1 LLM engine|EngineCore")),
    ("model load", re.compile(r"Model loading took|Loading weights took")),
    ("kv cache", re.compile(r"KV cache|GPU KV cache size|Maximum concurrency")),
    ("engine ready", re.compile(r"init engine .* took|Starting vLLM API server|Available routes")),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_start(model: str, log: Path, env: dict[str, str], adapter: Path | None = None) -> dict[str, Any]:
    """Start, time each stage and the first completion, stop; the row."""
    port = free_port()
    load = os.getloadavg()[0]
    lines: list[tuple[float, str]] = []
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "genenv.cli.main", "serve", "vllm", "--role", "both", "--model",
                             model, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)

    def read() -> None:
        assert proc.stdout is not None
        with log.open("a") as out:
            for raw in proc.stdout:
                t = time.monotonic() - t0
                line = raw.decode(errors="replace").rstrip()
                lines.append((t, line))
                out.write(f"{t:8.2f} {line}\n")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    row: dict[str, Any] = {"load_1m": round(load, 2)}
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}; see {log}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > 900:
                raise TimeoutError(f"not healthy after 900 s; see {log}")
            time.sleep(0.25)
        row["health_s"] = round(time.monotonic() - t0, 1)
        t1 = time.monotonic()
        body = {"model": "base", "prompt": "1+1=", "max_tokens": 8, "temperature": 0}
        r = httpx.post(f"{url}/v1/completions", json=body, timeout=300)
        r.raise_for_status()
        row["first_completion_s"] = round(time.monotonic() - t1, 2)
        row["greedy"] = r.json()["choices"][0]["text"]
        # The best of three: on a shared machine the other processes' load only ever slows a try down.
        tries = [throughput(url, proc.pid) for _ in range(3)]
        row["tokens_per_s"], row["cpu_s_per_1k_tokens"] = max(t[0] for t in tries), min(t[1] for t in tries)
        if adapter is not None:  # what a worker does after a restart: load the adapter, generate through it
            httpx.post(f"{url}/v1/load_lora_adapter", json={"lora_name": "probe", "lora_path": str(adapter)},
                       timeout=120).raise_for_status()
            r = httpx.post(f"{url}/v1/completions", json={**body, "model": "probe"}, timeout=300)
            r.raise_for_status()
            row["greedy_adapter"] = r.json()["choices"][0]["text"]
            tries = [throughput(url, proc.pid, model="probe") for _ in range(3)]
            row["adapter_tokens_per_s"] = max(t[0] for t in tries)
            row["adapter_cpu_s_per_1k_tokens"] = min(t[1] for t in tries)
    finally:
        with_group_stopped(proc)
        reader.join(timeout=10)
    for name, pattern in STAGES:
        row[name] = next((round(t, 1) for t, line in lines if pattern.search(line)), None)
    return row


def group_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by the server's processes (``pid`` and its descendants)."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    total = 0.0
    for p in procs:
        with suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def throughput(url: str, pid: int, requests: int = 16, tokens: int = 32, model: str = "base") -> tuple[float, float]:
    """Generated tokens per second for ``requests`` concurrent greedy completions, and the server's CPU seconds per
    1,000 of them: serving speed after the start (a start-up setting that made serving slower would be no cut). On a
    shared machine the CPU seconds move far less with the others' load than the wall-clock rate."""
    prompts = [f"Count from {i} to {i + 40}:" for i in range(requests)]
    body = {"model": model, "prompt": prompts, "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    t, cpu = time.monotonic(), group_cpu_s(pid)
    r = httpx.post(f"{url}/v1/completions", json=body, timeout=600)
    r.raise_for_status()
    done = int(r.json()["usage"]["completion_tokens"])
    return round(done / (time.monotonic() - t), 1), round(1000 * (group_cpu_s(pid) - cpu) / done, 2)


def with_group_stopped(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    except ProcessLookupError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=3, help="Starts, one after another (the median is reported).")
    parser.add_argument("--model", default=str(Path.home() / ".genenv" / "models" / "smollm2-135m-instruct"),
                        help="The model folder (the drill's SmolLM2).")
    parser.add_argument("--log", type=Path, default=Path("vllm-restart.log"),
                        help="Every output line, with seconds since the start.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows here.")
    parser.add_argument("--adapter", type=Path, default=None,
                        help="A LoRA adapter folder to load after the start and generate through (greedy text and "
                        "tokens/s with it).")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="Extra environment for the server (repeatable), to compare a setting.")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **dict(e.split("=", 1) for e in args.env)}
    rows = []
    for n in range(args.starts):
        with args.log.open("a") as out:
            out.write(f"==== start {n + 1} (load {os.getloadavg()[0]:.2f}) {args.env}\n")
        row = one_start(args.model, args.log, env, args.adapter)
        rows.append(row)
        print(json.dumps(row), flush=True)
    median = {k: statistics.median(r[k] for r in rows) for k in rows[0]
              if all(isinstance(r.get(k), (int, float)) for r in rows)}
    print("median", json.dumps(median), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "median": median, "env": args.env}, indent=2))


if __name__ == "__main__":
    main()
