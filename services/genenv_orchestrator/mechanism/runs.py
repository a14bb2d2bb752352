"""Exp 0 (calibrate), Exp 1 (offline) and the sizing pool of the simulator-mechanism pre-registration
(docs/experiments/preregistration.md), each phase cached under its ``out`` folder (a killed run resumes at the phase
it was in). ``genenv experiment mechanism`` builds the options and renders the results."""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from genenv.domains import get_domain
from genenv.experiments.mechanism import CalibrationRow, Criterion, choose_dose
from genenv.experiments.mechanism_pools import (
    ARMS,
    MARKER,
    OfflineRule,
    Sizes,
    analyse_offline,
    arm_sets,
    calibration_row,
    outcomes,
    pool_p_hat_by_group,
    train_items,
)
from genenv.models.prepare import resolve_model
from genenv.settings import GenEnvSettings, get_settings
from genenv_orchestrator.mechanism.engine import (
    Backend,
    Engine,
    cached,
    console,
    local_engine,
    save,
    served_engine,
    split_seeds,
    vllm_server,
    write_and_judge,
)
from genenv_orchestrator.mechanism.training import Trainer


@dataclass(kw_only=True)
class Common:
    """What every mechanism experiment takes: where it caches, what samples and trains, and the pool's sizes."""

    command: ClassVar[str] = ""
    out: Path
    backend: Backend = "vllm"
    url: str | None = None
    device: str = "auto"
    threads: int | None = None
    concurrency: int = 48
    variations: int = 8
    attempts: int = 8


@dataclass(kw_only=True)
class Calibrate(Common):
    """Exp 0: choose the RWR dose on a marker."""

    command: ClassVar[str] = "calibrate"
    seed: int = 8101
    pool_prompts: int = 210
    eval_prompts: int = 56
    samples: int = 8
    lrs: list[float] = field(default_factory=lambda: [1e-4, 2e-4, 5e-4, 1e-3])
    steps: list[int] = field(default_factory=lambda: [2, 4, 8, 16])


@dataclass(kw_only=True)
class Offline(Common):
    """Exp 1: one round of offline RWR, arms A/C/D/E, at the calibrated dose."""

    command: ClassVar[str] = "offline"
    lr: float
    steps: int
    seeds: list[int] = field(default_factory=lambda: [8201, 8202, 8203])
    pool_seeds: int = 210
    heldout: int = 112
    band: float = 0.1
    eval_attempts: int = 4
    cap: int = 256
    min_train: int = 32
    smallest_effect: float = 0.02


@dataclass(kw_only=True)
class Pool(Common):
    """A pool alone: band occupancy and throughput (sizing)."""

    command: ClassVar[str] = "pool"
    seed: int = 1
    pool_seeds: int = 70
    band: float = 0.1


def smoke_options(out: Path) -> tuple[Calibrate, Offline]:
    """calibrate and offline at the smallest sizes that exercise every code path (in process, on the CPU)."""
    base: dict[str, Any] = {"backend": "local", "device": "cpu", "threads": 2, "variations": 2, "attempts": 2}
    cal = Calibrate(out=out / "exp0", pool_prompts=3, eval_prompts=3, samples=3, lrs=[0.001], steps=[1, 2], **base)
    off = Offline(out=out / "exp1", seeds=[1], pool_seeds=3, heldout=3, band=0.5, lr=0.001, steps=1, min_train=1,
                  eval_attempts=2, **base)
    return cal, off


async def calibrate(opts: Calibrate, engine: Engine, trainer: Trainer) -> dict[str, Any]:
    """Exp 0: the marker sweep; returns the rows and the chosen dose."""
    out = opts.out
    pool_seeds, eval_seeds = split_seeds(engine.domain, opts.pool_prompts, opts.eval_prompts, opts.seed)
    pool = cached(out / "cache-pool.json") or save(out / "cache-pool.json", await write_and_judge(
        engine, pool_seeds, opts.samples, None, "Exp 0 pool: base simulator"))
    items = train_items(pool, lambda w, g: 1.0 if engine.domain.difficulty(g["payload"]).get(MARKER) else None)
    console.print(f"Exp 0 training pool: {len(items)} marker generations of "
                  f"{sum(len(w['generations']) for w in pool)} written for {len(pool)} prompts")
    base_written = cached(out / "cache-eval-base.json") or save(out / "cache-eval-base.json", await write_and_judge(
        engine, eval_seeds, opts.samples, None, "Exp 0 held-out: base"))
    base = calibration_row(0.0, 0, outcomes(engine.domain, base_written), 0.0)
    rows: list[CalibrationRow] = []
    samples = trainer.samples(items)
    for lr in opts.lrs:
        model, optimizer = trainer.fresh(lr)
        done = 0
        for steps in sorted(opts.steps):
            tag = f"lr{lr:g}-s{steps}".replace(".", "p")  # PEFT adapter names may not contain dots
            hit = cached(out / f"cache-eval-{tag}.json")
            train = trainer.steps(model, optimizer, samples, lr, steps - done, seed=opts.seed * 31 + steps)
            done = steps
            kl = train["kl_to_base_last_step"]
            if hit is None:
                path = trainer.save(model, out / "adapters" / tag)
                name = f"mech0-{opts.seed}-{tag}"
                await engine.load(name, path)
                hit = save(out / f"cache-eval-{tag}.json", {"train": train, "written": await write_and_judge(
                    engine, eval_seeds, opts.samples, name, f"Exp 0 held-out: {tag}")})
            rows.append(calibration_row(lr, steps, outcomes(engine.domain, hit["written"]), kl))
        del model, optimizer
    chosen, reason = choose_dose(rows, base, Criterion())
    return {"experiment": "calibrate", "seed": opts.seed, "pool_prompts": len(pool), "eval_prompts": len(eval_seeds),
            "samples": opts.samples, "train_pool": len(items), "criterion": Criterion(), "base": base, "rows": rows,
            "chosen": chosen, "reason": reason, "sizes": engine.sizes}


async def _train_arm(opts: Offline, engine: Engine, trainer: Trainer, seed: int, arm: str,
                     sets: dict[str, Any], reference: list[Any], heldout: list[Any]) -> dict[str, Any]:
    """One arm of one replicate: trained at the dose, its divergence to the base, its held-out tasks judged."""
    if len(sets[arm]) == 0:
        return {"written": [], "train": None, "divergence_to_base": None, "train_keys": []}
    out = opts.out / f"r{seed}"
    model, optimizer = trainer.fresh(opts.lr)
    train = trainer.steps(model, optimizer, trainer.samples(sets[arm]), opts.lr, opts.steps,
                          seed=seed * 7 + ARMS.index(arm))
    kl = trainer.divergence_from_base(model, reference)
    path = trainer.save(model, out / "adapters" / arm)
    del model, optimizer
    name = f"mech1-{seed}-{arm}"
    await engine.load(name, path)
    written = await write_and_judge(engine, heldout, opts.variations, name, f"r{seed} held-out: {arm}",
                                    opts.eval_attempts)
    return {"written": written, "train": {**train, "generations": len(sets[arm])},
            "divergence_to_base": kl, "train_keys": sorted({it.key for it in sets[arm]})}


async def offline_replicate(opts: Offline, engine: Engine, trainer: Trainer, seed: int) -> dict[str, Any]:
    """Exp 1, one replicate: pool, arms' training sets, training, held-out evaluation of base + arms."""
    out = opts.out / f"r{seed}"
    pool_seeds, heldout = split_seeds(engine.domain, opts.pool_seeds, opts.heldout, seed)
    pool = cached(out / "cache-pool.json") or save(out / "cache-pool.json", await write_and_judge(
        engine, pool_seeds, opts.variations, None, f"r{seed} pool: base simulator × base agent", opts.attempts))
    sets, info = arm_sets(pool, opts.band, engine.sizes, opts.cap, seed)
    console.print(f"r{seed} pool: {info}")
    base = cached(out / "cache-eval-base.json") or save(out / "cache-eval-base.json", await write_and_judge(
        engine, heldout, opts.variations, None, f"r{seed} held-out: base", opts.eval_attempts))
    reference = train_items(base, lambda w, g: 1.0)[: opts.heldout]  # the base's own tasks: the divergence's texts
    arms: dict[str, Any] = {"base": {"written": base, "train": None, "divergence_to_base": 0.0, "train_keys": []}}
    for arm in ARMS:
        hit = cached(out / f"cache-eval-{arm}.json")
        if hit is None:
            hit = await _train_arm(opts, engine, trainer, seed, arm, sets, reference, heldout)
            save(out / f"cache-eval-{arm}.json", hit)
        arms[arm] = hit
    return {"seed": seed, "pool": info, "arms": arms}


async def offline(opts: Offline, engine: Engine, trainer: Trainer) -> dict[str, Any]:
    """Exp 1: every replicate, then the pre-registered analysis."""
    reps = [await offline_replicate(opts, engine, trainer, s) for s in opts.seeds]
    rule = OfflineRule(band=opts.band, min_train=opts.min_train, smallest_effect=opts.smallest_effect)
    return {"experiment": "offline", "seeds": opts.seeds, "pool_seeds": opts.pool_seeds,
            "heldout": opts.heldout, "eval_attempts": opts.eval_attempts, "band_half_width": opts.band,
            "lr": opts.lr, "steps": opts.steps,
            "cap": opts.cap, "min_train": opts.min_train, "smallest_effect": opts.smallest_effect,
            "sizes": engine.sizes, "pools": {r["seed"]: r["pool"] for r in reps},
            "train": {r["seed"]: {arm: v["train"] for arm, v in r["arms"].items()} for r in reps},
            "analysis": analyse_offline(rule, engine.domain, reps)}


async def pool_only(opts: Pool, engine: Engine) -> dict[str, Any]:
    """A pool alone (no arm is trained): how the base agent fares on the base simulator's tasks, per band and per
    difficulty group, and how long writing and judging took. Sizes runs before they are pre-registered."""
    seeds, _ = split_seeds(engine.domain, opts.pool_seeds, 0, opts.seed)
    started = time.monotonic()
    pool = cached(opts.out / "cache-pool.json") or save(opts.out / "cache-pool.json", await write_and_judge(
        engine, seeds, opts.variations, None, "pool: base simulator × base agent", opts.attempts))
    _, info = arm_sets(pool, opts.band, engine.sizes, 10**9, opts.seed)
    return {"experiment": "pool", "seed": opts.seed, "pool": info, "seconds": time.monotonic() - started,
            "generations": sum(len(w["generations"]) for w in pool),
            "attempts": sum(g.get("n", 0) for w in pool for g in w["generations"]),
            "p_hat_by_group": pool_p_hat_by_group(pool)}


def _engine(opts: Common, settings: GenEnvSettings, sizes: Sizes, servers: ExitStack) -> Engine:
    """The backend the run samples with; a vLLM server it starts lives as long as ``servers``."""
    domain = get_domain("arithmetic")
    if opts.backend == "local":
        return local_engine(settings, domain, sizes, opts.device, opts.concurrency)
    url = opts.url
    if url is None:
        url = servers.enter_context(vllm_server("simulator-mechanism-vllm"))
    return served_engine(settings, url, domain, sizes, opts.concurrency)


async def _main(opts: Calibrate | Offline | Pool) -> dict[str, Any]:
    settings = get_settings()
    sizes = Sizes(variations=opts.variations, attempts=opts.attempts)
    with ExitStack() as servers:
        engine = _engine(opts, settings, sizes, servers)
        trainer = Trainer(resolve_model(settings.inference.base_model, settings.paths.model_cache), sizes, opts.device,
                          opts.threads)
        try:
            if isinstance(opts, Calibrate):
                return await calibrate(opts, engine, trainer)
            if isinstance(opts, Pool):
                return await pool_only(opts, engine)
            return await offline(opts, engine, trainer)
        finally:
            await engine.backend.aclose()


def run(opts: Calibrate | Offline | Pool) -> dict[str, Any]:
    """One experiment: run it, write its JSON under ``opts.out`` and return it (with its wall time)."""
    started = time.monotonic()
    result = asyncio.run(_main(opts))
    result["wall_s"] = round(time.monotonic() - started, 1)
    save(opts.out / f"{opts.command}.json", result)
    return result
