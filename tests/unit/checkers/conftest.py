"""Fixtures of the checker tests: the complete BFCL data, its tasks and the official checker (when installed).

The tests using ``bfcl_dir``, ``ast_tasks`` or ``relevance_tasks`` are marked ``full_data("bfcl")``: they compare
with BFCL on every item. The data is the benchmarks folder's bfcl/, else the pinned bfcl-eval package's copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bfcl_cases import AST_CATEGORIES, RELEVANCE_CATEGORIES, load_tasks

from genenv.domains.function_calling.reference import OfficialBfcl, load_official


@pytest.fixture
def bfcl_dir(full_benchmarks_dir: Path) -> Path:
    """The complete BFCL data folder (the benchmarks folder's, else the bfcl-eval package's)."""
    from genenv.domains.function_calling.data import bfcl_dir as locate

    return locate(full_benchmarks_dir)


@pytest.fixture
def ast_tasks(bfcl_dir: Path) -> list[dict[str, Any]]:
    """Every item of every supported AST category, as function-calling task payloads."""
    return load_tasks(bfcl_dir, AST_CATEGORIES)


@pytest.fixture
def relevance_tasks(bfcl_dir: Path) -> list[dict[str, Any]]:
    """Every irrelevance / relevance item."""
    return load_tasks(bfcl_dir, RELEVANCE_CATEGORIES)


@pytest.fixture(scope="session")
def official() -> OfficialBfcl:
    """The official bfcl-eval checker, loaded without its heavy dependencies; skipped when not installed."""
    try:
        return load_official()
    except ImportError as exc:
        pytest.skip(f"bfcl-eval is not importable, official comparison skipped: {exc}")
