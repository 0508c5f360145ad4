"""A directory's last-commit column asked of git, before the history index can answer it.

The index (``indexer.py``) answers a column from the changed paths it holds, newest commits
first; on a first visit it holds none, or a slice of recent history. What it cannot answer
yet is asked of git here, exactly as the index would answer it (git's own walk and
simplification, ``git log -1 -- entry``):

- ``each_last``: entry by entry, ``git rev-list -1 commit -- entry``, before even the commits
  are known (a small directory: one child an entry);
- ``last_among``: the entries a slice of recent history left, from the commits that changed
  any of them (``git rev-list --full-history``) and which ones, parent by parent (``git
  diff-tree``), walked by ``CommitGraph.last_changes_among`` over the graph of commits.

Both run in background threads, never on a request (browse pages spawn nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from floorless.errors import FloorlessError
from floorless.git.changed import ChangeStream, path_log, touching
from floorless.git.env import GitEnvironment
from floorless.git.history import CommitGraph

# entries a column's ``git rev-list`` and ``git diff-tree`` name, beyond which their directory
# (git matches every tree entry against every path named: 150 root entries over 100,000
# commits took 62 s, against 5 s to diff every commit's root)
LIMITED_PATHS = 8


def each_last(
    git: GitEnvironment,
    git_dir: Path,
    commit: bytes,
    directory: bytes,
    names: Sequence[bytes],
    stopped: Callable[[], bool] = lambda: False,
) -> dict[bytes, bytes | None] | None:
    """Path -> the last commit that changed it, for each of ``names`` in ``directory``: one
    ``git rev-list -1 commit -- entry`` an entry. An entry changed recently costs a few
    milliseconds, one changed only long ago a walk of the history in git (a few tenths of a
    second for 100,000 commits). None if ``stopped`` said so between two entries."""
    found: dict[bytes, bytes | None] = {}
    for name in names:
        if stopped():
            return None
        path = directory + b"/" + name if directory else name
        last = path_log(git, git_dir, commit, path, 1)
        found[path] = last[0] if last else None
    return found


def last_among(
    git: GitEnvironment,
    git_dir: Path,
    graph: CommitGraph,
    start: int,
    directory: bytes,
    rest: list[bytes],
) -> dict[bytes, int | None]:
    """``last_changes`` of ``rest`` (entries of ``directory``) from ``start``, from the
    paths git finds changed among them (see ``last_changes_among``): ``git rev-list``
    names the commits that changed any of them (a few, for entries the recent history
    did not answer for), and ``git diff-tree`` which ones, parent by parent."""
    # the entries themselves, unless so many that the directory is the shorter limit
    limit = rest if len(rest) <= LIMITED_PATHS else ([directory] if directory else [])
    found = touching(git, git_dir, graph.oids[start], limit)
    seq = graph.seq
    nodes = [seq[oid] for oid in found]  # (all in the graph: ``start`` is, and its past)
    oids, parents = graph.oids, graph.parents
    wanted = set(rest)
    prefix = directory + b"/" if directory else b""

    def entry(path: bytes) -> bytes:
        return prefix + path[len(prefix) :].split(b"/", 1)[0]

    asked = [0]

    def slots() -> Iterator[tuple[bytes, bytes | None]]:
        for node in nodes:
            these = parents[node]
            asked[0] += max(1, len(these))
            if not these:
                yield oids[node], None
            for parent in these:
                yield oids[node], oids[parent]

    changed: dict[int, list[frozenset[bytes]]] = {}
    answered = 0
    stream = ChangeStream(git, git_dir, slots(), limit, bool(directory))
    with stream:  # (the root's entries: git need not go down their trees)
        before, slot = b"", 0  # a merge's slots come one after the other, parent by parent
        for header, files in stream.slots:
            answered += 1
            slot = slot + 1 if header == before else 0
            before = header
            hit = frozenset(e for e in map(entry, files) if e in wanted) if files else None
            if hit:  # (most slots name none: the commit is found only for these)
                node = seq[bytes.fromhex(header.decode("ascii"))]
                differ = changed.setdefault(node, [frozenset()] * max(1, len(parents[node])))
                differ[slot] = hit
    if answered != asked[0]:  # (the feed ends before git's answer does)
        raise FloorlessError("git diff-tree stopped early")
    return graph.last_changes_among(start, rest, changed)
