"""Every process's entry point imports with the core dependencies alone: the app image installs `pip install .`
(no extras), so a module-level import of an extra's package there kills every container at start (the CLI once
imported PyYAML, a `dev` package, at start: all of the compose stack's services exited at once)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ENTRY_POINTS = [
    "genenv.cli.main",
    "genenv_control_plane.app",
    "genenv_orchestrator.tasks",
    "genenv_orchestrator.runtime",
    "genenv_rollout.tasks",
    "genenv_simulator.app",
    "genenv_verifier.app",
    "genenv_curriculum.app",
]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _extra_only_modules() -> set[str]:
    """Top-level modules whose distributions only an optional extra asks for (installed here, absent in the image)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for reqs in project["optional-dependencies"].values() for r in reqs} - core
    return {
        module
        for module, dists in packages_distributions().items()
        if module.isidentifier() and {d.lower().replace("_", "-") for d in dists} <= extras
    }


def test_the_entry_points_import_without_any_extra() -> None:
    blocked = sorted(_extra_only_modules())
    assert {"scipy", "matplotlib", "mlflow", "wandb", "torch"} <= set(blocked)  # what the image lacks
    # A meta-path finder that refuses the extras' modules, in a fresh interpreter (this one has them imported).
    script = f"""
import importlib.abc, sys
BLOCKED = set({blocked!r})
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} belongs to an optional extra", name=name)
        return None
sys.meta_path.insert(0, Refuse())
for module in {ENTRY_POINTS!r}:
    __import__(module)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
