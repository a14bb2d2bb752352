"""The shared checker machinery: verdict invariants, failure kinds, the one-watchdog time limit."""

from __future__ import annotations

import threading
import time

import pytest

from genenv.checkers.base import (
    CheckFailure,
    apply_threshold,
    checker_time_limit,
    current_time_limit,
    invalid_verdict,
    run_checker,
    valid_verdict,
)
from genenv.contracts.rollouts import Verdict, VerdictErrorKind


def _spin() -> Verdict:
    while True:
        pass


def test_valid_and_invalid_verdicts_keep_their_invariants():
    v = valid_verdict(0.5, 0.5, {"f1": 0.5})
    assert v.valid and v.score == 0.5 and v.success and v.error is None
    assert not valid_verdict(0.49, 0.5).success
    bad = invalid_verdict(VerdictErrorKind.PARSE_ERROR, "not JSON")
    assert not bad.valid and bad.score is None and not bad.success and bad.error.kind is VerdictErrorKind.PARSE_ERROR


def test_apply_threshold_recomputes_success_and_leaves_invalid_alone():
    v = valid_verdict(0.6, 1.0)
    assert not v.success and apply_threshold(v, 0.5).success
    bad = invalid_verdict(VerdictErrorKind.TIMEOUT, "slow")
    assert apply_threshold(bad, 0.1) is bad


@pytest.mark.parametrize("kind", [VerdictErrorKind.PARSE_ERROR, VerdictErrorKind.SCHEMA_ERROR])
def test_a_reply_that_does_not_parse_is_a_wrong_answer_scored_zero(kind: VerdictErrorKind) -> None:
    """METHOD.md Eq. 1: the agent's own malformed reply is R_agent = 0, valid, counted in p̂ and in GRPO."""
    def fail() -> Verdict:
        raise CheckFailure(kind, "wrong shape")

    v = run_checker(fail)
    assert v.valid and v.score == 0.0 and not v.success and v.error is None
    assert v.form_error is not None and v.form_error.kind is kind and v.form_error.message == "wrong shape"


@pytest.mark.parametrize("kind", [VerdictErrorKind.TASK_ERROR, VerdictErrorKind.TOO_LARGE])
def test_a_failure_that_is_not_the_agents_is_invalid_never_a_zero(kind: VerdictErrorKind) -> None:
    def fail() -> Verdict:
        raise CheckFailure(kind, "not the agent's fault")

    v = run_checker(fail)
    assert not v.valid and v.score is None and v.form_error is None
    assert v.error.kind is kind and v.error.message == "not the agent's fault"


def test_an_exception_in_a_checker_is_a_checker_error():
    def boom() -> Verdict:
        raise KeyError("x")

    v = run_checker(boom)
    assert v.error.kind is VerdictErrorKind.CHECKER_ERROR and "KeyError" in v.error.message


def test_recursion_is_contained():
    def deep(n: int = 0) -> Verdict:
        return deep(n + 1)

    assert run_checker(deep).error.kind is VerdictErrorKind.CHECKER_ERROR


def test_a_spinning_checker_is_stopped_at_its_limit():
    started = time.perf_counter()
    v = run_checker(_spin, time_limit_s=0.1)
    elapsed = time.perf_counter() - started
    assert v.error.kind is VerdictErrorKind.TIMEOUT
    assert 0.1 <= elapsed < 2.0


def test_a_timeout_cannot_be_swallowed_by_except_exception():
    def stubborn() -> Verdict:
        while True:
            try:
                while True:
                    pass
            except Exception:
                continue

    assert run_checker(stubborn, time_limit_s=0.05).error.kind is VerdictErrorKind.TIMEOUT


def test_a_check_that_finishes_late_is_a_timeout_even_without_interruption():
    def slow_c_call() -> Verdict:
        time.sleep(0.05)  # a C call: the watchdog cannot interrupt it, the elapsed-time check still counts it
        return valid_verdict(1.0, 1.0)

    assert run_checker(slow_c_call, time_limit_s=0.01).error.kind is VerdictErrorKind.TIMEOUT


def test_time_limit_comes_from_the_context_and_nests():
    assert current_time_limit() > 0
    with checker_time_limit(0.05):
        assert current_time_limit() == 0.05
        v = run_checker(lambda: run_checker(_spin, time_limit_s=10.0))
    # The inner, longer limit does not extend the outer one.
    assert v.error.kind is VerdictErrorKind.TIMEOUT
    with pytest.raises(ValueError):
        with checker_time_limit(0):
            pass


def test_after_a_nested_timeout_the_outer_limit_still_holds():
    def inner_then_spin() -> Verdict:
        assert run_checker(_spin, time_limit_s=0.02).error.kind is VerdictErrorKind.TIMEOUT
        return _spin()

    started = time.perf_counter()
    assert run_checker(inner_then_spin, time_limit_s=0.2).error.kind is VerdictErrorKind.TIMEOUT
    assert time.perf_counter() - started < 2.0


def test_threads_time_out_independently_with_one_watchdog():
    results: dict[int, list[str]] = {}

    def worker(i: int) -> None:
        out = []
        for j in range(20):
            if j % 5 == 0:
                out.append(run_checker(_spin, time_limit_s=0.02).error.kind.value)
            else:
                out.append(str(run_checker(lambda: valid_verdict(1.0, 1.0)).valid))
        results[i] = out

    before = threading.active_count()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(out.count("timeout") == 4 and out.count("True") == 16 for out in results.values())
    # No thread per item: at most the one watchdog thread is left over.
    assert threading.active_count() <= before + 1
    watchdogs = [t for t in threading.enumerate() if t.name == "genenv-checker-watchdog"]
    assert len(watchdogs) == 1
    time.sleep(0.1)  # a stray late exception would surface here


def test_a_fast_check_is_not_affected_by_a_previous_timeout():
    run_checker(_spin, time_limit_s=0.02)
    for _ in range(100):
        assert run_checker(lambda: valid_verdict(1.0, 1.0), time_limit_s=0.5).valid
