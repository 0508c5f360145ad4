"""The history index as database rows: packed binary, a row per batch, never per commit.

A restart used to read 85,000 rows of JSON for git.git (7-11 s) and build a Python set per
commit. Rows now hold the graph's own arrays as bytes (little-endian, whatever the machine):

- ``index_chunks``: a batch of commits added together (ids, committer times, parent counts
  and parents as sequence numbers), in sequence order from ``first``;
- ``index_changes``: a slice of indexing, the changed paths of the commits it indexed
  (``seq, slots, then per slot: count, path ids``) and the path names it introduced (their
  ids follow on from ``first_path``, NUL-separated: git paths hold no NUL).

Each batch or slice is written in one transaction, so an index stopped anywhere (a crash, a
restart) reloads as a consistent graph and goes on with the commits not indexed yet.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence

from floorless.core.errors import RepositoryBroken
from floorless.db import Database
from floorless.git.history import CommitGraph

CHUNK = 50_000  # commits per ``index_chunks`` row


def _pack(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _unpack(typecode: str, data: bytes) -> array[int]:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


Guard = Callable[[], None]


def _unguarded() -> None:
    pass


def write_commits(
    db: Database, repo_id: int, graph: CommitGraph, first: int, guard: Guard = _unguarded
) -> None:
    """Store the commits of ``graph`` from sequence number ``first`` on. ``guard`` runs in
    the transaction first (``Leases.guard``: it raises, and nothing is stored, when this
    node no longer holds the repository's lease)."""
    rows = []
    for start in range(first, len(graph), CHUNK):
        end = min(start + CHUNK, len(graph))
        counts = array("I")
        parents = array("I")
        for node in range(start, end):
            these = graph.parents[node]
            counts.append(len(these))
            parents.extend(these)
        rows.append(
            (
                repo_id,
                start,
                end - start,
                b"".join(graph.oids[start:end]),
                _pack(graph.times[start:end]),
                _pack(counts),
                _pack(parents),
            )
        )
    if not rows:
        return
    with db.transaction():
        guard()
        db.executemany(
            "INSERT INTO index_chunks"
            " (repo_id, first, count, oids, times, counts, parents) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (repo_id, first) DO UPDATE SET count = excluded.count,"
            " oids = excluded.oids, times = excluded.times, counts = excluded.counts,"
            " parents = excluded.parents",
            rows,
        )


def write_changes(
    db: Database,
    repo_id: int,
    number: int,
    graph: CommitGraph,
    nodes: Sequence[int],
    names: int,
    guard: Guard = _unguarded,
) -> None:
    """Store slice ``number``: the changed paths of ``nodes``, and the path names from id
    ``names`` on."""
    data = array("I")
    for node in nodes:
        slots = graph.slot_ids(node)
        assert slots is not None
        data.append(node)
        data.append(len(slots))
        for ids in slots:
            data.append(len(ids))
            data.extend(ids)
    with db.transaction():
        guard()
        db.execute(
            "INSERT INTO index_changes (repo_id, slice, first_path, paths, data)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (repo_id, slice) DO UPDATE SET"
            " first_path = excluded.first_path, paths = excluded.paths, data = excluded.data",
            (repo_id, number, names, b"\0".join(graph.path_names[names:]), _pack(data)),
        )


def load(db: Database, repo_id: int) -> tuple[CommitGraph, int]:
    """The stored graph, and the number of the next slice."""
    graph = CommitGraph()
    return graph, load_more(db, repo_id, graph, 0)


def load_more(db: Database, repo_id: int, graph: CommitGraph, slices: int) -> int:
    """Add to ``graph`` what was stored after it (its commits and its first ``slices``
    slices): another node's work, on a node that follows it. The number of the next slice."""
    for row in db.query(
        "SELECT first, count, oids, times, counts, parents FROM index_chunks"
        " WHERE repo_id = ? AND first + count > ? ORDER BY first",
        (repo_id, len(graph)),
    ):
        if row["first"] != len(graph):
            raise RepositoryBroken("the stored index has a gap: it is built again")
        count = row["count"]
        oids = bytes(row["oids"])
        width = len(oids) // count if count else 0
        times = _unpack("q", row["times"])
        counts = _unpack("I", row["counts"])
        parents = _unpack("I", row["parents"])
        at = 0
        with graph.lock:
            for i in range(count):
                oid = oids[i * width : (i + 1) * width]
                graph.add(oid, times[i], parents[at : at + counts[i]])
                at += counts[i]
    for row in db.query(
        "SELECT slice, first_path, paths, data FROM index_changes"
        " WHERE repo_id = ? AND slice >= ? ORDER BY slice",
        (repo_id, slices),
    ):
        if row["first_path"] != len(graph.path_names):
            raise RepositoryBroken("the stored index has a gap: it is built again")
        slices = row["slice"] + 1
        paths = bytes(row["paths"])
        data = _unpack("I", row["data"])
        with graph.lock:
            for name in paths.split(b"\0") if paths else ():
                graph.path_id(name, create=True)
            at = 0
            while at < len(data):
                node, count = data[at], data[at + 1]
                at += 2
                changes = []
                for _ in range(count):
                    length = data[at]
                    changes.append(data[at + 1 : at + 1 + length])
                    at += 1 + length
                if node >= len(graph):
                    raise RepositoryBroken("the stored index has a gap: it is built again")
                graph.set_changes(node, changes, ordered=True)
    return slices


def drop(db: Database, repo_id: int, guard: Guard = _unguarded) -> None:
    """Forget the stored index of a repository (to build it again)."""
    with db.transaction():
        guard()
        db.execute("DELETE FROM index_chunks WHERE repo_id = ?", (repo_id,))
        db.execute("DELETE FROM index_changes WHERE repo_id = ?", (repo_id,))
