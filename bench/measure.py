"""Measuring one page of one contender: latency percentiles over sequential requests,
throughput at a fixed concurrency, processes spawned and slow-filesystem operations.

Latency is timed by the client over one keep-alive connection (what a person's browser
sees). Throughput comes from `wrk` when it is installed (a Python client cannot drive tens of
thousands of requests a second on two cores), else from a bounded pool of Python threads.
Processes are counted from the kernel's fork counter (`processes` in /proc/stat), so a
contender's children are counted whoever spawns them; the benchmark runs nothing else
meanwhile, and the figure is an average over the requests.
"""

from __future__ import annotations

import http.client
import re
import shutil
import ssl
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class PageResult:
    page: str
    url: str
    status: int
    requests: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    spawns_per_request: float
    slowfs_ops_per_request: float | None
    throughput_rps: float | None = None
    server_timing: str | None = None
    notes: list[str] = field(default_factory=list)
    # processes the server says it spawned (Server-Timing ``spawn``), per request, when counted
    server_spawns_per_request: float | None = None
    # the slow-filesystem operations counted, by the name of the thread that made them
    slowfs_ops_by_thread: dict[str, int] | None = None


def forks() -> int:
    """Processes (and threads) created on this machine since boot."""
    with open("/proc/stat", encoding="ascii") as stat:
        for line in stat:
            if line.startswith("processes "):
                return int(line.split()[1])
    raise RuntimeError("/proc/stat has no processes line")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


class Client:
    """One keep-alive HTTP/1.1 connection; reconnects when the server closes it. An https
    URL is the benchmark's own proxy on loopback, whose self-signed certificate is not
    checked."""

    def __init__(self, base_url: str, timeout: float = 600.0) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if not self.tls:
            return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(
            self.host, self.port, timeout=self.timeout, context=context
        )

    def get(self, url: str) -> tuple[int, bytes, dict[str, str]]:
        path = urlsplit(url)
        target = path.path + (f"?{path.query}" if path.query else "")
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request("GET", target, headers={"Connection": "keep-alive"})
                response = self.conn.getresponse()
                body = response.read()
                headers = {k.lower(): v for k, v in response.getheaders()}
                if headers.get("connection", "").lower() == "close":
                    self.close()
                return response.status, body, headers
            except (http.client.HTTPException, OSError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def timed_get(client: Client, url: str) -> tuple[float, int, bytes, dict[str, str]]:
    began = time.perf_counter()
    status, body, headers = client.get(url)
    return time.perf_counter() - began, status, body, headers


def measure_page(
    page: str,
    url: str,
    requests: int,
    warmup: int,
    slowfs_ops: Callable[[], dict[str, int]] | None = None,
    slowfs_reset: Callable[[], None] | None = None,
    deadline_seconds: float = 120.0,
) -> PageResult:
    """Warm up, then time ``requests`` sequential GETs; warm-up and measurement each stop
    early (after at least one request) once ``deadline_seconds`` have passed."""
    (result,) = measure_interleaved(
        page, [url], requests, warmup, slowfs_ops, slowfs_reset, deadline_seconds
    )
    return result


def measure_interleaved(
    page: str,
    urls: list[str],
    requests: int,
    warmup: int,
    slowfs_ops: Callable[[], dict[str, int]] | None = None,
    slowfs_reset: Callable[[], None] | None = None,
    deadline_seconds: float = 120.0,
    on_slowfs: int = 0,
    spawns_each: bool = False,
    prepare: Callable[[int], None] | None = None,
) -> list[PageResult]:
    """``measure_page`` for several URLs at once, one keep-alive connection each: every
    round sends one request to each, in turn, and the order flips every round, so drift and
    noise on the machine fall on all of them alike. Processes are averaged over all the
    requests, or, with ``spawns_each``, counted around each request for its own URL (and the
    server's ``Server-Timing`` count summed apart); slow-filesystem operations are counted
    for the server at index ``on_slowfs`` (the others' storage is not counted). ``prepare``,
    if given, is called with a URL's index before each request to it, outside the time
    measured."""
    clients = [Client(url) for url in urls]
    samples: list[list[float]] = [[] for _ in urls]
    status = [0] * len(urls)
    headers: list[dict[str, str]] = [{} for _ in urls]
    forked = [0] * len(urls)
    reported = [0.0] * len(urls)

    def one_round(record: bool, flip: bool) -> None:
        order = list(enumerate(urls))
        for index, url in reversed(order) if flip else order:
            if prepare is not None:
                prepare(index)
            before = forks() if record and spawns_each else 0
            elapsed, status[index], _, headers[index] = timed_get(clients[index], url)
            if record:
                samples[index].append(elapsed)
                if spawns_each:
                    forked[index] += forks() - before
                    reported[index] += timing_spawns(headers[index].get("server-timing", ""))

    try:
        warm_until = time.monotonic() + deadline_seconds
        for round_ in range(warmup):
            one_round(False, round_ % 2 == 1)
            if time.monotonic() > warm_until:
                break
        if slowfs_reset is not None:
            slowfs_reset()
        before = forks()
        stop_at = time.monotonic() + deadline_seconds
        for round_ in range(requests):
            one_round(True, round_ % 2 == 1)
            if time.monotonic() > stop_at:
                break
        spawned = forks() - before
        by_thread = slowfs_ops() if slowfs_ops is not None else None
        ops = sum(by_thread.values()) if by_thread is not None else None
    finally:
        for client in clients:
            client.close()
    count = len(samples[0])
    return [
        PageResult(
            page=page,
            url=url,
            status=status[index],
            requests=count,
            p50_ms=statistics.median(samples[index]) * 1000,
            p95_ms=percentile(samples[index], 0.95) * 1000,
            p99_ms=percentile(samples[index], 0.99) * 1000,
            spawns_per_request=forked[index] / count
            if spawns_each
            else spawned / (count * len(urls)),
            slowfs_ops_per_request=None if ops is None or index != on_slowfs else ops / count,
            slowfs_ops_by_thread=None if index != on_slowfs else by_thread,
            server_timing=headers[index].get("server-timing"),
            server_spawns_per_request=reported[index] / count if spawns_each else None,
        )
        for index, url in enumerate(urls)
    ]


def timing_spawns(header: str) -> float:
    """The processes a ``Server-Timing`` header says the request spawned (0 without one)."""
    for item in header.split(","):
        name, *params = (part.strip() for part in item.split(";"))
        if name == "spawn":
            for param in params:
                if param.startswith("dur="):
                    return float(param[4:])
    return 0.0


def first_request_ms(url: str) -> tuple[float, int]:
    """The latency of one request on a fresh connection."""
    client = Client(url)
    try:
        elapsed, status, _, _ = timed_get(client, url)
    finally:
        client.close()
    return elapsed * 1000, status


WRK_RPS = re.compile(r"Requests/sec:\s+([0-9.]+)")


def throughput(url: str, concurrency: int, seconds: float, warmup: float = 1.0) -> float:
    """Requests per second at ``concurrency`` open connections for ``seconds``, after a
    discarded run of ``warmup`` seconds at the same concurrency (a server's every worker
    thread warms up, not just the one the sequential requests reached)."""
    if warmup > 0:
        _throughput(url, concurrency, warmup)
    return _throughput(url, concurrency, seconds)


def _throughput(url: str, concurrency: int, seconds: float) -> float:
    wrk = shutil.which("wrk")
    if wrk is not None:
        threads = max(1, min(2, concurrency))
        out = subprocess.run(
            [
                wrk,
                f"-t{threads}",
                f"-c{concurrency}",
                f"-d{max(1, round(seconds))}s",
                "--timeout",
                "30s",
                url,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=seconds + 60,
        ).stdout
        found = WRK_RPS.search(out)
        if found:
            return float(found.group(1))
    return _thread_throughput(url, concurrency, seconds)


def _thread_throughput(url: str, concurrency: int, seconds: float) -> float:
    done = 0
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker() -> None:
        nonlocal done
        client = Client(url)
        count = 0
        try:
            while time.monotonic() < stop_at:
                client.get(url)
                count += 1
        finally:
            client.close()
            with lock:
                done += count

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 120)
    return done / (time.monotonic() - began)
