"""Shared machinery of the pure checkers: verdict builders, error kinds and a time-limited run.

A checker is a plain function that returns a :class:`~genenv.contracts.rollouts.Verdict` (build it with
:func:`valid_verdict`) or raises :class:`CheckFailure` for a response it cannot score as an answer.
:func:`run_checker` decides whose fault that was (METHOD.md, "Invalid ≠ wrong"):

- ``CheckFailure`` of kind ``parse_error`` / ``schema_error`` (prose instead of a call, a call that does not
  decode, no integer, cut off at the token limit) → the agent's fault: a VALID verdict with score 0, the kind
  kept in ``form_error`` — it counts in p̂ and in the GRPO group, so the agent learns to answer in form;
- ``CheckFailure`` of any other kind (``task_error``, ``too_large``) → invalid verdict of that kind;
- any other exception → invalid ``checker_error``;
- running past the time limit → invalid ``timeout``.

Time limits cost no thread per item. One process-wide watchdog thread looks at the item each worker thread is
checking and, when its deadline passes, raises :class:`CheckerTimeout` inside that thread (CPython's
``PyThreadState_SetAsyncExc``: delivered at the next bytecode, so pure-Python loops stop; a long C call such as
one huge regex is not interrupted, which is why checkers bound their input sizes). A checker that finishes but
took longer than its limit is also a timeout, so the verdict does not depend on the watchdog's resolution.

The limit comes from :func:`checker_time_limit` (a context variable the verifier service sets from its
settings) so that ``Domain.verify(task, response, threshold)`` keeps its signature.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from genenv.contracts.rollouts import Verdict, VerdictError, VerdictErrorKind

DEFAULT_TIME_LIMIT_S = 2.0
"""Per-item time limit when nobody set one (the verifier service overrides it from its settings)."""

DEFAULT_MAX_RESPONSE_CHARS = 32_768
"""Longest response a checker parses; longer ones are invalid (``too_large``) rather than slow."""

_WATCHDOG_PERIOD_S = 0.01

_time_limit: contextvars.ContextVar[float] = contextvars.ContextVar(
    "genenv_checker_time_limit", default=DEFAULT_TIME_LIMIT_S
)


class CheckerTimeout(BaseException):
    """Raised inside a checker that ran past its limit. A BaseException so ``except Exception`` cannot eat it."""


class CheckFailure(Exception):
    """A response the checker cannot score: becomes an invalid verdict of ``kind``."""

    def __init__(self, kind: VerdictErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def valid_verdict(score: float, threshold: float, details: dict[str, Any] | None = None) -> Verdict:
    """A scored verdict; success = score ≥ threshold."""
    return Verdict(valid=True, score=score, success=score >= threshold, details=details or {})


def invalid_verdict(kind: VerdictErrorKind, message: str, details: dict[str, Any] | None = None) -> Verdict:
    """An unscored verdict carrying why (never a zero score): a failure that is not the agent's."""
    return Verdict(valid=False, error=VerdictError(kind=kind, message=message), details=details or {})


AGENT_FORM_ERRORS = frozenset({VerdictErrorKind.PARSE_ERROR, VerdictErrorKind.SCHEMA_ERROR})
"""Failure kinds that are the agent's own: its reply is a wrong answer (score 0), not an invalid verdict."""


def wrong_form_verdict(kind: VerdictErrorKind, message: str, details: dict[str, Any] | None = None) -> Verdict:
    """A reply that did not parse into an answer: R_agent = 0 (METHOD.md Eq. 1), with the reason kept."""
    return Verdict(valid=True, score=0.0, success=False, form_error=VerdictError(kind=kind, message=message),
                   details=details or {})


def failure_verdict(kind: VerdictErrorKind, message: str) -> Verdict:
    """The verdict for a reply a checker could not score: wrong answer if it is the agent's fault, else invalid."""
    if kind in AGENT_FORM_ERRORS:
        return wrong_form_verdict(kind, message)
    return invalid_verdict(kind, message)


def apply_threshold(verdict: Verdict, threshold: float) -> Verdict:
    """The same verdict with success recomputed for another threshold (invalid verdicts stay unsuccessful)."""
    if not verdict.valid or verdict.score is None:
        return verdict
    success = verdict.score >= threshold
    return verdict if success == verdict.success else verdict.model_copy(update={"success": success})


def current_time_limit() -> float:
    """The per-item time limit in force in this context."""
    return _time_limit.get()


@contextlib.contextmanager
def checker_time_limit(seconds: float) -> Iterator[None]:
    """Set the per-item time limit for checks run inside the block (this thread / task only)."""
    if seconds <= 0:
        raise ValueError("checker time limit must be positive")
    token = _time_limit.set(seconds)
    try:
        yield
    finally:
        _time_limit.reset(token)


class time_limit:
    """Raise CheckerTimeout inside the block once it runs longer than ``seconds`` (the one watchdog).

    Nests: an inner limit never extends an outer one, and the outer limit is re-armed when the inner block ends.
    Also raises CheckerTimeout on leaving the block late, so a long C call that the watchdog could not interrupt
    still counts as a timeout.
    """

    __slots__ = ("_outer", "_seconds", "_slot", "_start")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._slot = _WATCHDOG.slot()
        self._start = 0.0
        self._outer: float | None = None

    def __enter__(self) -> None:
        slot = self._slot
        self._start = time.perf_counter()
        deadline = self._start + self._seconds
        if slot.active:
            self._outer = slot.deadline
            deadline = min(deadline, slot.deadline)
        slot.begin(deadline)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        slot = self._slot
        try:
            slot.end()
        except CheckerTimeout:
            slot.active = False
            raise
        finally:
            if self._outer is not None:
                slot.begin(self._outer)
        if exc_type is CheckerTimeout:
            slot.active = self._outer is not None
        elif exc_type is None and time.perf_counter() - self._start > self._seconds:
            raise CheckerTimeout


def run_checker(check: Callable[[], Verdict], *, time_limit_s: float | None = None) -> Verdict:
    """Run one pure check under the time limit; every failure mode becomes an invalid verdict for this item."""
    limit = current_time_limit() if time_limit_s is None else time_limit_s
    try:
        slot = _WATCHDOG.slot()
        if slot.active and slot.deadline <= time.perf_counter() + limit:
            # Already inside a limit that ends no later (the service wraps each domain's verify, and domains
            # wrap their checks): arming again would only cost time. The elapsed check still applies.
            started = time.perf_counter()
            verdict = check()
            if time.perf_counter() - started > limit:
                raise CheckerTimeout
        else:
            with time_limit(limit):
                verdict = check()
    except CheckerTimeout:
        return invalid_verdict(VerdictErrorKind.TIMEOUT, f"checker ran longer than {limit:g} s")
    except CheckFailure as exc:
        return failure_verdict(exc.kind, exc.message)
    except (RecursionError, MemoryError) as exc:
        return invalid_verdict(VerdictErrorKind.CHECKER_ERROR, f"checker exhausted resources: {type(exc).__name__}")
    except Exception as exc:
        return invalid_verdict(VerdictErrorKind.CHECKER_ERROR, f"checker failed: {type(exc).__name__}: {exc}")
    return verdict


# --- the one watchdog -------------------------------------------------------------------------------------------

# PyThreadState_SetAsyncExc(thread id, exception class) schedules an exception in another thread; NULL cancels
# it. PYFUNCTYPE keeps the GIL held during the call, as the C API requires.
_SetAsyncExc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_CancelAsyncExc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)


class _Slot:
    """What one thread is checking now. begin/end are the hot path: a few attribute writes and one lock."""

    __slots__ = ("active", "deadline", "fired", "lock", "thread_id")

    def __init__(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.lock = threading.Lock()
        self.active = False
        self.fired = False
        self.deadline = 0.0

    def begin(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self.active = True
        _WATCHDOG.wake()

    def end(self) -> None:
        with self.lock:
            self.active = False
            if self.fired:
                # The watchdog fired but the exception may still be pending: cancel it so it never lands
                # outside the checker, then report the timeout ourselves.
                self.fired = False
                _CancelAsyncExc(self.thread_id, None)
                raise CheckerTimeout


class _Watchdog:
    """One daemon thread for the whole process; it sleeps while no check is running."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._slots: list[_Slot] = []
        self._slots_lock = threading.Lock()
        self._awake = threading.Event()
        self._thread: threading.Thread | None = None

    def slot(self) -> _Slot:
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            slot = _Slot(threading.get_ident())
            self._local.slot = slot
            with self._slots_lock:
                self._slots.append(slot)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="genenv-checker-watchdog", daemon=True)
                    self._thread.start()
        return slot

    def wake(self) -> None:
        if not self._awake.is_set():
            self._awake.set()

    def _run(self) -> None:
        while True:
            self._awake.wait()
            time.sleep(_WATCHDOG_PERIOD_S)
            now = time.perf_counter()
            any_active = False
            with self._slots_lock:
                slots = list(self._slots)
                alive = {t.ident for t in threading.enumerate()}
                self._slots = [s for s in slots if s.thread_id in alive]
            for slot in slots:
                if not slot.active:
                    continue
                any_active = True
                if now <= slot.deadline:
                    continue
                with slot.lock:
                    if slot.active and not slot.fired and time.perf_counter() > slot.deadline:
                        slot.fired = True
                        _SetAsyncExc(slot.thread_id, CheckerTimeout)
            if not any_active:
                self._awake.clear()
                # A begin() racing with clear() re-sets the event; re-check so that check is not missed.
                if any(s.active for s in self._slots):
                    self._awake.set()


_WATCHDOG = _Watchdog()
