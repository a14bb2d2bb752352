"""Which benchmark data a test reads: the committed subsets, or the complete data where it is present."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURE_BENCHMARKS = Path(__file__).resolve().parent / "fixtures" / "benchmarks"


def full_benchmarks_root() -> Path:
    """Where the complete benchmark data is looked for: the setting GENENV_PATHS__BENCHMARKS, else its default."""
    from genenv.settings import PathSettings

    env = os.environ.get("GENENV_PATHS__BENCHMARKS")
    return (Path(env) if env else PathSettings().benchmarks).expanduser()


def full_data_missing(names: tuple[str, ...]) -> str | None:
    """Why the complete data of ``names`` cannot be used here, or None when every one is present."""
    from genenv.data.fetch import inspect
    from genenv.data.manifest import load_manifest

    root, manifest = full_benchmarks_root(), load_manifest()
    missing = [n for n in names if not inspect(n, manifest.benchmarks[n], root).usable]
    if not missing:
        return None
    return (
        f"needs the full {', '.join(missing)} data, not found under {root}: set GENENV_PATHS__BENCHMARKS to a folder "
        f"holding it, or run `genenv data fetch {' '.join(missing)}`"
    )


@dataclass(frozen=True)
class BenchData:
    """A benchmarks folder a test runs on: the committed subset, or the complete data (``full``)."""

    root: Path
    full: bool


def on_subset_and_full(*names: str) -> pytest.MarkDecorator:
    """Run a test on the committed subset and again, marked ``full_data(names)``, on the complete data (fixture
    ``data``): what it checks item by item holds for both, and it may add full-benchmark counts when ``data.full``."""
    return pytest.mark.parametrize(
        "data", ["subset", pytest.param("full", marks=pytest.mark.full_data(*names))], indirect=True
    )
