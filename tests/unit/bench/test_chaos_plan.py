"""bench/chaos.py without a stack: the plan (kills and outages, a pure function of the seed), the executor on fake
victims and a fake clock (one fault at a time, outages kept down their planned time, recovery counted from the
moment a victim is let up), the options and the last line the CI drill reads."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from tests.unit.bench import scripts


@pytest.fixture(scope="module")
def chaos() -> ModuleType:
    return scripts.load("chaos")


def test_a_seed_plans_the_same_faults_every_time_and_its_kills_do_not_move_when_outages_are_added(
    chaos: ModuleType,
) -> None:
    kills_only = chaos.plan(4, 7919, 5.0, 40.0)
    both = chaos.plan(4, 7919, 5.0, 40.0, outages=3)
    assert both == chaos.plan(4, 7919, 5.0, 40.0, outages=3)
    assert both != chaos.plan(4, 7920, 5.0, 40.0, outages=3)
    assert [f.kind for f in kills_only] == ["kill"] * 4
    assert [(f.victim, f.delay_s) for f in both if f.kind == "kill"] == [(f.victim, f.delay_s) for f in kills_only]
    assert sum(f.kind == "outage" for f in both) == 3
    assert [f.n for f in both] == list(range(1, 8))
    # The CI drill's seed keeps its victims (tests/e2e/test_chaos_drill.py).
    assert [f.victim for f in chaos.plan(3, 5, 5.0, 40.0)] == ["postgres", "rollout", "redis"]


def test_outages_last_their_kind_s_duration_kills_none_and_every_delay_is_in_the_gap(chaos: ModuleType) -> None:
    durations = {"vllm": 300.0, "postgres": 120.0, "redis": 90.0, "control-plane": 60.0}
    faults = chaos.plan(6, 11, 5.0, 40.0, outages=12, outage_s=durations)
    outages = [f for f in faults if f.kind == "outage"]
    assert {f.victim for f in outages} <= set(durations) and len({f.victim for f in outages}) > 1
    assert all(f.down_s == durations[f.victim] for f in outages)
    assert all(f.down_s == 0.0 for f in faults if f.kind == "kill")
    assert all(5.0 <= f.delay_s <= 40.0 for f in faults)
    only_vllm = chaos.plan(0, 11, 5.0, 40.0, outages=3, outage_s={"vllm": 180.0})
    assert [(f.victim, f.down_s) for f in only_vllm] == [("vllm", 180.0)] * 3


def test_outage_options_override_the_defaults_and_bad_ones_are_refused(chaos: ModuleType) -> None:
    args = chaos.parse_args(["--kills", "4", "--outages", "3", "--outage-s", "vllm=200", "--outage-s", "redis=0",
                             "--outage-s", "rollout=30"])
    assert args.outage_s == {"vllm": 200.0, "postgres": 120.0, "control-plane": 120.0, "rollout": 30.0}
    assert args.epochs == (3 * 7 + 1) // 2 + 2
    assert chaos.parse_args([]).outage_s == chaos.OUTAGE_S and chaos.parse_args([]).outages == 0
    for bad in (["--outage-s", "nginx=5"], ["--outage-s", "vllm"], ["--outage-s", "vllm=-1"]):
        with pytest.raises(SystemExit):
            chaos.parse_args(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        chaos.parse_outage_s(["redis:5"])


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(s, 0.01)


@dataclass
class FakeVictims:
    """Down/up moments per fault; a victim answers ``back_after`` seconds after it is let up."""

    clock: FakeClock
    back_after: float = 3.0
    events: list[tuple[int, str, float, float | None]] = field(default_factory=list)
    answering: dict[int, float] = field(default_factory=dict)

    def down(self, fault: Any) -> None:
        assert not self.events or self.events[-1][3] is not None, "a fault went down before the previous was up"
        self.events.append((fault.n, fault.kind, self.clock.t, None))

    def up(self, fault: Any) -> Any:
        n, kind, down_at, _ = self.events[-1]
        self.events[-1] = (n, kind, down_at, self.clock.t)
        self.answering[n] = self.clock.t + self.back_after
        return lambda: self.clock.t >= self.answering[n]


@dataclass
class FakeRun:
    """A run whose work moves and whose chain ticks every 2 s, except while a victim is down, when it waits."""

    clock: FakeClock
    victims: FakeVictims

    def _down(self) -> bool:
        return bool(self.victims.events) and self.victims.events[-1][3] is None

    def status(self, run_id: str) -> str | None:
        return "running"

    def where(self, run_id: str) -> str:
        return "epoch 0 rollout"

    def progress(self, run_id: str) -> tuple[Any, ...] | None:
        return None if self._down() else (int(self.clock.t // 2),)

    def chain(self, run_id: str) -> tuple[str | None, str] | None:
        return None if self._down() else (str(int(self.clock.t // 2)), "running")

    def waiting_on(self, run_id: str) -> str | None:
        return "agent_model" if self._down() else None


def test_faults_run_one_at_a_time_outages_stay_down_their_time_and_recovery_counts_from_the_release(
    chaos: ModuleType,
) -> None:
    faults = chaos.plan(3, 7919, 5.0, 40.0, outages=2, outage_s={"vllm": 300.0, "postgres": 120.0})
    clock = FakeClock()
    victims = FakeVictims(clock)
    rows = chaos.execute(faults, victims, FakeRun(clock, victims), lambda: "run-1", lambda _: None,
                         recovery_timeout=900.0, clock=chaos.Clock(clock.now, clock.sleep))
    assert [(r.n, r.kind, r.victim) for r in rows] == [(f.n, f.kind, f.victim) for f in faults]
    previous_recovered = 0.0
    for fault, row, (n, kind, down_at, up_at) in zip(faults, rows, victims.events, strict=True):
        assert n == fault.n and up_at is not None
        # Never overlapping: each fault waits its delay after the previous victim recovered.
        assert down_at >= previous_recovered + fault.delay_s
        assert up_at - down_at >= fault.down_s and up_at - down_at < fault.down_s + 2.5
        assert row.down_s == pytest.approx(up_at - down_at, abs=0.1)
        if kind == "kill":
            assert row.down_s == 0.0 and row.waited_on == []
        else:
            assert row.waited_on == ["agent_model"]
        # Back 3 s after the release, not after the take-down (an outage's down time is not its recovery).
        assert row.back_s == pytest.approx(3.0, abs=0.6) and row.recovery_s is not None
        assert row.recovery_s < 5.0
        previous_recovered = up_at + row.recovery_s


def test_a_run_that_fails_leaves_the_remaining_faults_undone(chaos: ModuleType) -> None:
    clock = FakeClock()
    victims = FakeVictims(clock)

    class Failing(FakeRun):
        def status(self, run_id: str) -> str | None:
            return "failed" if victims.events else "running"

    lines: list[str] = []
    faults = chaos.plan(3, 5, 5.0, 40.0)
    rows = chaos.execute(faults, victims, Failing(clock, victims), lambda: "run-1", lines.append, 900.0,
                         chaos.Clock(clock.now, clock.sleep))
    assert len(rows) == 1 and "2 fault(s) left undone" in lines[-1]


def test_the_last_line_names_kills_and_outages_and_keeps_the_ci_drill_s_form(chaos: ModuleType) -> None:
    def row(kind: str, recovery: float | None) -> dict[str, Any]:
        return {"kind": kind, "recovery_s": recovery}

    kills = {"faults": [row("kill", 3.0), row("kill", 14.2)], "holds": True, "max_recovery_s": 14.2}
    assert chaos.summary(kills) == "chaos: 2 kills, invariants hold: yes, max recovery 14 s"
    mixed = {"faults": [row("kill", 3.0), row("outage", 61.0)], "holds": False, "max_recovery_s": None}
    assert chaos.summary(mixed) == ("chaos: 1 kills, 1 outages, invariants hold: no, max recovery never (a "
                                    "victim's work did not move again)")
