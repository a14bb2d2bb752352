"""Config files (run and experiment configs) read for the CLI, with every error as ``FILE:LINE:COL: problem``.

A pydantic error carries a path into the data (``curriculum.beta``), not a place in the file. YAML's composer keeps
each node's start mark, so walking the composed node tree along that path gives the line and column to print; the
JSON a user writes is YAML too (flow style), so the same walk locates a JSON file's errors. Where the walk stops
early (a missing field) it names the enclosing mapping, which is where the field belongs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
SUFFIXES = (".yaml", ".yml", ".json")


class ConfigFileError(Exception):
    """A config file that cannot be used: each line of ``lines`` is one ``FILE:LINE:COL: problem``."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


class Document:
    """A parsed config file and its node tree (None when the file is not YAML-composable) for locating errors."""

    def __init__(self, path: Path, data: Any, root: yaml.Node | None) -> None:
        self.path = path
        self.data = data
        self.root = root

    def where(self, loc: Sequence[str | int]) -> str:
        """``FILE:LINE:COL`` of the deepest node along ``loc`` (``FILE`` alone when nothing locates it)."""
        node = self.root
        found = node
        for part in loc:
            node = _child(node, part)
            if node is None:
                break
            found = node
        if found is None:
            return str(self.path)
        return f"{self.path}:{found.start_mark.line + 1}:{found.start_mark.column + 1}"


def _child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                found: yaml.Node = value
                return found
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        child: yaml.Node = node.value[part]
        return child
    return None


def read_document(path: Path) -> Document:
    """The parsed YAML (.yaml, .yml) or JSON (.json) file, or ConfigFileError naming the place of the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError([f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"]) from None
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigFileError([f"{path}: unsupported config format {suffix or '(no extension)'!r}: write YAML "
                               "(.yaml, .yml) or JSON (.json)"])
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigFileError([f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"]) from None
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:  # valid JSON that PyYAML's YAML 1.1 does not take: errors name the file only
            root = None
        return Document(path, data, root)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = exc.problem or exc.context or "not valid YAML"
        raise ConfigFileError([f"{where}: invalid YAML: {problem}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError([f"{path}: invalid YAML: {exc}"]) from None
    return Document(path, data, root)


def validation_lines(doc: Document, exc: ValidationError, prefix: Sequence[str | int] = ()) -> list[str]:
    """One ``FILE:LINE:COL: field.path: message`` per error; ``prefix`` is where the validated object sits in the
    file (``config`` for a wrapped run config)."""
    lines: list[str] = []
    for e in exc.errors():
        loc = [*prefix, *e["loc"]]
        field = ".".join(str(p) for p in e["loc"]) or "config"
        lines.append(f"{doc.where(loc)}: {field}: {e['msg']}")
    return lines


def validate_document(doc: Document, model: type[M], *, unwrap: str | None = None) -> tuple[M, list[str | int]]:
    """``model`` validated from ``doc`` as the API validates a request body (JSON text: enums arrive as strings),
    and where it sits in the file; ConfigFileError with every problem located. With ``unwrap``, a file holding only
    ``{unwrap: {...}}`` is read as its inner object."""
    data = doc.data if doc.data is not None else {}
    prefix: list[str | int] = []
    if unwrap is not None and isinstance(data, dict) and set(data) == {unwrap}:
        data, prefix = data[unwrap] or {}, [unwrap]
    if not isinstance(data, dict):
        raise ConfigFileError([f"{doc.where(prefix)}: expected a mapping of config fields, found "
                               f"{type(data).__name__}"])
    try:
        return model.model_validate_json(json.dumps(data, default=str)), prefix
    except ValidationError as exc:
        raise ConfigFileError(validation_lines(doc, exc, prefix)) from None


def load_model(path: Path, model: type[M], *, unwrap: str | None = None) -> M:
    """``validate_document`` of the file at ``path``."""
    return validate_document(read_document(path), model, unwrap=unwrap)[0]
