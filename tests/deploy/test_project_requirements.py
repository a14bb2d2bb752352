"""deploy/docker/project_requirements.py: the dependency list the images install before the sources."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement


def run(repo: Path, pyproject: Path, *extras: str) -> subprocess.CompletedProcess[str]:
    """The script as the build runs it: a bare interpreter, no site-packages (-I -S: standard library only)."""
    script = repo / "deploy" / "docker" / "project_requirements.py"
    return subprocess.run(
        [sys.executable, "-I", "-S", str(script), str(pyproject), *extras],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def test_lists_the_dependencies_then_the_named_extras(repo: Path) -> None:
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    core = run(repo, repo / "pyproject.toml")
    train = run(repo, repo / "pyproject.toml", "train")
    assert core.returncode == 0 and train.returncode == 0, core.stderr + train.stderr
    assert core.stdout.splitlines() == project["dependencies"]
    assert train.stdout.splitlines() == project["dependencies"] + project["optional-dependencies"]["train"]
    names = {Requirement(line).name for line in train.stdout.splitlines()}  # each line is a valid requirement
    assert "torch" in names and "torch" not in {Requirement(line).name for line in core.stdout.splitlines()}


def test_an_unknown_extra_fails_instead_of_listing_nothing(repo: Path) -> None:
    out = run(repo, repo / "pyproject.toml", "train", "trian")
    assert out.returncode == 1 and out.stdout == ""
    assert "no such extra in pyproject.toml: trian" in out.stderr


def test_an_extra_naming_the_project_itself_fails(repo: Path, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "genenv"\ndependencies = ["httpx"]\n'
        '[project.optional-dependencies]\nall = ["GenEnv[train]>=0.1"]\ntrain = ["torch"]\n'
    )
    assert run(repo, pyproject, "train").stdout.splitlines() == ["httpx", "torch"]
    out = run(repo, pyproject, "all")
    assert out.returncode == 1 and "GenEnv[train]>=0.1" in out.stderr
