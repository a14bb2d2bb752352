"""ALFWorld actions: exact match of the canonical action string against the expert action.

Canonical form: lower-case, whitespace collapsed, surrounding quotes/backticks and a trailing period removed, and
the pre-2.1.2 wording ``put X in/on Y`` rewritten to the ``move X to Y`` the game files (alfworld ≥ 0.4.2)
accept — both name the same PDDL action, and ReAct-style prompts still use the old wording.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from genenv.checkers.base import DEFAULT_MAX_RESPONSE_CHARS, CheckFailure, valid_verdict
from genenv.contracts.rollouts import Verdict, VerdictErrorKind

MAX_ACTION_CHARS = 200
"""A reply line longer than this is not an ALFWorld command."""

VERBS = frozenset(
    {
        "go",
        "take",
        "move",
        "put",
        "open",
        "close",
        "clean",
        "heat",
        "cool",
        "use",
        "slice",
        "look",
        "inventory",
        "examine",
        "help",
    }
)
"""First words of ALFWorld's command grammar (``put`` is the older spelling of ``move``)."""

_PREFIX = re.compile(r"^(?:>\s*|(?:next\s+)?action\s*[:：]\s*|act\s*[:：]\s*)+", re.IGNORECASE)
_PUT = re.compile(r"^put (.+?) (?:in|on|in/on|into|onto) (.+)$")


def canonical_action(text: str) -> str:
    """The canonical command string used for exact matching."""
    s = " ".join(text.strip().lower().split())
    s = s.strip("`'\" ").rstrip(".").strip()
    put = _PUT.match(s)
    if put is not None:
        s = f"move {put.group(1)} to {put.group(2)}"
    return s


def extract_action(response: str, *, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> str:
    """The command in a reply: the first line that is not a ``think:`` line, without an ``Action:`` prefix."""
    if len(response) > max_chars:
        raise CheckFailure(VerdictErrorKind.TOO_LARGE, f"response has {len(response)} characters (limit {max_chars})")
    for raw in response.splitlines():
        line = _PREFIX.sub("", raw.strip()).strip()
        if not line or line.lower().startswith("think:"):
            continue
        if len(line) > MAX_ACTION_CHARS:
            raise CheckFailure(VerdictErrorKind.PARSE_ERROR, f"action line longer than {MAX_ACTION_CHARS} characters")
        action = canonical_action(line)
        if not action or action.split(" ", 1)[0] not in VERBS:
            raise CheckFailure(VerdictErrorKind.PARSE_ERROR, f"not an ALFWorld command: {line[:80]!r}")
        return action
    raise CheckFailure(VerdictErrorKind.PARSE_ERROR, "no action in the reply")


def check_action(
    response: str, expert_action: str, threshold: float, admissible: Sequence[str] | None = None
) -> Verdict:
    """R_agent for one ALFWorld step: 1 iff the canonical action equals the canonical expert action."""
    expert = canonical_action(expert_action)
    if not expert:
        raise CheckFailure(VerdictErrorKind.TASK_ERROR, "task has an empty expert action")
    action = extract_action(response)
    details: dict[str, object] = {"action": action, "expert": expert}
    if admissible is not None:
        details["admissible"] = action in {canonical_action(a) for a in admissible}
    return valid_verdict(1.0 if action == expert else 0.0, threshold, details)
