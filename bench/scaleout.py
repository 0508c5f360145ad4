"""``python -m bench.scaleout``: two floorless nodes behind the shipped proxy, on slow shared
storage and PostgreSQL, against one node on local disk and SQLite.

- **one node**: ``floorless serve`` over the repositories on local disk, its database the
  data directory's SQLite: the single-machine installation.
- **two nodes**: two ``floorless serve`` processes over one repositories directory on the
  slow-storage simulator (``bench.slowfs``, ``--delay-ms`` a filesystem operation), one
  PostgreSQL database (``--database``, or a throwaway cluster from
  scripts/test-postgres.sh), behind nginx running deploy/nginx.conf (``bench.proxy``) over
  HTTPS.

Warm p50 per page is measured with requests alternating between the single node and the
proxy, one keep-alive connection each (as the ``slow`` scenario's paired measurement does),
after a warm-up through the proxy long enough for every page to be cached on both nodes.
Throughput at ``--concurrency`` connections is measured for the single node, for the proxy
with one node behind it, and for the proxy with both. The database statements each page
runs come from the nodes' ``Server-Timing`` header (``query``): on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import measure, slowfs
from bench import proxy as nginx
from bench.harness import (
    PAGES,
    Served,
    fresh_database,
    git,
    machine,
    page_urls,
    prepare_store,
    start_floorless,
    target_repository,
    wait_floorless_indexed,
    wait_listening,
)

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.25


@dataclass
class PageFigures:
    page: str
    local_p50_ms: float
    proxied_p50_ms: float
    node_p50_ms: float  # one of the two nodes, requested directly: the proxy's share
    local_proxied_p50_ms: float  # the one node behind the same proxy: the scale-out's share
    local_queries: int | None  # SQLite, one node
    proxied_queries: int | None  # PostgreSQL, through the proxy
    status: tuple[int, int, int, int]

    @property
    def ratio(self) -> float:
        return self.proxied_p50_ms / self.local_p50_ms

    @property
    def same_proxy_ratio(self) -> float:
        """Two nodes against one, both behind the proxy: what scaling out costs a page."""
        return self.proxied_p50_ms / self.local_proxied_p50_ms


@dataclass
class ScaleOut:
    repo: str
    options: dict[str, object]
    machine: dict[str, str]
    database: str  # what the two nodes shared: "postgresql" or "sqlite"
    pages: list[PageFigures] = field(default_factory=list)
    throughput: dict[str, dict[str, float]] = field(default_factory=dict)  # setup -> page -> rps
    seconds: float = 0.0


def queries(server_timing: str | None) -> int | None:
    found = re.search(r"query;[^,]*dur=(\d+)", server_timing or "")
    return int(found.group(1)) if found else None


@contextlib.contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """``url``, or a throwaway cluster's (stopped and removed at the end)."""
    if url:
        yield url
        return
    script = ROOT / "scripts" / "test-postgres.sh"
    out = subprocess.run(
        ["bash", str(script), "start"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    found = dict(re.findall(r"export (\w+)=(\S+)", out))
    try:
        yield found["FLOORLESS_TEST_POSTGRES"]
    finally:
        subprocess.run(
            ["bash", str(script), "stop", found["FLOORLESS_TEST_POSTGRES_DIR"]],
            check=False,
            timeout=120,
        )


def warm(url: str, requests: int) -> None:
    client = measure.Client(url)
    try:
        for _ in range(requests):
            client.get(url)
    finally:
        client.close()


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> ScaleOut:
    began = time.monotonic()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="floorless-scaleout-"))
    work.mkdir(parents=True, exist_ok=True)
    repo = target_repository(args.repo, args.cache_dir)
    home = work / "tip-home"
    home.mkdir(exist_ok=True)
    commit = git(repo.path, "rev-parse", f"refs/heads/{repo.branch}~1", home=home)
    reason = slowfs.fuse_available()
    if reason is not None:
        raise SystemExit(f"the slow-storage simulator needs FUSE: {reason}")
    local_repos, _ = prepare_store(work / "local", repo.path, repo.name)
    store = work / "shared" / "store"
    prepare_store(store, repo.path, repo.name)
    mountpoint = work / "shared" / "mnt"
    mountpoint.mkdir(parents=True, exist_ok=True)
    slowfs.cleanup_stale(mountpoint)
    with contextlib.ExitStack() as stack:
        database = args.database
        if database != "sqlite":
            server = stack.enter_context(postgres(database or None))
            shared_db = fresh_database(server, "floorless_scaleout")
        else:
            shared_db = str(work / "shared-floorless.sqlite3")
        kind = "sqlite" if database == "sqlite" else "postgresql"
        result = ScaleOut(repo.name, {k: str(v) for k, v in vars(args).items()}, machine(), kind)
        mount = stack.enter_context(slowfs.mounted(store, mountpoint, delay_ms=args.delay_ms))
        shared_repos = mountpoint / "repos"
        single, _ = start_floorless(local_repos, work / "single-data", repo, commit)
        stack.callback(single.stop)
        nodes: list[Served] = []
        for n in (1, 2):
            node, _ = start_floorless(
                shared_repos, work / f"node-{n}-data", repo, commit, ("--database", shared_db)
            )
            stack.callback(node.stop)
            nodes.append(node)
        for served in (single, *nodes):
            wait_listening(int(served.base_url.rsplit(":", 1)[1]), None, 120)
            wait_floorless_indexed(served, 3600)
        ports = [int(n.base_url.rsplit(":", 1)[1]) for n in nodes]
        both = stack.enter_context(nginx.running(ports, work / "proxy-both"))
        alone = stack.enter_context(nginx.running(ports[:1], work / "proxy-one"))
        single_port = int(single.base_url.rsplit(":", 1)[1])
        local_proxy = stack.enter_context(nginx.running([single_port], work / "proxy-local"))
        local_proxied = page_urls(local_proxy.url, repo, commit)
        proxied = page_urls(both.url, repo, commit)
        log(f"one node (local disk, SQLite) against two nodes behind nginx ({kind}, slow fs)")
        for page in PAGES:
            local_url, far_url, node_url = single.urls[page], proxied[page], nodes[0].urls[page]
            near_proxied_url = local_proxied[page]
            if local_url is None or far_url is None or node_url is None or not near_proxied_url:
                continue
            # every page warm on both nodes: round robin takes turns
            warm(far_url, args.warmup * 2)
            mount.reset()
            near, far, direct, near_proxied = measure.measure_interleaved(
                page, [local_url, far_url, node_url, near_proxied_url], args.requests, args.warmup
            )
            figures = PageFigures(
                page,
                near.p50_ms,
                far.p50_ms,
                direct.p50_ms,
                near_proxied.p50_ms,
                queries(near.server_timing),
                queries(far.server_timing),
                (near.status, far.status, direct.status, near_proxied.status),
            )
            result.pages.append(figures)
            log(
                f"  {page:8} one node {near.p50_ms:7.3f} ms  two behind nginx "
                f"{far.p50_ms:7.3f} ms  {figures.ratio:5.2f}x  a node direct "
                f"{direct.p50_ms:7.3f} ms  one behind nginx {near_proxied.p50_ms:7.3f} ms"
                f" ({figures.same_proxy_ratio:5.2f}x)  queries "
                f"{figures.local_queries}/{figures.proxied_queries}"
            )
        setups = {
            "one node, direct": single.urls,
            "one node behind nginx": page_urls(alone.url, repo, commit),
            "two nodes behind nginx": proxied,
        }
        for setup, urls in setups.items():
            rates: dict[str, float] = {}
            for page in args.throughput_pages:
                url = urls.get(page)
                if url is None:
                    continue
                rates[page] = measure.throughput(url, args.concurrency, args.seconds)
            result.throughput[setup] = rates
            log(f"  {setup:24} " + "  ".join(f"{p} {r:,.0f}/s" for p, r in rates.items()))
    result.seconds = time.monotonic() - began
    return result


def markdown(result: ScaleOut, command: str) -> str:
    m = result.machine
    worst = max((p.ratio for p in result.pages), default=0.0)
    worst_same = max((p.same_proxy_ratio for p in result.pages), default=0.0)
    more = [p.page for p in result.pages if (p.proxied_queries or 0) > (p.local_queries or 0)]
    lines = [
        "# Scale-out benchmark: two nodes behind nginx against one node",
        "",
        f"`{command}`",
        "",
        f"On {m['cpu']} ({m['cores']} cores), Linux {m['kernel']}, Python {m['python']}, "
        f"{m['git']}; repository `{result.repo}`; {result.seconds:.0f} s in all.",
        "",
        "One node: `floorless serve` on local disk with SQLite, requested directly. Two "
        f"nodes: two `floorless serve` over one repositories directory on the slow-storage "
        f"simulator ({result.options['delay_ms']} ms an operation), one "
        f"{'PostgreSQL' if result.database == 'postgresql' else 'SQLite'} database, behind "
        'nginx running deploy/nginx.conf over HTTPS. "A node direct" is one of the two '
        'nodes requested without the proxy; "one node behind nginx" is the single node behind '
        "the same proxy, so that the last ratio holds the proxy equal. Requests alternate "
        "between the four, one keep-alive connection each; every page is warm on every node.",
        "",
        "| page | one node p50 ms | two nodes behind nginx p50 ms | ratio | "
        "a node direct p50 ms | one node behind nginx p50 ms | ratio, same proxy | "
        f"statements, SQLite | statements, {result.database} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in result.pages:
        lines.append(
            f"| {p.page} | {p.local_p50_ms:.2f} | {p.proxied_p50_ms:.2f} | {p.ratio:.2f}x | "
            f"{p.node_p50_ms:.2f} | {p.local_proxied_p50_ms:.2f} | {p.same_proxy_ratio:.2f}x | "
            f"{p.local_queries} | {p.proxied_queries} |"
        )
    pages = sorted({page for rates in result.throughput.values() for page in rates})
    lines += [
        "",
        f"Throughput at concurrency {result.options['concurrency']} (requests a second):",
        "",
        "| setup | " + " | ".join(pages) + " |",
        "|---|" + "---|" * len(pages),
    ]
    for setup, rates in result.throughput.items():
        cells = " | ".join(f"{rates[p]:,.0f}" if p in rates else "-" for p in pages)
        lines.append(f"| {setup} | {cells} |")
    lines += [
        "",
        f"- Warm p50 within {TARGET_RATIO}x of one node on local disk: "
        + ("**met**" if worst <= TARGET_RATIO else "**missed**")
        + f" (worst {worst:.2f}x).",
        f"- Warm p50 within {TARGET_RATIO}x of one node on local disk behind the same proxy: "
        + ("**met**" if worst_same <= TARGET_RATIO else "**missed**")
        + f" (worst {worst_same:.2f}x).",
        f"- No more database statements per warm page on {result.database} than on SQLite: "
        + ("**met**" if not more else f"**missed** on {', '.join(more)}")
        + ".",
    ]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.scaleout", description=__doc__)
    parser.add_argument("--repo", default="small", help="small, medium, large or a path")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=3.0, help="throughput: each run")
    parser.add_argument("--throughput-pages", default="home,file,commits,explore")
    parser.add_argument("--delay-ms", type=float, default=30.0)
    parser.add_argument(
        "--database",
        default="",
        help="the two nodes' PostgreSQL server (a database floorless_scaleout is made on it), "
        "'sqlite' for one SQLite file; default: a throwaway cluster",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--docs", type=Path, default=None, help="write the Markdown here")
    args = parser.parse_args(argv)
    args.throughput_pages = tuple(p for p in args.throughput_pages.split(",") if p)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    result = run(args, log=lambda line: print(line, flush=True))
    command = "python -m bench.scaleout " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = markdown(result, command.strip())
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    if args.docs is not None:
        args.docs.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
