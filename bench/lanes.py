"""``python -m bench.lanes``: do cheap pages queue behind dear ones?

A person opening a file should not wait because someone else asked for a blame, a big diff or
an archive. floorless runs pages that can cost seconds (``DEAR`` in ``web.gateway``) on threads
of their own; this measures whether that is enough, over distinct URLs (every page a cache
miss), in three phases on one server whose index is complete:

1. **unloaded**: one client asks for each of a set of raw files and file pages once, in turn:
   each page's cost with nothing else running;
2. **busy**: ``--clients`` clients (16) ask for another set of raw files and file pages, each
   once: the queueing of cheap pages among themselves;
3. **dear**: the same number of clients on a third set while ``--dear-clients`` more ask, over
   and over, for blames, commit diffs and archives (each a different one, so never cached).

It reports each phase's p50/p95/p99 for raw and file pages, the loaded phases' p50 against the
unloaded one, and how many dear answers came back meanwhile (a 503 with Retry-After, the
answer when the dear lane is full, counts as an answer). Counts and ratios measured in one run,
not absolute times, are what to read on a shared machine.

Where cgit is installed, its raw files (``/plain/``) and file pages (``/tree/``) without its
cache go through the first two phases too, on the same files: how far 16 clients alone move a
server's p50 on this machine, the load generator on the same cores, whatever the server.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote

from bench import contenders, measure
from bench.harness import (
    OWNER,
    Target,
    git,
    prepare_store,
    start_floorless,
    target_repository,
    wait_listening,
)
from bench.harness import wait_floorless_indexed as wait_indexed

CHEAP = ("raw", "file")
PHASES = ("unloaded", "busy", "dear")
# "a few times", made a number: what the cheap pages' p50 may reach while dear pages run,
# against the same pages at the same concurrency without them
TARGET_RATIO = 4.0


@dataclass
class LanesResult:
    repo: str
    commits: int
    clients: int
    dear_clients: int
    requests: dict[str, int] = field(default_factory=dict)  # cheap requests per phase
    ms: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # phase/class/pXX
    errors: dict[str, int] = field(default_factory=dict)  # non-200 cheap answers per phase
    dear_answers: dict[str, int] = field(default_factory=dict)  # status -> count, dear phase
    dear_kinds: dict[str, int] = field(default_factory=dict)  # blame/diff/archive -> answers
    # cgit without its cache, the unloaded and busy phases on the same files
    cgit_ms: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    cgit_requests: dict[str, int] = field(default_factory=dict)
    cgit_errors: dict[str, int] = field(default_factory=dict)

    def ratio(self, phase: str, kind: str, against: str = "unloaded", cgit: bool = False) -> float:
        """``phase``'s p50 of ``kind`` against ``against``'s (``cgit``: cgit's phases)."""
        ms = self.cgit_ms if cgit else self.ms
        base = ms.get(against, {}).get(kind, {}).get("p50", 0.0)
        loaded = ms.get(phase, {}).get(kind, {}).get("p50", 0.0)
        return loaded / base if base else 0.0


def cheap_url(base: str, name: str, branch: str, kind: str, path: str) -> str:
    r = f"{base}/{OWNER}/{name}"
    verb = "raw" if kind == "raw" else "src"
    return f"{r}/{verb}/branch/{quote(branch)}/{quote(path)}"


def cgit_url(base: str, name: str, branch: str, kind: str, path: str) -> str:
    verb = "plain" if kind == "raw" else "tree"
    return f"{base}/{OWNER}/{name}/{verb}/{quote(path)}?h={quote(branch, safe='')}"


def dear_urls(base: str, name: str, branch: str, files: list[str], commits: list[str]) -> list[str]:
    """Blames of distinct files, diffs and archives of distinct commits, interleaved."""
    r = f"{base}/{OWNER}/{name}"
    urls: list[str] = []
    for i in range(max(len(files), len(commits))):
        if i < len(files):
            urls.append(f"{r}/blame/branch/{quote(branch)}/{quote(files[i])}")
        if i < len(commits):
            urls.append(f"{r}/commit/{commits[i]}.diff")
            urls.append(f"{r}/archive/{commits[i]}.tar.gz")
    return urls


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    return {
        f"p{int(q * 100)}": round(measure.percentile(samples, q) * 1000, 2)
        for q in (0.5, 0.95, 0.99)
    }


def _jobs(
    url: Callable[[str, str, str, str, str], str], base: str, target: Target, files: list[str]
) -> list[tuple[str, str]]:
    """(class, URL) of each cheap page of ``files``, as ``url`` names it on ``base``."""
    return [
        (kind, url(base, target.name, target.branch, kind, path))
        for path in files
        for kind in CHEAP
    ]


def _figures(times: dict[str, list[float]]) -> tuple[int, dict[str, dict[str, float]]]:
    """How many answers a phase had, and their percentiles by class."""
    return sum(len(v) for v in times.values()), {k: _percentiles(v) for k, v in times.items()}


def _crawl(
    base: str, jobs: list[tuple[str, str]], clients: int
) -> tuple[dict[str, list[float]], int]:
    """``clients`` connections share ``jobs`` (class, URL), each asked once: the seconds each
    answer took, by class, and how many were not 200."""
    todo: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
    for job in jobs:
        todo.put(job)
    times: dict[str, list[float]] = {kind: [] for kind in CHEAP}
    errors = [0]
    lock = threading.Lock()

    def work() -> None:
        client = measure.Client(base)
        try:
            while True:
                try:
                    kind, url = todo.get_nowait()
                except queue.Empty:
                    return
                took, status, _, _ = measure.timed_get(client, url)
                with lock:
                    times[kind].append(took)
                    errors[0] += status != 200
        finally:
            client.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=1800)
    return times, errors[0]


def _dear_load(
    base: str, urls: list[str], clients: int, stop: threading.Event, answers: dict[str, int]
) -> list[threading.Thread]:
    """``clients`` threads asking for the dear URLs in turn (each once) until ``stop``."""
    todo: queue.SimpleQueue[str] = queue.SimpleQueue()
    for url in urls:
        todo.put(url)
    lock = threading.Lock()

    def work() -> None:
        client = measure.Client(base)
        try:
            while not stop.is_set():
                try:
                    url = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    status, _, _ = client.get(url)
                except OSError:
                    status = 0
                kind = "blame" if "/blame/" in url else "archive" if "/archive/" in url else "diff"
                with lock:
                    answers[str(status)] = answers.get(str(status), 0) + 1
                    if status in (200, 503):
                        answers[kind] = answers.get(kind, 0) + 1
        finally:
            client.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    return threads


def choose(target: Target, home: Path, per_phase: int) -> tuple[list[list[str]], list[str]]:
    """Three disjoint sets of files (one per phase) and the commits for dear pages, spread
    over the whole list (every 7th file, every 97th commit) so each set is alike."""
    files = [
        f
        for f in git(
            target.path, "ls-tree", "-r", "--name-only", target.branch, home=home
        ).splitlines()
        if f
    ]
    commits = git(target.path, "rev-list", "--max-count=20000", target.branch, home=home).split()
    spread = files[::7] + [f for i, f in enumerate(files) if i % 7]
    sets = [spread[i * per_phase : (i + 1) * per_phase] for i in range(3)]
    sets = [s or files[:per_phase] for s in sets]  # a small repository: reuse (warm) files
    return sets, commits[::97] or commits


def run(
    target: Target,
    work: Path,
    clients: int = 16,
    dear_clients: int = 4,
    per_phase: int = 150,
    data: Path | None = None,
    log: Callable[[str], None] = print,
    serve: tuple[str, ...] = (),
) -> LanesResult:
    """The three phases on one ``floorless serve`` of ``target`` (over ``data`` when given:
    a data directory whose index is already complete; ``serve``: more of its options)."""
    repos, home = prepare_store(work / "store", target.path, target.name)
    sets, commits = choose(target, home, per_phase)
    result = LanesResult(target.name, target.commits, clients, dear_clients)
    served, proc = start_floorless(repos, data or work / "data", target, commits[0], serve)
    base = served.base_url
    try:
        wait_listening(int(base.rsplit(":", 1)[1]), proc, 120)
        log(f"lanes: waiting for the index of {target.commits} commits")
        wait_indexed(served, deadline=7200)
        for phase, files in zip(PHASES, sets, strict=True):
            jobs = _jobs(cheap_url, base, target, files)
            stop = threading.Event()
            answers: dict[str, int] = {}
            dear: list[threading.Thread] = []
            if phase == "dear":
                urls = dear_urls(base, target.name, target.branch, sets[0], commits)
                dear = _dear_load(base, urls, dear_clients, stop, answers)
                time.sleep(1.0)  # the dear lane is busy before the first cheap page
            log(f"lanes: {phase}, {len(jobs)} cheap pages")
            times, errors = _crawl(base, jobs, 1 if phase == "unloaded" else clients)
            stop.set()
            for thread in dear:
                thread.join(timeout=600)
            result.requests[phase], result.ms[phase] = _figures(times)
            result.errors[phase] = errors
            if phase == "dear":
                kinds = ("blame", "diff", "archive")
                result.dear_kinds = {k: answers.pop(k, 0) for k in kinds}
                result.dear_answers = answers
    finally:
        served.stop()
    if contenders.available("cgit") is None:
        with contenders.running(
            "cgit", repos, f"{OWNER}/{target.name}", target.branch, target.file,
            target.directory, target.history_path, commits[0], home, work / "cgit",
        ) as cgit:  # fmt: skip
            for phase, files in zip(PHASES[:2], sets, strict=False):
                jobs = _jobs(cgit_url, cgit.base_url, target, files)
                log(f"lanes: cgit, {phase}, {len(jobs)} cheap pages")
                times, errors = _crawl(cgit.base_url, jobs, 1 if phase == "unloaded" else clients)
                result.cgit_requests[phase], result.cgit_ms[phase] = _figures(times)
                result.cgit_errors[phase] = errors
    return result


def markdown(result: LanesResult) -> list[str]:
    lines = [
        f"Repository `{result.repo}` ({result.commits:,} commits); {result.clients} clients "
        f"on distinct raw files and file pages (each a cache miss), the dear phase with "
        f"{result.dear_clients} more asking for blames, diffs and archives.",
        "",
        "| phase | cheap pages | raw p50 / p95 / p99 ms | file p50 / p95 / p99 ms "
        "| raw p50 / unloaded | file p50 / unloaded | raw p50 / busy | file p50 / busy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for phase in PHASES:
        if phase not in result.ms:
            continue
        cells = []
        for kind in CHEAP:
            m = result.ms[phase][kind]
            cells.append(f"{m['p50']} / {m['p95']} / {m['p99']}")
        lines.append(
            f"| {phase} | {result.requests[phase]} ({result.errors[phase]} not 200) | "
            f"{cells[0]} | {cells[1]} | {result.ratio(phase, 'raw'):.1f}x | "
            f"{result.ratio(phase, 'file'):.1f}x | {result.ratio(phase, 'raw', 'busy'):.2f}x | "
            f"{result.ratio(phase, 'file', 'busy'):.2f}x |"
        )
    for phase in PHASES[:2]:
        if phase not in result.cgit_ms:
            continue
        cells = ["{p50} / {p95} / {p99}".format(**result.cgit_ms[phase][kind]) for kind in CHEAP]
        lines.append(
            f"| cgit, {phase} | {result.cgit_requests[phase]} ({result.cgit_errors[phase]} not"
            f" 200) | {' | '.join(cells)} | {result.ratio(phase, 'raw', cgit=True):.1f}x | "
            f"{result.ratio(phase, 'file', cgit=True):.1f}x | | |"
        )
    if result.dear_kinds:
        lines += [
            "",
            "Dear answers during the dear phase: "
            + ", ".join(f"{k} {v}" for k, v in result.dear_kinds.items())
            + " (by status: "
            + ", ".join(f"{k} {v}" for k, v in sorted(result.dear_answers.items()))
            + ").",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes", description=__doc__)
    parser.add_argument("--repo", default="medium", help="small, medium, large or a path")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--dear-clients", type=int, default=4)
    parser.add_argument("--per-phase", type=int, default=150, help="files asked per phase")
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    target = target_repository(args.repo, args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="floorless-lanes-") as work:
        result = run(
            target,
            Path(work),
            args.clients,
            args.dear_clients,
            args.per_phase,
            log=lambda line: print(line, file=sys.stderr),
        )
    print("\n".join(markdown(result)))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
