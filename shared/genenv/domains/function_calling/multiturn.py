"""BFCL multi-turn, scored turn by turn given the gold history (the paper's protocol), executed offline.

BFCL's multi-turn categories are scored by *executing* calls on stateful Python backends (a file system, a
trading bot, a travel API, …) built from each entry's ``initial_config``; the long-context category loads large
distractor state into them, which is what makes its tool outputs long. Those backends are the upstream classes
of ``bfcl_eval.eval_checker.multi_turn_eval.func_source_code`` (pure Python, offline; install with
``pip install --no-deps bfcl-eval==2026.3.23``). Without them the multi-turn items cannot be scored and the
evaluator reports them as skipped.

Protocol for turn *t* of an entry (every turn with gold calls is one item):

1. Build the backends from ``initial_config`` (long-context scenarios) and execute the gold calls of turns
   0..t-1 on them (the gold history).
2. The prompt is BFCL's system prompt with the docs of the involved classes, then for each earlier turn: its
   user message, an assistant message with the gold calls (``[f(a=1), g(b=2)]``) and a user message with their
   execution results (BFCL's prompting format: ``repr`` of ``[{"role": "tool", "name": call, "content":
   result}]``), then the user message of turn *t*.
3. The model answers in steps: each reply that decodes to calls is executed on a copy of the step-1 state and
   its results are appended; the turn ends at the first reply with no calls or after ``MAX_STEPS`` steps.
4. The gold calls of turn *t* are executed on another copy. The turn passes iff BFCL's two checks pass: every
   public attribute of every backend equals the gold one (state check), and the gold execution results are
   contained, as a multiset, in the results the model saw in this turn plus the gold history's (response
   check). A turn in which the model made no call fails (BFCL: ``empty_turn_model_response``).

Calls are executed without ``eval``: a decoded call is dispatched to the public method of that name on the
involved instances (the later class wins on a name clash, as in BFCL); model calls pass keyword arguments only
(BFCL's decoder drops positional ones), gold calls also pass positional ones (BFCL evals the gold strings).
Nested calls inside arguments stay literal dicts (BFCL would execute them) — a documented difference.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv.checkers.base import CheckerTimeout, CheckFailure, time_limit
from genenv.checkers.callparse import Call, parse_calls
from genenv.domains.base import DataMissingError

CATEGORY = "multi_turn_long_context"
MAX_STEPS = 20
"""Model steps per turn before the turn is cut off (BFCL's MAXIMUM_STEP_LIMIT)."""
CALL_TIME_LIMIT_S = 5.0
_BACKEND_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# class name -> (backend module, function-doc file); BFCL's CLASS_FILE_PATH_MAPPING / MULTI_TURN_FUNC_DOC_FILE_MAPPING.
BACKENDS: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
STATELESS = frozenset({"MathAPI"})
_BLOCKED = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})


@dataclass(frozen=True)
class Entry:
    """One multi-turn entry: per-turn user messages, backend setup and per-turn gold call strings."""

    id: str
    turns: list[list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    gold: list[list[str]]


def backends_missing() -> str | None:
    """Why the multi-turn backends cannot be used here (None when they can)."""
    try:
        for module, _doc in BACKENDS.values():
            importlib.import_module(f"{_BACKEND_PACKAGE}.{module}")
    except ImportError as exc:
        return f"BFCL multi-turn backends unavailable ({exc}); pip install --no-deps bfcl-eval==2026.3.23"
    return None


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_entries(bfcl_dir: Path, category: str = CATEGORY) -> list[Entry]:
    """Entries of a multi-turn category with their gold call lists."""
    data, answers = bfcl_dir / f"BFCL_v4_{category}.json", bfcl_dir / "possible_answer" / f"BFCL_v4_{category}.json"
    if not data.is_file() or not answers.is_file():
        raise DataMissingError(f"BFCL multi-turn data not found: {data} and {answers}")
    gold = {a["id"]: a["ground_truth"] for a in _lines(answers)}
    return [
        Entry(e["id"], e["question"], e.get("initial_config", {}), e["involved_classes"], gold[e["id"]])
        for e in _lines(data)
    ]


def function_docs(bfcl_dir: Path, involved_classes: list[str]) -> list[dict[str, Any]]:
    """The function docs of the involved backends, in BFCL's order."""
    docs: list[dict[str, Any]] = []
    for cls in involved_classes:
        path = bfcl_dir / "multi_turn_func_doc" / BACKENDS[cls][1]
        if not path.is_file():
            raise DataMissingError(f"BFCL multi-turn function docs not found: {path}")
        docs.extend(_lines(path))
    return docs


def render_call(call: Call) -> str:
    """A call in Python syntax (positional arguments first)."""
    parts = [repr(v) for v in call.positional] + [f"{k}={v!r}" for k, v in call.args.items()]
    return f"{call.name}({', '.join(parts)})"


def tool_results_message(calls: list[Call], results: list[str]) -> dict[str, Any]:
    """Execution results as BFCL's prompting handlers send them back: one user message."""
    pairs = zip(calls, results, strict=True)
    return {"role": "user", "content": repr([{"role": "tool", "name": render_call(c), "content": r} for c, r in pairs])}


def parse_gold(call_strings: list[str]) -> list[Call]:
    """Gold call strings (``"mv(source='a', destination='b')"``) as calls."""
    calls: list[Call] = []
    for s in call_strings:
        calls.extend(parse_calls(s))
    return calls


class World:
    """The backend instances of one entry and BFCL's way of executing calls on them (without eval)."""

    def __init__(self, instances: dict[str, Any]) -> None:
        self.instances = instances
        self._methods: dict[str, Callable[..., Any]] = {}
        for instance in instances.values():
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self._methods[name] = method

    @classmethod
    def create(cls, entry: Entry, *, long_context: bool = True) -> World:
        """Fresh backends loaded with the entry's scenario."""
        instances: dict[str, Any] = {}
        for name in entry.involved_classes:
            module = importlib.import_module(f"{_BACKEND_PACKAGE}.{BACKENDS[name][0]}")
            instance = getattr(module, name)()
            if name not in STATELESS:
                instance._load_scenario(copy.deepcopy(entry.initial_config.get(name, {})), long_context=long_context)
            instances[name] = instance
        return cls(instances)

    def copy(self) -> World:
        """An independent copy (model and gold continue from the same state)."""
        return World(copy.deepcopy(self.instances))

    def execute(self, calls: list[Call], *, positional: bool) -> list[str]:
        """Execute calls in order; each result as BFCL renders it (errors become 'Error during execution: …')."""
        return [self._execute_one(call, positional) for call in calls]

    def _execute_one(self, call: Call, positional: bool) -> str:
        method = self._methods.get(call.name)
        try:
            if method is None or call.name in _BLOCKED:
                raise NameError(f"name '{call.name}' is not defined")
            args = call.positional if positional else ()
            with time_limit(CALL_TIME_LIMIT_S):
                result = method(*args, **call.args)
        except CheckerTimeout:
            return f"Error during execution: call took longer than {CALL_TIME_LIMIT_S:g} s"
        except Exception as exc:
            return f"Error during execution: {exc}"
        if isinstance(result, str):
            return result
        if isinstance(result, dict):
            try:
                return json.dumps(result)
            except (TypeError, ValueError):
                return str(result)
        return str(result)

    def state_mismatch(self, gold: World) -> str | None:
        """BFCL's state check: the first backend whose public attributes differ from the gold one."""
        for name, gold_instance in gold.instances.items():
            model_instance = self.instances[name]
            for attr, value in vars(gold_instance).items():
                if not attr.startswith("_") and getattr(model_instance, attr) != value:
                    return f"{name}.{attr} differs from the gold state"
        return None


def missing_results(gold_results: list[str], model_results: list[str]) -> list[str]:
    """BFCL's response check: gold results not found (as a multiset) among the model's."""
    available = Counter(model_results)
    missing = []
    for r in gold_results:
        if available[r] > 0:
            available[r] -= 1
        else:
            missing.append(r)
    return missing


def decode_step(text: str) -> list[Call]:
    """The calls of one model reply; a reply that is not calls ends the turn (BFCL skips undecodable steps)."""
    try:
        return parse_calls(text)
    except CheckFailure:
        return []
