"""``genenv up``'s supervisor and the drill-only hold (genenv.devstack.hold_down): a held process stays down until
its hold ends or its file is deleted, then is restarted as before; without a hold file nothing changes."""

from __future__ import annotations

import time
from pathlib import Path

from genenv.devstack import DevStack, ProcessSpec, RestartPolicy, Supervisor, held_until, hold_down, hold_file


class FakeProc:
    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        return self.returncode


class FakeStack(DevStack):
    """Starting a process only records it: no real process."""

    def start(self, name: str) -> None:
        self.starts = getattr(self, "starts", 0) + 1
        self.procs[name] = FakeProc(1000 + self.starts)  # type: ignore[assignment]


def _stack(tmp_path: Path) -> FakeStack:
    stack = FakeStack(env={}, specs={"vllm": ProcessSpec("vllm", ["serve", "vllm"])}, log_dir=tmp_path)
    stack.start("vllm")
    return stack


def _exit(stack: FakeStack) -> None:
    stack.procs["vllm"].returncode = -9  # type: ignore[misc]


def _check_for(supervisor: Supervisor, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        supervisor.check()
        time.sleep(0.05)


def test_a_held_process_stays_down_until_its_hold_file_goes(tmp_path: Path) -> None:
    stack, lines = _stack(tmp_path), []
    supervisor = Supervisor(stack, lines.append, RestartPolicy(backoff_s=0.05))
    path = hold_down(tmp_path, "vllm", 600)
    assert path == hold_file(tmp_path, "vllm") and held_until(tmp_path, "vllm") is not None
    _exit(stack)
    _check_for(supervisor, 1.0)
    assert stack.starts == 1 and supervisor.restarts == 0
    assert sum("held down" in line for line in lines) == 1, lines  # said once, not every check
    path.unlink()
    _check_for(supervisor, 1.0)
    assert stack.starts == 2 and supervisor.restarts == 1 and stack.procs["vllm"].poll() is None


def test_a_hold_ends_by_itself_and_its_file_is_removed(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    supervisor = Supervisor(stack, lambda _: None, RestartPolicy(backoff_s=0.05))
    hold_down(tmp_path, "vllm", 0.6)
    _exit(stack)
    _check_for(supervisor, 0.3)
    assert supervisor.restarts == 0
    _check_for(supervisor, 1.5)
    assert supervisor.restarts == 1 and not hold_file(tmp_path, "vllm").exists()


def test_without_a_hold_or_with_an_unreadable_one_a_process_is_restarted_at_once(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    supervisor = Supervisor(stack, lambda _: None, RestartPolicy(backoff_s=0.05))
    hold_file(tmp_path, "vllm").write_text("soon\n")
    assert held_until(tmp_path, "vllm") is None
    _exit(stack)
    _check_for(supervisor, 0.5)
    assert supervisor.restarts == 1
