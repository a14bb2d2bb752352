"""Run a command with only the Python packages a borrowed GPU machine has, plus the wheels that travel to it.

The GPU machine (docs/deployment.md, "A GPU check") has torch, transformers, peft, accelerate, safetensors,
tokenizers, numpy, httpx, typer, rich, pyyaml and pytest, nothing of the project's web, database or queue stack,
and no network. Here a child Python starts without its site-packages (``-S``) and sees a folder of links to just
those distributions, their declared dependencies and deploy/gpu/requirements-gpu-check.txt, with the source tree
before it: an import of anything else fails there as it would on the machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[3]
WHEELS = REPO / "deploy" / "gpu" / "requirements-gpu-check.txt"
# What the issue and the machine's image promise (the image also has more; nothing else may be relied on).
MACHINE = ("torch", "transformers", "peft", "accelerate", "safetensors", "tokenizers", "numpy", "httpx", "typer",
           "rich", "pyyaml", "requests", "tqdm", "pytest")


def travelling() -> list[str]:
    """The distributions deploy/gpu/requirements-gpu-check.txt pins."""
    names = []
    for line in WHEELS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==", line.strip())
        if match:
            names.append(match.group(1))
    return names


def closure(names: list[str]) -> set[str]:
    """The installed distributions ``names`` need, their declared dependencies included (extras left out)."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency this environment does not have (platform-specific): not needed here either
        seen.add(name)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def site_folder(folder: Path) -> Path:
    """A folder of links to the top-level files of every allowed distribution (code and metadata)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(closure([*MACHINE, *travelling()])):
        dist = metadata.distribution(name)
        root = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source, link = root / top, folder / top
            if source.exists() and not link.exists() and not top.endswith(".pth"):
                link.symlink_to(source)
    return folder


def run(args: list[str], folder: Path, *, env: dict[str, str] | None = None, timeout: float = 600,
        cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``python -S args`` with only the GPU machine's packages and the source tree on the path."""
    paths = [str(REPO / "shared"), str(REPO / "services"), str(REPO), str(site_folder(folder))]
    full = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout, check=False)
