"""``python -m bench``: run the benchmark and write the table, the JSON and the docs page."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench import report
from bench.run import CONTENDERS, DEFAULT_SCENARIOS, PAGES, SCENARIOS, Options, run


def parse(argv: list[str]) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--repo",
        default="small",
        help="small, medium, large, or the path of a repository (default small)",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        help="local, slow (every contender's pages on each storage), api (floorless's API "
        "reads beside their pages), cold (first index, first visits, cold blame and commit, "
        "distinct URLs against cgit, cheap pages beside dear ones, memory: bench.cold_suite; "
        "asked for by name), search (literal and regex code search over a git.git-sized "
        "tree: bench.search; by name), finder (the file finder's path list cold and warm: "
        f"bench.finder; by name). Default {','.join(DEFAULT_SCENARIOS)}",
    )
    parser.add_argument(
        "--cold-parts",
        default="",
        help="the cold scenario's parts (default all: index,first,blame,commit,sweep,lanes)",
    )
    parser.add_argument(
        "--cold-runs", type=int, default=3, help="runs of the cold blame and commit pages"
    )
    parser.add_argument(
        "--cold-postgres",
        default=None,
        help="a PostgreSQL server's URL: floorless keeps its data there in the cold scenario "
        "(a fresh database for each part)",
    )
    parser.add_argument(
        "--cold-processes",
        type=int,
        default=1,
        help="floorless serve --processes in the cold scenario (more than one needs "
        "--cold-postgres)",
    )
    parser.add_argument(
        "--search-files", type=int, default=2500, help="files the search scenario adds"
    )
    parser.add_argument(
        "--search-megabytes", type=float, default=39.0, help="of text in those files"
    )
    parser.add_argument(
        "--search-requests", type=int, default=50, help="requests a query (search scenario)"
    )
    parser.add_argument(
        "--finder-files", type=int, default=4500, help="files of the finder scenario's tree"
    )
    parser.add_argument(
        "--finder-requests", type=int, default=200, help="requests a case (finder scenario)"
    )
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument(
        "--slow-contenders",
        default="",
        help="contenders of the slow scenario (default: --contenders)",
    )
    parser.add_argument("--requests", type=int, default=200, help="sequential requests a page")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--throughput-seconds", type=float, default=3.0)
    parser.add_argument(
        "--throughput-pages",
        default=",".join(PAGES),
        help="pages whose throughput is measured ('' for none)",
    )
    parser.add_argument("--delay-ms", type=float, default=30.0)
    parser.add_argument("--jitter", default="", help="a random delay range, e.g. 20-100 (ms)")
    parser.add_argument(
        "--cache-seconds",
        type=float,
        default=0.0,
        help="kernel attribute/entry cache of the slow filesystem",
    )
    parser.add_argument(
        "--page-deadline",
        type=float,
        default=120.0,
        help="seconds one page's sequential requests may take at most",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"))
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        help="write the Markdown report here (docs/benchmarks.md)",
    )
    args = parser.parse_args(argv)
    jitter = None
    if args.jitter:
        low, _, high = args.jitter.partition("-")
        jitter = (float(low), float(high))
    options = Options(
        repo=args.repo,
        scenarios=tuple(s for s in args.scenarios.split(",") if s),
        contenders=tuple(c for c in args.contenders.split(",") if c),
        slow_contenders=tuple(c for c in args.slow_contenders.split(",") if c) or None,
        requests=args.requests,
        warmup=args.warmup,
        concurrency=args.concurrency,
        throughput_seconds=args.throughput_seconds,
        throughput_pages=tuple(p for p in args.throughput_pages.split(",") if p),
        delay_ms=args.delay_ms,
        jitter_ms=jitter,
        cache_seconds=args.cache_seconds,
        page_deadline=args.page_deadline,
        workdir=args.workdir,
        cache_dir=args.cache_dir,
        cold_parts=tuple(p for p in args.cold_parts.split(",") if p),
        cold_runs=args.cold_runs,
        cold_postgres=args.cold_postgres,
        cold_processes=args.cold_processes,
        search_files=args.search_files,
        search_megabytes=args.search_megabytes,
        search_requests=args.search_requests,
        finder_files=args.finder_files,
        finder_requests=args.finder_requests,
    )
    unknown = set(options.contenders) - set(CONTENDERS)
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    unknown = set(options.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    from bench.cold_suite import PARTS

    unknown = set(options.cold_parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown cold parts: {', '.join(sorted(unknown))}")
    if options.cold_processes > 1 and not options.cold_postgres:
        parser.error("--cold-processes above 1 needs --cold-postgres")
    return options, args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options, args = parse(argv)
    results = run(options, log=lambda line: print(line, flush=True))
    print(report.table(results))
    command = "python -m bench " + shlex.join(argv)
    report.write(results, args.json, args.docs, command)
    print(f"\nwrote {args.json}" + (f" and {args.docs}" if args.docs else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
