"""BFCL-style function calling: given function docs and a request, write the call(s) — scored with BFCL's AST rules.

Task payload (seeds and generated tasks alike)::

    {"id": "simple_python_12", "category": "simple_python",
     "messages": [{"role": "user", "content": "..."}],          # the request (BFCL's single turn)
     "functions": [{"name", "description", "parameters": {"type": "dict", "properties", "required"}}],
     "ground_truth": [{"func_name": {"param": [allowed values, "" = may be omitted]}}]}   # [] = irrelevance

The category decides how calls are matched (:mod:`genenv.domains.function_calling.checker`): simple, multiple, parallel
(order-free), irrelevance (pass iff no call). Generated tasks get ``simple``/``multiple``/``parallel``/
``parallel_multiple``/``irrelevance`` from their shape.

Seeds and the evaluation split come from :mod:`genenv.domains.function_calling.data`.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import run_checker
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.base import Domain, TaskRejected
from genenv.domains.function_calling.checker import (
    IRRELEVANCE,
    PYTHON_TYPES,
    CompiledTask,
    compile_task,
    score_response,
)
from genenv.domains.function_calling.data import SEED_CATEGORIES, in_split, load_category

MAX_QUESTION_CHARS = 2_000
MAX_FUNCTIONS = 8
MAX_GOLD_CALLS = 6
MAX_PARAMS = 16
MAX_ALLOWED_VALUES = 8
MAX_TASK_JSON_CHARS = 12_000
MAX_NAME_CHARS = 64
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_COMPILED_CACHE_SIZE = 4096

SYSTEM_PROMPT = (
    "You are an expert in composing functions.You are given a question and a set of possible functions. Based on "
    "the question, you will need to make one or more function/tool calls to achieve the purpose. If none of the "
    "functions can be used, point it out. If the given question lacks the parameters required by the function, "
    "also point it out.\n\nYou should only return the function calls in your response.\n\nIf you decide to invoke "
    "any of the function(s), you MUST put it in the format of [func_name1(params_name1=params_value1, "
    "params_name2=params_value2...), func_name2(params)].  You SHOULD NOT include any other text in the response."
    "\n\nAt each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of your "
    "ability. Once you have no more functions to call, the system will consider the current turn complete and "
    "proceed to the next turn or task.\n\nHere is a list of functions in json format that you can invoke.\n"
    "{functions}\n"
)
"""BFCL's default system prompt (ret_fmt=python, plaintext, classic style), text as BFCL renders it; the docs are
compact JSON instead of BFCL's indent=4 to save the small model's context."""


def system_prompt(functions: list[dict[str, Any]]) -> str:
    """BFCL's default prompting system prompt for these function docs."""
    return SYSTEM_PROMPT.replace("{functions}", json.dumps(functions))


# --- compiled-task cache ---------------------------------------------------------------------------------------

_compiled: dict[tuple[Any, Any], tuple[dict[str, Any], CompiledTask]] = {}


def compiled(task: dict[str, Any]) -> CompiledTask:
    """The compiled checker of a payload, reused while an equal payload comes back (G rollouts of one task).

    Keyed by (id, category) and confirmed by identity or equality, so a different payload under the same id
    is recompiled. Payloads must not be mutated after they were verified.
    """
    key = (task.get("id"), task.get("category"))
    hit = _compiled.get(key)
    if hit is not None and (hit[0] is task or hit[0] == task):
        return hit[1]
    result = compile_task(task)
    if len(_compiled) >= _COMPILED_CACHE_SIZE:
        _compiled.clear()  # atomic, so safe with the service's worker threads (popping one entry would not be)
    _compiled[key] = (task, result)
    return result


# --- generated tasks -------------------------------------------------------------------------------------------

_PARAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": sorted(PYTHON_TYPES)},
        "description": {"type": "string", "maxLength": 300},
        "items": {
            "type": "object",
            "properties": {"type": {"type": "string", "enum": sorted(PYTHON_TYPES)}},
            "required": ["type"],
        },
    },
    "required": ["type", "description"],
}
# Written for xgrammar, the one structured-output backend of our vLLM servers and of the local backend (a vLLM
# engine holds one backend, so every domain's schema must compile there): in its strict mode an array without
# "items" admits no element, hence the recursive JSON value for a gold call's allowed values.
TASK_SCHEMA: dict[str, Any] = {
    "$defs": {"value": {"anyOf": [
        {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
        {"type": "array", "items": {"$ref": "#/$defs/value"}},
        {"type": "object", "additionalProperties": {"$ref": "#/$defs/value"}},
    ]}},
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
        "functions": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_FUNCTIONS,
            "items": {
                "type": "object",
                "properties": {
                    # No maxLength beside the pattern: xgrammar cannot bound a patterned string (the validator does).
                    "name": {"type": "string", "pattern": _NAME.pattern},
                    "description": {"type": "string", "maxLength": 500},
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "type": {"type": "string", "enum": ["dict"]},
                            "properties": {"type": "object", "additionalProperties": _PARAM_SCHEMA},
                            "required": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["type", "properties", "required"],
                    },
                },
                "required": ["name", "description", "parameters"],
            },
        },
        "ground_truth": {
            "type": "array",
            "maxItems": MAX_GOLD_CALLS,
            "items": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "array", "minItems": 1, "maxItems": MAX_ALLOWED_VALUES,
                        "items": {"$ref": "#/$defs/value"},
                    },
                },
            },
        },
    },
    "required": ["question", "functions", "ground_truth"],
    "additionalProperties": False,
}
"""What the simulator writes: the request, the function docs and the gold calls in BFCL possible_answer form."""


def _reject(detail: str, reason: RejectionReason = RejectionReason.INVALID_TASK) -> TaskRejected:
    return TaskRejected(reason, detail)


def _validate_function(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise _reject("each function doc must be an object", RejectionReason.SCHEMA)
    name = doc.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _reject(f"function name {name!r} is not a (dotted) identifier", RejectionReason.SCHEMA)
    if len(name) > MAX_NAME_CHARS:
        raise _reject(f"function name longer than {MAX_NAME_CHARS} characters", RejectionReason.TOO_LONG)
    params = doc.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "dict":
        raise _reject(f"{name}: parameters must be {{'type': 'dict', ...}}", RejectionReason.SCHEMA)
    props, required = params.get("properties"), params.get("required")
    if not isinstance(props, dict) or not isinstance(required, list):
        raise _reject(f"{name}: parameters need 'properties' and 'required'", RejectionReason.SCHEMA)
    if len(props) > MAX_PARAMS:
        raise _reject(f"{name}: more than {MAX_PARAMS} parameters")
    for p, prop in props.items():
        if not isinstance(prop, dict) or prop.get("type") not in PYTHON_TYPES:
            raise _reject(f"{name}.{p}: type must be one of {sorted(PYTHON_TYPES)}")
        if prop["type"] in ("array", "tuple"):
            items = prop.get("items")
            if not isinstance(items, dict) or items.get("type") not in PYTHON_TYPES:
                raise _reject(f"{name}.{p}: an array needs items.type")
    unknown = [r for r in required if r not in props]
    if unknown:
        raise _reject(f"{name}: required parameters {unknown} are not in properties")


def _category(n_functions: int, gold_names: list[str]) -> str:
    if not gold_names:
        return "irrelevance"
    if len(gold_names) == 1:
        return "simple" if n_functions == 1 else "multiple"
    return "parallel" if n_functions == 1 else "parallel_multiple"


def _template(value: Any) -> Any:
    """An accepted dict value is a template {key: [options]}: its first non-optional option per key."""
    if not isinstance(value, dict):
        return value
    return {k: next(o for o in opts if o != "") for k, opts in value.items() if any(o != "" for o in opts)}


def gold_answer(task: dict[str, Any]) -> str:
    """One response that must score 1: per gold parameter its first accepted value (Python call syntax)."""
    docs = {doc["name"]: doc for doc in task["functions"]}
    calls = []
    for gold in task["ground_truth"]:
        ((name, allowed),) = gold.items()
        props = docs[name]["parameters"]["properties"] if name in docs else {}
        args = []
        for p, options in allowed.items():
            value = next((o for o in options if o != ""), None)
            if value is None or (p not in props and "" in options):
                continue  # optional, or outside the schema where only omitting it can pass
            kind, item_kind = props.get(p, {}).get("type"), props.get(p, {}).get("items", {}).get("type")
            if kind == "dict":
                value = _template(value)
            elif kind == "array" and item_kind == "dict" and isinstance(value, list):
                value = [_template(v) for v in value]
            args.append(f"{p}={value!r}")
        calls.append(f"{name}({', '.join(args)})")
    return "[" + ", ".join(calls) + "]"


class FunctionCallingDomain(Domain):
    """BFCL single-turn function calling (Python categories)."""

    name: ClassVar[str] = "function_calling"
    group_field: ClassVar[str | None] = "category"
    default_success_threshold: ClassVar[float] = 1.0
    difficulty_measures: ClassVar[dict[str, str]] = {
        "gold_calls": "calls in the ground truth (parallel tasks have several; irrelevance has none)",
        "functions_offered": "function docs shown to the agent",
        "gold_arguments": "arguments across the gold calls",
    }

    def difficulty(self, payload: dict[str, Any]) -> dict[str, float]:
        """How many calls the answer needs, among how many documented functions, with how many arguments."""
        gold = payload.get("ground_truth") or []
        functions = payload.get("functions") or []
        arguments = sum(len(args) for call in gold if isinstance(call, dict)
                        for args in call.values() if isinstance(args, dict))
        return {"gold_calls": float(len(gold)), "functions_offered": float(len(functions)),
                "gold_arguments": float(arguments)}

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """BFCL items of the fixed 'train' (seed) or 'eval' split over the single-turn Python categories; seeds
        that no answer can solve are left out."""
        if split not in {"train", "eval"}:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        return [
            Seed(id=p["id"], domain=self.name, payload=p)
            for category in SEED_CATEGORIES
            for p in load_category(benchmarks_dir, category)
            if in_split(p, split) and (split == "eval" or self.solvable(p))
        ]

    def solvable(self, payload: dict[str, Any]) -> bool:
        """Whether some answer scores 1 (four BFCL items cannot: their docs and answers disagree; see docs)."""
        if not payload["ground_truth"]:
            return True
        verdict = self.verify(payload, gold_answer(payload))
        return verdict.valid and verdict.score == 1.0

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for ONE new task varying the seed: new request, (edited) function docs and the gold calls."""
        system = (
            "You write function-calling exercises for an assistant. An exercise is JSON with: 'question' (what "
            "the user asks), 'functions' (JSON-schema docs: name, description, parameters with type 'dict', "
            "'properties' and 'required'; parameter types: string, integer, float, boolean, array, tuple, dict, "
            "any) and 'ground_truth' (the correct calls: a list of {function_name: {parameter: [accepted "
            'values]}}; add "" to the accepted values of a parameter that may be left out). Use an empty '
            "ground_truth when no function fits the question. Every accepted value must answer the question "
            "exactly. Reply with the JSON only."
        )
        if seed is None:
            user = "Write one new exercise."
        else:
            p = seed.payload
            example = {
                "question": _question_text(p.get("messages", [])),
                "functions": p.get("functions", []),
                "ground_truth": p.get("ground_truth", []),
            }
            user = (
                f"Example exercise: {json.dumps(example)}\n"
                "Write one NEW exercise that varies the example: change the request and the values, and edit, "
                "add or remove functions if you like."
            )
        user += " " + _difficulty_hint(stats, target_success)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def task_json_schema(self) -> dict[str, Any]:
        """JSON schema of one generated task (guided decoding)."""
        return TASK_SCHEMA

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A payload whose own gold answer scores 1, or TaskRejected with the reason."""
        if not isinstance(obj, dict):
            raise _reject("a task must be a JSON object", RejectionReason.SCHEMA)
        unknown = sorted(set(obj) - {"question", "functions", "ground_truth"})
        if unknown:
            raise _reject(f"unknown fields {unknown}", RejectionReason.SCHEMA)
        question, functions, ground_truth = obj.get("question"), obj.get("functions"), obj.get("ground_truth")
        if not isinstance(question, str) or not isinstance(functions, list) or not isinstance(ground_truth, list):
            raise _reject("need question (string), functions (list) and ground_truth (list)", RejectionReason.SCHEMA)
        if not question.strip():
            raise _reject("empty question", RejectionReason.EMPTY)
        if len(question) > MAX_QUESTION_CHARS or len(json.dumps(obj)) > MAX_TASK_JSON_CHARS:
            raise _reject("task too long", RejectionReason.TOO_LONG)
        if not 1 <= len(functions) <= MAX_FUNCTIONS or len(ground_truth) > MAX_GOLD_CALLS:
            raise _reject(f"need 1–{MAX_FUNCTIONS} functions and at most {MAX_GOLD_CALLS} gold calls")
        for doc in functions:
            _validate_function(doc)
        names = [doc["name"] for doc in functions]
        if len(set(names)) != len(names):
            raise _reject("function names must be unique")
        docs = {doc["name"]: doc for doc in functions}
        gold_names = []
        for gold in ground_truth:
            if not isinstance(gold, dict) or len(gold) != 1:
                raise _reject("each gold call must be {function_name: {parameter: [values]}}", RejectionReason.SCHEMA)
            ((fname, allowed),) = gold.items()
            if fname not in docs:
                raise _reject(f"gold call {fname!r} is not one of the functions")
            _validate_allowed(docs[fname], allowed)
            gold_names.append(fname)
        category = _category(len(functions), gold_names)
        if category == "simple" and gold_names[0] != names[0]:
            raise _reject("the gold call must use the function")
        payload = {
            "id": "gen-" + hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16],
            "category": category,
            "messages": [{"role": "user", "content": question.strip()}],
            "functions": functions,
            "ground_truth": ground_truth,
        }
        self.reject_if_seed(payload, seed)
        if category != IRRELEVANCE:
            verdict = self.verify(payload, gold_answer(payload))
            if not verdict.valid or verdict.score != 1.0:
                reason = verdict.error.message if verdict.error else verdict.details.get("message", "")
                raise _reject(f"the gold answer does not pass its own checker: {reason}")
        return payload

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The request text and the gold calls (new function docs around the same request and calls are a repeat)."""
        question = _question_text(payload.get("messages") or []).strip()
        return json.dumps([question, payload.get("ground_truth")], sort_keys=True, default=str)

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """BFCL's prompting format: system prompt with the function docs, then the request."""
        system = system_prompt(task["functions"])
        messages: list[ChatMessage] = [dict(m) for m in task.get("messages", [])]
        if messages and messages[0].get("role") == "system":
            # BFCL appends a task's own system prompt after its function-calling instructions.
            return [{"role": "system", "content": system + "\n\n" + str(messages[0]["content"])}, *messages[1:]]
        return [{"role": "system", "content": system}, *messages]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """BFCL AST verdict: 1 when the calls match the gold, 0 when not; invalid when the reply is not calls."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold

        def check() -> Verdict:
            return score_response(compiled(task), response, threshold)

        return run_checker(check)


def _validate_allowed(doc: dict[str, Any], allowed: Any) -> None:
    name = doc["name"]
    if not isinstance(allowed, dict):
        raise _reject(f"{name}: gold parameters must be an object", RejectionReason.SCHEMA)
    props = doc["parameters"]["properties"]
    for p, options in allowed.items():
        if p not in props:
            raise _reject(f"{name}: gold parameter {p!r} is not in the function's properties")
        if not isinstance(options, list) or not options or len(options) > MAX_ALLOWED_VALUES:
            raise _reject(f"{name}.{p}: accepted values must be a list of 1–{MAX_ALLOWED_VALUES} values")
        prop = props[p]
        for option in options:
            if option != "" and not _fits(option, prop["type"]):
                raise _reject(f"{name}.{p}: accepted value {option!r} does not match type {prop['type']!r}")
            if prop["type"] in ("array", "tuple") and isinstance(option, list):
                bad = [x for x in option if not _fits(x, prop["items"]["type"])]
                if bad:
                    raise _reject(f"{name}.{p}: item {bad[0]!r} does not match type {prop['items']['type']!r}")
            templates = [option] if prop["type"] == "dict" else option if prop["type"] == "array" else []
            for template in templates:
                if isinstance(template, dict) and not all(isinstance(v, list) and v for v in template.values()):
                    raise _reject(f"{name}.{p}: a dict value maps each key to its accepted values, {{'k': ['v']}}")
    for r in doc["parameters"]["required"]:
        options = allowed.get(r)
        if options is None or all(o == "" for o in options):
            raise _reject(f"{name}: required parameter {r!r} has no accepted value")


def _fits(value: Any, type_name: str) -> bool:
    """A generated gold value must have its declared type (BFCL's "variables" are not generated)."""
    expected = PYTHON_TYPES[type_name]
    return type(value) is expected or (expected is float and type(value) is int)


def _question_text(messages: list[Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict) and m.get("role") == "user")


def _difficulty_hint(stats: tuple[int, int] | None, target: float | None) -> str:
    if stats is None or stats[1] == 0 or target is None:
        return "Keep a similar difficulty."
    k, n = stats
    rate = k / n
    line = f"The assistant solved {k} of {n} recent attempts at exercises like this ({rate:.0%}); target {target:.0%}."
    if rate > target + 0.1:
        return line + " Make it HARDER: more functions to choose from, more parameters, or several calls."
    if rate < target - 0.1:
        return line + " Make it EASIER: one function, few parameters, values stated plainly in the question."
    return line + " Keep a similar difficulty."


DOMAIN = FunctionCallingDomain()
