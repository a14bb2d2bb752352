"""The run state machine, exhaustively: every (state, target) pair and every (state, action) pair."""

from __future__ import annotations

import itertools

import pytest

from genenv.contracts.errors import ConflictError
from genenv.contracts.runs import RunStatus as S
from genenv.runs_state import ACTIONS, TERMINAL, TRANSITIONS, action_target, can_transition, check_transition

LEGAL = {
    (S.CREATED, S.RUNNING),
    (S.CREATED, S.CANCELLED),
    (S.RUNNING, S.PAUSED),
    (S.RUNNING, S.COMPLETED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.CANCELLED),
    (S.PAUSED, S.RUNNING),
    (S.PAUSED, S.FAILED),
    (S.PAUSED, S.CANCELLED),
}
ACTION_RESULTS = {
    ("start", S.CREATED): S.RUNNING,
    ("pause", S.RUNNING): S.PAUSED,
    ("resume", S.PAUSED): S.RUNNING,
    ("cancel", S.CREATED): S.CANCELLED,
    ("cancel", S.RUNNING): S.CANCELLED,
    ("cancel", S.PAUSED): S.CANCELLED,
}


def test_every_status_has_an_entry() -> None:
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_transition_table(current: S, target: S) -> None:
    legal = (current, target) in LEGAL
    assert can_transition(current, target) is legal
    if legal:
        check_transition(current, target)
    else:
        with pytest.raises(ConflictError) as info:
            check_transition(current, target)
        assert info.value.status_code == 409
        assert info.value.code == "illegal_transition"
        assert current.value in info.value.message and target.value in info.value.message


@pytest.mark.parametrize(("action", "current"), list(itertools.product(ACTIONS, S)))
def test_actions(action: str, current: S) -> None:
    expected = ACTION_RESULTS.get((action, current))
    if expected is None:
        with pytest.raises(ConflictError) as info:
            action_target(current, action)  # type: ignore[arg-type]
        assert f"cannot {action} a {current.value} run" in info.value.message
    else:
        assert action_target(current, action) is expected  # type: ignore[arg-type]
        assert can_transition(current, expected), "an action must follow a legal edge"


def test_terminal_states_have_no_exit_and_are_reachable_from_everywhere() -> None:
    assert frozenset({S.COMPLETED, S.FAILED, S.CANCELLED}) == TERMINAL
    for start in S:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert seen & TERMINAL, f"{start} cannot reach a terminal state"


def test_no_self_loops() -> None:
    assert all(s not in TRANSITIONS[s] for s in S)
