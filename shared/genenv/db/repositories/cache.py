"""Process-wide caches of validated read models (the control plane's read path)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ValidatedCache(Generic[K, V]):
    """``key → value`` built once by ``build`` and kept while recently used; safe across the thread pool's threads.

    Only for values that a key determines for good: a key must never come to mean another value.
    """

    def __init__(self, max_size: int) -> None:
        self._items: LRUCache[K, V] = LRUCache(maxsize=max_size)
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The cached value, or None."""
        with self._lock:
            return self._items.get(key)

    def get_or_build(self, key: K, build: Callable[[], V]) -> V:
        """The cached value, else ``build()`` stored under ``key`` (built outside the lock)."""
        value = self.get(key)
        if value is None:
            value = build()
            with self._lock:
                self._items[key] = value
        return value

    def discard(self, key: K) -> None:
        """Forget ``key``."""
        with self._lock:
            self._items.pop(key, None)
