"""API-Bank benchmark: level-1 and level-2 API-call accuracy.

Each item is one API-call sample of ``test-data/level-{1,2}-api.json``: the model sees upstream's instruction
(with the API descriptions) and the dialogue, and its first ``[ApiName(...)]`` is judged with API-Bank's per-API
correctness rules, the gold call's recorded result replayed instead of executing the API simulators (see
:mod:`genenv.domains.api_bank.checker`). Accuracy = correct / total; unparseable replies count as wrong (and are also
reported as ``invalid``). Categories are the two levels; ``level_1_accuracy`` and ``level_2_accuracy`` are the
paper-style numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.domains.api_bank.domain import DOMAIN, LEVELS, load_level


class ApiBankEvaluator(Evaluator):
    """Level-1 / level-2 API-call accuracy."""

    name: ClassVar[str] = "api_bank"
    splits: ClassVar[tuple[str, ...]] = ("all", "level-1", "level-2")
    default_split: ClassVar[str] = "all"
    headline: ClassVar[str] = "accuracy"
    max_tokens: ClassVar[int] = 128
    protocol: ClassVar[str] = (
        "API-Bank level-1/2 API-call samples; first [ApiName(...)] judged with the per-API correctness rules, "
        "gold result replayed (no API execution); ToolSearcher/Dictionary/Translate/SearchEngine by offline proxies"
    )

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """The API-call samples of one level or of both."""
        self.check_split(split)
        levels = list(LEVELS) if split == "all" else [split]
        return [
            BenchItem(id=f"{level}/{i:03d}", category=level, payload=p)
            for level in levels
            for i, p in enumerate(load_level(benchmarks_dir, level))
        ]

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Ask for the next API request and judge it."""
        completion = await ctx.chat(DOMAIN.agent_messages(item.payload))
        verdict = DOMAIN.verify(item.payload, completion.text)
        return ItemResult.of(item, verdict, completion.text)

    def summarize(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Default per-level table plus level_1_accuracy / level_2_accuracy in ``overall``."""
        metrics = super().summarize(results)
        for level, block in metrics["categories"].items():
            metrics["overall"][f"{level.replace('-', '_')}_accuracy"] = block["accuracy"]
        return metrics


EVALUATOR = ApiBankEvaluator()
