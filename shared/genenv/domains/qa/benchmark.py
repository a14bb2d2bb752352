"""Bamboogle benchmark: closed-book exact match and token-F1 (SQuAD normalisation).

No search tool is used (none is configured offline; the questions were written to need one, so closed-book
numbers are low by design). EM and F1 are means over all items, an empty or unusable reply counting 0 for both;
``accuracy`` is the share with F1 ≥ 0.5 (the qa domain's success threshold). Split ``test`` is all 125
questions (comparable with published numbers); ``heldout`` leaves out the fixed fifth that seeds the qa
simulator. Categories are answer types (number, yes/no, entity) read from the gold answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.checkers.text import normalize_answer
from genenv.domains.qa.domain import DOMAIN, is_seed_item, load_bamboogle

_NUMBER = re.compile(r"^[\d\s,.]+$")


def answer_type(answer: str) -> str:
    """'number', 'yes/no' or 'entity' for a gold answer."""
    norm = normalize_answer(answer)
    if norm in {"yes", "no"}:
        return "yes/no"
    if _NUMBER.match(norm):
        return "number"
    return "entity"


class BamboogleEvaluator(Evaluator):
    """Closed-book EM / F1."""

    name: ClassVar[str] = "bamboogle"
    splits: ClassVar[tuple[str, ...]] = ("test", "heldout")
    default_split: ClassVar[str] = "test"
    headline: ClassVar[str] = "em"
    max_tokens: ClassVar[int] = 32
    protocol: ClassVar[str] = (
        "closed-book (no search tool); EM and token-F1 after SQuAD normalisation, max over gold answers"
    )

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """All 125 questions, or the 100 that never seed the simulator."""
        self.check_split(split)
        return [
            BenchItem(id=p["id"], category=answer_type(p["golden_answers"][0]), payload=p)
            for p in load_bamboogle(benchmarks_dir)
            if split == "test" or not is_seed_item(p["id"])
        ]

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Ask the question, score the reply."""
        completion = await ctx.chat(DOMAIN.agent_messages(item.payload))
        verdict = DOMAIN.verify(item.payload, completion.text)
        em = float(verdict.details.get("em", 0.0)) if verdict.valid else 0.0
        f1 = float(verdict.details.get("f1", 0.0)) if verdict.valid else 0.0
        return ItemResult.of(item, verdict, completion.text, em=em, f1=f1)

    def summarize(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Default table plus mean EM and F1 per category and overall."""
        metrics = super().summarize(results)
        groups: dict[str, list[ItemResult]] = {}
        for r in results:
            groups.setdefault(r.category, []).append(r)
        blocks = [(metrics["overall"], list(results))] + [(metrics["categories"][c], rs) for c, rs in groups.items()]
        for block, rs in blocks:
            n = len(rs)
            block["em"] = sum(r.extra.get("em", 0.0) for r in rs) / n if n else None
            block["f1"] = sum(r.extra.get("f1", 0.0) for r in rs) / n if n else None
        metrics["score"] = metrics["overall"]["em"]
        return metrics


EVALUATOR = BamboogleEvaluator()
