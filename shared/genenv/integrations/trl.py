"""TRL's GRPOTrainer as the outside agent of an external_agent run (issue 33, item 4).

Two pieces, both over the typed client (:mod:`genenv.clients.external_agent`):

- :func:`leased_dataset`: a ``datasets.IterableDataset`` whose rows are the run's leased tasks, one row per task,
  with the columns ``prompt`` (the agent messages the domain builds), ``task_id``, ``lease_id``, ``attempts`` and
  ``epoch``. GRPO repeats each row ``num_generations`` times, so every completion TRL scores is one leased attempt;
  set ``num_generations`` to the run's ``rollouts_per_task`` (the lease asks for that many attempts per task).
- :class:`ServiceReward`: the reward function. TRL passes the dataset's columns to it as keyword lists, one value
  per completion; it reports the completions as the attempts of their leases (one report per lease, with an
  Idempotency-Key derived from the lease and the attempts, so a repeated call records nothing new) and returns
  the service's verdict scores in completion order (``None`` for an attempt the service could not check, which
  TRL reads as NaN).

The GRPOConfig must keep the stream's order: ``shuffle_dataset=False`` (a buffered shuffle would lease a thousand
tasks before the first step) and ``max_steps`` set (the stream has no length); :func:`check_grpo_args` says so.

Why a pass ends: accelerate reads one generation batch ahead of the one being trained on. When an epoch's tasks are
all leased, the next batch can only come from the next epoch, which opens only once the batch being held is
answered; so when nothing is leasable after at least one full batch, the stream ends the dataloader's pass, the
trainer answers what it holds, and the next pass waits for the next epoch. Rows are yielded in whole generation
batches (``prompts_per_batch`` tasks) because TRL drops a trailing partial batch; tasks leased for a batch that
could not be filled are never answered and return to the pool when their lease expires (keep ``lease_s`` short),
and an epoch whose valid tasks are not a multiple of ``prompts_per_batch`` closes at its ``external.epoch_deadline_s``.
Single process only: several accelerate processes would each lease their own stream.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from genenv.clients.base import ApiError
from genenv.clients.external_agent import (
    DEFAULT_LEASE_S,
    GONE,
    IDLE_WAIT_S,
    MAX_IDLE_WAIT_S,
    RUN_NOT_RUNNING,
    ExternalAgentClient,
)
from genenv.contracts.leases import AttemptIn, AttemptsRecorded, LeaseItem

if TYPE_CHECKING:
    from datasets import IterableDataset

REWARD_NAME = "genenv_verdict"
_KEY_NAMESPACE = uuid.UUID("6f1d3c52-8a7e-4b0e-9a51-33e0a9c0f7a1")


class LeaseSource:
    """Leases an external_agent run's tasks in whole batches of ``prompts_per_batch`` and yields one dataset row per
    leased task (see the module's docstring for when a pass ends)."""

    def __init__(
        self,
        client: ExternalAgentClient,
        run_id: str,
        *,
        prompts_per_batch: int,
        lease_s: int = DEFAULT_LEASE_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if prompts_per_batch < 1:
            raise ValueError("prompts_per_batch must be at least 1")
        self.client = client
        self.run_id = run_id
        self.prompts_per_batch = prompts_per_batch
        self.lease_s = lease_s
        self._sleep = sleep
        self.stopped: ApiError | None = None
        """The 409 run_not_running that ended the stream; None while the run runs."""
        self.leased = 0
        """Tasks leased so far (all passes)."""

    def rows(self) -> Iterator[dict[str, Any]]:
        """One pass: whole batches of rows until nothing is leasable after a yielded batch, or the run stops."""
        pending: list[tuple[str, int, LeaseItem]] = []
        yielded = False
        while self.stopped is None:
            try:
                lease = self.client.lease(self.run_id, min(self.prompts_per_batch - len(pending), 256), self.lease_s)
            except ApiError as exc:
                if exc.status_code != 409 or exc.code != RUN_NOT_RUNNING:
                    raise
                self.stopped = exc
                return
            if lease.items and lease.lease_id is not None:
                self.leased += len(lease.items)
                pending.extend((lease.lease_id, lease.epoch, item) for item in lease.items)
                if len(pending) == self.prompts_per_batch:
                    yield from (_row(lease_id, epoch, item) for lease_id, epoch, item in pending)
                    pending, yielded = [], True
                continue
            if yielded:
                return  # let the trainer answer the batch it holds; the next pass waits for the next epoch
            wait = lease.retry_after_s if lease.retry_after_s is not None else IDLE_WAIT_S
            self._sleep(min(wait, MAX_IDLE_WAIT_S))


def _row(lease_id: str, epoch: int, item: LeaseItem) -> dict[str, Any]:
    return {
        "prompt": [{"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
                   for m in item.messages],
        "task_id": item.task_id,
        "lease_id": lease_id,
        "attempts": item.attempts,
        "epoch": epoch,
    }


def leased_dataset(source: LeaseSource) -> IterableDataset:
    """``source``'s rows as the ``datasets.IterableDataset`` GRPOTrainer takes as ``train_dataset``."""
    from datasets import Features, List, Value

    features = Features({
        "prompt": List({"role": Value("string"), "content": Value("string")}),
        "task_id": Value("int64"),
        "lease_id": Value("string"),
        "attempts": Value("int64"),
        "epoch": Value("int64"),
    })
    # IterableDataset.from_generator would fingerprint the generator by pickling it, i.e. the source's HTTP client
    # (an SSLContext cannot be pickled: TypeError). The input stream it wraps takes the fingerprint instead; a
    # stream of leases is never cached, so a fresh one per dataset is right.
    from datasets.io.generator import GeneratorDatasetInputStream

    stream = GeneratorDatasetInputStream(generator=source.rows, features=features, streaming=True,
                                         fingerprint=f"genenv-leases-{uuid.uuid4().hex}")
    dataset: IterableDataset = stream.read()
    return dataset


def check_grpo_args(args: Any, prompts_per_batch: int) -> None:
    """Raise ValueError when a ``trl.GRPOConfig`` would break the stream (shuffled, unbounded, or batches of another
    size than the source's ``prompts_per_batch``)."""
    if args.shuffle_dataset:
        raise ValueError("set GRPOConfig(shuffle_dataset=False): a buffered shuffle leases ~1000 tasks up front")
    if args.max_steps is None or args.max_steps <= 0:
        raise ValueError("set GRPOConfig(max_steps=...): a leased stream has no length")
    per_batch = args.generation_batch_size // args.num_generations
    if per_batch != prompts_per_batch:
        raise ValueError(f"the trainer takes {per_batch} prompts per generation batch "
                         f"(generation_batch_size / num_generations) but the source leases {prompts_per_batch}")


def _reply(completion: Any) -> str:
    """A completion's text: TRL gives a string (standard) or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content") or "") for m in completion if m.get("role", "assistant") == "assistant")


def report_key(lease_id: str, task_ids: Sequence[int]) -> str:
    """The Idempotency-Key of one report: the same lease and attempts give the same key, so a reward function
    called again on the same completions (a retried step) is answered from the first recording."""
    return uuid.uuid5(_KEY_NAMESPACE, lease_id + "|" + ",".join(map(str, task_ids))).hex


class ServiceReward:
    """GRPO reward function: reports the completions as attempts and returns the service's verdict scores.

    Pass it in ``reward_funcs``; it needs the ``task_id``, ``lease_id`` and ``attempts`` columns of
    :func:`leased_dataset`. A completion beyond what its lease asks for at a task is not reported and gets None.
    A report refused because its lease expired, its epoch closed or the run stopped (409) is dropped: its
    completions get None and the error is kept in ``refused``.
    """

    __name__ = REWARD_NAME  # TRL names the reward in its logs by the callable's __name__

    def __init__(self, client: ExternalAgentClient, run_id: str,
                 on_report: Callable[[AttemptsRecorded], None] | None = None) -> None:
        self.client = client
        self.run_id = run_id
        self.on_report = on_report
        self.reports: list[AttemptsRecorded] = []
        self.refused: list[ApiError] = []

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task_id: Sequence[int],
        lease_id: Sequence[str],
        attempts: Sequence[int],
        **_: Any,
    ) -> list[float | None]:
        taken: dict[tuple[str, int], int] = {}
        per_lease: dict[str, list[int]] = {}
        for i, (lease, task, allowed) in enumerate(zip(lease_id, task_id, attempts, strict=True)):
            if taken.get((lease, task), 0) < allowed:
                taken[(lease, task)] = taken.get((lease, task), 0) + 1
                per_lease.setdefault(lease, []).append(i)
        scores: list[float | None] = [None] * len(completions)
        for lease, indexes in per_lease.items():
            sent = [AttemptIn(task_id=int(task_id[i]), reply=_reply(completions[i])) for i in indexes]
            try:
                recorded = self.client.report(self.run_id, lease, sent,
                                              idempotency_key=report_key(lease, [a.task_id for a in sent]))
            except ApiError as exc:
                if exc.status_code == 409 and exc.code in GONE:
                    self.refused.append(exc)
                    continue
                raise
            self.reports.append(recorded)
            if self.on_report is not None:
                self.on_report(recorded)
            for i, verdict in zip(indexes, recorded.verdicts, strict=True):
                scores[i] = verdict.score
        return scores
