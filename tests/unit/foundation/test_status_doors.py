"""Status changes go through one door per entity (issue 22, item 3): no code outside the doors assigns a ``status``
attribute or writes a ``status`` value in an UPDATE. A new writer that bypasses its entity's table fails here."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SOURCES = [*(REPO / "shared" / "genenv").rglob("*.py"), *(REPO / "services").rglob("*.py")]
# (file, function) pairs allowed to write a status: the doors themselves.
DOORS = {
    ("shared/genenv/db/repositories/runs.py", "move"),
    ("shared/genenv/db/repositories/experiments.py", "_move"),
    ("shared/genenv/db/repositories/train_jobs.py", "move_job"),
}


def _is_update(node: ast.AST) -> bool:
    """Whether an expression chain starts at SQLAlchemy's ``update(...)`` (inserts create rows: not a change)."""
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "update":
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _writers() -> set[tuple[str, str, int]]:
    found = set()
    for path in SOURCES:
        rel = str(path.relative_to(REPO))
        if "/migrations/" in rel:
            continue
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            issues_update = any(_is_update(n) for n in ast.walk(func) if isinstance(n, ast.Call))
            for node in ast.walk(func):
                assigned = (
                    [t for t in node.targets if isinstance(t, ast.Attribute) and t.attr == "status"]
                    if isinstance(node, ast.Assign) else []
                )
                # .values(status=...) of an UPDATE, or a dict literal {"status": ...} in a function issuing one.
                written = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr == "values" and any(k.arg == "status" for k in node.keywords)
                    and _is_update(node.func.value))
                listed = isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == "status" for k in node.keys)
                if assigned or written or (listed and issues_update):
                    found.add((rel, func.name, node.lineno))
    return found


def test_only_the_doors_write_a_status() -> None:
    outside = {w for w in _writers() if (w[0], w[1]) not in DOORS}
    assert not outside, f"status written outside the doors (use runs.move / experiments._move / move_job): {outside}"


def test_every_door_is_found() -> None:
    """The scan sees the doors' own writes, so it would see a stray one."""
    assert {(f, fn) for f, fn, _ in _writers()} >= DOORS
