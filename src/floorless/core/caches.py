"""Bounded caches shared by threads, counting their hits and misses for ``/-/metrics``.

Storage and eviction are ``cachetools``' (least recently used, optionally with a time to
live); this adds what every cache in floorless needs around it: a lock (cachetools' caches
are not thread-safe), the counters, and a size in bytes for values that are rendered text,
so that a bound says how much memory a cache may hold rather than how many things.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import cachetools

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def approximate_size(value: object) -> int:
    """Bytes held by ``value`` and what it contains: strings, bytes, lists, tuples, dicts and
    dataclasses, followed down. Shared objects are counted each time they are reached, so
    this errs on the large side."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, str | bytes | int | float | bool) or item is None:
            continue
        if isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return total


class Cache(Generic[K, V]):
    """One cachetools cache behind a lock, with hit and miss counts.

    A value larger than the whole cache is not kept (and drops what the key held before).
    """

    def __init__(self, store: cachetools.Cache[K, V], by_bytes: bool = False) -> None:
        self._store = store
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.by_bytes = by_bytes  # whether maxsize and currsize are bytes, not entries

    @classmethod
    def lru(cls, maxsize: int, getsizeof: Callable[[V], int] | None = None) -> Cache[K, V]:
        """At most ``maxsize`` entries, or ``maxsize`` bytes as ``getsizeof`` measures them."""
        return cls(cachetools.LRUCache(maxsize, getsizeof=getsizeof), getsizeof is not None)

    @classmethod
    def lru_ttl(
        cls, maxsize: int, seconds: float, getsizeof: Callable[[V], int] | None = None
    ) -> Cache[K, V]:
        """As ``lru``, and each entry is forgotten ``seconds`` after it was kept."""
        store: cachetools.TTLCache[K, V] = cachetools.TTLCache(
            maxsize, seconds, getsizeof=getsizeof
        )
        return cls(store, getsizeof is not None)

    @property
    def maxsize(self) -> float:
        return self._store.maxsize

    @property
    def currsize(self) -> float:
        with self._lock:
            return self._store.currsize

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def values(self) -> list[V]:
        """A copy of what the cache holds now (for tests and reports)."""
        with self._lock:
            return list(self._store.values())

    def get(self, key: K, valid: Callable[[V], bool] | None = None) -> V | None:
        """The value kept for ``key``; None (a miss) if there is none, or if ``valid`` says
        the one kept no longer is."""
        with self._lock:
            try:
                value = self._store[key]
            except KeyError:
                self.misses += 1
                return None
            if valid is not None and not valid(value):
                self.misses += 1
                return None
            self.hits += 1
            return value

    def put(self, key: K, value: V) -> bool:
        """Keep ``value``; False if it is too large for the cache."""
        if not self._store.maxsize:
            return False
        with self._lock:
            try:
                self._store[key] = value
            except ValueError:  # larger than the whole cache
                self._store.pop(key, None)
                return False
        return True

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for ``key``, or ``make()``'s, kept. ``make`` runs outside the lock,
        so two threads missing at once may both make it."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def pop(self, key: K) -> None:
        with self._lock:
            self._store.pop(key, None)

    def count_where(self, matches: Callable[[K], bool]) -> int:
        """How many entries' keys ``matches`` (for tests and reports)."""
        with self._lock:
            return sum(1 for key in self._store if matches(key))

    def drop_where(self, matches: Callable[[K], bool]) -> int:
        """Drop every entry whose key ``matches``; return how many. A pass over the whole
        cache: for what is rare (a repository forgotten), never for a request."""
        with self._lock:
            keys = [key for key in self._store if matches(key)]
            for key in keys:
                self._store.pop(key, None)
        return len(keys)
