"""Held-out arithmetic: the agent's greedy accuracy on the arithmetic domain's eval split, per difficulty level.

The eval split is the domain's fixed hash rule (about a fifth of every level's expressions), so no item can ever
be a seed or — since the simulator's generations are checked against nothing here — leak into training through
the seed prompts. Items are ordered by level and index, and ``limit`` takes them round-robin across levels, so
every member run of an experiment evaluates the same items and a small limit still covers every level. The
prompt and the checker are the domain's own: exactly what the agent is trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.domains.arithmetic.domain import DOMAIN


class ArithmeticEvaluator(Evaluator):
    """Exact match of the last integer in the reply, per level."""

    name: ClassVar[str] = "arithmetic"
    splits: ClassVar[tuple[str, ...]] = ("eval", "heldout")
    default_split: ClassVar[str] = "eval"
    headline: ClassVar[str] = "accuracy"
    max_tokens: ClassVar[int] = 24
    protocol: ClassVar[str] = (
        "greedy; the domain's prompt; exact match of the last integer in the reply; categories are difficulty "
        "levels; items from the eval split only (never seeds)"
    )

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """eval: the eval-hash expressions among the seed indices (≈ 117, the split earlier experiments used);
        heldout: ≈ 540 eval-hash expressions, up to 120 per level (no data files: the domain generates them)."""
        self.check_split(split)
        seeds = DOMAIN.heldout_items() if split == "heldout" else DOMAIN.load_seeds(None, split)
        return [BenchItem(id=seed.id, category=str(seed.payload["level"]), payload=seed.payload) for seed in seeds]

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Ask the question, check the answer."""
        completion = await ctx.chat(DOMAIN.agent_messages(item.payload))
        return ItemResult.of(item, DOMAIN.verify(item.payload, completion.text), completion.text)


EVALUATOR = ArithmeticEvaluator()
