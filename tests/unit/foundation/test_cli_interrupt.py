"""Ctrl-C for the commands that drive runs in this process (genenv.cli.interrupt), on real processes and signals.

Each case starts a Python process that runs a coroutine under ``run_interruptible``, waits until it says it is
running, sends SIGINT as a terminal's Ctrl-C would, and reads the exit code and what it printed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from genenv.cli.interrupt import EXIT_INTERRUPTED

REPO = Path(__file__).resolve().parents[3]

PROGRAM = textwrap.dedent("""
    import asyncio, sys, time
    import typer
    from genenv.cli.interrupt import run_interruptible

    async def polite():
        # A drive loop: stops at its await when cancelled and cleans up.
        try:
            print("running", flush=True)
            while True:
                await asyncio.sleep(0.2)
        finally:
            print("cleaned up", flush=True)

    async def stubborn():
        # What a stuck stop looks like: a retry loop that swallows cancellation.
        print("running", flush=True)
        while True:
            try:
                await asyncio.sleep(0.2)
            except asyncio.CancelledError:
                print("cancel swallowed", flush=True)

    async def in_thread():
        # A training step off the loop: cancelling the task cannot stop the thread, and the loop's close waits
        # for it.
        print("running", flush=True)
        await asyncio.to_thread(time.sleep, 600)

    def main(case: str) -> None:
        print("result", run_interruptible(globals()[case](), resume_hint="resume with X"), flush=True)

    typer.run(main)
""")


def _start(case: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM, case], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    return proc


def _ended_within(proc: subprocess.Popen[str], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def test_one_ctrl_c_stops_a_drive_at_its_await_and_cleans_up() -> None:
    proc = _start("polite")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_INTERRUPTED  # typer turns the KeyboardInterrupt into 130
    assert "cleaned up" in out and "result" not in out
    assert "stopping (Ctrl-C again quits at once); resume with X" in err


@pytest.mark.parametrize("case", ["stubborn", "in_thread"])
def test_a_second_ctrl_c_quits_at_once_whatever_the_process_waits_on(case: str) -> None:
    proc = _start(case)
    proc.send_signal(signal.SIGINT)
    # The first one does not end these: the stop they need never comes (without the second, they run on).
    assert not _ended_within(proc, 1.5)
    proc.send_signal(signal.SIGINT)
    assert _ended_within(proc, 5.0)
    out, err = proc.communicate()
    assert proc.returncode == EXIT_INTERRUPTED
    assert "quitting now; resume with X" in err
    if case == "stubborn":
        assert "cancel swallowed" in out


def test_a_coroutine_that_ends_returns_its_value_and_restores_ctrl_c() -> None:
    from genenv.cli.interrupt import run_interruptible

    async def answer() -> int:
        return 42

    before = signal.getsignal(signal.SIGINT)
    assert run_interruptible(answer(), resume_hint="-") == 42
    assert signal.getsignal(signal.SIGINT) is before
