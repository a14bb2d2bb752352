"""BFCL data is read from the benchmarks folder, else from the bfcl-eval package; otherwise a clear error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from genenv.domains.base import DataMissingError
from genenv.domains.function_calling.data import bfcl_dir
from genenv.domains.function_calling.domain import DOMAIN


def test_benchmarks_folder_first(benchmarks_dir: Path) -> None:
    assert bfcl_dir(benchmarks_dir) == benchmarks_dir / "bfcl"


@pytest.mark.full_data("bfcl")
@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval is not installed")
def test_falls_back_to_the_package_data(tmp_path: Path, full_benchmarks_dir: Path) -> None:
    if not (full_benchmarks_dir / "bfcl").is_dir():
        pytest.skip(f"compares the package's data with a bfcl/ folder; none in {full_benchmarks_dir} "
                    "(GENENV_PATHS__BENCHMARKS)")
    root = bfcl_dir(tmp_path)  # no bfcl/ here
    assert root.name == "data" and "bfcl_eval" in str(root)
    # The folder is byte-identical to the package's data (the manifest pins both), so the seeds are the same.
    from_package = DOMAIN.load_seeds(tmp_path, "train")
    from_folder = DOMAIN.load_seeds(full_benchmarks_dir, "train")
    assert [s.id for s in from_package] == [s.id for s in from_folder]
    assert len(from_package) > 800


def test_missing_everywhere_names_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataMissingError, match="GENENV_PATHS__BENCHMARKS"):
        bfcl_dir(tmp_path)
