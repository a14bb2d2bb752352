"""Print the project's requirements, one a line: pyproject.toml's [project].dependencies plus the named extras.

The images install these in a layer keyed on pyproject.toml alone, before the sources are copied, so a change to
the sources reinstalls only the genenv package (`pip install --no-deps .`) instead of every dependency.
Standard library only: it runs on the base image's Python 3.11 before anything is installed.

    python project_requirements.py pyproject.toml [EXTRA ...] > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any


def requirements(pyproject: dict[str, Any], extras: list[str]) -> list[str]:
    """[project].dependencies, then each extra's requirements; an unknown extra is an error, not an empty list."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    missing = [e for e in extras if e not in optional]
    if missing:
        raise ValueError(f"no such extra in pyproject.toml: {', '.join(missing)} (known: {', '.join(optional)})")
    reqs = list(project.get("dependencies", []))
    for extra in extras:
        reqs.extend(optional[extra])
    # An extra that names the project itself (genenv[other]) would send pip to the index for genenv.
    own = [r for r in reqs if _name(r) == _name(project["name"])]
    if own:
        raise ValueError(f"self-referencing requirements are not expanded here: {', '.join(own)}")
    return reqs


def _name(requirement: str) -> str:
    """A requirement's project name, normalised (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    pyproject = tomllib.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        reqs = requirements(pyproject, argv[1:])
    except ValueError as exc:
        print(f"project_requirements: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write("".join(f"{r}\n" for r in reqs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
