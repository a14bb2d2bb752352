"""BFCL items, gold responses and systematic perturbations shared by the checker tests and the speed benchmark."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AST_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")


@dataclass(frozen=True)
class Case:
    """One (task, response) pair with a label saying how it was made."""

    task: dict[str, Any]
    calls: list[dict[str, dict[str, Any]]] | None  # decoded form (None = free text)
    response: str
    label: str


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_tasks(
    bfcl_dir: Path, categories: tuple[str, ...] = AST_CATEGORIES + RELEVANCE_CATEGORIES
) -> list[dict[str, Any]]:
    """Function-calling task payloads (functions, ground_truth, category) for BFCL categories."""
    tasks = []
    for cat in categories:
        items = _lines(bfcl_dir / f"BFCL_v4_{cat}.json")
        answers: dict[str, Any] = {}
        if (bfcl_dir / "possible_answer" / f"BFCL_v4_{cat}.json").exists():
            answers = {a["id"]: a["ground_truth"] for a in _lines(bfcl_dir / "possible_answer" / f"BFCL_v4_{cat}.json")}
        for item in items:
            tasks.append(
                {
                    "id": item["id"],
                    "category": cat,
                    "functions": item["function"],
                    "ground_truth": answers.get(item["id"], []),
                }
            )
    return tasks


def render(calls: list[dict[str, dict[str, Any]]]) -> str:
    """Python call syntax as BFCL prompts for it."""
    parts = []
    for call in calls:
        ((name, args),) = call.items()
        parts.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})")
    return "[" + ", ".join(parts) + "]"


def _first(options: list[Any]) -> tuple[bool, Any]:
    for o in options:
        if o != "":
            return True, o
    return False, None


def _doc_for(task: dict[str, Any], i: int, name: str) -> dict[str, Any]:
    if "parallel" not in task["category"] and "multiple" not in task["category"]:
        return task["functions"][0]  # BFCL checks 'simple' against the first doc
    return next((f for f in task["functions"] if f["name"] == name), task["functions"][0])


def _template(value: Any) -> Any:
    """An allowed dict value is a template {key: [options]}: pick the first option of each key."""
    if not isinstance(value, dict):
        return value
    out = {}
    for k, options in value.items():
        ok, v = _first(options)
        if ok:
            out[k] = v
    return out


def _instantiate(prop: dict[str, Any], value: Any) -> Any:
    """Turn an allowed value into a concrete argument (dict templates are filled, lists of them too)."""
    if prop.get("type") == "dict":
        return _template(value)
    if prop.get("type") == "array" and (prop.get("items") or {}).get("type") == "dict" and isinstance(value, list):
        return [_template(v) for v in value]
    return value


def gold_calls(task: dict[str, Any], pick: dict[tuple[int, str], int] | None = None) -> list[dict[str, dict[str, Any]]]:
    """One gold answer: per parameter the first allowed value (or the pick-th); '' -only parameters are omitted
    unless the doc requires them (then the empty string, which BFCL's string check accepts)."""
    calls = []
    for i, gold in enumerate(task["ground_truth"]):
        ((name, allowed),) = gold.items()
        doc = _doc_for(task, i, name)
        props = doc["parameters"]["properties"]
        required = doc["parameters"].get("required", [])
        args = {}
        for p, options in allowed.items():
            prop = props.get(p, {})
            if pick and (i, p) in pick:
                args[p] = _instantiate(prop, options[pick[(i, p)]])
                continue
            ok, value = _first(options)
            if p not in props and "" in options:
                continue  # outside the schema: only omitting it can pass
            if ok:
                args[p] = _instantiate(prop, value)
            elif p in required and "" in options:
                # Required by the doc but only '' allowed: BFCL's string/list checks accept an empty value.
                args[p] = [] if prop.get("type") == "array" else ""
        calls.append({name: args})
    return calls


def gold_cases(tasks: list[dict[str, Any]]) -> Iterator[Case]:
    """Every allowed value of every parameter appears in some gold response; optional parameters also omitted."""
    for task in tasks:
        if not task["ground_truth"]:
            continue
        base = gold_calls(task)
        yield Case(task, base, render(base), "gold")
        for i, gold in enumerate(task["ground_truth"]):
            ((name, allowed),) = gold.items()
            params = _doc_for(task, i, name)["parameters"]
            required = params.get("required", [])
            for p, options in allowed.items():
                if p not in params["properties"]:
                    continue  # outside the schema: no value of it can pass
                for k, option in enumerate(options):
                    if option == "":
                        if p in required:
                            continue  # BFCL requires it whatever the answer file says
                        calls = gold_calls(task)
                        calls[i][name].pop(p, None)
                        yield Case(task, calls, render(calls), "gold:omit_optional")
                    elif k > 0:
                        calls = gold_calls(task, {(i, p): k})
                        yield Case(task, calls, render(calls), "gold:alternative")


def _other_type(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(value)
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return str(value)
    if isinstance(value, dict):
        return [value]
    return "x"


def _outside(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 7.5
    if isinstance(value, str):
        return value + " zzz"
    if isinstance(value, list):
        return [*value, value[0] if value else "zzz"]
    if isinstance(value, dict):
        return {**value, "zzz_key": 1}
    return "zzz"


def perturbations(task: dict[str, Any], rng: random.Random) -> Iterator[Case]:
    """Systematic perturbations of the gold answer of one task."""
    base = gold_calls(task)
    if not base:
        return
    docs = {f["name"]: f for f in task["functions"]}

    def case(calls: list[dict[str, dict[str, Any]]], label: str) -> Case:
        return Case(task, calls, render(calls), label)

    def copy() -> list[dict[str, dict[str, Any]]]:
        return json.loads(json.dumps(base))

    i = rng.randrange(len(base))
    name = next(iter(base[i]))
    args = base[i][name]
    doc = docs.get(name, task["functions"][0])
    props = doc["parameters"]["properties"]
    required = doc["parameters"].get("required", [])

    calls = copy()
    calls[i] = {name + "_v2": calls[i][name]}
    yield case(calls, "wrong_name")
    others = [n for n in docs if n != name]
    if others:
        calls = copy()
        calls[i] = {rng.choice(others): calls[i][name]}
        yield case(calls, "other_function")
    for p in required:
        if p in args:
            calls = copy()
            del calls[i][name][p]
            yield case(calls, "missing_required")
            break
    calls = copy()
    calls[i][name]["unknown_param_zz"] = 1
    yield case(calls, "extra_param")
    extra = [p for p in props if p not in args]
    if extra:
        p = rng.choice(extra)
        calls = copy()
        calls[i][name][p] = _first([v for v in [props[p].get("default")] if v is not None])[1] or "value"
        yield case(calls, "extra_schema_param")
    for p, value in args.items():
        calls = copy()
        calls[i][name][p] = _other_type(value)
        yield case(calls, "wrong_type")
        calls = copy()
        calls[i][name][p] = _outside(value)
        yield case(calls, "outside_allowed")
        if isinstance(value, int) and not isinstance(value, bool):
            calls = copy()
            calls[i][name][p] = float(value)
            yield case(calls, "int_as_float")
        if isinstance(value, float) and value.is_integer():
            calls = copy()
            calls[i][name][p] = int(value)
            yield case(calls, "float_as_int")
        if isinstance(value, str) and value:
            calls = copy()
            calls[i][name][p] = value.upper().replace(" ", "  ") + "."
            # A string where the schema says another type is a "variable": BFCL compares it raw.
            string_typed = props.get(p, {}).get("type") == "string"
            yield case(calls, "string_normalisation" if string_typed else "variable_case_changed")
        if isinstance(value, list):
            calls = copy()
            calls[i][name][p] = tuple(value)
            yield case(calls, "list_as_tuple")
            if value:
                calls = copy()
                calls[i][name][p] = [_other_type(value[0]), *value[1:]]
                yield case(calls, "wrong_item_type")
                calls = copy()
                calls[i][name][p] = list(reversed(value))
                yield case(calls, "list_reordered")
        if isinstance(value, dict) and value:
            k = rng.choice(list(value))
            calls = copy()
            del calls[i][name][p][k]
            yield case(calls, "dict_key_dropped")
            calls = copy()
            calls[i][name][p][k] = _outside(value[k])
            yield case(calls, "dict_value_changed")
    gold_allowed = next(iter(task["ground_truth"][i].values()))
    for p, options in gold_allowed.items():
        if p in args and "" not in options:
            calls = copy()
            del calls[i][name][p]
            yield case(calls, "missing_gold_param")
            break
    if len(base) > 1:
        calls = copy()
        rng.shuffle(calls)
        yield case(calls, "parallel_shuffled")
        yield case(list(reversed(copy())), "parallel_reversed")
        yield case(copy()[:-1], "parallel_missing_call")
    yield case([*copy(), copy()[i]], "duplicate_call")
    yield case([], "no_call")


def relevance_cases(task: dict[str, Any]) -> Iterator[Case]:
    """Responses for (ir)relevance tasks: free text, an empty list and a call to one of the functions."""
    yield Case(task, None, "I cannot answer that with the given functions.", "text")
    yield Case(task, [], "[]", "empty_list")
    if task["functions"]:
        doc = task["functions"][0]
        call = {doc["name"]: {p: "x" for p in doc["parameters"].get("required", [])}}
        yield Case(task, [call], render([call]), "call")


# Small hand-written tasks used by several tests.
SIMPLE = {
    "id": "t",
    "category": "simple_python",
    "functions": [
        {
            "name": "calc.area",
            "parameters": {
                "type": "dict",
                "properties": {
                    "base": {"type": "integer"},
                    "height": {"type": "float"},
                    "unit": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "exact": {"type": "boolean"},
                },
                "required": ["base", "height"],
            },
        }
    ],
    "ground_truth": [
        {
            "calc.area": {
                "base": [10],
                "height": [5.0],
                "unit": ["square meters", ""],
                "tags": [["a b", "c"], ""],
                "exact": [True, ""],
            }
        }
    ],
}


PARALLEL = {
    "id": "p",
    "category": "parallel",
    "functions": [
        {
            "name": "f",
            "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        }
    ],
    "ground_truth": [{"f": {"x": [1]}}, {"f": {"x": [2]}}, {"f": {"x": [3]}}],
}
