"""Ctrl-C for the commands that drive runs in this process (quickstart, experiment run/resume).

The first Ctrl-C cancels the driving coroutine: the run stops at its current await and the stack closes as after
any stop (what is stored stays; `genenv experiment resume` goes on from the stored phase).
A second Ctrl-C quits at once, whatever the process is waiting on.

Why not asyncio.run's own handling: it cancels on the first Ctrl-C too, but its close then waits, with no limit,
for every thread of the default executor (an embedded training step runs in one for minutes) and for tasks that
do not end on cancellation; a second Ctrl-C raised KeyboardInterrupt into that wait and the process stayed. A user
who presses Ctrl-C twice wants the process gone: quitting mid-step is a crash the system is built to recover from
(every phase is idempotent and resumes from the database), and the model server started for the command is a
child that dies with this process (genenv.inference.launcher.die_with_parent).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

EXIT_INTERRUPTED = 130
"""The exit code of a process ended by Ctrl-C (128 + SIGINT), as shells report it."""


def run_interruptible(main: Coroutine[Any, Any, T], *, resume_hint: str) -> T:
    """Run ``main`` to its end on a new event loop; Ctrl-C once stops it (KeyboardInterrupt once the loop has
    closed), twice quits the process at once with exit code 130. ``resume_hint`` says how to go on (stderr)."""
    interrupts = 0
    task: asyncio.Task[Any] | None = None  # the running coroutine's task, once the loop has started it

    def on_sigint(_signum: int, _frame: FrameType | None) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1 and task is not None and not task.done():
            _say(f"stopping (Ctrl-C again quits at once); {resume_hint}")
            task.get_loop().call_soon_threadsafe(task.cancel)
            return
        _say(f"quitting now; {resume_hint}")
        os._exit(EXIT_INTERRUPTED)

    async def wrapped() -> T:
        nonlocal task
        task = asyncio.current_task()
        return await main

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with asyncio.Runner() as runner:
            try:
                return runner.run(wrapped())
            except asyncio.CancelledError:
                if interrupts == 0:
                    raise
        # Only a Ctrl-C gets here: the loop and its executor closed, the run is stopped where it was.
        raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, previous)


def _say(message: str) -> None:
    # Straight to stderr: a signal handler must not wait on rich's console lock held by a progress bar's refresh.
    sys.stderr.write(f"\n{message}\n")
    sys.stderr.flush()
