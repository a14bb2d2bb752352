"""API-Bank calls: parse ``[ApiName(key='value', ...)]`` and judge it against the gold call with API-Bank's rules.

Upstream (``evaluator_by_json.py``) takes the first ``[Name(...)]`` in the output, requires the gold API name,
*executes* the call against a Python simulator of that API and hands the result to the API's own
``check_api_call_correctness(result, gold_result)``. Those rules compare normalised inputs and the output and
exception. Here the call is not executed: a prediction whose inputs are equivalent under the API's rule is
given the gold call's recorded output and exception ("replay"). That reproduces upstream wherever the
simulated output is a function of the compared inputs, which is the case for every rule except the few listed
under :data:`OFFLINE_PROXIES` (network or model-backed APIs and output-only rules).

Per-API input rules (from the upstream ``apis/*.py``):

- exact dict equality for most APIs (GetUserToken, RegisterUser, BookHotel, the alarm APIs, ...);
- ``strip`` / ``strip+lower`` / ``upper+strip`` on ids and names, and date/time fields re-formatted
  (``%Y-%m-%d``, ``%Y-%m-%d %H:%M:%S``, history ``%m-%d``) before comparing;
- free-text fields (agenda ``content``, meeting ``meeting_topic``, reminder ``content``) pass when the Jaccard
  of their space-split word sets is > 0.5; the other inputs of those APIs must be equal;
- scene device lists and health-data lists compared as normalised, sorted lists; Calculator formulas with
  spaces removed; Delete{Agenda,Reminder} compare only ``time`` when the gold call succeeded;
- GetToday accepts any call (its recorded input is always ``None``).

Tokens: rules such as AddAgenda ignore ``token``, but upstream the token decides whether the call succeeds
(``CheckToken``), so the replay compares it exactly — it differs from upstream only when a *different valid*
token of another user is used.

Calls are parsed with :mod:`ast` (literals only, never ``eval``). Upstream's gold strings quote list values
(``attendees='['John']'``), which is not Python; those quotes are removed before parsing.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from genenv.checkers.base import DEFAULT_MAX_RESPONSE_CHARS, CheckFailure, valid_verdict
from genenv.contracts.rollouts import Verdict, VerdictErrorKind

# Upstream extracts with re.search(r"\[(\w+)\((.*)\)\]"): the first "[Name(" that has a ")]" later on its line,
# up to the last ")]" of that line. _locate_call does the same in linear time (that regex is quadratic on
# replies full of "[a(").
_CALL_START = re.compile(r"\[(\w+)\(")
# A list written inside quotes: key='[...]' (how API-Bank's own gold strings render list arguments).
_QUOTED_LIST = re.compile(r"""(=\s*)(['"])(\[.*?\])\2(?=\s*(?:,\s*\w+\s*=|$))""", re.DOTALL)

MAX_REPAIR_CHARS = 2_000
"""Longest argument text the quoted-list repair is tried on (real API-Bank calls are a few hundred characters)."""

OFFLINE_PROXIES: Mapping[str, str] = {
    "ToolSearcher": "upstream embeds the keywords with a hub model and compares the best-matching API; offline the "
    "keywords pass when the Jaccard of their lower-cased word sets with the gold keywords is > 0.5",
    "Dictionary": "upstream queries dictionaryapi.dev and compares the output only; offline the normalised keyword "
    "(underscores to spaces, stripped, lower-cased — the request URL) must equal the gold keyword",
    "Translate": "upstream calls Google Translate and compares src and output; offline src must be equal and "
    "src_lang/tgt_lang equal after lower-casing (one given on one side only is a mismatch)",
    "SearchEngine": "upstream ranks a BM25 index with NLTK tokens and compares the top-2 documents; offline the "
    "lower-cased, stripped keyword must equal the gold keyword",
    "Wiki": "upstream compares the output only; offline the normalised keyword (the database key) must be equal",
    "PlayMusic": "upstream compares the output 'music://<name>'; offline the lower-cased, stripped name must be equal "
    "(exactly what determines that output)",
    "DeleteMeeting": "upstream reads input['time'], which DeleteMeeting does not have (KeyError: never correct when "
    "the gold call succeeded); here start_time plays that role, as in DeleteAgenda/DeleteReminder",
}
"""APIs whose upstream rule cannot run offline or is broken, and what is done instead."""

# 8 level-1 gold calls write TimedSwitch/CancelTimedSwitch(device_id=...) although the API (and its description in
# the prompt) names the parameter `name`; upstream rejects them ("invalid parameter name"), so those items could
# never be solved. Both spellings are read as `name` here.
_ALIASES: Mapping[str, Mapping[str, str]] = {
    "TimedSwitch": {"device_id": "name"},
    "CancelTimedSwitch": {"device_id": "name"},
}

# Parameters an upstream ``call`` signature lets a caller omit (everything else is a required positional).
_OPTIONAL: Mapping[str, frozenset[str]] = {
    "ForgotPassword": frozenset({"username", "email", "verification_code", "new_password"}),
    "Translate": frozenset({"src_lang", "tgt_lang"}),
    "RecordHealthData": frozenset({"health_data"}),
}


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One parsed API request."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ApiJudgement:
    """Outcome of comparing a parsed call with the gold call."""

    correct: bool
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class GoldCall:
    """The gold request with its declared parameter types and recorded result."""

    name: str
    args: dict[str, Any]
    parameters: dict[str, str] = field(default_factory=dict)
    output: Any = None
    exception: str | None = None
    required: tuple[str, ...] | None = None

    @classmethod
    def from_payload(cls, gold: Mapping[str, Any]) -> GoldCall:
        """Build from a task payload's ``gold`` object (raises CheckFailure task_error when malformed)."""
        try:
            name = gold["api_name"]
            args = gold["arguments"]
        except (KeyError, TypeError):
            raise CheckFailure(VerdictErrorKind.TASK_ERROR, "task gold lacks api_name/arguments") from None
        if not isinstance(name, str) or not isinstance(args, dict):
            raise CheckFailure(VerdictErrorKind.TASK_ERROR, "task gold api_name/arguments have the wrong type")
        params = gold.get("parameters") or {k: type_name(v) for k, v in args.items()}
        required = gold.get("required")
        return cls(
            name=name,
            args=dict(args),
            parameters=dict(params),
            output=gold.get("output"),
            exception=gold.get("exception"),
            required=tuple(required) if required is not None else None,
        )

    def required_params(self) -> tuple[str, ...]:
        """Parameters the call must carry (upstream: the positional parameters of the API's ``call``)."""
        if self.required is not None:
            return self.required
        if self.name == "GetToday":
            return ()
        optional = _OPTIONAL.get(self.name, frozenset())
        return tuple(p for p in self.parameters if p not in optional)


def type_name(value: Any) -> str:
    """API-Bank's type name for a Python value (used when a generated task does not declare types)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, list):
        return "list"
    return "str"


# --- parsing --------------------------------------------------------------------------------------------------


def parse_api_request(text: str, *, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> ApiCall:
    """The first ``[Name(k=v, ...)]`` in a response; raises CheckFailure (parse_error/schema_error/too_large)."""
    if len(text) > max_chars:
        raise CheckFailure(VerdictErrorKind.TOO_LARGE, f"response has {len(text)} characters (limit {max_chars})")
    located = _locate_call(text)
    if located is None:
        raise CheckFailure(VerdictErrorKind.PARSE_ERROR, "no API request of the form [ApiName(key='value', ...)]")
    name, start, last_close = located
    # Upstream's body runs to the line's last ")]"; when that does not parse (two calls on one line), the body
    # up to the first ")]" is tried as well.
    first_close = text.find(")]", start, last_close + 2)
    node = _parse_call(name, [text[start:last_close], text[start:first_close]])
    if node.args:
        raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, "positional arguments are not allowed; use key='value'")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, "**kwargs is not a literal argument")
        if kw.arg in args:
            raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, f"argument {kw.arg!r} given twice")
        args[kw.arg] = _literal(kw.value)
    return ApiCall(name=name, args=args)


def _locate_call(text: str) -> tuple[str, int, int] | None:
    """(name, body start, position of the line's last ")]") of the first call upstream's regex would find."""
    line_end, last_close = -1, -1
    for m in _CALL_START.finditer(text):
        if m.start() > line_end:
            line_end = text.find("\n", m.start())
            if line_end == -1:
                line_end = len(text)
            last_close = text.rfind(")]", m.start(), line_end)
        if last_close >= m.end():
            return m.group(1), m.end(), last_close
    return None


def _parse_call(name: str, bodies: list[str]) -> ast.Call:
    # The quoted-list repair regex backtracks quadratically, so it only runs on bodies of a plausible size.
    candidates = dict.fromkeys(
        c for body in bodies for c in (body, _QUOTED_LIST.sub(r"\1\3", body) if len(body) <= MAX_REPAIR_CHARS else body)
    )
    for candidate in candidates:
        try:
            tree = ast.parse(f"{name}({candidate})", mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if isinstance(tree.body, ast.Call):
            return tree.body
    raise CheckFailure(VerdictErrorKind.PARSE_ERROR, f"cannot parse the arguments of {name}(...)")


def _literal(node: ast.expr) -> Any:
    # A bare word is read as a string, like upstream's `key=value` regex alternative.
    if isinstance(node, ast.Name):
        return node.id
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise CheckFailure(
            VerdictErrorKind.SCHEMA_ERROR, f"argument is not a literal: {ast.unparse(node)[:80]}"
        ) from None


# --- type coercion (upstream ToolManager.api_call) --------------------------------------------------------------


class _BadType(Exception):
    pass


def _coerce(value: Any, kind: str) -> Any:
    if kind == "str":
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)  # upstream's regex reads a bare number as its text
        raise _BadType
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
        raise _BadType
    if kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and value.replace(".", "", 1).isdigit():
            return float(value)
        raise _BadType
    if kind == "bool":
        return value is True or value == "True"
    if kind.startswith("list"):
        if isinstance(value, list):
            return value
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                parsed = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                raise _BadType from None
            if isinstance(parsed, list):
                return parsed
        raise _BadType
    return value


# --- per-API input rules -----------------------------------------------------------------------------------------


class _Unparseable:
    """Stands for a value upstream's format check turned into an exception object: equal to nothing."""

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


def _fmt(fmt: str, out: str | None = None) -> Callable[[Any], Any]:
    def norm(value: Any) -> Any:
        if not isinstance(value, str):
            return _Unparseable()
        parts = value.strip().split("-")
        if len(parts) == 3 and len(parts[0]) != 4:
            parts[0] = parts[0].zfill(4)
        try:
            return dt.datetime.strptime("-".join(parts), fmt).strftime(out or fmt)
        except ValueError:
            return _Unparseable()

    return norm


def _history_date(value: Any) -> Any:
    """QueryHistoryToday: %Y-%m-%d or %m-%d, compared as %m-%d."""
    full = _fmt("%Y-%m-%d", "%m-%d")(value)
    if not isinstance(full, _Unparseable):
        return full
    return _fmt("%m-%d")(value)


def _strip(v: Any) -> Any:
    return v.strip() if isinstance(v, str) else v


def _lower_strip(v: Any) -> Any:
    return v.strip().lower() if isinstance(v, str) else v


def _upper_strip(v: Any) -> Any:
    return v.upper().strip() if isinstance(v, str) else v


def _no_spaces(v: Any) -> Any:
    return v.replace(" ", "") if isinstance(v, str) else v


def _keyword(v: Any) -> Any:
    return v.replace("_", " ").strip().lower() if isinstance(v, str) else v


def _devices(v: Any) -> Any:
    if not isinstance(v, list):
        return _Unparseable()
    out = []
    for d in v:
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not isinstance(d.get("description"), str):
            return _Unparseable()
        out.append({**d, "name": d["name"].strip().lower(), "description": d["description"].strip()})
    return sorted(out, key=lambda d: d["name"])


def _health_data(v: Any) -> Any:
    if not isinstance(v, list) or not all(isinstance(d, dict) and "name" in d and "value" in d for d in v):
        return _Unparseable()
    return sorted(({"name": str(d["name"]), "value": str(d["value"])} for d in v), key=str)


def _opt_lower(v: Any) -> Any:
    return v.lower() if isinstance(v, str) else v


_DATE = _fmt("%Y-%m-%d")
_DATETIME = _fmt("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class _Rule:
    """How one API's inputs are compared: per-field normalisers and fuzzy text fields."""

    norms: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    jaccard: Mapping[str, bool] = field(default_factory=dict)  # field -> lower-case before splitting
    # Delete* APIs: when the gold call succeeded only these fields (plus the token) are compared.
    on_success_only: tuple[str, ...] | None = None
    accept_any: bool = False
    keyword_jaccard: str | None = None


_AGENDA = _Rule(jaccard={"content": False})
_REMINDER = _Rule(jaccard={"content": True})
_MEETING = _Rule(jaccard={"meeting_topic": False})
_SCENE = _Rule(norms={"name": _lower_strip, "devices": _devices})

RULES: Mapping[str, _Rule] = {
    "AddAgenda": _AGENDA,
    "ModifyAgenda": _AGENDA,
    "QueryAgenda": _AGENDA,
    "DeleteAgenda": _Rule(on_success_only=("token", "time")),
    "AddReminder": _REMINDER,
    "ModifyReminder": _REMINDER,
    "QueryReminder": _REMINDER,
    "DeleteReminder": _Rule(on_success_only=("token", "time")),
    "AddMeeting": _MEETING,
    "ModifyMeeting": _MEETING,
    "QueryMeeting": _MEETING,
    "DeleteMeeting": _Rule(on_success_only=("token", "start_time")),
    "AddScene": _SCENE,
    "ModifyScene": _SCENE,
    "DeleteScene": _Rule(norms={"name": _lower_strip}),
    "QueryScene": _Rule(norms={"name": _lower_strip}),
    "TimedSwitch": _Rule(norms={"name": _lower_strip, "time": _DATETIME}),
    "CancelTimedSwitch": _Rule(norms={"name": _lower_strip, "time": _DATETIME}),
    "AppointmentRegistration": _Rule(norms={"patient_name": _strip, "date": _DATE, "doctor_name": _strip}),
    "QueryRegistration": _Rule(norms={"patient_name": _strip, "date": _DATE}),
    "ModifyRegistration": _Rule(
        norms={"appointment_id": _strip, "new_appointment_date": _DATE, "new_appointment_doctor": _strip}
    ),
    "CancelRegistration": _Rule(norms={"appointment_id": _strip}),
    "QueryHealthData": _Rule(norms={"user_id": _upper_strip, "start_time": _DATETIME, "end_time": _DATETIME}),
    "RecordHealthData": _Rule(norms={"user_id": _upper_strip, "time": _DATETIME, "health_data": _health_data}),
    "QueryStock": _Rule(norms={"stock_code": _upper_strip, "date": _DATE}),
    "QueryBalance": _Rule(norms={"token": _strip}),
    "QueryHistoryToday": _Rule(norms={"date": _history_date}),
    "EmergencyKnowledge": _Rule(norms={"symptom": _lower_strip}),
    "SymptomSearch": _Rule(norms={"symptom": _lower_strip}),
    "DocumentQA": _Rule(norms={"url": _strip, "question": _strip}),
    "SendEmail": _Rule(norms={"receiver": _lower_strip, "subject": _strip, "content": _strip}),
    "Calculator": _Rule(norms={"formula": _no_spaces}),
    "PlayMusic": _Rule(norms={"music_name": _lower_strip}),
    "Wiki": _Rule(norms={"keyword": _keyword}),
    "Dictionary": _Rule(norms={"keyword": _keyword}),
    "SearchEngine": _Rule(norms={"keyword": _lower_strip}),
    "Translate": _Rule(norms={"src_lang": _opt_lower, "tgt_lang": _opt_lower}),
    "GetToday": _Rule(accept_any=True),
    "ToolSearcher": _Rule(keyword_jaccard="keywords"),
}
"""Input rules by API; an API not listed compares its inputs exactly (upstream's default rule)."""


def _word_jaccard(a: Any, b: Any, lower: bool) -> float:
    if not isinstance(a, str) or not isinstance(b, str):
        return 0.0
    if lower:
        a, b = a.lower(), b.lower()
    sa, sb = set(a.split(" ")), set(b.split(" "))
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def judge_call(call: ApiCall, gold: GoldCall) -> ApiJudgement:
    """Whether a parsed call counts as the gold call under API-Bank's rules (replaying the gold result)."""
    if call.name != gold.name:
        return ApiJudgement(False, "api_name_mismatch", f"{call.name} vs {gold.name}")
    rule = RULES.get(gold.name, _Rule())
    if rule.accept_any:
        return ApiJudgement(True, "correct")
    aliases = _ALIASES.get(gold.name)
    if aliases:
        call = ApiCall(call.name, {aliases.get(k, k): v for k, v in call.args.items()})
        gold = replace(gold, args={aliases.get(k, k): v for k, v in gold.args.items()})
    unknown = sorted(set(call.args) - set(gold.parameters))
    if unknown:
        return ApiJudgement(False, "invalid_parameter_name", ", ".join(unknown))
    missing = [p for p in gold.required_params() if p not in call.args]
    if missing:
        return ApiJudgement(False, "missing_argument", ", ".join(missing))
    try:
        pred = {k: _coerce(v, gold.parameters.get(k, "str")) for k, v in call.args.items()}
    except _BadType:
        return ApiJudgement(False, "invalid_parameter_type")
    try:
        ref = {k: _coerce(v, gold.parameters.get(k, "str")) for k, v in gold.args.items()}
    except _BadType:
        raise CheckFailure(VerdictErrorKind.TASK_ERROR, "gold arguments do not match their declared types") from None

    if rule.keyword_jaccard is not None:
        key = rule.keyword_jaccard
        ok = _word_jaccard(pred.get(key), ref.get(key), lower=True) > 0.5
        return ApiJudgement(ok, "correct" if ok else "input_mismatch", key)

    fields: set[str] = set(pred) | set(ref)
    if rule.on_success_only is not None and gold.exception is None and gold.output == "success":
        fields = set(rule.on_success_only)
    for name in sorted(fields):
        a, b = pred.get(name), ref.get(name)
        if name in rule.jaccard:
            if _word_jaccard(a, b, rule.jaccard[name]) <= 0.5:
                return ApiJudgement(False, "input_mismatch", name)
            continue
        norm = rule.norms.get(name)
        if norm is not None and a is not None and b is not None:
            a, b = norm(a), norm(b)
        if a != b:
            return ApiJudgement(False, "input_mismatch", name)
    return ApiJudgement(True, "correct")


def check_api_bank(response: str, gold: Mapping[str, Any], threshold: float) -> Verdict:
    """R_agent for an API-Bank call: 1 when the first request in the response matches the gold call."""
    gold_call = GoldCall.from_payload(gold)
    call = parse_api_request(response)
    judgement = judge_call(call, gold_call)
    details: dict[str, Any] = {"api_name": call.name, "reason": judgement.reason}
    if judgement.detail:
        details["detail"] = judgement.detail
    return valid_verdict(1.0 if judgement.correct else 0.0, threshold, details)
