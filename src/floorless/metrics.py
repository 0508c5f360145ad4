"""Prometheus metrics, in a registry of the app's own (no global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
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
        self.cache = Counter(
            "floorless_cache",
            "Cache lookups, by cache and result.",
            ["cache", "result"],
            registry=self.registry,
        )
        self.index_lag = Gauge(
            "floorless_index_lag_seconds",
            "Duration of the latest index update.",
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
