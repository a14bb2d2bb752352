"""Fixtures for the deployment checks: rendered overlays, the compose and hadolint binaries, settings names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from deploy_policy import OVERLAYS, REPO, kubectl, render_overlay, settings_env_names


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def known_env() -> set[str]:
    """Every GENENV_* name GenEnvSettings reads."""
    return settings_env_names()


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """`kubectl kustomize` of every overlay (kubectl is the only tool these tests may lack)."""
    if kubectl() is None:
        pytest.skip("kubectl is not installed: it is needed to render the kustomize overlays")
    return {name: render_overlay(REPO / "k8s" / "overlays" / name) for name in OVERLAYS}


@pytest.fixture(scope="session")
def tools_bin() -> Path:
    """Folder with the docker-compose and hadolint binaries (installed by .ci/deploy_checks.sh if missing)."""
    cached = os.environ.get("DEPLOY_TOOLS_DIR")
    if cached and (Path(cached) / "bin" / "docker-compose").exists() and (Path(cached) / "bin" / "hadolint").exists():
        return Path(cached) / "bin"
    out = subprocess.run(
        ["bash", str(REPO / ".ci" / "deploy_checks.sh"), "--tools-only"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, f"installing the deploy tools failed:\n{out.stderr}"
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def compose_bin(tools_bin: Path) -> Path:
    """The Docker Compose v2 binary (not the Python wrapper, which always exits 0)."""
    return tools_bin / "docker-compose"


@pytest.fixture(scope="session")
def hadolint_bin(tools_bin: Path) -> Path:
    """The hadolint binary."""
    return tools_bin / "hadolint"
