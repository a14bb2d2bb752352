"""The run state machine: created → running ⇄ paused → completed | failed | cancelled. Pure code."""

from __future__ import annotations

from genenv.contracts.errors import ConflictError
from genenv.contracts.runs import RunAction, RunStatus

S = RunStatus

TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    S.CREATED: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.PAUSED, S.COMPLETED, S.FAILED, S.CANCELLED}),
    # A paused run can fail (e.g. its adapters vanished) but only completes after being resumed.
    S.PAUSED: frozenset({S.RUNNING, S.FAILED, S.CANCELLED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}
"""Every legal edge. Terminal states have none."""

ACTIONS: dict[str, tuple[frozenset[RunStatus], RunStatus]] = {
    "start": (frozenset({S.CREATED}), S.RUNNING),
    "pause": (frozenset({S.RUNNING}), S.PAUSED),
    "resume": (frozenset({S.PAUSED}), S.RUNNING),
    "cancel": (frozenset({S.CREATED, S.RUNNING, S.PAUSED}), S.CANCELLED),
}
"""User actions (the control plane's POST /v1/runs/{id}/<action>): allowed sources and the target."""

TERMINAL: frozenset[RunStatus] = frozenset(s for s, targets in TRANSITIONS.items() if not targets)


def can_transition(current: RunStatus, target: RunStatus) -> bool:
    """Whether ``current → target`` is a legal edge."""
    return target in TRANSITIONS[current]


def check_transition(current: RunStatus, target: RunStatus) -> None:
    """Raise ConflictError (409) unless ``current → target`` is legal."""
    if not can_transition(current, target):
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none (terminal)"
        raise ConflictError(
            f"a {current.value} run cannot become {target.value}; allowed next states: {allowed}",
            code="illegal_transition",
        )


def action_target(current: RunStatus, action: RunAction) -> RunStatus:
    """The status ``action`` moves a run in ``current`` to; ConflictError (409) if not allowed from there."""
    sources, target = ACTIONS[action]
    if current not in sources:
        allowed = ", ".join(sorted(s.value for s in sources))
        raise ConflictError(
            f"cannot {action} a {current.value} run; {action} is allowed only from: {allowed}",
            code="illegal_transition",
        )
    return target
