"""A directory's last-commit column asked of git, before the history index can answer it.

The index (``indexer.py``) answers a column from the changed paths it holds, newest commits
first; on a first visit it holds none, or a slice of recent history. What it cannot answer
yet is asked of git here, exactly as the index would answer it (git's own walk and
simplification, ``git log -1 -- entry``):

- ``each_last``: entry by entry, ``git rev-list -1 commit -- entry``, before even the commits
  are known (a small directory: one child an entry);
- ``last_among``: the entries a slice of recent history left, from the commits that changed
  any of them (``git rev-list --full-history``) and which ones, parent by parent (``git
  diff-tree``), walked by ``CommitGraph.last_changes_among`` over the graph of commits;
- ``root_last``: a wide root's column (git.git's root has 561 entries), from the moment a
  page asks, without the index: the commits from ``git rev-list --parents``, the root
  entries each changed against its first parent from PARTS ``git diff-tree`` processes at
  once, each over its share of the history (the diff of every commit's root is nearly all
  of the column's cost), a merge's other parents asked in process of what differs from the
  first, walked as ``last_changes_among`` walks the graph's commits.

Both run in background threads, never on a request (browse pages spawn nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pygit2

from floorless.core import background
from floorless.core.errors import FloorlessError
from floorless.git.changed import (
    ChangeStream,
    answered,
    diff_slots,
    parent_lines,
    path_log,
    touching,
)
from floorless.git.env import GitEnvironment
from floorless.git.history import CommitGraph
from floorless.git.treesame import differing

# entries a column's ``git rev-list`` and ``git diff-tree`` name, beyond which their directory
# (git matches every tree entry against every path named: 150 root entries over 100,000
# commits took 62 s, against 5 s to diff every commit's root)
LIMITED_PATHS = 8
# ``git diff-tree`` processes a root's column is asked of at once, each over its share of the
# commits: every commit's root of a 100,000-commit history took 4.4 s in one, 2.4-2.5 s in
# two side by side on two cores (the bulk index pauses meanwhile: the cores are the column's)
PARTS = 2


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
    second for 100,000 commits; seconds on slow storage). None if ``stopped`` said so,
    between two entries or while git runs (git is ended then)."""
    found: dict[bytes, bytes | None] = {}
    for name in names:
        if stopped():
            return None
        path = directory + b"/" + name if directory else name
        last = path_log(git, git_dir, commit, path, 1, stopped)
        if last is None:
            return None
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


def root_last(
    git: GitEnvironment,
    repo: pygit2.Repository,
    commit: bytes,
    names: Sequence[bytes],
    parts: int = PARTS,
) -> dict[bytes, bytes | None]:
    """Entry -> the last commit that changed it (``git log -1 commit -- entry``), for each of
    ``names``, entries of the root of ``commit``: git's answers alone, no index. Commits stay
    in hex as git writes them. One walk (``git rev-list --topo-order --parents``) gives the
    order the answers are walked in and the diffs' lines: git diffs each commit's root
    against its first parent, and a merge's other parents are asked in process of the
    entries that differ from the first, when the walk brings any there (``treesame.py``).
    On git.git, diffing every merge against each parent took 6.2 s of git's time, against
    4.7 for the first parents alone; the other parents were asked 289 times. (Asking in
    process on the side branches too, and git only for the first-parent chain, 24,254 of
    81,966 commits, asked 16,744 times, some of hundreds of entries: slower.)"""
    git_dir = Path(repo.path)
    rows = parent_lines(git, git_dir, commit, ["--topo-order"])().splitlines()
    firsts = {row[: row.find(b" ")]: row.split(b" ", 2)[1] for row in rows if b" " in row}
    slots = b"".join(b" ".join(row.split(b" ", 2)[:2]) + b"\n" for row in rows)
    shares = _split(slots, parts)
    found: list[dict[bytes, frozenset[bytes]]] = [{} for _ in shares]
    failed: list[FloorlessError | OSError | ValueError] = []
    wanted = frozenset(names)

    def read(share: bytes, into: dict[bytes, frozenset[bytes]]) -> None:
        try:
            _diff_roots(git, git_dir, share, wanted, into)
        except (FloorlessError, OSError, ValueError) as exc:  # raised on the caller's thread
            failed.append(exc)

    threads = [
        background.start(functools.partial(read, *pair), "roots")
        for pair in zip(shares, found, strict=True)
    ]
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]
    changed: dict[bytes, frozenset[bytes]] = {}
    for part in found:
        changed.update(part)

    def differ(node: bytes, parent: bytes | None, group: set[bytes]) -> set[bytes]:
        if parent is None or parent == firsts.get(node):  # git's answer
            return group & changed.get(node, frozenset())
        ours, theirs = (pygit2.Oid(hex=oid.decode("ascii")) for oid in (node, parent))
        return differing(repo, ours, theirs, group)

    last = _walk_rows(rows, wanted, differ)
    return {name: _unhex(last.get(name)) for name in names}


def _walk_rows(
    rows: list[bytes],
    names: frozenset[bytes],
    differ: Callable[[bytes, bytes | None, set[bytes]], set[bytes]],
) -> dict[bytes, bytes | None]:
    """``CommitGraph.last_changes_among`` over ``git rev-list --topo-order --parents``
    lines (commit ids in hex), asking ``differ(commit, parent, names)`` which of ``names``
    differ between a commit and a parent (None: a root commit's, those it has): each name
    follows one chain, a merge TREESAME to a parent handing it to that parent alone (the
    first such), and a commit is reached after all its children, so the names travelling
    together cross it once. Stops once each name has its answer."""
    answer: dict[bytes, bytes | None] = {}
    pending: dict[bytes, set[bytes]] = {rows[0].split(b" ", 1)[0]: set(names)} if rows else {}

    def move(group: set[bytes], parent: bytes) -> None:
        waiting = pending.get(parent)
        if waiting is None:
            pending[parent] = group
        else:
            waiting |= group

    for row in rows:
        if len(answer) == len(names):
            break
        ids = row.split(b" ")
        node = ids[0]
        group = pending.pop(node, None)
        if group is None:
            continue
        if len(ids) == 1:  # a root: what it has is what it changed
            hit = differ(node, None, group)
            answer.update({p: node if p in hit else None for p in group})
            continue
        hit = differ(node, ids[1], group)
        if hit:
            group -= hit
        if group:  # TREESAME to the first parent: those follow it
            move(group, ids[1])
        for parent in ids[2:]:
            if not hit:
                break
            same = hit - differ(node, parent, hit)
            if same:  # TREESAME to this parent: those follow it alone
                move(same, parent)
                hit -= same
        if hit:  # changed against every parent
            answer.update(dict.fromkeys(hit, node))
    return answer


def _unhex(value: bytes | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value.decode("ascii"))


def _split(lines: bytes, parts: int) -> list[bytes]:
    """``lines`` in at most ``parts`` runs of whole lines, of about the same size."""
    shares, at = [], 0
    for part in range(1, max(1, parts)):
        end = lines.find(b"\n", max(at, len(lines) * part // parts))
        if end < 0:
            break
        shares.append(lines[at : end + 1])
        at = end + 1
    shares.append(lines[at:])
    return [share for share in shares if share]


def _diff_roots(
    git: GitEnvironment,
    git_dir: Path,
    slots: bytes,
    wanted: frozenset[bytes],
    into: dict[bytes, frozenset[bytes]],
) -> None:
    """Into ``into``, commit (hex) -> which of ``wanted`` (root entries) differ from its first
    parent, for the commits of ``slots`` (lines ``commit [parent]``) that changed any, from
    one ``git diff-tree``."""
    same: dict[frozenset[bytes], frozenset[bytes]] = {}  # one set a set of names: shared
    count = 0
    for answer, files in answered(diff_slots(git, git_dir, slots, recursive=False)):
        count += 1
        hit = wanted.intersection(files) if files else frozenset()
        if hit:
            into[answer] = same.setdefault(hit, hit)
    if count != slots.count(b"\n"):  # (git's answer ends early)
        raise FloorlessError("git diff-tree stopped early")
