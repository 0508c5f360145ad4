"""The ``cold`` scenario of ``python -m bench``: first visits on a real-sized history.

Warm pages say little about the first person to open a repository. This runs, on the
benchmark's repository (``--repo large`` is the one to judge by), each cold measurement the
benchmark has, one after the other so that none shares the cores with another:

- ``index``: the first index of the whole history against ``git log --raw`` and ``git
  commit-graph write --changed-paths`` (``bench.index``), and a restart loading it;
- ``first``: ``floorless serve`` over a fresh data directory, holding the repository and a
  companion beside it (the caller's; by default the medium one beside the large one, flask's
  size beside git.git's): seconds until the first page of a path's history and the home
  page's last-commit column are complete when asked for at once, until the whole index is
  done, resident memory during indexing and once both are indexed and idle (its worker
  processes', and beside it the whole process tree's); then a restart over the same data, and
  the seconds until both pages are complete again;
- ``blame``: a cold blame page of a 7,000-line file against ``git blame --porcelain``
  (``bench.cold``, its generated repository);
- ``commit``: a cold 300-file commit page against ``git show --stat`` (``bench.cold_commit``);
- ``sweep``: distinct URLs, each once, against cgit without its cache, throughput on distinct
  URLs at 16 clients, memory and garbage-collection pauses during the crawl (``bench.sweep``);
- ``lanes``: cheap pages at 16 clients while blames, diffs and archives run (``bench.lanes``),
  on the data directory ``first`` left, its index complete.

Each part's failure is recorded and the others still run. The figures go into the JSON and
docs/benchmarks.md (``bench.scenarios.cold``), judged against the targets.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import cold, cold_commit, index, lanes, measure, sweep
from bench.harness import (
    Target,
    fresh_database,
    git,
    prepare_store,
    server_rss_mb,
    start_floorless,
    target_repository,
    wait_listening,
)
from bench.repos import SIZES

PARTS = ("index", "first", "blame", "commit", "sweep", "lanes")
# what "within a few seconds" is held to, for the first visit's pages and after a restart
FEW_SECONDS = 5.0
# what the resident memory of a forge serving the repositories, indexed and idle, is held to
MEMORY_MB = 300.0


@dataclass
class ColdResults:
    repo: str
    commits: int
    parts: list[str]
    processes: int = 1  # floorless serve's, in the first, sweep and lanes parts
    database: str = "sqlite"
    index: dict[str, Any] = field(default_factory=dict)
    first: dict[str, Any] = field(default_factory=dict)
    blame: dict[str, Any] = field(default_factory=dict)
    commit: dict[str, Any] = field(default_factory=dict)
    sweep: dict[str, Any] = field(default_factory=dict)
    lanes: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def server_memory(root: int) -> dict[str, float]:
    """Resident memory of a ``floorless serve`` (pid ``root``): its worker processes' (the
    forges, whose memory the targets are about), and the whole tree with granian's main
    process and any git child."""
    workers: list[int] = []
    try:
        for task in Path(f"/proc/{root}/task").iterdir():
            workers += [int(p) for p in (task / "children").read_text().split()]
    except OSError:
        pass
    return {
        "workers": round(sum(_rss_mb(pid) for pid in workers), 1),
        # of it, the heap and other private memory; the rest is mapped files (pack files
        # above all), pages the kernel can drop and shares with any other reader
        "workers_anon": round(sum(_rss_mb(pid, "RssAnon") for pid in workers), 1),
        "all": round(server_rss_mb(root), 1),
    }


def _complete(client: measure.Client, url: str, done: bytes, pending: bytes) -> bool:
    status, body, _ = client.get(url)
    return status == 200 and (done in body if done else pending not in body)


def watch_first_visit(
    base: str, root: int, history: str, home: str, deadline: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """From now on, ask for ``history`` and ``home`` until each is complete, and the metrics
    until the index is: seconds for each, and the largest resident memory seen meanwhile."""
    began = time.monotonic()
    figures: dict[str, Any] = {}
    client = measure.Client(base)
    peak = 0.0
    try:
        while time.monotonic() - began < deadline:
            now = round(time.monotonic() - began, 2)
            if "history_s" not in figures and _complete(client, history, b"", b"being prepared"):
                figures["history_s"] = now
                log(f"first: the path's history complete after {now} s")
            if "home_s" not in figures and _complete(client, home, b'data-ready="yes"', b""):
                figures["home_s"] = now
                log(f"first: the home page's last-commit column complete after {now} s")
            _, metrics, _ = client.get(base + "/-/metrics")
            peak = max(peak, server_memory(root)["workers"])
            if (
                "history_s" in figures
                and "home_s" in figures
                and b"\nfloorless_index_pending 0.0\n" in metrics
            ):
                figures["indexed_s"] = round(time.monotonic() - began, 2)
                break
            time.sleep(0.25)
    finally:
        client.close()
    figures["rss_peak_mb"] = peak
    return figures


def first_visit(
    target: Target,
    companion: Target | None,
    work: Path,
    deadline: float,
    log: Callable[[str], None],
    serve: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``first`` part (see the module's docstring); leaves ``work``'s store and data
    directory, its index complete, to the ``lanes`` part."""
    repos, home = prepare_store(work / "store", target.path, target.name)
    if companion is not None:
        prepare_store(work / "store", companion.path, companion.name)
    commit = git(target.path, "rev-parse", f"refs/heads/{target.branch}~1", home=home)
    figures: dict[str, Any] = {"companion": companion.name if companion else None}
    for attempt in ("first", "restart"):
        served, proc = start_floorless(repos, work / "data", target, commit, serve)
        try:
            wait_listening(int(served.base_url.rsplit(":", 1)[1]), proc, 120)
            urls = served.urls
            found = watch_first_visit(
                served.base_url, proc.pid, urls["history"] or "", urls["home"] or "", deadline, log
            )
            figures[attempt] = found
            if companion is not None and attempt == "first":
                other = f"{served.base_url}/bench/{companion.name}"
                client = measure.Client(served.base_url)
                try:
                    stop_at = time.monotonic() + deadline
                    while time.monotonic() < stop_at and not _complete(
                        client, other, b'data-ready="yes"', b""
                    ):
                        time.sleep(0.5)
                finally:
                    client.close()
            time.sleep(2.0)  # idle: no request, no index work
            memory = server_memory(proc.pid)
            figures[attempt]["rss_idle_mb"] = memory["workers"]
            figures[attempt]["rss_idle_all_mb"] = memory["all"]
            figures[attempt]["rss_idle_anon_mb"] = memory["workers_anon"]
        finally:
            served.stop()
    return figures


def run(
    target: Target,
    cache_dir: Path,
    work: Path,
    parts: tuple[str, ...] = PARTS,
    runs: int = 3,
    deadline: float = 7200.0,
    log: Callable[[str], None] = print,
    postgres: str | None = None,
    processes: int = 1,
    companion: Target | None = None,
    throughput_processes: int = 1,
) -> ColdResults:
    """Each of ``parts`` in turn. With ``postgres`` (a server's URL), each ``floorless serve``
    keeps its data in a fresh database there, and runs ``processes`` processes. ``companion``:
    the repository served beside ``target`` in the first visits (None: the medium one beside
    the large one, none beside any other). ``throughput_processes``: above 1, the sweep also
    measures the throughput of that many processes on the same data."""
    if processes > 1 and not postgres:
        raise ValueError("more than one floorless process needs a PostgreSQL server")
    databases: dict[str, tuple[str, ...]] = {}

    def serve(part: str) -> tuple[str, ...]:
        """floorless serve's options for ``part`` (lanes reuses the first visit's data)."""
        if not postgres:
            return ()
        if part not in databases:
            url = fresh_database(postgres, f"bench_cold_{part}")
            databases[part] = ("--database", url, "--processes", str(processes))
        return databases[part]

    result = ColdResults(
        target.name,
        target.commits,
        list(parts),
        processes,
        "postgresql" if postgres else "sqlite",
    )
    for part in parts:
        log(f"cold: {part}")
        try:
            if part == "index":
                with tempfile.TemporaryDirectory(prefix="fl-index-", dir=work) as tmp:
                    result.index = dict(index.run(target.path, Path(tmp)))
            elif part == "first":
                if companion is None and target.kind == "large":
                    companion = target_repository("medium", cache_dir)
                result.first = first_visit(
                    target, companion, work / "first", deadline, log, serve("first")
                )
            elif part == "blame":
                repo = cache_dir.absolute() / "cold-blame.git"
                if not (repo / "refs").is_dir():
                    cold.build_blame_repo(repo)
                result.blame = asdict(cold.measure_blame(repo, cold.BLAME_FILE, "HEAD", runs))
            elif part == "commit":
                repo = cache_dir.absolute() / "cold-commit-300.git"
                if not (repo / "refs").is_dir():
                    cold_commit.build_commit_repo(repo)
                result.commit = asdict(cold_commit.measure(repo, "HEAD", runs=runs))
            elif part == "sweep":
                spec = target.kind if target.kind in SIZES else str(target.path)
                options = argparse.Namespace(
                    repo=spec,
                    seed=7,
                    index_deadline=deadline,
                    cache_dir=cache_dir,
                    rounds=sweep.ROUNDS,
                    serve_options=serve("sweep"),
                    throughput_processes=throughput_processes,
                    workdir=work / "sweep",  # its copy of the repository goes with the run's
                )
                result.sweep = asdict(sweep.run(options))
            elif part == "lanes":
                data = work / "first" / "data"
                found = lanes.run(
                    target,
                    work / "first",
                    data=data if data.is_dir() else None,
                    log=log,
                    serve=serve("first" if data.is_dir() else "lanes"),
                )
                result.lanes = asdict(found)
        except Exception as error:  # noqa: BLE001 (one part's failure leaves the others to run)
            log(f"cold: {part} failed: {error}")
            result.errors[part] = "".join(traceback.format_exception_only(error)).strip()
            traceback.print_exc()
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.cold_suite --repo large [--parts index,first]``: print the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.cold_suite", description=__doc__)
    parser.add_argument("--repo", default="medium")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--postgres", default=None, help="a PostgreSQL server's URL")
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args(argv)
    target = target_repository(args.repo, args.cache_dir)
    with tempfile.TemporaryDirectory(prefix="floorless-cold-") as work:
        found = run(
            target,
            args.cache_dir,
            Path(work),
            tuple(p for p in args.parts.split(",") if p),
            args.runs,
            log=lambda line: print(line, file=sys.stderr, flush=True),
            postgres=args.postgres,
            processes=args.processes,
        )
    print(json.dumps(asdict(found), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
