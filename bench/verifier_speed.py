"""Verdicts per second: the official bfcl-eval checker, ours in-process, and the verifier service over HTTP.

One run prints one table. All rows score the same function-call items: for every task of BFCL's non-live AST
categories, its gold answer and a few systematic perturbations (tests/unit/checkers/bfcl_cases.py), as Python
call text — what an agent sends back.

- official · decoded: ``bfcl_eval ... ast_checker`` on already decoded calls (the number the issue quotes);
- ours · decoded: ``CompiledTask.check`` on the same decoded calls (tasks compiled once, as the verifier does
  for the G responses of one task);
- official · text: BFCL's prompting decoder + ``ast_checker`` (what BFCL does with a model's reply);
- ours · text: ``function_calling`` domain ``verify`` (parse + check + Verdict, under the per-item time limit);
- service · HTTP: ``POST /v1/verify`` of ``genenv serve verifier`` (uvicorn, its own process) on loopback,
  batches of ``--batch`` items, two requests in flight (stdlib keep-alive connections), request bodies
  serialised before timing.

Each row is the best of ``--rounds`` rounds (rows interleaved per round, so load drifts hit all rows alike).
"identical" counts items whose pass/fail equals the official verdict (rows 2–4) or whose Verdict equals the
in-process one (service). Targets: ours ≥ 1.0× official; service ≥ 0.5× ours (text).

    python bench/verifier_speed.py --per-task 4 --rounds 6
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import ROOT, load_file, serving
from rich.console import Console
from rich.table import Table

from genenv.checkers.callparse import Call
from genenv.contracts.rollouts import Verdict
from genenv.devstack import free_port
from genenv.domains.function_calling.data import bfcl_dir
from genenv.domains.function_calling.domain import DOMAIN, compiled
from genenv.domains.function_calling.reference import REFERENCE_MODEL_NAME, load_official
from genenv.inference.launcher import Started
from genenv.settings import get_settings

# The gold answers and perturbations of the checker tests: a helper of the test tree, loaded from its file.
_cases = load_file(ROOT / "tests" / "unit" / "checkers" / "bfcl_cases.py")
Case, gold_cases, load_tasks, perturbations = _cases.Case, _cases.gold_cases, _cases.load_tasks, _cases.perturbations

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


def build_cases(bfcl_folder: Path, per_task: int, seed: int) -> list[Case]:
    """Gold answer + (per_task - 1) perturbations of every task."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for task in load_tasks(bfcl_folder, CATEGORIES):
        task = {**task, "messages": []}
        gold = next(iter(gold_cases([task])), None)
        extra = list(perturbations(task, rng))
        rng.shuffle(extra)
        cases.extend(([gold] if gold else []) + extra[: per_task - 1])
    return cases


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) another process has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], Any], server_pid: int | None = None) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds (this process, plus the server's when given) and the result of fn()."""
    server_before = process_cpu(server_pid) if server_pid else 0.0
    cpu_before, started = time.process_time(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_before
    if server_pid:
        cpu += process_cpu(server_pid) - server_before
    return wall, cpu, out


@contextmanager
def verifier(benchmarks: Path, workdir: Path) -> Iterator[Started]:
    """This checkout's verifier service on a free port for the ``with`` block."""
    env = {
        **os.environ,
        "GENENV_DATABASE__URL": f"sqlite:///{workdir / 'bench.db'}",
        "GENENV_PATHS__BENCHMARKS": str(benchmarks),
        "GENENV_LOGGING__LEVEL": "WARNING",
    }
    with serving(["serve", "verifier"], free_port(), workdir / "verifier.log", path="/healthz", timeout_s=60,
                 poll_s=0.2, env=env) as started:
        yield started


def post_all(port: int, bodies: list[bytes], in_flight: int) -> list[dict[str, Any]]:
    """POST every body (order kept), ``in_flight`` at a time over keep-alive connections; all verdicts.

    The stdlib client keeps the client's own CPU per verdict small (≈3 µs), so the row measures the service.
    """
    local = threading.local()

    def one(body: bytes) -> list[dict[str, Any]]:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/verify", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:300]!r}")
        verdicts: list[dict[str, Any]] = json.loads(data)["verdicts"]
        return verdicts

    with ThreadPoolExecutor(in_flight) as pool:
        return [v for batch in pool.map(one, bodies) for v in batch]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--benchmarks", type=Path, default=get_settings().paths.benchmarks,
        help="Benchmarks folder (default: settings paths.benchmarks); BFCL falls back to the bfcl-eval package's data.",
    )
    parser.add_argument("--per-task", type=int, default=4, help="Responses per task (gold + perturbations).")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch", type=int, default=1024, help="Items per /v1/verify request.")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def paths(cases: list[Case], official: Any) -> dict[str, Callable[[], Any]]:
    """The in-process paths, each verifying every case: the official checker and ours, on decoded calls and on
    text."""
    decoded = [[Call(next(iter(c)), next(iter(c.values()))) for c in case.calls or []] for case in cases]

    def official_decoded() -> list[bool]:
        py = official.language_python
        return [
            official.ast_checker(
                c.task["functions"], c.calls, c.task["ground_truth"], py, c.task["category"], REFERENCE_MODEL_NAME
            )["valid"]
            for c in cases
        ]

    def ours_decoded() -> list[bool]:
        return [compiled(c.task).check(d) is None for c, d in zip(cases, decoded, strict=True)]

    def official_text() -> list[bool]:
        return [
            official.check_text(c.task["functions"], c.response, c.task["ground_truth"], c.task["category"])
            for c in cases
        ]

    def ours_text() -> list[Verdict]:
        return [DOMAIN.verify(c.task, c.response) for c in cases]

    return {"official · decoded": official_decoded, "ours · decoded": ours_decoded,
            "official · text": official_text, "ours · text": ours_text}


@dataclass
class Timings:
    """Best wall and CPU seconds per path over the rounds, and each path's last output."""

    best: dict[str, float] = field(default_factory=dict)
    best_cpu: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)


def measure(args: argparse.Namespace, cases: list[Case], in_process: dict[str, Callable[[], Any]]) -> Timings:
    """Every path, best of ``args.rounds`` rounds, the service's over HTTP in batches of ``args.batch``."""
    items = [{"domain": "function_calling", "task": c.task, "response": c.response} for c in cases]
    bodies = [json.dumps({"items": items[i : i + args.batch]}).encode() for i in range(0, len(cases), args.batch)]
    t = Timings()
    with tempfile.TemporaryDirectory() as tmp, verifier(args.benchmarks, Path(tmp)) as service:
        proc, port = service.proc, service.port
        post_all(port, bodies[:2], 2)  # warm-up: imports, first compiles, both connections
        for _ in range(args.rounds):
            for name, fn in (*in_process.items(), ("service · HTTP", lambda: post_all(port, bodies, 2))):
                seconds, cpu, out = timed(fn, proc.pid if name.startswith("service") else None)
                t.best[name] = min(t.best.get(name, float("inf")), seconds)
                t.best_cpu[name] = min(t.best_cpu.get(name, float("inf")), cpu)
                t.outputs[name] = out
    return t


def identical_counts(outputs: dict[str, Any], n: int) -> dict[str, int]:
    """Per path, the verdicts that agree with its reference (the official text checker, or the in-process path)."""
    reference = outputs["official · text"]
    in_process = [v.model_dump(mode="json") for v in outputs["ours · text"]]
    return {
        "official · decoded": sum(a == b for a, b in zip(outputs["official · decoded"], reference, strict=True)),
        "ours · decoded": sum(
            a == b for a, b in zip(outputs["ours · decoded"], outputs["official · decoded"], strict=True)
        ),
        "official · text": n,
        "ours · text": sum(
            (v.valid and v.score == 1.0) == ok for v, ok in zip(outputs["ours · text"], reference, strict=True)
        ),
        "service · HTTP": sum(a == b for a, b in zip(outputs["service · HTTP"], in_process, strict=True)),
    }


PAIRS = {
    "ours · decoded": ("official · decoded", 1.0),
    "ours · text": ("official · text", 1.0),
    "service · HTTP": ("ours · text", 0.5),
}
"""Path → (the path it is compared with, the target ratio)."""


def render(t: Timings, identical: dict[str, int], n: int, rounds: int) -> Table:
    """The verdicts-per-second table with ratios against each path's reference and the targets."""
    rate = {name: n / s for name, s in t.best.items()}
    cpu_rate = {name: n / s for name, s in t.best_cpu.items()}
    table = Table(title=f"Function-call verdicts per second · {n} items · best of {rounds} rounds")
    for col in ("path", "verdicts/s", "ratio", "target", "CPU µs/verdict", "CPU ratio", "identical"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for name in t.best:
        base, target = PAIRS.get(name, ("", 0.0))
        ratio = rate[name] / rate[base] if base else None
        cpu_ratio = cpu_rate[name] / cpu_rate[base] if base else None
        table.add_row(
            name,
            f"{rate[name]:,.0f}",
            f"{ratio:.2f}× {base}" if ratio is not None else "",
            f"≥ {target}× {'met' if ratio >= target else 'MISSED'}" if ratio is not None else "",
            f"{1e6 / cpu_rate[name]:.1f}",
            f"{cpu_ratio:.2f}×" if cpu_ratio is not None else "",
            f"{identical[name]}/{n}",
        )
    table.caption = (
        "verdicts/s: wall clock. CPU: this process (+ the service process for HTTP), so the CPU ratio does not "
        f"depend on other load; load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores."
    )
    return table


def main() -> None:
    args = parse_args()
    official = load_official()
    cases = build_cases(bfcl_dir(args.benchmarks), args.per_task, args.seed)
    timings = measure(args, cases, paths(cases, official))
    Console().print(render(timings, identical_counts(timings.outputs, len(cases)), len(cases), args.rounds))


if __name__ == "__main__":
    main()
