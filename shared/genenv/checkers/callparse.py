"""Parse a model's function-call output into calls — literal values only, never ``eval``/``exec``.

Accepted forms (after stripping surrounding whitespace, a Markdown code fence or ``<TOOLCALL>`` tags):

- Python call syntax as BFCL prompts for it: ``[f(a=1, b='x'), mod.g(c=[1, 2])]`` or a bare ``f(a=1)``. Parsed
  with ``ast.parse(mode="eval")`` and resolved like BFCL's ``default_decode_ast_prompting``: constants, negative
  numbers, lists, tuples, dicts, bare names (read as strings), calls without keywords (read as their source
  text), calls with keywords (read as nested ``{name: {args}}``), subscripts (read as source text). Arithmetic
  (``3 * 10 ** 8``) is folded on numeric/string literals only — BFCL ``eval``s it, which would run any code.
- JSON: a list (or one object) of BFCL-style ``{name: {args}}``, ``{"name": .., "arguments"|"parameters": ..}``,
  BFCL's JSON output format ``{"function": name, "parameters": {..}}``, OpenAI ``tool_calls`` entries
  ``{"type": "function", "function": {"name": .., "arguments": "<json>"}}`` or a message ``{"tool_calls": [..]}``.
- Hermes/Qwen ``<tool_call>{"name": .., "arguments": {..}}</tool_call>`` blocks.

Positional arguments are kept apart (``Call.positional``): BFCL's decoder drops them, so the AST checker ignores
them too (``f(5)`` lacks its keyword and fails), while the multi-turn executor passes them on.

Failures raise :class:`~genenv.checkers.base.CheckFailure`: ``too_large`` beyond the size limit, ``parse_error``
for text that is neither JSON nor Python (``truncated`` in the message when the text just stops), and
``schema_error`` for well-formed text of the wrong shape (``[1, 2]``, ``{"foo": 1}``).

Known differences from BFCL's decoder, all on inputs a model rarely writes: BFCL reads ``+x``, ``not x`` and
``~x`` as ``-x`` (we read ``+x`` as ``x`` and reject the others); BFCL keeps a ``**kwargs`` argument under the key
``None`` and a call on a non-name (``f()(a=1)``) under the name ``""`` (we reject both); BFCL fails on code
fences with a language tag, JSON and ``<tool_call>`` tags in its Python mode (we accept them).
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from typing import Any, NamedTuple

from genenv.checkers.base import DEFAULT_MAX_RESPONSE_CHARS, CheckFailure
from genenv.contracts.rollouts import VerdictErrorKind

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_TOOLCALL_TAG = re.compile(r"<TOOLCALL>(.*?)</TOOLCALL>", re.DOTALL)
_MAX_POW_EXPONENT = 256
_MAX_FOLDED_STR = 10_000


class Call(NamedTuple):
    """One function call: its (possibly dotted) name, keyword arguments and positional arguments."""

    name: str
    args: dict[str, Any]
    positional: tuple[Any, ...] = ()

    def as_bfcl(self) -> dict[str, dict[str, Any]]:
        """The ``{name: {args}}`` form BFCL's checker takes."""
        return {self.name: self.args}


def _parse_error(message: str) -> CheckFailure:
    return CheckFailure(VerdictErrorKind.PARSE_ERROR, message)


def _schema_error(message: str) -> CheckFailure:
    return CheckFailure(VerdictErrorKind.SCHEMA_ERROR, message)


def parse_calls(text: str, *, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> list[Call]:
    """All calls in a response (``[]`` for an explicit empty list); raises CheckFailure when it is not calls."""
    if len(text) > max_chars:
        raise CheckFailure(VerdictErrorKind.TOO_LARGE, f"response has {len(text)} characters (limit {max_chars})")
    s = text.strip()
    if not s:
        raise _parse_error("empty response")
    if "<tool_call>" in s:
        return _parse_tool_call_blocks(s)
    if "<TOOLCALL>" in s:
        match = _TOOLCALL_TAG.search(s)
        if match is None:
            raise _parse_error("unclosed <TOOLCALL> tag (truncated)")
        s = match.group(1).strip()
    if s.startswith("```"):
        s = _strip_fence(s)
    if not s:
        raise _parse_error("empty response")
    head = s[0]
    if head == "{" or (head == "[" and _looks_like_json_list(s)):
        try:
            obj = json.loads(s)
        except RecursionError:
            raise _parse_error("JSON nested too deeply") from None
        except json.JSONDecodeError as exc:
            if head == "[" and exc.pos == 1:
                return _parse_python(s)
            return _from_python_literal(s, exc)
        return _from_json(obj)
    return _parse_python(s)


def _looks_like_json_list(s: str) -> bool:
    """``[{...}]`` or ``[]`` is JSON-shaped; ``[f(x=1)]`` is Python."""
    rest = s[1:].lstrip()
    return rest[:1] in ("{", "]")


def _strip_fence(s: str) -> str:
    """Drop a Markdown fence (with or without a language tag) around the payload."""
    first_newline = s.find("\n")
    if first_newline == -1:
        return s.strip("`").strip()
    body = s[first_newline + 1 :]
    end = body.rfind("```")
    if end != -1:
        body = body[:end]
    return body.strip()


def _parse_tool_call_blocks(s: str) -> list[Call]:
    calls: list[Call] = []
    for block in _TOOL_CALL_BLOCK.findall(s):
        try:
            obj = json.loads(block)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise _parse_error(f"<tool_call> block is not JSON: {exc}") from None
        calls.extend(_from_json(obj))
    return calls


def _from_python_literal(s: str, exc: json.JSONDecodeError) -> list[Call]:
    """``{'name': 'f', 'arguments': {...}}`` written with Python quotes: a literal, still not evaluated."""
    try:
        tree = ast.parse(s, mode="eval")
        obj = _literal(tree.body)
    except (SyntaxError, ValueError, RecursionError, MemoryError, CheckFailure):
        truncated = exc.pos >= len(s) - 1
        raise _parse_error(f"{'truncated' if truncated else 'invalid'} JSON: {exc.msg} at {exc.pos}") from None
    return _from_json(obj)


def _from_json(obj: Any) -> list[Call]:
    if isinstance(obj, list):
        calls: list[Call] = []
        for item in obj:
            calls.extend(_from_json_item(item))
        return calls
    return _from_json_item(obj)


def _from_json_item(item: Any) -> list[Call]:
    if not isinstance(item, dict) or not item:
        raise _schema_error(f"expected a function-call object, got {_short(item)}")
    tool_calls = item.get("tool_calls")
    if isinstance(tool_calls, list):
        return _from_json(tool_calls)
    fn = item.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return [_named(fn["name"], fn.get("arguments", fn.get("parameters")))]
    if isinstance(fn, str) and len(item) <= 2 and ("parameters" in item or "arguments" in item):
        return [_named(fn, item.get("parameters", item.get("arguments")))]
    name = item.get("name")
    if isinstance(name, str) and len(item) <= 3:
        for key in ("arguments", "parameters", "args"):
            if key in item:
                return [_named(name, item[key])]
    if len(item) == 1:
        ((name, args),) = item.items()
        if isinstance(args, dict):
            return [_named(name, args)]
    raise _schema_error(f"expected a function-call object, got {_short(item)}")


def _named(name: Any, args: Any) -> Call:
    if not isinstance(name, str) or not name:
        raise _schema_error("function name must be a non-empty string")
    if args is None:
        args = {}
    elif isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            raise _parse_error(f"arguments of {name!r} are not valid JSON") from None
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise _schema_error(f"arguments of {name!r} must be an object with string keys")
    return Call(name, args)


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


# --- Python call syntax ------------------------------------------------------------------------------------------


def _parse_python(s: str) -> list[Call]:
    # Same wrapping as BFCL's default_decode_ast_prompting, so bare `f(a=1)` and `[f(a=1)]` both parse.
    s = s.strip("`\n ")
    if not s.startswith("["):
        s = "[" + s
    if not s.endswith("]"):
        s = s + "]"
    s = s.strip().strip("'")
    fast = _fast_parse(s)
    if fast is not None:
        return fast
    try:
        tree = ast.parse(s, mode="eval")
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        last_line = s.rsplit("\n", 1)[-1]
        at_end = exc.lineno == s.count("\n") + 1 and (exc.offset or 0) >= len(last_line)
        truncated = "(" in s and (at_end or "never closed" in msg or "unexpected EOF" in msg)
        raise _parse_error(f"{'truncated' if truncated else 'not a function call'}: {msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise _parse_error(f"not a function call: {type(exc).__name__}") from None
    body = tree.body
    if type(body) is ast.Call:
        return [_call(body)]
    if type(body) is not ast.List:
        raise _schema_error("expected a list of function calls")
    calls = []
    for elt in body.elts:
        if type(elt) is not ast.Call:
            raise _schema_error(f"expected a function call, got {type(elt).__name__.lower()}")
        calls.append(_call(elt))
    return calls


def _call_name(node: ast.expr) -> str:
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        raise _schema_error("function name must be a dotted identifier")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call) -> Call:
    name = _call_name(node.func)
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise _schema_error(f"**kwargs are not accepted in a call to {name!r}")
        args[kw.arg] = _literal(kw.value)
    positional = tuple(_literal(a) for a in node.args) if node.args else ()
    return Call(name, args, positional)


def _literal(node: ast.expr) -> Any:
    """A literal value from an argument expression (BFCL's resolve_ast_by_type without its eval)."""
    t = type(node)
    if t is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
        return "..." if value is Ellipsis else value
    if t is ast.List:
        return [_literal(e) for e in node.elts]  # type: ignore[attr-defined]
    if t is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if t is ast.UnaryOp:
        return _unary(node)  # type: ignore[arg-type]
    if t is ast.Dict:
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):  # type: ignore[attr-defined]
            if k is None:
                raise _schema_error("dict unpacking (**) is not a literal")
            key = _literal(k)
            try:
                out[key] = _literal(v)
            except TypeError:
                raise _schema_error(f"dict key {_short(key)} is not hashable") from None
        return out
    if t is ast.Tuple:
        return tuple(_literal(e) for e in node.elts)  # type: ignore[attr-defined]
    if t is ast.Call:
        if not node.keywords:  # type: ignore[attr-defined]
            return ast.unparse(node)
        nested = _call(node)  # type: ignore[arg-type]
        return {nested.name: nested.args}
    if t is ast.BinOp:
        return _fold(node)  # type: ignore[arg-type]
    if t is ast.Subscript:
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"  # type: ignore[attr-defined]
    raise _schema_error(f"argument is not a literal ({t.__name__})")


_NUMBER = (int, float, complex)


def _is_number(v: Any) -> bool:
    return type(v) in _NUMBER


def _unary(node: ast.UnaryOp) -> Any:
    operand = _literal(node.operand)
    if not _is_number(operand):
        raise _schema_error("unary operator on a non-number")
    if type(node.op) is ast.USub:
        return -operand
    if type(node.op) is ast.UAdd:
        return operand
    raise _schema_error(f"operator {type(node.op).__name__} is not accepted in a literal")


def _fold(node: ast.BinOp) -> Any:
    """Constant-fold arithmetic on literals (bounded so a response cannot make us build huge numbers)."""
    left, right = _literal(node.left), _literal(node.right)
    op = type(node.op)
    try:
        if _is_number(left) and _is_number(right):
            if op is ast.Add:
                return left + right
            if op is ast.Sub:
                return left - right
            if op is ast.Mult:
                return left * right
            if op is ast.Div:
                return left / right
            if op is ast.FloorDiv:
                return left // right
            if op is ast.Mod:
                return left % right
            if op is ast.Pow:
                if type(right) is not complex and abs(right) > _MAX_POW_EXPONENT:
                    raise _schema_error("exponent too large")
                if type(left) is int and abs(left) > 2**64:
                    raise _schema_error("power base too large")
                result = left**right
                if type(result) is float and not math.isfinite(result):
                    raise _schema_error("arithmetic overflow")
                return result
        if op is ast.Add and type(left) is str and type(right) is str:
            return left + right
        if op is ast.Mult and {type(left), type(right)} == {str, int}:
            times = left if type(left) is int else right
            text = right if type(left) is int else left
            if len(text) * max(times, 0) > _MAX_FOLDED_STR:
                raise _schema_error("repeated string too long")
            return text * times
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:
        raise _schema_error(f"arithmetic in an argument failed: {type(exc).__name__}") from None
    raise _schema_error(f"operator {op.__name__} is not accepted on these operands")


# --- fast path ------------------------------------------------------------------------------------------------
# Most responses are plain `[f(a=1, b='x', c=[1.5, -2], d={'k': True})]`. Tokenising those with one C-level
# regex scan and a small recursive descent is about twice as fast as ast.parse. The fast path accepts only a
# strict subset of Python (ASCII names, quote-only strings without escapes, plain decimal numbers, lists,
# dicts, negative numbers); on anything else it gives up and ast.parse decides, so results are identical by
# construction (and tested against the ast path on every BFCL response and on generated literals).

_TOKEN = re.compile(
    r"""[ \t\n\r\f]*('[^'\\\n\r\x00\ud800-\udfff]*'|"[^"\\\n\r\x00\ud800-\udfff]*"|"""
    r"""(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?|[A-Za-z_][A-Za-z0-9_]*|.)""",
    re.DOTALL,
)
_PLAIN_INT = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NUMBER_START = frozenset("0123456789.")
_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}
_KEYWORDS = frozenset(keyword.kwlist)


class _GiveUp(Exception):
    """The fast path does not handle this input; ast.parse will."""


def _fast_parse(s: str) -> list[Call] | None:
    toks = _TOKEN.findall(s)
    try:
        if toks[0] != "[":
            return None
        calls: list[Call] = []
        i = 1
        if toks[i] == "]":
            return None  # empty lists are decided by the JSON path
        while True:
            call, i = _fast_call(toks, i)
            calls.append(call)
            t = toks[i]
            if t == ",":
                i += 1
                if toks[i] == "]":
                    i += 1
                    break
            elif t == "]":
                i += 1
                break
            else:
                return None
        return calls if i == len(toks) else None
    except (_GiveUp, IndexError, ValueError, TypeError):
        return None


def _fast_name(t: str) -> str:
    if t[0] not in _NAME_START or t in _KEYWORDS:
        raise _GiveUp
    return t


def _fast_call(toks: list[str], i: int) -> tuple[Call, int]:
    name = _fast_name(toks[i])
    i += 1
    while toks[i] == ".":
        name += "." + _fast_name(toks[i + 1])
        i += 2
    if toks[i] != "(":
        raise _GiveUp
    i += 1
    args: dict[str, Any] = {}
    positional: list[Any] = []
    if toks[i] == ")":
        return Call(name, args), i + 1
    while True:
        t = toks[i]
        if toks[i + 1] == "=" and toks[i + 2] != "=":
            if _fast_name(t) in args:
                raise _GiveUp  # repeated keyword: a SyntaxError, let ast report it
            args[t], i = _fast_value(toks, i + 2)
        else:
            if args:
                raise _GiveUp  # positional after keyword
            value, i = _fast_value(toks, i)
            positional.append(value)
        t = toks[i]
        if t == ",":
            i += 1
            if toks[i] == ")":
                break
        elif t != ")":
            raise _GiveUp
        else:
            break
    return Call(name, args, tuple(positional)), i + 1


def _fast_value(toks: list[str], i: int) -> tuple[Any, int]:
    t = toks[i]
    c = t[0]
    if (c == "'" or c == '"') and len(t) > 1:
        return t[1:-1], i + 1
    if c in _NUMBER_START and t != ".":
        return _fast_number(t), i + 1
    if c in _NAME_START:
        if toks[i + 1] in ("(", ".", "[") or (t in _KEYWORDS and t not in _CONSTANTS):
            raise _GiveUp
        return _CONSTANTS.get(t, t), i + 1
    if c == "-":
        n = toks[i + 1]
        if n[0] in _NUMBER_START and n != ".":
            return -_fast_number(n), i + 2
        raise _GiveUp
    if c == "[":
        out: list[Any] = []
        i += 1
        if toks[i] == "]":
            return out, i + 1
        while True:
            value, i = _fast_value(toks, i)
            out.append(value)
            t = toks[i]
            if t == ",":
                i += 1
                if toks[i] == "]":
                    return out, i + 1
            elif t == "]":
                return out, i + 1
            else:
                raise _GiveUp
    if c == "{":
        obj: dict[Any, Any] = {}
        i += 1
        if toks[i] == "}":
            return obj, i + 1
        while True:
            key, i = _fast_value(toks, i)
            if toks[i] != ":":
                raise _GiveUp
            obj[key], i = _fast_value(toks, i + 1)
            t = toks[i]
            if t == ",":
                i += 1
                if toks[i] == "}":
                    return obj, i + 1
            elif t == "}":
                return obj, i + 1
            else:
                raise _GiveUp
    raise _GiveUp


def _fast_number(t: str) -> int | float:
    if "." in t or "e" in t or "E" in t:
        return float(t)
    if _PLAIN_INT.match(t) is None:
        raise _GiveUp  # leading zeros: ast decides
    return int(t)
