"""``python -m bench.load``: many clients on small pages while hostile and heavy clients run.

floorless serves the benchmark repository and a repository holding one large blob. For
``--seconds``, ``wrk`` keeps ``--clients`` connections busy on a mix of small pages (home,
directory, file, raw, commits, path history, commit, explore) while, at the same time:

- ``--slow-bodies`` clients announce a request body and send it one byte a second (each is cut
  off by the server's ``client_timeout`` and comes straight back);
- ``--heavy`` clients download the large blob's raw bytes and ask for its file page, over and
  over (a 503 with Retry-After, floorless's answer when its heavy-work slots are full, counts
  as an answer, not an error).

It reports the small pages' requests, errors (non-2xx answers, socket errors and timeouts),
latency percentiles, what the slow and heavy clients got, and the server's resident memory
before and after. Everything is bounded: the run ends after ``--seconds`` by itself.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pygit2

from bench import measure
from bench.harness import (
    OWNER,
    page_urls,
    prepare_store,
    server_rss_mb,
    start_floorless,
    target_repository,
)
from bench.harness import wait_floorless_indexed as wait_indexed

HEAVY_REPO = "heavy"
HEAVY_FILE = "big.bin"


@dataclass
class LoadResult:
    clients: int
    seconds: float
    small_pages: list[str]
    requests: int = 0
    errors: int = 0
    error_detail: dict[str, int] = field(default_factory=dict)
    requests_per_second: float = 0.0
    latency_ms: dict[str, float] = field(default_factory=dict)  # p50, p75, p90, p99, max
    slow_bodies: dict[str, int] = field(default_factory=dict)
    heavy: dict[str, int] = field(default_factory=dict)
    rss_mb_before: float = 0.0
    rss_mb_after: float = 0.0
    heavy_mb: int = 0


def build_heavy(path: Path, megabytes: int) -> None:
    """A bare repository whose one commit holds a ``megabytes`` MB incompressible blob."""
    if (path / "HEAD").exists():
        return
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    blob = repo.create_blob(os.urandom(megabytes * 1024 * 1024))
    builder = repo.TreeBuilder()
    builder.insert(HEAVY_FILE, blob, pygit2.enums.FileMode.BLOB)
    who = pygit2.Signature("Bench", "bench@example.org", 1_700_000_000, 0)
    repo.create_commit("refs/heads/main", who, who, "a large blob\n", builder.write(), [])


def _slow_body_client(port: int, stop_at: float, tally: Counter[str], lock: threading.Lock) -> None:
    head = (
        b"POST /-/login HTTP/1.1\r\nHost: bench\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\n"
    )
    while time.monotonic() < stop_at:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(head)
                outcome = "held to the end of the run"
                while time.monotonic() < stop_at:
                    time.sleep(1.0)
                    sock.sendall(b"a")
                    sock.settimeout(0.01)
                    with contextlib.suppress(TimeoutError, BlockingIOError):
                        answer = sock.recv(64)
                        outcome = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"
                        break
                    sock.settimeout(5)
        except OSError as exc:
            outcome = f"connection: {type(exc).__name__}"
        with lock:
            tally[outcome] += 1


def _heavy_client(
    port: int, paths: list[str], stop_at: float, tally: Counter[str], lock: threading.Lock
) -> None:
    turn = 0
    while time.monotonic() < stop_at:
        path = paths[turn % len(paths)]
        turn += 1
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            while response.read(1 << 20):
                if time.monotonic() > stop_at + 60:
                    break
            outcome = f"{response.status}"
        except (OSError, http.client.HTTPException) as exc:
            outcome = f"error: {type(exc).__name__}"
        finally:
            conn.close()
        with lock:
            tally[outcome] += 1
        if outcome == "503":
            time.sleep(0.5)


_LUA = """
local paths = {%s}
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter %% #paths) + 1])
end
"""
_LATENCY = re.compile(r"^\s+(50|75|90|99)%\s+([0-9.]+)(us|ms|s)\s*$", re.M)
_MAX = re.compile(r"^\s+Latency\s+\S+\s+\S+\s+([0-9.]+)(us|ms|s)", re.M)
_TOTAL = re.compile(r"(\d+) requests in ([0-9.]+)(s|m|ms)")
_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")


def _ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse_wrk(out: str, result: LoadResult) -> None:
    for percent, value, unit in _LATENCY.findall(out):
        result.latency_ms[f"p{percent}"] = _ms(value, unit)
    found = _MAX.search(out)
    if found:
        result.latency_ms["max"] = _ms(found.group(1), found.group(2))
    total = _TOTAL.search(out)
    if total:
        result.requests = int(total.group(1))
    sockets = _SOCKET.search(out)
    detail: dict[str, int] = {}
    if sockets:
        for name, count in zip(
            ("connect", "read", "write", "timeout"), sockets.groups(), strict=True
        ):
            if int(count):
                detail[f"socket {name}"] = int(count)
    non2xx = _NON2XX.search(out)
    if non2xx:
        detail["non-2xx"] = int(non2xx.group(1))
    result.error_detail = detail
    result.errors = sum(detail.values())
    rps = measure.WRK_RPS.search(out)
    if rps:
        result.requests_per_second = float(rps.group(1))


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> LoadResult:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is needed: bash scripts/install-bench-deps.sh")
    work = Path(tempfile.mkdtemp(prefix="floorless-load-"))
    try:
        built = target = target_repository(args.repo, args.cache_dir)
        repos, _ = prepare_store(work / "store", built.path, target.name)
        log(f"building a repository with a {args.heavy_mb} MB blob")
        build_heavy(repos / OWNER / f"{HEAVY_REPO}.git", args.heavy_mb)
        tip = pygit2.Repository(str(built.path)).revparse_single(f"refs/heads/{built.branch}~1")
        served, proc = start_floorless(repos, work / "data", target, str(tip.id))
        try:
            port = int(served.base_url.rsplit(":", 1)[1])
            log("waiting for floorless to index")
            _wait_up(served.base_url)
            wait_indexed(served, deadline=600)
            urls = {k: v for k, v in page_urls("", target, str(tip.id)).items() if v}
            small = [
                urls[k]
                for k in ("home", "dir", "file", "raw", "commits", "history", "commit", "explore")
            ]
            client = measure.Client(served.base_url)
            for path in small:  # warm: the run measures serving, not first renders
                client.get(served.base_url + path)
            client.close()
            result = LoadResult(args.clients, args.seconds, small, heavy_mb=args.heavy_mb)
            result.rss_mb_before = server_rss_mb(proc.pid)
            lua = work / "mix.lua"
            lua.write_text(_LUA % ", ".join(json.dumps(p) for p in small))
            stop_at = time.monotonic() + args.seconds
            lock = threading.Lock()
            slow: Counter[str] = Counter()
            heavy: Counter[str] = Counter()
            heavy_paths = [
                f"/{OWNER}/{HEAVY_REPO}/raw/branch/main/{HEAVY_FILE}",
                f"/{OWNER}/{HEAVY_REPO}/src/branch/main/{HEAVY_FILE}",
            ]
            threads = [
                threading.Thread(target=_slow_body_client, args=(port, stop_at, slow, lock))
                for _ in range(args.slow_bodies)
            ] + [
                threading.Thread(
                    target=_heavy_client, args=(port, heavy_paths, stop_at, heavy, lock)
                )
                for _ in range(args.heavy)
            ]
            for thread in threads:
                thread.start()
            log(
                f"{args.clients} clients on small pages for {args.seconds:.0f} s, with "
                f"{args.slow_bodies} slow-body and {args.heavy} heavy clients"
            )
            out = subprocess.run(
                [
                    wrk,
                    "-t2",
                    f"-c{args.clients}",
                    f"-d{round(args.seconds)}s",
                    "--timeout",
                    "30s",
                    "--latency",
                    "-s",
                    str(lua),
                    served.base_url,
                ],
                capture_output=True,
                text=True,
                check=False,
                timeout=args.seconds + 120,
            ).stdout
            for thread in threads:
                thread.join(timeout=args.seconds + 180)
            parse_wrk(out, result)
            result.slow_bodies = dict(slow)
            result.heavy = dict(heavy)
            result.rss_mb_after = server_rss_mb(proc.pid)
            if "requests in" not in out:
                raise SystemExit(f"wrk printed no result:\n{out}")
            return result
        finally:
            served.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _wait_up(base_url: str) -> None:
    client = measure.Client(base_url)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, http.client.HTTPException):
                if client.get(base_url + "/")[0] == 200:
                    return
            time.sleep(0.1)
    finally:
        client.close()
    raise SystemExit("floorless did not start")


def markdown(result: LoadResult, command: str) -> str:
    lat = result.latency_ms
    lines = [
        f"`{command}`",
        "",
        f"- {result.clients} clients on small pages for {result.seconds:.0f} s: "
        f"{result.requests:,} requests ({result.requests_per_second:,.0f}/s), "
        f"**{result.errors} errors**"
        + (
            f" ({', '.join(f'{k} {v}' for k, v in result.error_detail.items())})"
            if result.error_detail
            else ""
        ),
        "- small-page latency (ms): "
        + ", ".join(f"{k} {lat[k]:.1f}" for k in ("p50", "p75", "p90", "p99", "max") if k in lat),
        f"- slow-body clients: {_tally(result.slow_bodies)}",
        f"- heavy clients ({result.heavy_mb} MB blob, raw and file page): {_tally(result.heavy)}",
        f"- server memory (RSS): {result.rss_mb_before:.0f} MB before, "
        f"{result.rss_mb_after:.0f} MB after",
    ]
    return "\n".join(lines) + "\n"


def _tally(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} x {k}" for k, v in sorted(counts.items())) or "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--repo", default="small", help="small, medium or large (default small)")
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--slow-bodies", type=int, default=4)
    parser.add_argument("--heavy", type=int, default=2)
    parser.add_argument("--heavy-mb", type=int, default=100)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args(argv)
    result = run(args)
    command = "python -m bench.load " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(result, command.strip())
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return 0 if result.errors == 0 and result.requests else 1


if __name__ == "__main__":
    raise SystemExit(main())
