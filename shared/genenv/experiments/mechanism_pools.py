"""The simulator-mechanism experiments' pools (docs/experiments/preregistration.md, Exp 0 and Exp 1): cached
generations turned into prompt outcomes, training pairs with their RWR weights, each arm's training set and Exp 1's
analysis. Pure: the driver that writes, judges and trains is genenv_orchestrator.mechanism.

A cached *written* row is one seed's simulator prompt with its generations: ``{"seed_id", "group", "prompt",
"generations": [{"raw_text", "payload", "k", "n"}]}`` (``payload`` None when the domain rejected the generation;
``k``/``n`` the base agent's successes over valid attempts, absent when nothing was attempted).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from genenv.curriculum.reward import alpha_reward, in_band
from genenv.domains.base import Domain
from genenv.experiments.mechanism import (
    BANDS,
    CalibrationRow,
    Contrast,
    ManipulationCheck,
    PromptOutcome,
    TaskOutcome,
    contrast,
    decide,
    manipulation_check,
    summarise_arm,
)

ALPHA = 0.5
MARKER = "has_mul"
"""Exp 0's marker: a difficulty measure of the arithmetic domain that is 1 when the expression multiplies."""
ARMS = ("A", "C", "D", "E")

Written = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TrainItem:
    """One (simulator prompt → generation) pair with its RWR weight."""

    prompt: list[dict[str, Any]]
    raw_text: str
    weight: float
    key: str


def task_key(payload: Mapping[str, Any]) -> str:
    """A task's canonical key (copies of pool items and repeats are spotted by it)."""
    return json.dumps(payload.get("expression", payload), sort_keys=True)


def outcomes(domain: Domain, written: Written, train_keys: frozenset[str] | set[str] = frozenset()
             ) -> dict[str, PromptOutcome]:
    """Prompt outcomes of one arm from its cached generations."""
    out: dict[str, PromptOutcome] = {}
    for w in written:
        tasks = [TaskOutcome(task_key(g["payload"]), int(g.get("k", 0)), int(g.get("n", 0)),
                             domain.difficulty(g["payload"]))
                 for g in w["generations"] if g["payload"] is not None]
        out[w["seed_id"]] = PromptOutcome(
            w["seed_id"], w["group"], len(w["generations"]), tasks,
            copies=sum(t.key in train_keys for t in tasks),
            markers=sum(bool(t.difficulty.get(MARKER)) for t in tasks))
    return out


Keep = Callable[[Mapping[str, Any], Mapping[str, Any]], float | None]


def train_items(written: Written, keep: Keep) -> list[TrainItem]:
    """Training pairs from cached generations; ``keep(prompt_row, generation)`` gives the weight or None."""
    out = []
    for w in written:
        for g in w["generations"]:
            if g["payload"] is not None and (weight := keep(w, g)) is not None:
                out.append(TrainItem(w["prompt"], g["raw_text"], weight, task_key(g["payload"])))
    return out


def calibration_row(lr: float, steps: int, prompts: Mapping[str, PromptOutcome], kl: float | None
                    ) -> CalibrationRow:
    """One dose's row of Exp 0: marker, validity and distinct shares on the held-out prompts."""
    valid = sum(len(p.tasks) for p in prompts.values())
    distinct = [d for p in prompts.values() if (d := p.distinct_share) is not None]
    return CalibrationRow(
        lr=lr, steps=steps,
        marker_share=sum(p.markers for p in prompts.values()) / valid if valid else 0.0,
        valid_share=valid / max(sum(p.samples for p in prompts.values()), 1),
        distinct_share=sum(distinct) / len(distinct) if distinct else 0.0, kl_to_base=kl)


def batch_p_hat(w: Mapping[str, Any]) -> float | None:
    """A seed batch's p̂: every attempt at its valid generations pooled."""
    n = sum(g.get("n", 0) for g in w["generations"] if g["payload"] is not None)
    return sum(g.get("k", 0) for g in w["generations"] if g["payload"] is not None) / n if n else None


def _task_p(g: Mapping[str, Any]) -> float | None:
    return float(g["k"] / g["n"]) if g.get("n") else None


def arm_sets(pool: Written, half_width: float, sizes: Sizes, cap: int, seed: int
             ) -> tuple[dict[str, list[TrainItem]], dict[str, Any]]:
    """Each arm's training generations. A: generations of seed batches in the α band (the method's RWR pool:
    seed-batch p̂, R_env weights); C: a random selection of all valid generations, size-matched to A. D and E:
    generations whose OWN p̂ (G attempts) lies in a band at 0.3 / 0.7 (task level: with a weak agent hardly any seed
    batch averages 0.7), size-matched to each other. Every weight is exp(λ·R_env) with the arm's centre as α."""
    p_of = {w["seed_id"]: batch_p_hat(w) for w in pool}

    def band_weight(p: float | None, center: float) -> float | None:
        if p is None or not in_band(p, alpha=center, k_min=half_width):
            return None
        return math.exp(sizes.rwr_lambda * alpha_reward(p, alpha=center, beta=sizes.beta))

    available = {
        "A": train_items(pool, lambda w, g: band_weight(p_of[w["seed_id"]], BANDS["A"])),
        "D": train_items(pool, lambda w, g: band_weight(_task_p(g), BANDS["D"])),
        "E": train_items(pool, lambda w, g: band_weight(_task_p(g), BANDS["E"])),
    }
    everything = train_items(pool, lambda w, g: 1.0)
    rng = random.Random(seed)
    n_ac = min(len(available["A"]), cap)
    n_de = min(len(available["D"]), len(available["E"]), cap)
    chosen = {"A": rng.sample(available["A"], n_ac), "C": rng.sample(everything, n_ac),
              "D": rng.sample(available["D"], n_de), "E": rng.sample(available["E"], n_de)}
    batches = [p for p in p_of.values() if p is not None]
    tasks = [p for w in pool for g in w["generations"] if g["payload"] is not None and (p := _task_p(g)) is not None]
    info = {"seed_batches": len(pool), "scored_batches": len(batches), "valid_generations": len(everything),
            "available": {arm: len(v) for arm, v in available.items()}, "matched": {"A, C": n_ac, "D, E": n_de},
            "batches_in_band": {arm: sum(in_band(p, alpha=c, k_min=half_width) for p in batches)
                                for arm, c in BANDS.items()},
            "tasks_in_band": {arm: sum(in_band(p, alpha=c, k_min=half_width) for p in tasks)
                              for arm, c in BANDS.items()},
            "batch_p_hat_deciles": deciles(batches), "task_p_hat_deciles": deciles(tasks)}
    return chosen, info


def deciles(values: Sequence[float]) -> list[int]:
    """How many values fall in each tenth of [0, 1] (1.0 in the last)."""
    return [sum(1 for p in values if i / 10 <= p < (i + 1) / 10 or (i == 9 and p == 1.0)) for i in range(10)]


def pool_p_hat_by_group(pool: Written) -> dict[str, float]:
    """The mean seed-batch p̂ per difficulty group (batches without a valid attempt left out)."""
    by_group: dict[str, list[float]] = {}
    for w in pool:
        if (p := batch_p_hat(w)) is not None:
            by_group.setdefault(str(w["group"]), []).append(p)
    return {g: sum(v) / len(v) for g, v in sorted(by_group.items())}


@dataclass(frozen=True)
class OfflineRule:
    """Exp 1's pre-registered analysis parameters."""

    band: float
    min_train: int
    smallest_effect: float


def analyse_offline(rule: OfflineRule, domain: Domain, replicates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summaries per arm, the two endpoints with their checks and decisions, and secondary contrasts."""
    runs: dict[int, dict[str, dict[str, PromptOutcome]]] = {}
    for rep in replicates:
        runs[rep["seed"]] = {arm: outcomes(domain, v["written"], set(v["train_keys"])) for arm, v in
                             rep["arms"].items()}
    names = ("base", *ARMS)
    summaries = {arm: summarise_arm(arm, [o for r in runs.values() for o in r.get(arm, {}).values()], ALPHA,
                                    rule.band) for arm in names}
    sizes = {arm: min((rep["arms"][arm]["train"] or {}).get("generations", 0) for rep in replicates) for arm in ARMS}
    kls = {arm: sum(rep["arms"][arm]["divergence_to_base"] or 0.0 for rep in replicates) / len(replicates)
           for arm in ARMS}
    endpoints: list[tuple[Contrast, ManipulationCheck]] = []
    for c, arms in ((contrast("E1: A − C on |p̂ − α|", runs, "A", "C", "abs_gap", -1, ALPHA), ("A", "C")),
                    (contrast("E2: E − D on p̂", runs, "E", "D", "p_hat", 1, ALPHA), ("D", "E"))):
        check = manipulation_check(arms, sizes, kls, summaries, summaries["base"], min_train=rule.min_train,
                                   max_kl_ratio=2.0, max_valid_drop=0.10, max_distinct_drop=0.15)
        endpoints.append((c, check))
    secondary = [contrast(f"{a} − base on {m}", runs, a, "base", m, s, ALPHA)  # type: ignore[arg-type]
                 for a, m, s in (("A", "abs_gap", -1), ("C", "abs_gap", -1), ("D", "p_hat", -1), ("E", "p_hat", 1))]
    return {
        "summaries": summaries,
        "train_sizes": sizes,
        "divergence_to_base": kls,
        "endpoints": [{"contrast": c, "check": chk, "decision": decide(c, chk, rule.smallest_effect)}
                      for c, chk in endpoints],
        "secondary": secondary,
    }
