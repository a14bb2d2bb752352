"""Play the scripted arithmetic agent (a known frontier) against an external_agent run until the run finishes.

The agent (genenv.domains.arithmetic.scripted_agent) answers a task right with probability
p = σ(bias − w_d·(digits − 1) − w_k·(operators − 1)), so the tasks where p = α are known: the ground truth
against which the simulator's progress is read (issue 33, item 5). Each epoch prints one line:

    epoch 2: 480 attempts on 240 tasks · success 0.47 (agent's true p̄ 0.46, true in-band 0.38) · service p̂ 0.47,
    in-band 0.42 · lease+report 1.31 s (2.73 s per 1,000 attempts) · idle 12.0 s

- success: the service's verdicts on the agent's replies (its checker);
- agent's true p̄: the mean of the agent's own p over its attempts (what the success rate estimates);
- true in-band: the share of the epoch's tasks whose true p lies within the run's k_min of α (how much of what the
  simulator wrote sits on the agent's frontier);
- service p̂ / in-band: the epoch summary the run stored (null until the epoch is scored);
- lease+report: the client's wall time in the protocol's calls (a report's time includes the service's scoring);
  idle: time the client waited with nothing leasable since the previous line (the service generating, scoring
  and training around this epoch: not the protocol's overhead).

    python bench/scripted_agent.py --run-id RUN --preset weak [--url URL] [--token TOKEN] [--json OUT.json]

``--json`` also writes every epoch's numbers (the line's fields, the service's summary) for a table or a figure.

The run must be an external_agent run on the arithmetic domain; a run still 'created' is waited for (start it
with ``genenv runs start RUN``). Exits 0 when the run ends completed, 1 when it failed or was cancelled.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv.clients.base import ApiError
from genenv.clients.control_plane import ControlPlaneClient
from genenv.clients.external_agent import DEFAULT_LEASE_S, DEFAULT_LIMIT, AsyncExternalAgentClient, StreamStats
from genenv.contracts.epochs import EpochSummary
from genenv.contracts.leases import AttemptsRecorded
from genenv.contracts.runs import RunStatus
from genenv.domains.arithmetic.scripted_agent import PRESETS, ScriptedAgent

URL_ENV = "GENENV_URL"
TOKEN_ENV = "GENENV_TOKEN"
START_POLL_S = 2.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(
        description="Play the scripted arithmetic agent (known frontier) against an external_agent run until it "
        "finishes; one progress line per epoch.",
    )
    p.add_argument("--run-id", required=True, help="The external_agent run to play (its domain must be arithmetic).")
    p.add_argument("--preset", choices=sorted(PRESETS), default="weak",
                   help="The agent's skill: " + ", ".join(
                       f"{name} (p = 0.5 at {profile.digits_at(0.5, 1):.1f}-digit sums)"
                       for name, profile in sorted(PRESETS.items())) + ".")
    p.add_argument("--seed", type=int, default=0, help="Seed of the agent's draws (same seed, same replies).")
    p.add_argument("--url", default=os.environ.get(URL_ENV),
                   help=f"Control-plane base URL (default ${URL_ENV}).")
    p.add_argument("--token", default=os.environ.get(TOKEN_ENV),
                   help=f"Bearer token (default ${TOKEN_ENV}; none when the control plane has auth off).")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="Most tasks per lease (1-256).")
    p.add_argument("--lease-s", type=int, default=DEFAULT_LEASE_S, help="Seconds a lease holds its tasks (10-3600).")
    p.add_argument("--json", type=Path, default=None,
                   help="Also write the epochs' numbers (each progress line's fields) to this JSON file.")
    p.add_argument("--wait-start-s", type=float, default=600.0,
                   help="How long to wait for a run that is still 'created' to be started.")
    args = p.parse_args(argv)
    if not args.url:
        p.error(f"no control plane: give --url or set {URL_ENV}")
    return args


@dataclass
class EpochTally:
    """One epoch as the agent saw it."""

    epoch: int
    alpha: float
    k_min: float
    attempts: int = 0
    true_p_sum: float = 0.0
    task_p: dict[int, float] = field(default_factory=dict)
    verdicts: int = 0
    successes: int = 0
    invalid: int = 0
    stats: StreamStats = field(default_factory=StreamStats)
    """The stream's calls during this epoch (a difference of two snapshots)."""

    def add_attempt(self, task_id: int, p: float) -> None:
        self.attempts += 1
        self.true_p_sum += p
        self.task_p[task_id] = p

    def add_report(self, recorded: AttemptsRecorded) -> None:
        for verdict in recorded.verdicts:
            self.verdicts += 1
            self.invalid += not verdict.valid
            self.successes += verdict.success

    @property
    def success(self) -> float | None:
        valid = self.verdicts - self.invalid
        return self.successes / valid if valid else None

    @property
    def true_p(self) -> float | None:
        return self.true_p_sum / self.attempts if self.attempts else None

    @property
    def true_in_band(self) -> float | None:
        if not self.task_p:
            return None
        return sum(abs(p - self.alpha) <= self.k_min for p in self.task_p.values()) / len(self.task_p)


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def epoch_line(tally: EpochTally, summary: EpochSummary | None) -> str:
    """The progress line of one epoch."""
    overhead = tally.stats.lease_s + tally.stats.report_s
    per_1000 = f"{overhead / tally.verdicts * 1000:.2f} s" if tally.verdicts else "n/a"
    service = (f"service p̂ {_f(summary.p_hat)}, in-band {_f(summary.in_band_share)}" if summary is not None
               else "service summary not stored yet")
    refused = f" · {tally.stats.refused} refused (lease expired)" if tally.stats.refused else ""
    return (
        f"epoch {tally.epoch}: {tally.attempts} attempts on {len(tally.task_p)} tasks · success {_f(tally.success)} "
        f"(agent's true p̄ {_f(tally.true_p)}, true in-band {_f(tally.true_in_band)}) · {service} · lease+report "
        f"{overhead:.2f} s ({per_1000} per 1,000 attempts) · idle {tally.stats.idle_s:.1f} s{refused}"
    )


def epoch_record(tally: EpochTally, summary: EpochSummary | None) -> dict[str, Any]:
    """The numbers of one epoch's progress line, for ``--json``."""
    overhead = tally.stats.lease_s + tally.stats.report_s
    return {
        "epoch": tally.epoch, "attempts": tally.attempts, "tasks": len(tally.task_p), "verdicts": tally.verdicts,
        "invalid": tally.invalid, "success": tally.success, "true_p": tally.true_p,
        "true_in_band": tally.true_in_band, "service_p_hat": None if summary is None else summary.p_hat,
        "service_in_band": None if summary is None else summary.in_band_share,
        "lease_s": tally.stats.lease_s, "report_s": tally.stats.report_s, "idle_s": tally.stats.idle_s,
        "overhead_s_per_1000": overhead / tally.verdicts * 1000 if tally.verdicts else None,
        "refused": tally.stats.refused,
    }


def _minus(after: StreamStats, before: StreamStats) -> StreamStats:
    return StreamStats(**{f.name: getattr(after, f.name) - getattr(before, f.name)
                          for f in dataclasses.fields(StreamStats)})


async def _summary(control: ControlPlaneClient, run_id: str, index: int) -> EpochSummary | None:
    cursor: str | None = None
    while True:
        page = await control.list_epochs(run_id, cursor=cursor, limit=500)
        for epoch in page.items:
            if epoch.index == index:
                return epoch.summary
        cursor = page.next_cursor
        if cursor is None:
            return None


async def _wait_running(client: AsyncExternalAgentClient, run_id: str, wait_s: float,
                        out: Callable[[str], None]) -> RunStatus:
    run = await client.get_run(run_id)
    deadline = time.monotonic() + wait_s
    if run.status == RunStatus.CREATED:
        out(f"run {run_id} is created, not started: waiting up to {wait_s:.0f} s (genenv runs start {run_id})")
    while run.status == RunStatus.CREATED and time.monotonic() < deadline:
        await asyncio.sleep(START_POLL_S)
        run = await client.get_run(run_id)
    return run.status


async def play(
    agent: ScriptedAgent,
    client: AsyncExternalAgentClient,
    control: ControlPlaneClient,
    run_id: str,
    *,
    limit: int = DEFAULT_LIMIT,
    lease_s: int = DEFAULT_LEASE_S,
    wait_start_s: float = 600.0,
    out: Callable[[str], None] = print,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[RunStatus, list[EpochTally]]:
    """Lease, answer and report until the run stops; one line per epoch through ``out``. Returns the run's final
    status and the epochs' tallies. ``sleep`` waits while nothing is leasable (a test's hook)."""
    status = await _wait_running(client, run_id, wait_start_s, out)
    if status != RunStatus.RUNNING:
        out(f"run {run_id} is {status}: nothing to play")
        return status, []
    run = await client.get_run(run_id)
    alpha, k_min = run.config.curriculum.alpha, run.config.curriculum.k_min
    frontier = ", ".join(f"{pt.operators} op → {pt.digits:.1f} digits" for pt in agent.profile.frontier(alpha)[:4])
    out(f"{agent.profile.name} agent on run {run_id}: α = {alpha}, p = α at {frontier}")
    tallies: list[EpochTally] = []
    by_epoch: dict[int, EpochTally] = {}

    def on_report(recorded: AttemptsRecorded) -> None:
        if recorded.epoch in by_epoch:
            by_epoch[recorded.epoch].add_report(recorded)

    stream = client.prompts(run_id, limit=limit, lease_s=lease_s, on_report=on_report, sleep=sleep)
    snapshot = dataclasses.replace(stream.stats)

    async def close(tally: EpochTally) -> None:
        nonlocal snapshot
        tally.stats = _minus(stream.stats, snapshot)
        snapshot = dataclasses.replace(stream.stats)
        out(epoch_line(tally, await _summary(control, run_id, tally.epoch)))

    async for prompt in stream:
        if not tallies or prompt.epoch != tallies[-1].epoch:
            if tallies:
                await close(tallies[-1])
            tallies.append(EpochTally(prompt.epoch, alpha, k_min))
            by_epoch[prompt.epoch] = tallies[-1]
        attempt = agent.attempt(prompt.messages)
        tallies[-1].add_attempt(prompt.task_id, attempt.probability)
        await stream.answer(prompt, attempt.reply)
    if tallies:
        await close(tallies[-1])
    final = (await client.get_run(run_id)).status
    out(f"run {run_id} is {final}")
    return final, tallies


async def _main(args: argparse.Namespace) -> int:
    agent = ScriptedAgent(args.preset, seed=args.seed)
    async with (AsyncExternalAgentClient(args.url, token=args.token) as client,
                ControlPlaneClient(args.url, token=args.token) as control):
        status, tallies = await play(agent, client, control, args.run_id, limit=args.limit, lease_s=args.lease_s,
                                     wait_start_s=args.wait_start_s)
        if args.json is not None:
            # Summaries read again at the end: an epoch's is stored once it is scored, after the client moved on.
            epochs = [epoch_record(t, await _summary(control, args.run_id, t.epoch)) for t in tallies]
            args.json.write_text(json.dumps({"run_id": args.run_id, "preset": args.preset, "seed": args.seed,
                                             "status": str(status), "epochs": epochs}, indent=1))
    return 0 if status == RunStatus.COMPLETED else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, play, exit status (2 for an error answer from the control plane)."""
    args = parse_args(argv)
    try:
        return asyncio.run(_main(args))
    except ApiError as exc:
        where = f" [{exc.param}]" if exc.param else ""
        print(f"error{where}: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
