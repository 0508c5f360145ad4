"""Prometheus metrics, in a registry of the app's own (no global state)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


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
        for name, cache in sorted(self.caches().items()):
            family.add_metric([name, "hit"], cache.hits)
            family.add_metric([name, "miss"], cache.misses)
        yield family


class Metrics:
    def __init__(self, caches: Callable[[], Mapping[str, HitCounting]]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(CacheCollector(caches))
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
        self.queries = Counter(
            "floorless_db_queries",
            "Database queries made while answering requests.",
            ["route"],
            registry=self.registry,
        )
