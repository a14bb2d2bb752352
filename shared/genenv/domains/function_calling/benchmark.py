"""BFCL evaluator: the non-live single-turn AST categories and the long-context multi-turn subset, turn by turn.

Categories and scoring:

- ``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple``, ``irrelevance``: one greedy reply per
  item to BFCL's default prompt (:func:`genenv.domains.function_calling.domain.system_prompt`), scored with the
  BFCL AST checker (:mod:`genenv.domains.function_calling.checker`, 100 % agreement with the official checker, see
  docs/benchmarks.md). A reply that is not calls is an invalid verdict and counts as not solved, as in BFCL.
- ``multi_turn_long_context``: every turn with gold calls is one item, scored given the gold history by
  executing calls on BFCL's backends (:mod:`genenv.domains.function_calling.multiturn`). Without ``bfcl-eval``
  installed these items are skipped and the metrics say so.

Splits: ``eval`` (default) = the AST items of the fixed evaluation split of the function-calling domain (never
used as seeds) plus all multi-turn turns; ``ast`` = those AST items alone (the multi-turn turns need a 16k
context, more than a small CPU server serves: an experiment's held-out evaluation on CPU uses this one); ``all`` =
every item, including those that seed the simulator (for comparison with published full-benchmark numbers only).
``headline`` is the mean of the category accuracies (BFCL averages its non-live categories unweighted).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.checkers.base import run_checker, valid_verdict
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage
from genenv.domains.function_calling.data import bfcl_dir, load_category, split_of
from genenv.domains.function_calling.domain import DOMAIN, system_prompt
from genenv.domains.function_calling.multiturn import (
    CATEGORY as MULTI_TURN,
)
from genenv.domains.function_calling.multiturn import (
    MAX_STEPS,
    Entry,
    World,
    backends_missing,
    decode_step,
    function_docs,
    load_entries,
    missing_results,
    parse_gold,
    render_call,
    tool_results_message,
)

AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")


class BfclEvaluator(Evaluator):
    """BFCL non-live AST categories + multi-turn long context (turn by turn, gold history)."""

    name: ClassVar[str] = "bfcl"
    splits: ClassVar[tuple[str, ...]] = ("eval", "ast", "all")
    default_split: ClassVar[str] = "eval"
    headline: ClassVar[str] = "macro_accuracy"
    max_tokens: ClassVar[int] = 256
    protocol: ClassVar[str] = (
        "non-live AST categories: one greedy reply, BFCL AST checker; multi_turn_long_context: each turn given "
        "the gold history, executed on BFCL's backends, BFCL state + response checks"
    )

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """AST items of the split, then one item per multi-turn turn with gold calls (when backends exist)."""
        self.check_split(split)
        items = [
            BenchItem(p["id"], category, {"kind": "ast", "task": p})
            for category in AST_CATEGORIES
            for p in load_category(benchmarks_dir, category)
            if split == "all" or split_of(p["id"]) == "eval"
        ]
        if split != "ast" and backends_missing() is None:
            root = bfcl_dir(benchmarks_dir)
            for entry in load_entries(root):
                docs = function_docs(root, entry.involved_classes)
                for turn, gold in enumerate(entry.gold):
                    if gold:
                        payload = {"kind": "multi_turn", "entry": entry, "turn": turn, "functions": docs}
                        items.append(BenchItem(f"{entry.id}/turn{turn}", MULTI_TURN, payload))
        return items

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """One AST reply, or one multi-turn turn (several steps)."""
        if item.payload["kind"] == "ast":
            task = item.payload["task"]
            completion = await ctx.chat(DOMAIN.agent_messages(task))
            return ItemResult.of(item, DOMAIN.verify(task, completion.text), completion.text)
        return await _run_turn(ctx, item)

    def summarize(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Default per-category summary, plus the reason when multi-turn items could not be run."""
        metrics = super().summarize(results)
        reason = backends_missing()
        if reason is not None:
            metrics["skipped"] = {MULTI_TURN: reason}
        return metrics


async def _run_turn(ctx: RunContext, item: BenchItem) -> ItemResult:
    entry: Entry = item.payload["entry"]
    turn: int = item.payload["turn"]
    world = World.create(entry)
    messages: list[ChatMessage] = [{"role": "system", "content": system_prompt(item.payload["functions"])}]
    history_results: list[str] = []
    for t in range(turn):
        calls = parse_gold(entry.gold[t])
        messages.extend(dict(m) for m in entry.turns[t])
        if calls:
            results = world.execute(calls, positional=True)
            history_results.extend(results)
            messages.append({"role": "assistant", "content": "[" + ", ".join(render_call(c) for c in calls) + "]"})
            messages.append(tool_results_message(calls, results))
    messages.extend(dict(m) for m in entry.turns[turn])
    model_world = world.copy()
    model_results: list[str] = []
    replies: list[str] = []
    for _step in range(MAX_STEPS):
        completion = await ctx.chat(messages)
        replies.append(completion.text)
        calls = decode_step(completion.text)
        if not calls:
            break
        results = model_world.execute(calls, positional=False)
        model_results.extend(results)
        messages.append({"role": "assistant", "content": completion.text})
        messages.append(tool_results_message(calls, results))
    gold_calls = parse_gold(entry.gold[turn])

    def check() -> Verdict:
        gold_world = world.copy()
        gold_results = gold_world.execute(gold_calls, positional=True)
        details: dict[str, Any] = {"steps": len(replies), "model_calls": len(model_results)}
        if not model_results:
            return valid_verdict(0.0, 1.0, {**details, "error_type": "multi_turn:empty_turn_model_response"})
        mismatch = model_world.state_mismatch(gold_world)
        if mismatch is not None:
            return valid_verdict(
                0.0, 1.0, {**details, "error_type": "multi_turn:instance_state_mismatch", "message": mismatch}
            )
        missing = missing_results(gold_results, history_results + model_results)
        if missing:
            return valid_verdict(
                0.0,
                1.0,
                {**details, "error_type": "multi_turn:execution_response_mismatch", "message": missing[0][:200]},
            )
        return valid_verdict(1.0, 1.0, details)

    return ItemResult.of(item, run_checker(check), "\n---\n".join(replies))


EVALUATOR = BfclEvaluator()
