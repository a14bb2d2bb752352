"""Evaluator framework: load a benchmark split, run every item through the agent concurrently, score, summarise.

An evaluator subclasses :class:`Evaluator` and provides three things:

- ``load_items(benchmarks_dir, split)`` → :class:`BenchItem` list (stable order; missing data raises
  ``DataMissingError``);
- ``async run_item(ctx, item)`` → :class:`ItemResult`: query ``ctx.backend`` (greedy, ``ctx.adapter``) and score
  the answer with a pure checker (use ``ItemResult.of(item, verdict, ...)``);
- optionally ``summarize(results)`` to add benchmark-specific metrics (EM/F1, micro/macro rates, …) on top of the
  default per-category table, and ``headline`` naming the one number the paper reports.

:func:`run_evaluation` does the rest: ``limit`` takes items round-robin across categories (so a small slice still
covers every category), runs them with bounded concurrency under a Rich progress bar, turns inference failures
into invalid ``rollout_error`` verdicts (the item counts as not solved; it is never dropped), and returns an
:class:`EvaluationReport` whose ``metrics`` dict is what gets stored in the ``evaluation`` row:

``{"headline": name, "score": value, "overall": {...}, "categories": {cat: {...}}, "protocol": ..., ...}``

where each summary block has ``n``, ``solved``, ``accuracy`` (solved / n: invalid verdicts count as failures),
``malformed`` (replies that did not parse: valid verdicts with score 0, the same rule as training and p̂),
``invalid``, ``rollout_errors`` and ``mean_score`` (over valid verdicts, malformed replies included). ``overall``
also has ``macro_accuracy`` (mean of the category accuracies).
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from genenv.checkers.base import invalid_verdict
from genenv.contracts.errors import GenEnvError
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.contracts.rollouts import Verdict, VerdictErrorKind
from genenv.contracts.tasks import ChatMessage
from genenv.inference.base import Completion, InferenceBackend, InferenceError, SamplingParams


class UnknownSplitError(GenEnvError):
    """The benchmark has no split of that name."""

    status_code = 422
    type = "invalid_request_error"


@dataclass(frozen=True)
class BenchItem:
    """One evaluation item: a stable id, the category it is reported under, and whatever the evaluator needs."""

    id: str
    category: str
    payload: dict[str, Any]


@dataclass
class ItemResult:
    """The outcome of one item. ``verdict`` is invalid (rollout_error) when the model could not be queried."""

    id: str
    category: str
    verdict: Verdict
    response: str | None = None
    extra: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, item: BenchItem, verdict: Verdict, response: str | None = None, **extra: float) -> ItemResult:
        """Result for an item, with optional per-item numbers (e.g. ``em=1.0, f1=0.5``) for custom summaries."""
        return cls(item.id, item.category, verdict, response, dict(extra))

    @property
    def solved(self) -> bool:
        """A valid and successful verdict."""
        return self.verdict.valid and self.verdict.success

    @property
    def rollout_error(self) -> bool:
        """The model was not (successfully) queried."""
        err = self.verdict.error
        return err is not None and err.kind is VerdictErrorKind.ROLLOUT_ERROR


@dataclass(frozen=True)
class RunContext:
    """What ``run_item`` may use: the backend, the adapter to evaluate (None = base model), generation limits."""

    backend: InferenceBackend
    adapter: str | None
    max_tokens: int = 256
    temperature: float = 0.0
    # The folder the items were loaded from: a checker that needs more of the benchmark's data (TravelPlanner's
    # database) reads it from here, not from the process settings, so items and data always come from one place.
    benchmarks_dir: Path | None = None

    async def chat(self, messages: list[ChatMessage], *, max_tokens: int | None = None) -> Completion:
        """One greedy chat completion with this run's adapter."""
        sampling = SamplingParams(temperature=self.temperature, max_tokens=max_tokens or self.max_tokens)
        return await self.backend.chat(messages, sampling=sampling, adapter=self.adapter)


@dataclass
class EvaluationReport:
    """What one evaluation produced: its identity, the metrics stored in the evaluation row, the item results."""

    benchmark: str
    split: str
    adapter: str | None
    metrics: dict[str, Any]
    results: list[ItemResult]

    @property
    def n_items(self) -> int:
        """Items evaluated."""
        return len(self.results)


class Evaluator(abc.ABC):
    """One benchmark. Subclasses are stateless; one instance per process is registered in the registry."""

    name: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]
    default_split: ClassVar[str]
    headline: ClassVar[str] = "accuracy"
    """Key of the number the paper reports (looked up in ``metrics['overall']`` by the default summary)."""
    max_tokens: ClassVar[int] = 256
    protocol: ClassVar[str] = ""
    """One line saying how the benchmark is run and scored (stored with the metrics)."""

    def check_split(self, split: str) -> None:
        """Raise UnknownSplitError for a split this benchmark does not have."""
        if split not in self.splits:
            raise UnknownSplitError(
                f"{self.name} has no split {split!r}; choose from {list(self.splits)}", param="split"
            )

    @abc.abstractmethod
    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """All items of a split, in a stable order."""

    @abc.abstractmethod
    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Query the model for one item and score the answer."""

    def summarize(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Metrics stored for the evaluation: per-category and overall summaries plus the headline score."""
        metrics = default_summary(results)
        metrics["headline"] = self.headline
        metrics["score"] = metrics["overall"].get(self.headline)
        if self.protocol:
            metrics["protocol"] = self.protocol
        return metrics


def summary_block(results: Sequence[ItemResult]) -> dict[str, Any]:
    """n, solved, accuracy, malformed, invalid, rollout_errors, mean_score (valid only) of some results."""
    n = len(results)
    solved = sum(1 for r in results if r.solved)
    valid_scores = [r.verdict.score for r in results if r.verdict.valid and r.verdict.score is not None]
    return {
        "n": n,
        "solved": solved,
        "accuracy": solved / n if n else None,
        "malformed": sum(1 for r in results if r.verdict.form_error is not None),
        "invalid": sum(1 for r in results if not r.verdict.valid),
        "rollout_errors": sum(1 for r in results if r.rollout_error),
        "mean_score": sum(valid_scores) / len(valid_scores) if valid_scores else None,
    }


def default_summary(results: Sequence[ItemResult]) -> dict[str, Any]:
    """``{"overall": block + macro_accuracy, "categories": {category: block}}``."""
    by_category: dict[str, list[ItemResult]] = defaultdict(list)
    for r in results:
        by_category[r.category].append(r)
    categories = {cat: summary_block(items) for cat, items in sorted(by_category.items())}
    overall = summary_block(results)
    accs = [c["accuracy"] for c in categories.values() if c["accuracy"] is not None]
    overall["macro_accuracy"] = sum(accs) / len(accs) if accs else None
    return {"overall": overall, "categories": categories}


def take(items: Sequence[BenchItem], limit: int | None) -> list[BenchItem]:
    """The first ``limit`` items taken round-robin across categories (all items when limit is None)."""
    if limit is None or limit >= len(items):
        return list(items)
    queues: dict[str, list[BenchItem]] = defaultdict(list)
    for item in items:
        queues[item.category].append(item)
    picked: list[BenchItem] = []
    depth = 0
    while len(picked) < limit:
        for queue in queues.values():
            if depth < len(queue):
                picked.append(queue[depth])
                if len(picked) == limit:
                    break
        depth += 1
    return picked


async def _run_one(evaluator: Evaluator, ctx: RunContext, item: BenchItem) -> ItemResult:
    try:
        return await evaluator.run_item(ctx, item)
    except InferenceError as exc:
        return ItemResult.of(item, invalid_verdict(VerdictErrorKind.ROLLOUT_ERROR, f"inference failed: {exc}"))
    except (GenEnvError, OSError) as exc:
        return ItemResult.of(item, invalid_verdict(VerdictErrorKind.ROLLOUT_ERROR, f"{type(exc).__name__}: {exc}"))


async def run_evaluation(
    evaluator: Evaluator,
    backend: InferenceBackend,
    *,
    benchmarks_dir: Path,
    adapter: str | None = None,
    split: str | None = None,
    limit: int | None = None,
    concurrency: int = 16,
    show_progress: bool = True,
    console: Console | None = None,
) -> EvaluationReport:
    """Evaluate ``adapter`` (None = base model) on a split: every item, concurrently, under a progress bar."""
    split = split or evaluator.default_split
    evaluator.check_split(split)
    if limit is not None and limit < 1:
        raise GenEnvError("limit must be at least 1", param="limit")
    items = take(evaluator.load_items(benchmarks_dir, split), limit)
    ctx = RunContext(backend=backend, adapter=adapter, max_tokens=evaluator.max_tokens, benchmarks_dir=benchmarks_dir)
    semaphore = asyncio.Semaphore(max(1, concurrency))
    started = time.perf_counter()
    progress = Progress(
        TextColumn(f"[bold]{evaluator.name}[/] {split}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress,
        transient=True,
    )

    with progress:
        bar = progress.add_task("items", total=len(items))

        async def one(item: BenchItem) -> ItemResult:
            async with semaphore:
                result = await _run_one(evaluator, ctx, item)
            progress.advance(bar)
            return result

        results = list(await asyncio.gather(*(one(item) for item in items)))
    metrics = evaluator.summarize(results)
    metrics["duration_s"] = round(time.perf_counter() - started, 3)
    metrics["limit"] = limit
    return EvaluationReport(benchmark=evaluator.name, split=split, adapter=adapter, metrics=metrics, results=results)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def metrics_table(benchmark: str, split: str, adapter: str | None, metrics: dict[str, Any]) -> Table:
    """A Rich table: one row per category and the overall row; numbers only the overall block has go below it."""
    base_cols = ["n", "solved", "accuracy", "malformed", "invalid", "rollout_errors", "mean_score"]
    parsed = EvaluationMetrics.parse(metrics)
    overall = parsed.overall.numbers()
    categories = {name: block.numbers() for name, block in parsed.categories.items()}
    extra_cols = sorted(set().union(*(set(b) for b in categories.values())) - set(base_cols))
    overall_only = sorted(set(overall) - set(base_cols) - set(extra_cols))
    title = f"{benchmark} · {split} · {adapter or 'base model'}"
    if parsed.score is not None:
        title += f" · {parsed.headline} = {_fmt(parsed.score)}"
    caption = "  ".join(f"{k} = {_fmt(overall[k])}" for k in overall_only) or None
    table = Table(title=title, caption=caption)
    table.add_column("category", overflow="fold")
    for col in base_cols + extra_cols:
        table.add_column(col.replace("_", " "), justify="right", overflow="fold")
    for cat, block in categories.items():
        table.add_row(cat, *(_fmt(block.get(c)) for c in base_cols + extra_cols))
    table.add_row("[bold]overall[/]", *(_fmt(overall.get(c)) for c in base_cols + extra_cols), end_section=True)
    return table


def print_report(report: EvaluationReport, console: Console | None = None) -> None:
    """Print the per-category table of a report."""
    (console or Console()).print(metrics_table(report.benchmark, report.split, report.adapter, report.metrics))
