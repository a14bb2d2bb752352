"""Random run data (tasks, rollouts, verdicts) and the Python reference of the difficulty ledger."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from genenv.contracts.runs import RunConfig
from genenv.db.models import RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import runs


@dataclass
class Ref:
    """What the ledger must say, computed in Python from the rows as they were written."""

    task: dict[int, tuple[str, int, int, int]] = field(default_factory=dict)  # id -> (seed, epoch, n, k)

    def seeds(self) -> dict[str, tuple[int, int, int, int]]:
        """seed -> (n, k, valid tasks, epochs)."""
        acc: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        epochs: dict[str, set[int]] = defaultdict(set)
        for seed, epoch, n, k in self.task.values():
            acc[seed][0] += n
            acc[seed][1] += k
            acc[seed][2] += 1
            epochs[seed].add(epoch)
        return {s: (v[0], v[1], v[2], len(epochs[s])) for s, v in acc.items()}

    def epoch_seeds(self, epoch: int) -> dict[str, tuple[int, int]]:
        """seed -> (n, k) within one epoch."""
        acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for seed, e, n, k in self.task.values():
            if e == epoch:
                acc[seed][0] += n
                acc[seed][1] += k
        return {s: (v[0], v[1]) for s, v in acc.items()}


def make_run(session: Session, **config: object) -> str:
    """A stored run with the given config overrides."""
    return runs.create(session, RunConfig.model_validate(config)).id


def add_task(session: Session, run_id: str, epoch: int, seed_id: str, variation: int, *, valid: bool = True,
             raw_text: str = "{}", prompt: str = "write a task") -> TaskRow:
    """One generated task row."""
    row = TaskRow(
        run_id=run_id, epoch=epoch, seed_id=seed_id, domain="arithmetic", variation=variation,
        status="valid" if valid else "rejected", payload={"q": f"{seed_id}-{variation}"} if valid else None,
        rejection_reason=None if valid else "not_json", raw_text=raw_text,
        prompt_messages=[{"role": "user", "content": prompt}],
    )
    session.add(row)
    session.flush()
    return row


def add_attempt(session: Session, task_id: int, attempt: int, verdict: str | None, *, score: float | None = None,
                response: str = "7", token_ids: list[int] | None = None,
                token_logprobs: list[float] | None = None) -> RolloutRow:
    """A rollout and (verdict 'success' | 'fail' | 'invalid' | None = not verified yet) its verdict."""
    ro = RolloutRow(task_id=task_id, attempt=attempt, prompt_messages=[{"role": "user", "content": "q"}],
                    response=response, token_ids=token_ids, token_logprobs=token_logprobs)
    session.add(ro)
    session.flush()
    if verdict is not None:
        valid = verdict != "invalid"
        if score is None and valid:
            score = 1.0 if verdict == "success" else 0.0
        session.add(VerdictRow(
            rollout_id=ro.id, valid=valid, score=score if valid else None, success=verdict == "success",
            error_kind=None if valid else "parse_error", error_message=None if valid else "unparseable",
        ))
        session.flush()
    return ro


def random_run_data(session: Session, run_id: str, rng: random.Random, *, epochs: int = 3, seeds: int = 6) -> Ref:
    """Tasks over several epochs and seeds, some rejected; rollouts verified, invalid or not verified."""
    ref = Ref()
    for epoch in range(epochs):
        for s in range(seeds):
            if rng.random() < 0.15:
                continue  # seed not used this epoch
            for v in range(rng.randint(1, 4)):
                valid = rng.random() > 0.2
                task = add_task(session, run_id, epoch, f"seed-{s:02d}", v, valid=valid)
                if not valid:
                    continue
                n = k = 0
                p = rng.random()
                for a in range(rng.randint(0, 6)):
                    kind = rng.choices(["success", "fail", "invalid", None], [p, 1 - p, 0.2, 0.1])[0]
                    add_attempt(session, task.id, a, kind)
                    if kind in ("success", "fail"):
                        n += 1
                        k += kind == "success"
                ref.task[task.id] = (f"seed-{s:02d}", epoch, n, k)
    return ref
