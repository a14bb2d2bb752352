"""Function-call checker with BFCL's AST semantics (``bfcl_eval.eval_checker.ast_eval.ast_checker``, Python).

A task is compiled once (:func:`compile_task`) into per-call structures: the expected name, required
parameters, per-parameter type, and allowed values standardised once. Checking a response then repeats BFCL's
decisions in BFCL's order, so the pass/fail outcome *and* the reported ``error_type`` match the official checker:

1. the function name must match (no underscore-for-dot renaming: that is for FC APIs that forbid dots);
2. every required parameter is present; no parameter outside the schema *or* outside the gold answer;
3. types match exactly (``bool`` is not ``int``); an ``int`` is accepted where the schema says ``float``; a
   ``tuple`` where it says ``tuple``; when the gold values are of another type than the schema (a "variable"),
   that type is accepted and compared raw; arrays check their items one level deep;
4. values must be among the allowed ones. Strings are standardised (spaces and ``,./-_*^`` removed, lower case,
   ``'`` → ``"``); lists of strings and dict values element-wise; dicts key by key (``""`` marks an optional key);
5. a gold parameter the response omits must allow ``""``;
6. parallel categories: same number of calls, matched **greedily** in gold order (BFCL's algorithm: the first
   unmatched model call that passes is taken, so an unlucky order can fail where a perfect matching exists —
   reproduced on purpose); ``multiple``: exactly one call, checked against the doc of the gold function;
   ``simple``: exactly one call, checked against the *first* function doc;
7. irrelevance: pass iff the response decodes to no call; relevance: pass iff it decodes to at least one.

The category of a task decides 6–7 exactly as BFCL does (substring tests on the category name).
Only Python-typed categories are supported; Java/JavaScript (whose values BFCL converts with tree-sitter) are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from genenv.checkers.base import (
    DEFAULT_MAX_RESPONSE_CHARS,
    CheckFailure,
    run_checker,
    valid_verdict,
)
from genenv.checkers.callparse import Call, parse_calls
from genenv.contracts.rollouts import Verdict, VerdictErrorKind

PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
"""BFCL's PYTHON_TYPE_MAPPING: schema type name → the Python type a value must have."""

_NESTED = frozenset(("array", "tuple"))
_STD = str.maketrans({" ": None, ",": None, ".": None, "/": None, "-": None, "_": None, "*": None, "^": None, "'": '"'})

SIMPLE, MULTIPLE, PARALLEL, IRRELEVANCE, RELEVANCE = "simple", "multiple", "parallel", "irrelevance", "relevance"


def standardize(s: str) -> str:
    """BFCL's standardize_string: drop spaces and ``,./-_*^``, lower-case, ``'`` → ``"``."""
    return s.translate(_STD).lower()


def kind_of(category: str) -> str:
    """How BFCL dispatches a category: relevance tests first, then 'parallel' before 'multiple'."""
    if "irrelevance" in category:
        return IRRELEVANCE
    if "relevance" in category:
        return RELEVANCE
    if "parallel" in category:
        return PARALLEL
    if "multiple" in category:
        return MULTIPLE
    return SIMPLE


def _task_error(message: str) -> CheckFailure:
    return CheckFailure(VerdictErrorKind.TASK_ERROR, message)


class Failure:
    """Why a response failed: BFCL's error_type and a message formatted only when someone reads it."""

    __slots__ = ("_args", "_template", "error_type")

    def __init__(self, error_type: str, template: str, *args: Any) -> None:
        self.error_type = error_type
        self._template = template
        self._args = args

    @property
    def message(self) -> str:
        """Human-readable reason."""
        return self._template.format(*(_short(a) for a in self._args))


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _first_type(allowed: Any) -> type | None:
    """BFCL's get_possible_answer_type: the type of the first allowed value that is not the optional marker."""
    for a in allowed:
        if a != "":
            return type(a)
    return None


def _std_items(a: Any) -> list[Any]:
    # BFCL indexes each allowed value (`a[j] for j in range(len(a))`), so a string is read character-wise.
    if isinstance(a, dict):
        if a:
            raise _task_error("allowed value of a list parameter is a non-empty dict")
        return []
    if not isinstance(a, list | tuple | str):
        raise _task_error(f"allowed value {a!r} of a list parameter is not a list")
    return [standardize(x) if type(x) is str else x for x in a]


class _Param:
    """One parameter of one gold call: schema type, allowed values and their standardised forms (lazy)."""

    __slots__ = ("allowed", "desc", "expected", "name", "nested", "nested_types", "pa_type", "std_lists", "std_strs")

    def __init__(self, name: str, prop: Any, allowed: Any) -> None:
        self.name = name
        desc = prop.get("type") if isinstance(prop, dict) else None
        if desc not in PYTHON_TYPES:
            raise _task_error(f"parameter {name!r} has unsupported type {desc!r}")
        self.desc: str = desc
        self.expected = PYTHON_TYPES[desc]
        self.nested: type | None = None
        if desc in _NESTED:
            items = prop.get("items")
            item_type = items.get("type") if isinstance(items, dict) else None
            if item_type not in PYTHON_TYPES:
                raise _task_error(f"array parameter {name!r} has no supported item type")
            self.nested = PYTHON_TYPES[item_type]
        if not isinstance(allowed, list):
            raise _task_error(f"allowed values of {name!r} must be a list")
        self.allowed = allowed
        self.pa_type = _first_type(allowed)
        self.nested_types: list[tuple[bool, type | None]] | None = None
        self.std_strs: set[str] | None = None
        self.std_lists: list[list[Any]] | None = None

    def check(self, value: Any) -> Failure | None:
        """BFCL's per-parameter type check and value check (simple_function_checker's loop body)."""
        desc, expected, nested, pa_type = self.desc, self.expected, self.nested, self.pa_type
        tv = type(value)
        if tv is tuple and desc == "tuple":
            value, tv = list(value), list
        elif tv is int and desc == "float":
            value, tv = float(value), float
        if tv is expected:
            is_variable = pa_type is not None and pa_type is not expected
            if nested is not None and not self._nested_ok(value, nested):
                if pa_type is not None and tv is pa_type:
                    return Failure("type_error:nested", "items of {} have the wrong type: {}", self.name, value)
                return Failure("type_error:simple", "wrong type for {}: {}", self.name, value)
        elif pa_type is not None and tv is pa_type:
            is_variable = True
        else:
            return Failure("type_error:simple", "wrong type for {}: expected {}, got {}", self.name, desc, tv.__name__)
        if not is_variable:
            if expected is dict:
                return _dict_check(value, self.allowed)
            if expected is list and nested is dict:
                return _list_dict_check(value, self.allowed)
            if expected is str:
                if self.std_strs is None:
                    self.std_strs = {standardize(a) for a in self.allowed if type(a) is str}
                if standardize(value) in self.std_strs:
                    return None
                return Failure("value_error:string", "invalid value for {}: {}", self.name, value)
            if expected is list:
                if self.std_lists is None:
                    self.std_lists = [_std_items(a) for a in self.allowed]
                std = [standardize(x) if type(x) is str else x for x in value]
                if std in self.std_lists:
                    return None
                return Failure("value_error:list/tuple", "invalid value for {}: {}", self.name, value)
        if value in self.allowed:
            return None
        return Failure("value_error:others", "invalid value for {}: {}", self.name, value)

    def _nested_ok(self, value: list[Any], nested: type) -> bool:
        """One level of item type checking: some allowed value is not a list, or all items fit it."""
        if self.nested_types is None:
            self.nested_types = [(type(a) is list, _first_type(a) if type(a) is list else None) for a in self.allowed]
        for is_list, item_pa_type in self.nested_types:
            if not is_list:
                return True
            for item in value:
                ti = type(item)
                if ti is not nested and (item_pa_type is None or ti is not item_pa_type):
                    break
            else:
                return True
        return False


def _dict_check(value: Any, allowed: Sequence[Any]) -> Failure | None:
    """BFCL's dict_checker: some allowed dict accepts every key/value and misses only optional keys."""
    failure = Failure("dict_checker:unclear", "invalid dict value")
    for answer in allowed:
        if answer == "":
            continue
        failure = Failure("dict_checker:unclear", "invalid dict value")
        ok = True
        for key, item in value.items():
            if key not in answer:
                failure = Failure("value_error:dict_key", "unexpected dict key {}", key)
                ok = False
                break
            std = standardize(item) if type(item) is str else item
            options = answer[key]
            # Indexed like BFCL (`options[i] for i in range(len(options))`), not iterated.
            if std not in [
                standardize(x) if type(x) is str else x for x in map(options.__getitem__, range(len(options)))
            ]:
                failure = Failure("value_error:dict_value", "invalid value for dict key {}: {}", key, item)
                ok = False
                break
        # BFCL runs this loop even after a mismatch above, so its error wins.
        for key, options in answer.items():
            if key not in value and "" not in options:
                failure = Failure("value_error:dict_key", "missing dict key {}", key)
                ok = False
                break
        if ok:
            return None
    return failure


def _list_dict_check(value: Any, allowed: Sequence[Any]) -> Failure | None:
    """BFCL's list_dict_checker: some allowed list of dicts has the same length and matches position by position."""
    failure = Failure("list_dict_checker:unclear", "invalid list of dicts")
    for answer in allowed:
        if len(value) != len(answer):
            failure = Failure("value_error:list_dict_count", "wrong number of dicts in the list")
            continue
        ok = True
        for i in range(len(value)):
            sub = _dict_check(value[i], [answer[i]])
            if sub is not None:
                failure, ok = sub, False
                break
        if ok:
            return None
    return failure


class GoldCall:
    """One expected call: the doc it is checked against and the allowed values of each gold parameter."""

    __slots__ = ("_params", "allowed", "name", "props", "required")

    def __init__(self, doc: Any, allowed: Any) -> None:
        try:
            self.name: str = doc["name"]
            params = doc["parameters"]
            self.props: dict[str, Any] = params["properties"]
            self.required: list[str] = params["required"]
        except (KeyError, TypeError):
            raise _task_error("function doc needs name, parameters.properties and parameters.required") from None
        if not isinstance(allowed, dict):
            raise _task_error(f"ground truth of {self.name!r} must map parameters to allowed values")
        self.allowed: dict[str, Any] = allowed
        self._params: dict[str, _Param] = {}

    def param(self, name: str) -> _Param | None:
        """The compiled parameter, or None when the schema or the gold answer does not have it."""
        cp = self._params.get(name)
        if cp is None:
            if name not in self.props or name not in self.allowed:
                return None
            cp = self._params[name] = _Param(name, self.props[name], self.allowed[name])
        return cp

    def check(self, call: Call) -> Failure | None:
        """BFCL's simple_function_checker for one model call against this gold call."""
        if call.name != self.name:
            return Failure(
                "simple_function_checker:wrong_func_name", "expected function {}, got {}", self.name, call.name
            )
        args = call.args
        for p in self.required:
            if p not in args:
                return Failure("simple_function_checker:missing_required", "missing required parameter {}", p)
        for p, value in args.items():
            cp = self.param(p)
            if cp is None:
                return Failure("simple_function_checker:unexpected_param", "unexpected parameter {}", p)
            failure = cp.check(value)
            if failure is not None:
                return failure
        for p, options in self.allowed.items():
            if p not in args and "" not in options:
                return Failure(
                    "simple_function_checker:missing_optional", "parameter {} not provided and not optional", p
                )
        return None


class CompiledTask:
    """A BFCL-style task ready to check many responses: its category kind and gold calls."""

    __slots__ = ("category", "golds", "kind")

    def __init__(self, functions: Any, ground_truth: Any, category: str) -> None:
        self.category = category
        self.kind = kind_of(category)
        if not isinstance(functions, list) or not all(isinstance(f, dict) for f in functions):
            raise _task_error("functions must be a list of function docs")
        if not isinstance(ground_truth, list):
            raise _task_error("ground_truth must be a list of {name: {param: [allowed values]}}")
        self.golds: list[GoldCall] = []
        if self.kind in (IRRELEVANCE, RELEVANCE):
            return
        if not ground_truth or not functions:
            raise _task_error("an AST task needs functions and at least one gold call")
        first_doc: dict[str, Any] = {}
        for f in functions:
            first_doc.setdefault(f.get("name"), f)
        # 'simple' checks only the first gold call, against the first doc whatever its name (BFCL does).
        for gold in ground_truth[:1] if self.kind == SIMPLE else ground_truth:
            if not isinstance(gold, dict) or len(gold) != 1:
                raise _task_error("each gold call must be {name: {param: [allowed values]}}")
            ((name, allowed),) = gold.items()
            doc = functions[0] if self.kind == SIMPLE else first_doc.get(name)
            if doc is None:
                raise _task_error(f"gold call {name!r} has no function doc")
            self.golds.append(GoldCall(doc, allowed))

    def check(self, calls: list[Call]) -> Failure | None:
        """BFCL's ast_checker (or relevance test) on decoded calls; None = pass."""
        kind = self.kind
        if kind == IRRELEVANCE:
            return Failure("irrelevance_error:decoder_success", "made a call where none was wanted") if calls else None
        if kind == RELEVANCE:
            return None if calls else Failure("relevance_error:decoder_failed", "made no call")
        golds = self.golds
        if kind == PARALLEL:
            return _parallel_no_order(golds, calls)
        if kind == MULTIPLE:
            if len(calls) != len(golds):
                return Failure(
                    "multiple_function_checker:wrong_count", "expected {} call(s), got {}", len(golds), len(calls)
                )
            return golds[0].check(calls[0])
        if len(calls) != 1:
            return Failure("simple_function_checker:wrong_count", "expected 1 call, got {}", len(calls))
        return golds[0].check(calls[0])


def _parallel_no_order(golds: list[GoldCall], calls: list[Call]) -> Failure | None:
    if len(calls) != len(golds):
        return Failure(
            "parallel_function_checker_no_order:wrong_count", "expected {} call(s), got {}", len(golds), len(calls)
        )
    matched = [False] * len(calls)
    for i, gold in enumerate(golds):
        first: Failure | None = None
        for j, call in enumerate(calls):
            if matched[j]:
                continue
            failure = gold.check(call)
            if failure is None:
                matched[j] = True
                break
            first = first or failure
        else:
            reason = first.message if first is not None else "no call left"
            return Failure(
                "parallel_function_checker_no_order:cannot_find_match",
                "no model call matches gold call {} ({}): {}",
                i,
                gold.name,
                reason,
            )
    return None


def compile_task(task: dict[str, Any]) -> CompiledTask:
    """Compile a function-calling task payload (``functions``, ``ground_truth``, ``category``)."""
    category = task.get("category")
    if not isinstance(category, str) or not category:
        raise _task_error("task has no category")
    return CompiledTask(task.get("functions"), task.get("ground_truth"), category)


def score_response(
    compiled: CompiledTask, response: str, threshold: float, *, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS
) -> Verdict:
    """Parse and check one response; raises CheckFailure for a response that cannot be scored."""
    if compiled.kind in (IRRELEVANCE, RELEVANCE):
        if len(response) > max_chars:
            raise CheckFailure(
                VerdictErrorKind.TOO_LARGE, f"response has {len(response)} characters (limit {max_chars})"
            )
        try:
            calls = parse_calls(response, max_chars=max_chars)
        except CheckFailure:
            calls = []  # text that is not a call is exactly "no call"
    else:
        calls = parse_calls(response, max_chars=max_chars)
    failure = compiled.check(calls)
    if failure is None:
        return valid_verdict(1.0, threshold, {"category": compiled.category})
    return valid_verdict(
        0.0, threshold, {"category": compiled.category, "error_type": failure.error_type, "message": failure.message}
    )


def verify(task: dict[str, Any], response: str, threshold: float = 1.0) -> Verdict:
    """R_agent of one response to a function-calling task, time-limited; never raises."""

    def check() -> Verdict:
        return score_response(compile_task(task), response, threshold)

    return run_checker(check)
