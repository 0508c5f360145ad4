"""The first index of a whole history, against git's own tools, in one run.

``python -m bench.index REPO.git [--data DIR]`` copies the repository (its commit-graph
removed, so every contender starts cold), then times, one after the other on the copy:

- ``git log --raw --no-renames`` over the whole history (output discarded);
- ``git commit-graph write --reachable --changed-paths`` (then removed again);
- floorless's first index of it (``Indexer.update``: every commit, every changed path);
- a restart: a new forge over the same database loading the stored index and finding
  nothing to add.

It prints one JSON object: seconds for each, the ratio of floorless's index to the
commit-graph write, the resident memory of this process after indexing and after the
restart (``VmRSS``), and the index's size in memory and in the database. ``judge`` holds
those figures to the first index's target (the cold and real scenarios' reports).
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import Check
from bench.repos import git_env
from floorless.core.config import Settings
from floorless.forge import Forge


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _git_seconds(git_dir: Path, env: dict[str, str], *args: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def _drop_commit_graph(git_dir: Path) -> None:
    info = git_dir / "objects" / "info"
    for name in ("commit-graph", "commit-graphs"):
        target = info / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def _forge(repos: Path, data: Path) -> Forge:
    forge = Forge(Settings.load(environ={}, data=data, repos=repos))
    forge.start(background=False)
    return forge


def run(source: Path, work: Path) -> dict[str, float | int]:
    repos = work / "repos"
    git_dir = repos / "bench" / source.name
    shutil.copytree(source, git_dir, symlinks=True)
    _drop_commit_graph(git_dir)
    env = git_env(work / "home")
    (work / "home").mkdir(exist_ok=True)
    result: dict[str, float | int] = {}
    result["git_log_raw_s"] = _git_seconds(git_dir, env, "log", "--raw", "--no-renames")
    result["commit_graph_write_s"] = _git_seconds(
        git_dir, env, "commit-graph", "write", "--reachable", "--changed-paths"
    )
    _drop_commit_graph(git_dir)
    data = work / "data"
    gc.collect()
    result["rss_before_mb"] = round(_rss_mb(), 1)
    forge = _forge(repos, data)
    repo = forge.registry.all()[0]
    start = time.perf_counter()
    result["commits"] = forge.indexer.update(repo, forge.live.state(repo).snapshot())
    result["floorless_index_s"] = time.perf_counter() - start
    graph = forge.indexer.graph(repo.id)
    assert graph is not None and graph.indexed == len(graph)
    result["index_memory_mb"] = round(graph.nbytes() / 2**20, 1)
    result["slices"] = forge.indexer.commits_indexed // 5000 + 1
    gc.collect()
    result["rss_after_index_mb"] = round(_rss_mb(), 1)
    forge.stop()
    forge.db.close()
    del forge, graph
    gc.collect()
    result["db_mb"] = round(sum(p.stat().st_size for p in data.glob("*.sqlite3*")) / 2**20, 1)
    start = time.perf_counter()
    again = _forge(repos, data)
    repo = again.registry.all()[0]
    added = again.indexer.update(repo, again.live.state(repo).snapshot())
    result["restart_s"] = time.perf_counter() - start
    assert added == 0 and again.indexer.commits_indexed == 0
    gc.collect()
    result["rss_after_restart_mb"] = round(_rss_mb(), 1)
    again.stop()
    result["ratio_to_commit_graph"] = result["floorless_index_s"] / result["commit_graph_write_s"]
    return {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}


TARGET = "first index within 2x of `git commit-graph write --reachable --changed-paths`"


def judge(found: dict[str, Any], missing: str) -> Check:
    """``run``'s figures (as the JSON has them) against the target; ``missing``: why there
    are none, when ``found`` is empty."""
    if not found:
        return Check(TARGET, None, missing)
    ratio = found["ratio_to_commit_graph"]
    return Check(
        TARGET,
        ratio <= 2,
        f"{ratio:.2f}x: {found['floorless_index_s']:.1f} s against "
        f"{found['commit_graph_write_s']:.1f} s (`git log --raw` {found['git_log_raw_s']:.1f} s)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a git directory (e.g. from bench.repos)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fl-index-") as work:
        print(json.dumps(run(args.repo.resolve(), Path(work)), indent=2))


if __name__ == "__main__":
    main()
