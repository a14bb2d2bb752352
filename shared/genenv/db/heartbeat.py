"""A background thread that renews a job's liveness row every few seconds while the job's work runs.

Beating from a thread rather than between units of work (optimiser steps, rollout batches) decouples the lease
from the longest unit: a lease only has to outlive a few missed beats, so a dead worker is noticed in seconds
whether it died loading a model or in the middle of a long step.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

log = logging.getLogger(__name__)


class Heartbeat:
    """Calls ``beat`` every ``interval_s`` until closed; ``beat`` returning False means the claim is lost."""

    def __init__(self, beat: Callable[[], bool], interval_s: float, name: str) -> None:
        self._beat = beat
        self._interval_s = interval_s
        self._name = name
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{name}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        # A beat in flight is one short UPDATE; do not let a hung database hold the worker's exit forever.
        self._thread.join(timeout=max(5.0, self._interval_s))

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                alive = self._beat()
            except Exception:
                # A database blip: the lease tolerates a few missed beats, so keep trying rather than give up.
                log.warning("heartbeat of %s failed; retrying in %.1f s", self._name, self._interval_s,
                            exc_info=True)
                continue
            if not alive:
                log.warning("heartbeat of %s: the claim is no longer ours", self._name)
                self.lost.set()
                return
