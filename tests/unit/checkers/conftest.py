"""Fixtures of the checker tests: the BFCL data folder, its tasks and the official checker (when installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bfcl_cases import AST_CATEGORIES, RELEVANCE_CATEGORIES, load_tasks

from genenv.checkers.bfcl_reference import OfficialBfcl, load_official


@pytest.fixture(scope="session")
def bfcl_dir(benchmarks_dir: Path) -> Path:
    """The BFCL data folder."""
    return benchmarks_dir / "bfcl"


@pytest.fixture(scope="session")
def ast_tasks(bfcl_dir: Path) -> list[dict[str, Any]]:
    """Every item of every supported AST category, as function-calling task payloads."""
    return load_tasks(bfcl_dir, AST_CATEGORIES)


@pytest.fixture(scope="session")
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
