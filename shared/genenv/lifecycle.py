"""Every status an entity can have and every legal change, one table per entity (run, experiment, job). Pure code.

The tables are the only place the edges live. Each entity's repository has one door that writes its status
(``runs.move``, ``experiments._move``, ``train_jobs.move_job``); the door refuses an edge that is not in the table,
and writes conditioned on the status it checked, so a concurrent writer that changed the row in between makes the
write a conflict instead of a silent overwrite. The status sets other code needs (finished, live, …) are derived
here from the tables, never listed again elsewhere.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from genenv.contracts.adapters import JobStatus
from genenv.contracts.errors import ConflictError
from genenv.contracts.experiments import ExperimentStatus
from genenv.contracts.runs import RunStatus

S = TypeVar("S", bound=enum.StrEnum)


@dataclass(frozen=True)
class StateMachine(Generic[S]):
    """The legal edges of one entity's status and the user actions that move it."""

    entity: str
    transitions: Mapping[S, frozenset[S]]
    actions: Mapping[str, tuple[frozenset[S], S]] = field(default_factory=dict)

    @property
    def terminal(self) -> frozenset[S]:
        """Statuses with no way out."""
        return frozenset(s for s, targets in self.transitions.items() if not targets)

    def can(self, current: S, target: S) -> bool:
        """Whether ``current → target`` is a legal edge."""
        return target in self.transitions[current]

    def sources(self, target: S) -> frozenset[S]:
        """Every status ``target`` may be reached from (what a conditional UPDATE matches on)."""
        return frozenset(s for s, targets in self.transitions.items() if target in targets)

    def check(self, current: S, target: S) -> None:
        """Raise ConflictError (409) unless ``current → target`` is legal."""
        if not self.can(current, target):
            allowed = ", ".join(sorted(self.transitions[current])) or "none (terminal)"
            raise ConflictError(
                f"a {current.value} {self.entity} cannot become {target.value}; allowed next states: {allowed}",
                code="illegal_transition",
            )

    def action_target(self, current: S, action: str) -> S:
        """The status ``action`` moves an entity in ``current`` to; ConflictError (409) if not allowed from there."""
        sources, target = self.actions[action]
        if current not in sources:
            allowed = ", ".join(sorted(s.value for s in sources))
            raise ConflictError(
                f"cannot {action} a {current.value} {self.entity}; {action} is allowed only from: {allowed}",
                code="illegal_transition",
            )
        return target


R = RunStatus
RUN: StateMachine[RunStatus] = StateMachine(
    "run",
    {
        R.CREATED: frozenset({R.RUNNING, R.CANCELLED}),
        R.RUNNING: frozenset({R.PAUSED, R.COMPLETED, R.FAILED, R.CANCELLED}),
        # A paused run can fail (e.g. its adapters vanished) but only completes after being resumed.
        R.PAUSED: frozenset({R.RUNNING, R.FAILED, R.CANCELLED}),
        R.COMPLETED: frozenset(),
        R.FAILED: frozenset(),
        R.CANCELLED: frozenset(),
    },
    {
        "start": (frozenset({R.CREATED}), R.RUNNING),
        "pause": (frozenset({R.RUNNING}), R.PAUSED),
        "resume": (frozenset({R.PAUSED}), R.RUNNING),
        "cancel": (frozenset({R.CREATED, R.RUNNING, R.PAUSED}), R.CANCELLED),
    },
)
"""created → running ⇄ paused → completed | failed | cancelled. The user's actions are the control plane's
POST /v1/runs/{id}/<action>; completed and failed are the orchestrator's."""

RUN_FINISHED: frozenset[RunStatus] = RUN.terminal
"""completed, failed, cancelled: nothing will ever change the run again."""
RUN_LIVE: frozenset[RunStatus] = frozenset({R.RUNNING, R.PAUSED})
"""Started and not finished: a sequential experiment's next member waits while one of these is live."""
RUN_AT_REST: frozenset[RunStatus] = frozenset(RunStatus) - {R.RUNNING}
"""Nothing advances the run until a user acts (or ever): the orchestrator, the embedded driver and
`genenv runs watch` stop on these."""

X = ExperimentStatus
EXPERIMENT: StateMachine[ExperimentStatus] = StateMachine(
    "experiment",
    {
        X.CREATED: frozenset({X.RUNNING, X.CANCELLED}),
        X.RUNNING: frozenset({X.CANCELLED}),
        X.CANCELLED: frozenset(),
        # Never stored: a running experiment's completed/failed is derived from its members (members are the truth).
        X.COMPLETED: frozenset(),
        X.FAILED: frozenset(),
    },
    {
        "start": (frozenset({X.CREATED}), X.RUNNING),
        "cancel": (frozenset({X.CREATED, X.RUNNING}), X.CANCELLED),
    },
)
"""Stored: created → running → cancelled (or created → cancelled)."""

J = JobStatus
JOB: StateMachine[JobStatus] = StateMachine(
    "job",
    {
        # pending → done: a rollout job with nothing left to do; pending → failed: out of attempts.
        J.PENDING: frozenset({J.RUNNING, J.DONE, J.FAILED}),
        # running → running: a dead worker's claim taken over, or a stalled rollout dispatched again.
        J.RUNNING: frozenset({J.RUNNING, J.DONE, J.SKIPPED, J.FAILED}),
        # A failed attempt may be claimed again while attempts remain; failed → failed records giving up.
        J.FAILED: frozenset({J.RUNNING, J.FAILED}),
        J.DONE: frozenset(),
        J.SKIPPED: frozenset(),
    },
)
"""train_job rows (train_agent, train_simulator, rollout): pending → running → done | skipped | failed."""

JOB_FINISHED: frozenset[JobStatus] = JOB.terminal
"""done, skipped: a delivery that finds one of these exits without working."""
