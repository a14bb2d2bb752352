"""TravelPlanner benchmark, sole-planning: the 180 validation queries, reference information in the prompt.

Rates as upstream ``evaluation/eval.py`` computes them on validation:

- commonsense micro = passed commonsense constraints / (8 × queries), macro = plans passing all 8;
- hard micro = passed hard constraints / applicable ones (Budget + each set local constraint: 420 on the full
  validation set), macro = plans passing all applicable hard constraints; hard constraints are checked only
  for plans that pass Complete Information and Within Sandbox;
- final pass rate = plans passing everything; delivery rate = plans that parsed.

A reply that does not parse as a plan (or a failed request) is an undelivered plan: it fails every constraint.
The paper's TravelPlanner number is the mean of the four micro/macro rates (``cs_hard_mean``). It is labelled a
proxy: flights are checked against the table derived from the validation reference information (not the full
flights database), and plans are read as JSON from the model instead of being parsed by GPT-4.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.checkers.base import invalid_verdict
from genenv.contracts.errors import GenEnvError
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains.travel_plan.checker import COMMONSENSE, HARD, TravelQuery, applicable_hard
from genenv.domains.travel_plan.domain import DOMAIN, TravelPlanDomain, load_validation
from genenv.inference.base import InferenceError

PROXY_NOTE = (
    "proxy: flights checked against the table derived from the validation reference information; plans read as "
    "JSON (no GPT-4 parsing step)"
)


def _key(name: str) -> str:
    return name.lower().replace(" ", "_").replace(".", "").replace("-", "_")


class TravelPlannerEvaluator(Evaluator):
    """Commonsense / hard-constraint micro and macro pass rates and the final pass rate."""

    name: ClassVar[str] = "travelplanner"
    splits: ClassVar[tuple[str, ...]] = ("validation",)
    default_split: ClassVar[str] = "validation"
    headline: ClassVar[str] = "cs_hard_mean"
    max_tokens: ClassVar[int] = 1536
    protocol: ClassVar[str] = (
        "sole-planning on the 180 validation queries; JSON plan scored by the 8 commonsense + 5 hard constraints"
    )

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """The validation queries, categorised as level/days (easy-3 … hard-7)."""
        self.check_split(split)
        return [
            BenchItem(id=f"validation/{p['idx']:03d}", category=f"{p['level']}-{p['days']}", payload=p)
            for p in load_validation(benchmarks_dir)
        ]

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Ask for a plan and check every constraint (a failed request is an undelivered plan)."""
        applicable = float(applicable_hard(TravelQuery.from_payload(item.payload)))
        try:
            completion = await ctx.chat(DOMAIN.agent_messages(item.payload))
        except (InferenceError, GenEnvError, OSError) as exc:
            verdict = invalid_verdict(VerdictErrorKind.ROLLOUT_ERROR, f"{type(exc).__name__}: {exc}")
            return ItemResult.of(item, verdict, None, hard_applicable=applicable)
        domain = DOMAIN if ctx.benchmarks_dir is None else TravelPlanDomain(ctx.benchmarks_dir)
        verdict = domain.verify(item.payload, completion.text)
        return ItemResult.of(item, verdict, completion.text, **plan_numbers(verdict.details, verdict.valid, applicable))

    def summarize(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Default table plus the official rates overall and per level/days category."""
        metrics = super().summarize(results)
        groups: dict[str, list[ItemResult]] = {}
        for r in results:
            groups.setdefault(r.category, []).append(r)
        metrics["overall"].update(rates(results))
        for category, rs in groups.items():
            metrics["categories"][category].update(rates(rs))
        metrics["score"] = metrics["overall"]["cs_hard_mean"]
        metrics["proxy"] = PROXY_NOTE
        metrics["constraints"] = {
            name: sum(r.extra.get(f"cs:{_key(name)}", 0.0) for r in results) for name in COMMONSENSE
        } | {name: sum(r.extra.get(f"hard:{_key(name)}", 0.0) for r in results) for name in HARD}
        return metrics


def plan_numbers(details: dict[str, Any], valid: bool, applicable: float) -> dict[str, float]:
    """Per-item numbers the rates are built from (all zero for an undelivered plan)."""
    out: dict[str, float] = {"hard_applicable": applicable, "delivered": 1.0 if valid else 0.0}
    if not valid:
        return out
    cs: dict[str, bool] = details.get("commonsense") or {}
    hd: dict[str, bool | None] | None = details.get("hard")
    for name, ok in cs.items():
        out[f"cs:{_key(name)}"] = 1.0 if ok else 0.0
    for name, value in (hd or {}).items():
        out[f"hard:{_key(name)}"] = 1.0 if value is True else 0.0
    out["cs_passed"] = float(sum(cs.values()))
    out["hard_passed"] = float(sum(v is True for v in (hd or {}).values()))
    out["cs_all"] = 1.0 if details.get("commonsense_pass") and hd is not None else 0.0
    out["hard_all"] = 1.0 if details.get("hard_pass") else 0.0
    out["final"] = 1.0 if details.get("final_pass") else 0.0
    return out


def rates(results: Sequence[ItemResult]) -> dict[str, float | None]:
    """Delivery, commonsense/hard micro and macro, final pass rate and the mean of the four micro/macro rates."""
    n = len(results)
    if n == 0:
        return {}
    hard_total = sum(r.extra.get("hard_applicable", 0.0) for r in results)
    out: dict[str, float | None] = {
        "delivery_rate": sum(r.extra.get("delivered", 0.0) for r in results) / n,
        "cs_micro": sum(r.extra.get("cs_passed", 0.0) for r in results) / (len(COMMONSENSE) * n),
        "cs_macro": sum(r.extra.get("cs_all", 0.0) for r in results) / n,
        "hard_micro": sum(r.extra.get("hard_passed", 0.0) for r in results) / hard_total if hard_total else None,
        "hard_macro": sum(r.extra.get("hard_all", 0.0) for r in results) / n,
        "final_pass_rate": sum(r.extra.get("final", 0.0) for r in results) / n,
    }
    four = [out["cs_micro"], out["cs_macro"], out["hard_micro"], out["hard_macro"]]
    out["cs_hard_mean"] = sum(v for v in four if v is not None) / len(four) if None not in four else None
    return out


EVALUATOR = TravelPlannerEvaluator()
