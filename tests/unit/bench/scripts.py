"""Import a bench/ script as a module (the scripts are not a package)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

# bench/ is on sys.path in the tests (pyproject's pytest ``pythonpath``), as it is for ``python bench/<name>.py``.
from _common import load_file

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load(name: str) -> ModuleType:
    """bench/<name>.py as module ``name``, registered in sys.modules (its dataclasses resolve their annotations
    through it)."""
    return load_file(BENCH / f"{name}.py")
