"""One domain catalogue (issue 30, item 2): the database layer and the contracts import neither the domain plug-ins
nor the curriculum, and no process turns a name into a Domain except through genenv.catalogue."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
GENENV = REPO / "shared" / "genenv"


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module ``path`` imports (``from a import b`` gives ``a.b`` too), with its line."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            yield node.module, node.lineno
            yield from ((f"{node.module}.{a.name}", node.lineno) for a in node.names)


def test_db_and_contracts_import_neither_the_domains_nor_the_curriculum() -> None:
    found = {
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for folder in (GENENV / "db", GENENV / "contracts")
        for path in folder.rglob("*.py")
        for module, line in _imports(path)
        if module.split(".")[:2] in (["genenv", "domains"], ["genenv", "curriculum"])
    }
    assert not found, sorted(found)


def test_only_the_catalogue_uses_the_registry() -> None:
    """Services and the library outside genenv.domains look domains up through genenv.catalogue (built-in, plug-in
    and data-defined alike), never through the registry, which knows no data-defined domain by name."""
    sources = [*GENENV.rglob("*.py"), *(REPO / "services").rglob("*.py")]
    allowed = {GENENV / "catalogue.py"}
    found = {
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for path in sources
        if path not in allowed and GENENV / "domains" not in path.parents
        for module, line in _imports(path)
        if module.endswith((".REGISTRY", ".get_domain", ".for_task")) and module.startswith("genenv.domains")
    }
    assert not found, sorted(found)
