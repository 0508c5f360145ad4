"""Prometheus metrics, in a registry of the app's own (no global state)."""

from __future__ import annotations

import bisect
import gc
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from floorless.core import heap


class HitCounting(Protocol):
    @property
    def hits(self) -> int: ...

    @property
    def misses(self) -> int: ...


class CacheCollector(Collector):
    """Hits and misses of every cache, read when Prometheus scrapes."""

    def __init__(self, caches: Callable[[], Mapping[str, HitCounting]]) -> None:
        self.caches = caches

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "floorless_cache_lookups",
            "Cache lookups, by cache and result.",
            labels=["cache", "result"],
        )
        held = GaugeMetricFamily(
            "floorless_cache_bytes",
            "Bytes each cache kept by size holds now (as it measures them), by cache.",
            labels=["cache"],
        )
        for name, cache in sorted(self.caches().items()):
            family.add_metric([name, "hit"], cache.hits)
            family.add_metric([name, "miss"], cache.misses)
            if getattr(cache, "by_bytes", False):
                held.add_metric([name], float(getattr(cache, "currsize", 0.0)))
        yield family
        yield held


# upper bounds (seconds) of the pause lengths told apart; 0.02: the longest a pause may be
PAUSE_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class GcPauses(Collector):
    """How often Python's garbage collector stopped the process, and for how long, by
    generation: a full collection over a large heap is a pause every request in flight
    waits through, so it shows in a small page's p99. Those the interpreter starts, in
    whichever thread allocates, apart from those ``heap`` runs at moments it chooses
    (``heap.chosen``: young ones while busy, a full one once quiet). The interpreter's own
    are also counted by length (``PAUSE_BUCKETS``), so that a scraper can tell how many
    pauses over 20 ms fell between two of its scrapes, whatever came before."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        # per generation: pauses at most each of PAUSE_BUCKETS long (not cumulative)
        self.lengths = [[0] * (len(PAUSE_BUCKETS) + 1) for _ in range(3)]
        self.seconds = [0.0, 0.0, 0.0]
        self.longest = [0.0, 0.0, 0.0]
        self.chosen_count = [0, 0, 0]
        self.chosen_longest = [0.0, 0.0, 0.0]
        self._started = 0.0
        self._chosen = False
        # re-entrant: a collection can start in ``collect`` itself, which allocates under it,
        # and its callback, in the same thread, takes it again (a plain lock: a deadlock)
        self._lock = threading.RLock()

    def install(self) -> None:
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            self._chosen = heap.chosen
            return
        took = time.perf_counter() - self._started
        generation = int(info.get("generation", 2))
        with self._lock:
            if self._chosen:
                self.chosen_count[generation] += 1
                self.chosen_longest[generation] = max(self.chosen_longest[generation], took)
                return
            self.count[generation] += 1
            self.seconds[generation] += took
            self.longest[generation] = max(self.longest[generation], took)
            self.lengths[generation][bisect.bisect_left(PAUSE_BUCKETS, took)] += 1

    def collect(self) -> Iterator[Metric]:
        count = CounterMetricFamily(
            "floorless_gc_collections", "Garbage collections, by generation.", labels=["gen"]
        )
        seconds = CounterMetricFamily(
            "floorless_gc_pause_seconds",
            "Time the garbage collector held the process, by generation.",
            labels=["gen"],
        )
        longest = GaugeMetricFamily(
            "floorless_gc_longest_pause_seconds",
            "The longest garbage-collection pause so far, by generation.",
            labels=["gen"],
        )
        chosen = CounterMetricFamily(
            "floorless_gc_chosen_collections",
            "Garbage collections run at moments floorless chose (heap.Activity), by generation.",
            labels=["gen"],
        )
        chosen_longest = GaugeMetricFamily(
            "floorless_gc_chosen_longest_pause_seconds",
            "The longest of those so far, by generation.",
            labels=["gen"],
        )
        lengths = HistogramMetricFamily(
            "floorless_gc_pause_length_seconds",
            "Garbage-collection pauses the interpreter started, by length and generation.",
            labels=["gen"],
        )
        with self._lock:
            for gen in range(3):
                below, buckets = 0, []
                bounds = (*PAUSE_BUCKETS, math.inf)
                for bound, pauses in zip(bounds, self.lengths[gen], strict=True):
                    below += pauses
                    buckets.append(("+Inf" if bound == math.inf else repr(bound), below))
                lengths.add_metric([str(gen)], buckets, self.seconds[gen])
                count.add_metric([str(gen)], self.count[gen])
                seconds.add_metric([str(gen)], self.seconds[gen])
                longest.add_metric([str(gen)], self.longest[gen])
                chosen.add_metric([str(gen)], self.chosen_count[gen])
                chosen_longest.add_metric([str(gen)], self.chosen_longest[gen])
        frozen = GaugeMetricFamily(
            "floorless_gc_frozen_objects",
            "Objects in the permanent generation, which no collection walks (heap.settle).",
            value=heap.frozen(),
        )
        yield from (count, seconds, longest, lengths, chosen, chosen_longest, frozen)


_gc_pauses: GcPauses | None = None
_gc_lock = threading.Lock()


def gc_pauses() -> GcPauses:
    """The process's one garbage-collection watcher, installed the first time it is asked
    for (the collector is the process's, whichever app reports it)."""
    global _gc_pauses
    with _gc_lock:
        if _gc_pauses is None:
            _gc_pauses = GcPauses()
            _gc_pauses.install()
        return _gc_pauses


class Metrics:
    def __init__(self, caches: Callable[[], Mapping[str, HitCounting]]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(CacheCollector(caches))
        ProcessCollector(registry=self.registry)  # resident memory, CPU, open files
        self.registry.register(gc_pauses())
        self.latency = Histogram(
            "floorless_request_seconds",
            "Time to answer a request, by route.",
            ["route"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self.responses = Counter(
            "floorless_responses",
            "Responses, by route and status.",
            ["route", "status"],
            registry=self.registry,
        )
        self.spawns = Counter(
            "floorless_spawned_processes",
            "Processes started by floorless.",
            ["route"],
            registry=self.registry,
        )
        self.index_lag = Gauge(
            "floorless_index_lag_seconds",
            "Seconds the oldest ref change not yet indexed has waited.",
            registry=self.registry,
        )
        self.index_pending = Gauge(
            "floorless_index_pending",
            "Repositories waiting to be indexed.",
            registry=self.registry,
        )
        # Several processes answer on one port (``processes``) and each reports its own
        # figures: the process id says whose a scrape is.
        self.process_id = Gauge(
            "floorless_process_id",
            "The id of the process that answered this scrape.",
            registry=self.registry,
        )
        self.index_commits = Gauge(
            "floorless_index_commits",
            "Commits whose changed paths this process has indexed since it started (each "
            "repository is indexed by one process at a time, under its lease: the processes' "
            "sums add up to each history once).",
            registry=self.registry,
        )
        self.queries = Counter(
            "floorless_db_queries",
            "Database queries made while answering requests.",
            ["route"],
            registry=self.registry,
        )
