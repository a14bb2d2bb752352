"""Seed files of data-defined domains: parse, convert and check them, every bad row reported as ``line N: reason``.

A seed file is JSON Lines, one seed task per line, in one of three kinds:

- ``function_calling``: the OpenAI tools format ``{"tools": [{"type": "function", "function": {"name",
  "description", "parameters": <JSON Schema>}}], "messages": [{"role": "user", "content": ...}], "calls":
  [{"name": ..., "arguments": {...}}]}`` (``calls`` may hold several calls, or none for a request no tool serves),
  or BFCL's own format ``{"question": [[messages]], "function": [docs], "ground_truth": [possible answers]}``;
- ``exact_answer``: ``{"question": ..., "answer": ...}``, scored after a normalisation (``number``, ``exact`` or
  ``case-insensitive``);
- ``qa``: ``{"question": ..., "answers": [...]}``, scored by token-F1 like Bamboogle.

An optional ``"split": "eval"`` (or ``"train"``) places a row; rows without one are held out when the sha256 of
their canonical task is ≡ 0 (mod 5) (a fifth, the same on every machine). Seeds are converted to the payloads the
existing checkers score (function calling: BFCL's form, so the BFCL AST checker scores them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from genenv.contracts.domains import DATA_KINDS
from genenv.contracts.tasks import Seed

NORMALIZATIONS: tuple[str, ...] = ("number", "exact", "case-insensitive")
DEFAULT_MAX_BYTES = 2_000_000
"""Largest seed file accepted (bytes); GENENV_DOMAINS__MAX_SEED_FILE_BYTES overrides it."""
MAX_ROWS = 20_000
MAX_LISTED_ERRORS = 50
"""Line errors kept in a report (the count says how many there were in all)."""
EVAL_MODULUS = 5
DATA_KIND_FIELD = "data_kind"
"""Payload field naming a data-defined task's kind (so a process without the database can score it)."""

# OpenAI tools (JSON Schema) types → BFCL's type names, which its AST checker dispatches on.
_JSON_TO_BFCL = {"string": "string", "integer": "integer", "number": "float", "boolean": "boolean",
                 "array": "array", "object": "dict"}


class RowError(ValueError):
    """A seed row that cannot become a seed; the message is the reason shown after ``line N:``."""


@dataclass(frozen=True)
class LineError:
    """One bad row (line 0 = the file as a whole)."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}" if self.line else f"file: {self.reason}"


@dataclass
class SeedFileReport:
    """What a seed file holds: its seeds per split and every bad row."""

    kind: str
    rows: int = 0
    train: list[Seed] = field(default_factory=list)
    eval: list[Seed] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    error_count: int = 0

    @property
    def ok(self) -> bool:
        """No bad row, and something to seed the simulator with."""
        return self.error_count == 0

    def add_error(self, line: int, reason: str) -> None:
        """Record a bad row (only the first MAX_LISTED_ERRORS are kept; all are counted)."""
        self.error_count += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(LineError(line, reason))

    def summary(self) -> str:
        """One line: rows, split sizes, bad rows."""
        return (f"{self.rows} rows: {len(self.train)} train, {len(self.eval)} eval; "
                f"{self.error_count} bad row{'s' if self.error_count != 1 else ''}")


def _require(row: dict[str, Any], key: str, what: str) -> list[Any]:
    """The list field ``key`` of a row, or RowError (missing, or not a list)."""
    if key not in row:
        raise RowError(f"missing field {key!r}")
    value = row[key]
    if not isinstance(value, list):
        raise RowError(f"field {key!r} must be {what}")
    return value


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"field {key!r} must be a non-empty string")
    return value.strip()


# --- function calling -------------------------------------------------------------------------------------------


def _bfcl_param(schema: Any, where: str) -> dict[str, Any]:
    """One JSON Schema property as a BFCL parameter doc."""
    if not isinstance(schema, dict):
        raise RowError(f"{where}: a property schema must be an object")
    json_type = schema.get("type")
    if json_type not in _JSON_TO_BFCL:
        raise RowError(f"{where}: type {json_type!r} is not supported (use one of {sorted(_JSON_TO_BFCL)})")
    out: dict[str, Any] = {"type": _JSON_TO_BFCL[json_type], "description": str(schema.get("description", ""))}
    for key in ("enum", "default"):
        if key in schema:
            out[key] = schema[key]
    if json_type == "array":
        items = schema.get("items", {"type": "string"})
        if not isinstance(items, dict) or items.get("type") not in _JSON_TO_BFCL:
            raise RowError(f"{where}: an array needs items with a type from {sorted(_JSON_TO_BFCL)}")
        out["items"] = {"type": _JSON_TO_BFCL[items["type"]]}
    if json_type == "object" and isinstance(schema.get("properties"), dict):
        out["properties"] = {k: _bfcl_param(v, f"{where}.{k}") for k, v in schema["properties"].items()}
    return out


def _bfcl_function(tool: Any, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """An OpenAI tool as (BFCL function doc, its JSON Schema of arguments)."""
    if not isinstance(tool, dict):
        raise RowError(f"tools[{index}] must be an object")
    fn = tool.get("function") if tool.get("type", "function") == "function" else None
    if not isinstance(fn, dict):
        raise RowError(f"tools[{index}] must be {{'type': 'function', 'function': {{...}}}}")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise RowError(f"tools[{index}] has no function name")
    params = fn.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, dict) or params.get("type", "object") != "object":
        raise RowError(f"tool {name!r}: parameters must be a JSON Schema of type 'object'")
    try:
        jsonschema.Draft202012Validator.check_schema(params)
    except jsonschema.SchemaError as exc:
        raise RowError(f"tool {name!r}: parameters are not a valid JSON Schema: {exc.message}") from None
    props = params.get("properties", {})
    required = params.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list):
        raise RowError(f"tool {name!r}: 'properties' must be an object and 'required' a list")
    doc = {
        "name": name,
        "description": str(fn.get("description", "")),
        "parameters": {
            "type": "dict",
            "properties": {p: _bfcl_param(s, f"tool {name!r} parameter {p!r}") for p, s in props.items()},
            "required": [r for r in required if isinstance(r, str)],
        },
    }
    return doc, params


def _template(value: Any) -> Any:
    """A gold dict value in BFCL's possible-answer form ({key: [accepted values]})."""
    if isinstance(value, dict):
        return {k: [_template(v)] for k, v in value.items()}
    return value


def _gold_call(call: Any, index: int, docs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """A gold call {"name", "arguments"} in BFCL possible-answer form, checked against its tool's JSON Schema."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise RowError(f"calls[{index}] must be {{'name': ..., 'arguments': {{...}}}}")
    name = call["name"]
    if name not in docs:
        raise RowError(f"calls[{index}] names {name!r}, which is not a declared tool (declared: {sorted(docs)})")
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):  # the OpenAI API itself carries arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise RowError(f"calls[{index}] ({name}): arguments are not JSON") from None
    if not isinstance(arguments, dict):
        raise RowError(f"calls[{index}] ({name}): arguments must be an object")
    doc, schema = docs[name]
    problems = sorted(jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path))
    if problems:
        where = ".".join(str(p) for p in problems[0].path)
        raise RowError(f"calls[{index}] ({name}): arguments violate the tool's schema"
                       f"{f' at {where}' if where else ''}: {problems[0].message}")
    props = doc["parameters"]["properties"]
    allowed: dict[str, list[Any]] = {}
    for p, value in arguments.items():
        kind = props.get(p, {}).get("type")
        if kind == "dict":
            allowed[p] = [_template(value)]
        elif kind == "array" and isinstance(value, list) and props[p].get("items", {}).get("type") == "dict":
            allowed[p] = [[_template(v) for v in value]]
        else:
            allowed[p] = [value]
    for p, prop in props.items():
        if p not in allowed and "default" in prop:
            allowed[p] = [prop["default"], ""]  # BFCL's convention: an optional parameter at its default or left out
    return {name: allowed}


def _category(n_functions: int, n_calls: int) -> str:
    if n_calls == 0:
        return "irrelevance"
    if n_calls == 1:
        return "simple" if n_functions == 1 else "multiple"
    return "parallel" if n_functions == 1 else "parallel_multiple"


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise RowError("field 'messages' must be a non-empty list of {role, content}")
    out = []
    for m in value:
        if not isinstance(m, dict) or m.get("role") not in {"system", "user", "assistant"} or not isinstance(
            m.get("content"), str
        ):
            raise RowError("each message must be {'role': 'system'|'user'|'assistant', 'content': string}")
        out.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "user" and m["content"].strip() for m in out):
        raise RowError("the messages hold no user request")
    return out


def function_calling_payload(row: dict[str, Any]) -> dict[str, Any]:
    """A seed row (OpenAI tools or BFCL format) as a BFCL task payload (``category`` from its shape)."""
    if "function" in row and "question" in row:  # BFCL's own format
        question = row["question"]
        turns = question[0] if isinstance(question, list) and question and isinstance(question[0], list) else question
        functions = row["function"]
        if not isinstance(functions, list) or not functions:
            raise RowError("field 'function' must be a non-empty list of function docs")
        gold = row.get("ground_truth", [])
        if not isinstance(gold, list):
            raise RowError("field 'ground_truth' must be a list")
        names = {f.get("name") for f in functions if isinstance(f, dict)}
        for i, g in enumerate(gold):
            if not isinstance(g, dict) or len(g) != 1:
                raise RowError(f"ground_truth[{i}] must be {{function_name: {{parameter: [values]}}}}")
            (fname,) = g
            if fname not in names:
                raise RowError(f"ground_truth[{i}] names {fname!r}, which is not a declared function")
        return {"category": _category(len(functions), len(gold)), "messages": _messages(turns),
                "functions": functions, "ground_truth": gold}
    tools = _require(row, "tools", "a list of tools")
    if not tools:
        raise RowError("field 'tools' must declare at least one tool")
    messages = _messages(_require(row, "messages", "a list of messages"))
    calls = _require(row, "calls", "a list of calls (empty when no tool serves the request)")
    docs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for i, tool in enumerate(tools):
        doc, schema = _bfcl_function(tool, i)
        if doc["name"] in docs:
            raise RowError(f"tool {doc['name']!r} is declared twice")
        docs[doc["name"]] = (doc, schema)
    gold = [_gold_call(c, i, docs) for i, c in enumerate(calls)]
    return {"category": _category(len(docs), len(gold)), "messages": messages,
            "functions": [d for d, _ in docs.values()], "ground_truth": gold}


# --- exact answer and qa ----------------------------------------------------------------------------------------


def parse_number(text: str) -> float | None:
    """The number a string states (``1,234.5``, ``-3``, ``2e3``), or None."""
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def exact_answer_payload(row: dict[str, Any], normalize: str) -> dict[str, Any]:
    """A seed row {"question", "answer"} as a task payload carrying its normalisation."""
    question = _text(row.get("question") if "question" in row else _missing("question"), "question")
    if "answer" not in row:
        raise RowError("missing field 'answer'")
    answer = row["answer"]
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise RowError("field 'answer' must be a string or a number")
    answer = str(answer).strip()
    if not answer:
        raise RowError("field 'answer' is empty")
    if normalize == "number" and parse_number(answer) is None:
        raise RowError(f"answer {answer!r} is not a number (the domain normalises answers as numbers)")
    return {"question": question, "answer": answer, "normalize": normalize}


def qa_payload(row: dict[str, Any]) -> dict[str, Any]:
    """A seed row {"question", "answers": [...]} as a Bamboogle-style payload."""
    question = _text(row.get("question") if "question" in row else _missing("question"), "question")
    answers = _require(row, "answers", "a list of answers")
    golds = [str(a).strip() for a in answers if isinstance(a, str | int | float) and not isinstance(a, bool)]
    if not golds or len(golds) != len(answers) or not all(golds):
        raise RowError("field 'answers' must be a non-empty list of non-empty strings")
    return {"question": question, "golden_answers": golds}


def _missing(key: str) -> Any:
    raise RowError(f"missing field {key!r}")


# --- the whole file ---------------------------------------------------------------------------------------------


def row_payload(kind: str, row: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The task payload of one parsed row (RowError for a bad one)."""
    if kind == "function_calling":
        payload = function_calling_payload(row)
    elif kind == "exact_answer":
        payload = exact_answer_payload(row, str(options.get("normalize", "case-insensitive")))
    elif kind == "qa":
        payload = qa_payload(row)
    else:
        raise ValueError(f"unknown kind {kind!r}; choose from {list(DATA_KINDS)}")
    payload[DATA_KIND_FIELD] = kind
    return payload


def check_options(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options of a kind with defaults filled in, or ValueError saying how to fix them."""
    if kind not in DATA_KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose from {list(DATA_KINDS)}")
    unknown = sorted(set(options) - ({"normalize"} if kind == "exact_answer" else set()))
    if unknown:
        raise ValueError(f"options {unknown} do not apply to kind {kind!r}")
    if kind == "exact_answer":
        normalize = options.get("normalize", "case-insensitive")
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {list(NORMALIZATIONS)}, got {normalize!r}")
        return {"normalize": normalize}
    return {}


def split_by_hash(canonical: str) -> str:
    """'eval' for a fifth of the tasks (sha256 of the canonical task ≡ 0 mod 5), else 'train'."""
    digest = hashlib.sha256(canonical.encode()).digest()
    return "eval" if int.from_bytes(digest[:8], "big") % EVAL_MODULUS == 0 else "train"


def read_seed_file(
    name: str,
    kind: str,
    content: str | bytes,
    options: dict[str, Any],
    *,
    canonical: Callable[[dict[str, Any]], str],
    gold_check: Callable[[dict[str, Any]], str | None],
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SeedFileReport:
    """Every seed of a seed file by split, and every bad row. ``canonical`` is the domain's canonical form (for
    duplicates and the split hash); ``gold_check`` says why a row's own gold answer fails its checker, or None."""
    report = SeedFileReport(kind=kind)
    size = len(content.encode() if isinstance(content, str) else content)
    if size > max_bytes:
        report.add_error(0, f"over the size limit: {size} bytes > {max_bytes} (split the file or raise "
                            "GENENV_DOMAINS__MAX_SEED_FILE_BYTES)")
        return report
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            report.add_error(0, f"not UTF-8 text: {exc}")
            return report
    seen: dict[str, int] = {}
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        report.rows += 1
        if report.rows > MAX_ROWS:
            report.add_error(number, f"more than {MAX_ROWS} rows")
            break
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            report.add_error(number, f"bad JSON: {exc.msg} at column {exc.colno}")
            continue
        try:
            if not isinstance(row, dict):
                raise RowError("a row must be a JSON object")
            split = row.get("split")
            if split is not None and split not in ("train", "eval"):
                raise RowError(f"split must be 'train' or 'eval', got {split!r}")
            payload = row_payload(kind, row, options)
            key = canonical(payload)
            if key in seen:
                raise RowError(f"duplicate of line {seen[key]}")
            problem = gold_check(payload)
            if problem is not None:
                raise RowError(f"the gold answer does not pass the checker: {problem}")
        except RowError as exc:
            report.add_error(number, str(exc))
            continue
        seen[key] = number
        split = split or split_by_hash(key)
        payload = {"id": f"{name}-{number}", **payload}
        seed = Seed(id=f"{name}-{number}", domain=name, payload=payload)
        (report.eval if split == "eval" else report.train).append(seed)
    if report.rows == 0 and report.error_count == 0:
        report.add_error(0, "empty file: no seed rows")
    elif report.error_count == 0 and not report.train:
        report.add_error(0, "no train rows: every row is held out for evaluation, so the simulator has no seeds")
    return report
