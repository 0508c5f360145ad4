"""The ``search`` and ``finder`` scenarios of ``python -m bench``: code search
(``bench.search``) and the file finder's path list (``bench.finder``) run inside the one
benchmark, so that their figures land in docs/benchmarks.md beside the others and are judged
against their targets there. Both are asked for by name: the search scenario widens the
repository to git.git's tree size and indexes it, which takes minutes on the large one."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.run import Options


def run_search(options: Options, log: Callable[[str], None]) -> dict[str, Any]:
    """``bench.search`` on the benchmark's repository with the run's options; its result as
    JSON-ready data."""
    from bench import search

    namespace = argparse.Namespace(
        repo=options.repo,
        files=options.search_files,
        megabytes=options.search_megabytes,
        requests=options.search_requests,
        warmup=max(1, options.search_requests // 10),
        index_deadline=1800.0,
        cache_dir=options.cache_dir,
    )
    return asdict(search.run(namespace, log=log))


def run_finder(options: Options, base: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """``bench.finder``: a repository of ``finder_files`` files (git.git's count by default)
    with one commit per request, so that every cold request lists a tree never listed."""
    from bench import finder

    requests = options.finder_requests
    repos = base / "repos"
    log(f"finder: a tree of {options.finder_files} files, {requests} requests a case")
    finder.build(repos / "bench" / "finder.git", options.finder_files, requests + 1)
    result = finder.measure(repos, base / "data", requests)
    log(
        "finder: path list p50 cold {cold} ms, warm {warm} ms, processes {spawned}".format(
            cold=result["paths_cold"]["p50_ms"],  # type: ignore[index]
            warm=result["paths_warm"]["p50_ms"],  # type: ignore[index]
            spawned=result["spawned"],
        )
    )
    return result
