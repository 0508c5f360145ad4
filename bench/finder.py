"""The file finder's list, cold and warm, in one run.

``python -m bench.finder [--files 4500] [--requests 200] [--repo PATH]`` builds (or takes) a
repository whose tree holds git.git's number of files (~4,500, in directories as deep as
git.git's), serves it in-process through the WSGI app (no sockets: the route's own cost), and
measures, in interleaved rounds so that every figure shares the machine's moment:

- ``paths_cold``: ``/-/paths/{tree}`` of a tree never asked for before (each request another
  commit's tree, one file more than the last): the libgit2 listing, the JSON and the gzip;
- ``paths_warm``: the same with both caches kept (what every finder after the first costs);
- ``paths_304``: a browser's revalidation with the ETag it holds;
- ``find_page``: the finder's page without script, ``?q=`` a file name's few letters.

It prints one JSON object: p50 and p95 in milliseconds for each, their ratios to the warm
list, the body's size plain and gzipped, and the processes spawned (always 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pygit2
from falcon import testing

from bench.measure import percentile, timing_spawns
from bench.repos import fast_import
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

GIT_GIT_FILES = 4500
EPOCH = 1_700_000_000


def build(dest: Path, files: int, commits: int) -> None:
    """A first commit of ``files`` small files spread over directories two to four deep, then
    ``commits - 1`` commits adding one file each: as many trees, each listed cold once."""

    def write(out: IO[bytes]) -> None:
        blob = b"x = 1\n"
        out.write(b"blob\nmark :1\ndata %d\n%s\n" % (len(blob), blob))
        for number in range(1, commits + 1):
            out.write(b"commit refs/heads/main\n")
            out.write(b"committer Bench <bench@bench.example> %d +0000\n" % (EPOCH + number))
            out.write(b"data 7\ncommit\n")
            if number == 1:
                for n in range(files):
                    top, middle, low = n % 12, (n // 12) % 9, (n // 108) % 5
                    directory = f"area{top}/part{middle}" + (f"/sub{low}" if n % 3 else "")
                    name = f"{directory}/file_{n}_{'abcdefgh'[n % 8]}.c"
                    out.write(f"M 100644 :1 {name}\n".encode())
            else:
                out.write(f"M 100644 :1 extra/added_{number}.c\n".encode())
            out.write(b"\n")
        out.write(b"done\n")

    fast_import(dest, "main", write)


def _trees(git_dir: Path) -> list[str]:
    """The tree of every commit of main, newest first (read in-process: no git child)."""
    handle = pygit2.Repository(str(git_dir))
    found: list[str] = []
    commit: object = handle.revparse_single("main")
    while isinstance(commit, pygit2.Commit):
        found.append(str(commit.tree_id))
        commit = commit.parents[0] if commit.parents else None
    return found


def measure(repo_root: Path, data: Path, requests: int) -> dict[str, object]:
    settings = Settings.load(environ={}, data=data, repos=repo_root)
    forge = Forge(settings)
    forge.start()
    try:
        client = testing.TestClient(create_app(forge))
        trees = _trees(repo_root / "bench" / "finder.git")
        base = "/bench/finder/-/paths/"
        deadline = time.monotonic() + 300
        while True:  # the first answer waits for the index (503 until it knows the refs)
            plain = client.simulate_get(base + trees[0])
            if plain.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if plain.status_code != 200:
            raise RuntimeError(f"the path list answered {plain.status_code}")
        count = len(json.loads(plain.text)["paths"])
        gzip_headers = {"Accept-Encoding": "gzip"}
        zipped = client.simulate_get(base + trees[0], headers=gzip_headers)
        etag = zipped.headers["etag"]
        cold_trees = iter(trees[1:])

        def cold() -> testing.Result:  # a tree never listed: nothing cached for it
            return client.simulate_get(base + next(cold_trees), headers=gzip_headers)

        def warm() -> testing.Result:
            return client.simulate_get(base + trees[0], headers=gzip_headers)

        def revalidate() -> testing.Result:
            headers = {**gzip_headers, "If-None-Match": etag}
            return client.simulate_get(base + trees[0], headers=headers)

        def find_page() -> testing.Result:
            return client.simulate_get(
                "/bench/finder/find/branch/main", query_string="q=fil7h", headers=gzip_headers
            )

        cases: dict[str, tuple[Callable[[], testing.Result], int]] = {
            "paths_cold": (cold, 200),
            "paths_warm": (warm, 200),
            "paths_304": (revalidate, 304),
            "find_page": (find_page, 200),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        spawned = 0.0
        for _ in range(requests):  # interleaved: each round measures every case once
            for name, (call, expected) in cases.items():
                begin = time.perf_counter()
                result = call()
                samples[name].append(time.perf_counter() - begin)
                if result.status_code != expected:
                    raise RuntimeError(f"{name} answered {result.status_code}, not {expected}")
                spawned += timing_spawns(result.headers.get("server-timing", ""))
        warm_p50 = statistics.median(samples["paths_warm"])
        return {
            "files": count,
            "requests": requests,
            "body_bytes": len(plain.content),
            "gzip_bytes": len(zipped.content),
            "spawned": spawned,
            **{
                name: {
                    "p50_ms": round(statistics.median(times) * 1000, 3),
                    "p95_ms": round(percentile(times, 0.95) * 1000, 3),
                    "to_warm": round(statistics.median(times) / warm_p50, 2),
                }
                for name, times in samples.items()
            },
        }
    finally:
        forge.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.finder", description=__doc__)
    parser.add_argument("--files", type=int, default=GIT_GIT_FILES)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-finder-") as tmp:
        root = Path(tmp)
        build(root / "repos" / "bench" / "finder.git", args.files, args.requests + 1)
        result = measure(root / "repos", root / "data", args.requests)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
