"""Parse the user docs: fenced code blocks, curl calls, endpoint mentions, tables; match paths to OpenAPI."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import FastAPI

from genenv.settings import GenEnvSettings

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
EXAMPLES = REPO / "examples"

TOKEN = "docs-token"
"""The bearer token the in-process apps accept."""


@dataclass
class Apps:
    """The services as apps (never served on a port) and their OpenAPI schemas."""

    settings: GenEnvSettings
    apps: dict[str, FastAPI]

    def openapi(self, service: str) -> dict[str, Any]:
        """The service's OpenAPI document."""
        schema: dict[str, Any] = self.apps[service].openapi()
        return schema


# Shell variables the docs use for base URLs, and the service each one points at.
SERVICE_VARS = {
    "GENENV_URL": "control_plane",
    "GENENV_SIM_URL": "simulator",
    "GENENV_VERIFIER_URL": "verifier",
    "GENENV_CURRICULUM_URL": "curriculum",
}
# Base URLs of servers that are not GenEnv services (vLLM's own API); their paths are not checked here.
EXTERNAL_VARS = frozenset({"VLLM_SIM_URL"})

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
_URL = re.compile(r"^\$\{?([A-Z_]+)\}?(/.*)?$")
_SHELL_VAR = re.compile(r"\$\{?[A-Za-z_]+\}?")
_MENTION = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`\s]*)`")


def code_blocks(text: str, lang: str | None = None) -> list[str]:
    """Contents of the fenced code blocks (of one language when ``lang`` is given)."""
    return [body for fence_lang, body in _FENCE.findall(text) if lang is None or fence_lang == lang]


def json_blocks(text: str) -> list[Any]:
    """Every ```json block, parsed."""
    return [json.loads(block) for block in code_blocks(text, "json")]


def shell_commands(block: str) -> list[list[str]]:
    """The commands of a shell block as token lists (line continuations and multi-line quotes joined)."""
    commands: list[list[str]] = []
    pending = ""
    for line in block.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            tokens = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on on the next line
            continue
        if tokens:
            commands.append(tokens)
        pending = ""
    assert not pending, f"unterminated quote in shell block: {pending[:200]!r}"
    return commands


@dataclass
class CurlCall:
    """One documented curl request."""

    method: str
    var: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    headers: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.method} ${self.var}{self.path}"


def curl_calls(text: str) -> list[CurlCall]:
    """Every curl command in the ```sh blocks of a document."""
    calls: list[CurlCall] = []
    for block in code_blocks(text, "sh"):
        for tokens in shell_commands(block):
            while "curl" in tokens:
                start = tokens.index("curl") + 1
                end = tokens.index("|", start) if "|" in tokens[start:] else len(tokens)
                calls.append(_parse_curl(tokens[start:end]))
                tokens = tokens[end:]
    return calls


def _parse_curl(args: list[str]) -> CurlCall:
    method: str | None = None
    body: str | None = None
    headers: list[str] = []
    url: str | None = None
    it = iter(args)
    for arg in it:
        if arg in ("-X", "--request"):
            method = next(it)
        elif arg in ("-d", "--data", "--data-raw"):
            body = next(it)
        elif arg in ("-H", "--header"):
            headers.append(next(it))
        elif arg.startswith("$"):
            url = arg
    assert url is not None, f"curl without a $VAR URL: {args}"
    match = _URL.match(url)
    assert match, f"curl URL must start with a shell variable: {url}"
    parts = urlsplit(match.group(2) or "/")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return CurlCall(method or ("POST" if body is not None else "GET"), match.group(1), parts.path, query, body, headers)


def endpoint_mentions(text: str) -> list[tuple[str, str]]:
    """(method, path) for every inline-code mention like `GET /v1/runs/{id}/tasks` (query string dropped)."""
    return [(method, path.split("?", 1)[0]) for method, path in _MENTION.findall(text)]


def template_regex(template: str) -> re.Pattern[str]:
    """An OpenAPI path template as a regex: each {param} matches one path segment."""
    pieces = re.split(r"(\{[^}]+\})", template)
    return re.compile("^" + "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in pieces) + "$")


def concrete(path: str) -> str:
    """A documented path with shell variables and {placeholders} replaced by a sample segment."""
    return re.sub(r"\{[^}]+\}", "x", _SHELL_VAR.sub("x", path))


def find_operation(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any] | None:
    """The OpenAPI operation serving ``method path`` (path may hold variables or placeholders)."""
    sample = concrete(path)
    for template, operations in openapi["paths"].items():
        if template_regex(template).match(sample) and method.lower() in operations:
            op: dict[str, Any] = operations[method.lower()]
            return op
    return None


def section(text: str, heading: str) -> str:
    """The text under a markdown heading (up to the next heading of the same or a higher level)."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.MULTILINE)
    assert match, f"no heading {heading!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def cells(line: str) -> list[str]:
    """The cells of a markdown table row (escaped pipes stay inside their cell), stripped."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _body_rows(text: str) -> list[list[str]]:
    """Cells of every table row whose first cell starts with a backticked name (header rows skipped)."""
    lines = text.splitlines()
    rows: list[list[str]] = []
    for i, line in enumerate(lines):
        header = i + 1 < len(lines) and re.match(r"^\|\s*-", lines[i + 1]) is not None
        if line.startswith("| `") and not header:
            rows.append(cells(line))
    return rows


def table_first_column(text: str) -> list[str]:
    """The backticked names in the first column of the markdown tables in ``text``."""
    return [name for row in _body_rows(text) for name in re.findall(r"`([^`]+)`", row[0])]


def table_rows(text: str) -> dict[str, str]:
    """First-column name → the other cells joined, for rows whose first cell is one backticked name."""
    rows: dict[str, str] = {}
    for row in _body_rows(text):
        names = re.findall(r"`([^`]+)`", row[0])
        if len(names) == 1 and len(row) > 1:
            rows[names[0]] = " | ".join(row[1:])
    return rows
