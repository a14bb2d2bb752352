"""The state machines, exhaustively: every (state, target) pair and every (state, action) pair of runs, experiments
and jobs, written out here independently of genenv.lifecycle; and the derived status sets."""

from __future__ import annotations

import itertools

import pytest

from genenv.contracts.adapters import JobStatus as J
from genenv.contracts.errors import ConflictError
from genenv.contracts.experiments import ExperimentStatus as X
from genenv.contracts.runs import RunStatus as S
from genenv.lifecycle import EXPERIMENT, JOB, JOB_FINISHED, RUN, RUN_AT_REST, RUN_FINISHED, RUN_LIVE, StateMachine

ACTIONS, TERMINAL, TRANSITIONS = RUN.actions, RUN.terminal, RUN.transitions
can_transition, check_transition, action_target = RUN.can, RUN.check, RUN.action_target

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


def test_run_sets() -> None:
    assert RUN_FINISHED == TERMINAL
    assert frozenset({S.RUNNING, S.PAUSED}) == RUN_LIVE
    assert frozenset(S) - {S.RUNNING} == RUN_AT_REST


EXPERIMENT_LEGAL = {(X.CREATED, X.RUNNING), (X.CREATED, X.CANCELLED), (X.RUNNING, X.CANCELLED)}
JOB_LEGAL = {
    (J.PENDING, J.RUNNING), (J.PENDING, J.DONE), (J.PENDING, J.FAILED),
    (J.RUNNING, J.RUNNING), (J.RUNNING, J.DONE), (J.RUNNING, J.SKIPPED), (J.RUNNING, J.FAILED),
    (J.FAILED, J.RUNNING), (J.FAILED, J.FAILED),
}


@pytest.mark.parametrize(("machine", "legal"), [(EXPERIMENT, EXPERIMENT_LEGAL), (JOB, JOB_LEGAL)],
                         ids=["experiment", "job"])
def test_other_tables(machine: StateMachine, legal: set) -> None:  # type: ignore[type-arg]
    states = list(machine.transitions)
    for current, target in itertools.product(states, states):
        assert machine.can(current, target) is ((current, target) in legal)
        if (current, target) not in legal:
            with pytest.raises(ConflictError, match=f"a {current.value} {machine.entity} cannot become"):
                machine.check(current, target)
    for target in states:
        assert machine.sources(target) == {c for c, t in legal if t == target}


def test_experiment_actions_and_job_sets() -> None:
    assert EXPERIMENT.action_target(X.CREATED, "start") is X.RUNNING
    assert EXPERIMENT.action_target(X.RUNNING, "cancel") is X.CANCELLED
    with pytest.raises(ConflictError, match="cannot cancel a completed experiment"):
        EXPERIMENT.action_target(X.COMPLETED, "cancel")
    assert frozenset({J.DONE, J.SKIPPED}) == JOB_FINISHED
