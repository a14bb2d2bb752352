"""Benchmark evaluators, looked up by name in the domain registry's family table (each family's
``genenv.domains.<family>.benchmark`` defines ``EVALUATOR``, an instance of ``Evaluator``), and held-out evaluation
on any domain's own eval split (``domain:NAME``).

Held-out evaluation: ``domain:NAME`` in a run's ``eval_benchmarks``. A user who brings a data-defined domain (or a
plug-in) has no benchmark module, but has held-out rows: those marked ``"split": "eval"`` in the seed file, or the
fifth the hash rule holds out. This evaluator asks the agent each of them with the domain's own agent prompt and
scores the reply with the domain's own checker, so held-out accuracy measures exactly what the agent is trained on,
on rows that are never seeds. Built-in domains work too (``domain:arithmetic`` is the arithmetic benchmark's
``eval`` split).

The held-out evaluator is built per domain (the domain may live in the database, so only a process that has it can
build one: the verifier); categories are the domain's difficulty groups where it has them.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.contracts.errors import NotFoundError
from genenv.contracts.runs import DOMAIN_HELDOUT_PREFIX
from genenv.domains.base import Domain
from genenv.domains.registry import REGISTRY


class UnknownBenchmarkError(NotFoundError):
    """No benchmark of that name."""


def benchmark_names() -> list[str]:
    """Names accepted by get_evaluator."""
    return sorted(REGISTRY.benchmark_modules())


def get_evaluator(name: str) -> Evaluator:
    """The evaluator called ``name`` (imported on first use so each process loads only what it needs)."""
    try:
        module_name = REGISTRY.benchmark_modules()[name]
    except KeyError:
        raise UnknownBenchmarkError(
            f"unknown benchmark {name!r}; choose from {benchmark_names()}", param="name"
        ) from None
    evaluator = importlib.import_module(module_name).EVALUATOR
    assert isinstance(evaluator, Evaluator)
    return evaluator


class DomainHeldout(Evaluator):
    """Greedy answers to the domain's eval rows, scored by the domain's checker."""

    name: ClassVar[str] = DOMAIN_HELDOUT_PREFIX
    splits: ClassVar[tuple[str, ...]] = ("eval",)
    default_split: ClassVar[str] = "eval"
    headline: ClassVar[str] = "accuracy"
    protocol: ClassVar[str] = (
        "greedy; the domain's agent prompt and checker; the domain's eval rows (never seeds); categories are the "
        "domain's difficulty groups"
    )
    domain: ClassVar[Domain]

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """The domain's eval split in its stable order."""
        self.check_split(split)
        seeds = self.domain.load_seeds(benchmarks_dir, split)
        return [BenchItem(id=s.id, category=str(self.domain.difficulty_group(s.payload) or "all"), payload=s.payload)
                for s in seeds]

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Ask with the domain's prompt, score with its checker."""
        completion = await ctx.chat(self.domain.agent_messages(item.payload))
        return ItemResult.of(item, self.domain.verify(item.payload, completion.text), completion.text)


def domain_heldout(domain: Domain) -> Evaluator:
    """The held-out evaluator of ``domain``, named ``domain:<name>``."""
    # A subclass per domain rather than instance attributes: an Evaluator's name and identity are class-level by
    # contract (the registry's evaluators are singletons), and the harness reads them from there.
    cls = type(f"DomainHeldout_{domain.name}", (DomainHeldout,),
               {"name": DOMAIN_HELDOUT_PREFIX + domain.name, "domain": domain})
    evaluator = cls()
    assert isinstance(evaluator, Evaluator)
    return evaluator
