"""Time each page class over repeated, sequential requests; the floor is what a repository
page costs beyond a page outside any repository.

Requests go round-robin (home, raw, commits, outside, static, home, ...) so drift in the
server's load touches every class alike; one unrecorded round first opens the connection and
warms the server's caches. The run stops after ``requests`` rounds, or once ``max_seconds``
have passed and every class has been timed at least once; each request is bounded by the
client's timeout.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from floorless.core.errors import DiagnosisError
from floorless.probe.client import Client
from floorless.probe.discover import Page, Plan


def parse_server_timing(values: list[str]) -> dict[str, float]:
    """``Server-Timing`` header values -> {metric: dur}; a metric without ``dur`` is left out,
    a metric named twice is summed."""
    metrics: dict[str, float] = {}
    for value in values:
        for entry in _split_outside_quotes(value, ","):
            name, *params = (p.strip() for p in _split_outside_quotes(entry, ";"))
            if not name:
                continue
            for param in params:
                key, _, raw = param.partition("=")
                if key.strip().lower() != "dur":
                    continue
                try:
                    metrics[name] = metrics.get(name, 0.0) + float(raw.strip().strip('"'))
                except ValueError:
                    continue
    return metrics


def _split_outside_quotes(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (p95 of 20 values is the 19th smallest)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class ClassResult:
    page: Page
    ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    server_timing: dict[str, list[float]] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return bool(self.ms)

    @property
    def ok(self) -> bool:
        """Mostly answered with a success (2xx or 304): fit to compare."""
        good = sum(n for status, n in self.statuses.items() if 200 <= status < 300 or status == 304)
        return self.measured and good * 2 > len(self.ms)

    @property
    def p50(self) -> float:
        return statistics.median(self.ms)

    @property
    def p95(self) -> float:
        return percentile(self.ms, 0.95)

    def timing_medians(self) -> dict[str, float]:
        return {name: statistics.median(v) for name, v in self.server_timing.items() if v}


@dataclass
class Result:
    plan: Plan
    classes: list[ClassResult]
    rounds: int
    seconds: float

    def baseline(self) -> ClassResult | None:
        """The non-repository page, else the static asset: what any page costs."""
        for key in ("outside", "static"):
            for result in self.classes:
                if result.page.key == key and result.ok:
                    return result
        return None

    def floor_ms(self) -> float | None:
        """The fastest repository page's p50 minus the baseline's p50 (never below 0)."""
        base = self.baseline()
        repo = [r.p50 for r in self.classes if r.page.in_repository and r.ok]
        if base is None or not repo:
            return None
        return max(0.0, min(repo) - base.p50)


def run(plan: Plan, client: Client, requests: int, max_seconds: float) -> Result:
    """Time every page class ``requests`` times, in rounds; stop once ``max_seconds`` (counted
    from the warm-up round) have passed and every class has at least one timing."""
    results = [ClassResult(page) for page in plan.pages if page.url is not None]
    if not results:
        raise DiagnosisError("no page to time: give --repo or --url CLASS=URL")
    began = time.perf_counter()
    rounds = 0
    for round_number in range(requests + 1):  # round 0 warms up and is not recorded
        for result in results:
            assert result.page.url is not None
            if round_number > 1 and time.perf_counter() - began > max_seconds:
                return Result(plan, results, rounds, time.perf_counter() - began)
            try:
                response = client.get(result.page.url)
            except DiagnosisError as exc:
                if round_number > 0:
                    result.errors.append(str(exc))
                continue
            if round_number == 0:
                continue
            result.ms.append(response.seconds * 1000)
            result.statuses[response.status] += 1
            timing = parse_server_timing(response.header_values("Server-Timing"))
            for name, value in timing.items():
                result.server_timing.setdefault(name, []).append(value)
        rounds = round_number
    return Result(plan, results, rounds, time.perf_counter() - began)
