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
- ``root_last``: a wide root's column (git.git's root has about 450 entries), from the
  moment a page asks, without the index: the commits from ``git rev-list --parents``, the
  root entries each changed, parent by parent, from PARTS ``git diff-tree`` processes at
  once, each over its share of the history (the diff of every commit's root is nearly all
  of the column's cost), walked as ``last_changes_among`` walks the graph's commits.

Both run in background threads, never on a request (browse pages spawn nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

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
    git_dir: Path,
    commit: bytes,
    names: Sequence[bytes],
    parts: int = PARTS,
) -> dict[bytes, bytes | None]:
    """Entry -> the last commit that changed it (``git log -1 commit -- entry``), for each of
    ``names``, entries of the root of ``commit``: git's answers alone, no index. Commits stay
    in hex as git writes them, and git's lines go to git as they are: one walk (``git
    rev-list --topo-order --parents``) gives the order the answers are walked in and the
    diffs' lines, a commit of one parent's as it is, a merge's split into a line for each
    parent. The interpreter reads the diffs' answers and little else. (Three walks, for the
    commits of one parent, the merges and the order, took 1.2 s of git.git's 3.8.)"""
    rows = parent_lines(git, git_dir, commit, ["--topo-order"])().splitlines()
    slots = b"".join(row + b"\n" if row.count(b" ") < 2 else _each_parent(row) for row in rows)
    shares = _split(slots, parts)
    found: list[dict[bytes, list[frozenset[bytes]]]] = [{} for _ in shares]
    failed: list[FloorlessError | OSError | ValueError] = []
    wanted = frozenset(names)

    def read(share: bytes, into: dict[bytes, list[frozenset[bytes]]]) -> None:
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
    changed: dict[bytes, list[frozenset[bytes]]] = {}
    for part in found:
        changed.update(part)
    last = _walk_rows(rows, changed, wanted)
    return {name: _unhex(last.get(name)) for name in names}


def _each_parent(merge: bytes) -> bytes:
    """A merge's ``git rev-list --parents`` line as ``git diff-tree --stdin`` lines, one for
    each parent (given ``commit parent parent``, it would leave out the header of an empty
    diff, and which parent the next diff belongs to would be lost)."""
    commit, *parents = merge.split(b" ")
    return b"".join(commit + b" " + parent + b"\n" for parent in parents)


def _walk_rows(
    rows: list[bytes], changed: dict[bytes, list[frozenset[bytes]]], names: frozenset[bytes]
) -> dict[bytes, bytes | None]:
    """``CommitGraph.last_changes_among`` over ``git rev-list --topo-order --parents``
    lines (commit ids in hex): each name follows one chain, a merge TREESAME to a parent
    handing it to that parent alone (the first such), and a commit is reached after all
    its children, so the names travelling together cross it once. Stops once each name has
    its answer."""
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
        slots = changed.get(node)
        if len(ids) == 1:  # a root: what it has is what it changed
            answer.update({p: node if slots and p in slots[0] else None for p in group})
        elif slots is None:  # none of them differ from any parent: the first parent's
            move(group, ids[1])
        elif len(ids) == 2:
            hit = slots[0] & group if len(slots[0]) < len(group) else group & slots[0]
            if hit:
                answer.update(dict.fromkeys(hit, node))
                group -= hit
            if group:
                move(group, ids[1])
        else:
            for parent, differ in zip(ids[1:], slots, strict=True):
                same = group - differ
                if same:  # TREESAME to this parent: those follow it alone
                    move(same, parent)
                    group &= differ
                if not group:
                    break
            answer.update(dict.fromkeys(group, node))  # changed against every parent
    return answer


def _unhex(value: bytes | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value.decode("ascii"))


def _split(lines: bytes, parts: int) -> list[bytes]:
    """``lines`` (one a slot) in at most ``parts`` runs of about the same size, never
    between two slots of one commit."""
    shares, at = [], 0
    for part in range(1, max(1, parts)):
        end = lines.find(b"\n", max(at, len(lines) * part // parts))
        while end >= 0:
            ours = lines[lines.rfind(b"\n", 0, end) + 1 : end].split(b" ", 1)[0]
            if not lines.startswith(ours + b" ", end + 1):
                break
            end = lines.find(b"\n", end + 1)  # the next slot is the same commit's
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
    into: dict[bytes, list[frozenset[bytes]]],
) -> None:
    """Into ``into``, commit (hex) -> per parent, which of ``wanted`` (root entries) differ,
    for the commits of ``slots`` (lines ``commit [parent]``) that changed any, from one
    ``git diff-tree``: a commit's slots come one after the other."""
    same: dict[frozenset[bytes], frozenset[bytes]] = {}  # one set a set of names: shared
    count = 0
    header, differ = b"", [frozenset[bytes]()]
    for answer, files in answered(diff_slots(git, git_dir, slots, recursive=False)):
        count += 1
        if answer != header:  # the next commit
            if any(differ):
                into[header] = differ
            header, differ = answer, []
        hit = wanted.intersection(files) if files else frozenset()
        differ.append(same.setdefault(hit, hit))
    if any(differ):
        into[header] = differ
    if count != slots.count(b"\n"):  # (git's answer ends early)
        raise FloorlessError("git diff-tree stopped early")
