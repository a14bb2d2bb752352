"""Benchmark evaluators, looked up by name in the domain registry's family table (each module defines
``EVALUATOR``, an instance of ``Evaluator``)."""

from __future__ import annotations

import importlib

from genenv.benchmarks.base import Evaluator
from genenv.contracts.errors import NotFoundError
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
