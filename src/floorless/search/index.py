"""The code index: trigrams of every file at each repository's default branch, in the database.

Built in the background after each ref move (``queue`` is one of the forge's ref listeners),
on its own thread, never on a request. What is kept, all keyed by object ids so that nothing
ever needs invalidating and unchanged files cost nothing:

- ``search_blobs``: each blob ever looked at, numbered, with its kind: ``text`` (indexed),
  ``binary`` (a NUL byte in its first 8 KiB) or ``large`` (over ``max_file_bytes``). A blob
  is read once, whichever repository and commit hold it.
- ``search_postings``: for each trigram, the numbers of the text blobs that hold it, in
  segments: each indexing run writes one segment with the blobs new to it (so a push costs
  only its new blobs), and once there are more than ``MAX_SEGMENTS`` they are merged into one.
- ``search_trees``: a tree's text files (path, blob id, blob number), keyed by the tree id.
- ``search_repos``: which commit (and tree) of each repository is searched.

A blob is numbered, and its postings stored, in one transaction: a search never finds a
number it cannot read. Another node indexing the same blobs at the same moment finds them
numbered when its own transaction begins, and stores only what is still missing.

Privacy: postings are shared by every repository, but a search only reads files listed in
the tree of a repository its reader may read, from that repository's own objects.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import psycopg
import pygit2
from pygit2.enums import FileMode

from floorless.core.background import Jobs
from floorless.core.caches import Cache
from floorless.core.errors import FloorlessError
from floorless.db import Database
from floorless.git.refs import RefSnapshot
from floorless.repos.registry import Repo
from floorless.search.grams import file_grams

log = logging.getLogger(__name__)

MAX_SEGMENTS = 8  # posting segments before they are merged into one
BATCH_BYTES = 16 * 1024 * 1024  # file bytes read into one segment (bounds the indexer's memory)
BINARY_PROBE = 8000  # bytes looked at for a NUL, as git does to call a file binary
TREE_MEMORY_BYTES = 64 * 1024 * 1024  # trees' file lists kept in memory
_IN_CHUNK = 500  # values in one ``IN (...)``


@dataclass(frozen=True)
class TreeFiles:
    """The text files of a tree, in path order: what a search of it reads."""

    paths: list[bytes]
    oids: list[bytes]
    numbers: array[int]

    def nbytes(self) -> int:
        return sum(len(p) + len(o) + 100 for p, o in zip(self.paths, self.oids, strict=True))


@dataclass(frozen=True)
class Indexed:
    """What is searched of a repository: its ref, commit and tree when they were indexed."""

    repo_id: int
    kind: str
    ref: bytes
    commit: bytes
    tree: bytes
    indexed_at: float


def pack_numbers(numbers: Iterable[int]) -> bytes:
    """Sorted blob numbers as deltas, compressed: a common trigram's list is mostly ones."""
    previous = 0
    deltas = array("I")
    for number in sorted(numbers):
        deltas.append(number - previous)
        previous = number
    return zlib.compress(deltas.tobytes(), 1)


def unpack_numbers(data: bytes) -> list[int]:
    deltas = array("I")
    deltas.frombytes(zlib.decompress(data))
    return list(itertools.accumulate(deltas))


def _chunks(values: Sequence[bytes]) -> Iterable[Sequence[bytes]]:
    for start in range(0, len(values), _IN_CHUNK):
        yield values[start : start + _IN_CHUNK]


def _marks(count: int) -> str:
    return ", ".join("?" * count)


class CodeIndex:
    def __init__(
        self,
        db: Database,
        locate: Callable[[Repo], tuple[pygit2.Repository, RefSnapshot]],
        max_file_bytes: int,
        cache_bytes: int = 64 * 1024 * 1024,
        make_way: Callable[[], object] = lambda: None,
    ) -> None:
        self.db = db
        # called before each blob is read: waits while a page's answer is being computed in
        # the background (``Indexer.make_way``), as reading trigrams takes the interpreter
        self.make_way = make_way
        self.locate = locate
        self.max_file_bytes = max_file_bytes
        # what a job may fail with is logged, and the thread goes on (the next push retries)
        failures = (FloorlessError, pygit2.GitError, OSError, KeyError, ValueError, zlib.error)
        self.jobs = Jobs("search", log, (*failures, sqlite3.Error, psycopg.Error))
        self._trees: Cache[bytes, TreeFiles] = Cache.lru(
            TREE_MEMORY_BYTES, getsizeof=lambda files: files.nbytes()
        )
        # files' lower-cased bytes, by blob id: what a search checks first (``query.search``)
        self.lowered: Cache[bytes, bytes] = Cache.lru(cache_bytes, getsizeof=len)
        self.blobs_read = 0  # blobs this process read to index them (tests count them)

    # -- the background thread -----------------------------------------------------------------

    def start(self) -> None:
        self.jobs.start()

    def stop(self) -> None:
        self.jobs.stop()

    def idle(self) -> bool:
        return self.jobs.idle()

    def queue(self, repo: Repo, snapshot: RefSnapshot | None = None) -> None:
        """A ref listener: index ``repo``'s default branch soon (as it is when the job runs)."""
        self.jobs.queue(repo.id, lambda: self.index(repo))

    def queue_tree(self, repo: Repo, tree: bytes) -> None:
        """Index the tree ``tree`` of ``repo`` soon (a ref other than the default branch that
        a search asked for): its files' list, and the blobs not indexed yet."""
        self.jobs.queue(("tree", repo.id, tree), lambda: self.index_tree(repo, tree))

    def index_tree(self, repo: Repo, tree: bytes) -> TreeFiles:
        handle, _ = self.locate(repo)
        return self.tree_files(handle, tree)

    # -- indexing -------------------------------------------------------------------------------

    def index(self, repo: Repo) -> Indexed | None:
        """Index what ``repo``'s home page shows (its default branch), if not done yet."""
        handle, snapshot = self.locate(repo)
        home = snapshot.home
        if home is None:
            self.db.execute("DELETE FROM search_repos WHERE repo_id = ?", (repo.id,))
            return None
        kind, ref, commit_id = home
        commit = handle[pygit2.Oid(raw=commit_id)]
        assert isinstance(commit, pygit2.Commit)
        tree = commit.tree_id.raw
        current = self.indexed(repo.id)
        if current is not None and current.commit == commit_id and current.ref == ref:
            return current
        self.tree_files(handle, tree)
        now = time.time()
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO search_repos (repo_id, kind, ref, commit_id, tree, indexed_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (repo_id) DO UPDATE SET"
                " kind = excluded.kind, ref = excluded.ref, commit_id = excluded.commit_id,"
                " tree = excluded.tree, indexed_at = excluded.indexed_at",
                (repo.id, kind, ref, commit_id, tree, now),
            )
            if current is not None and current.tree != tree:
                self.db.execute(  # the old tree's list, unless another repository searches it
                    "DELETE FROM search_trees WHERE tree = ? AND NOT EXISTS"
                    " (SELECT 1 FROM search_repos s WHERE s.tree = search_trees.tree)",
                    (current.tree,),
                )
        self.compact()
        return Indexed(repo.id, kind, ref, commit_id, tree, now)

    def indexed(self, repo_id: int) -> Indexed | None:
        row = self.db.one("SELECT * FROM search_repos WHERE repo_id = ?", (repo_id,))
        if row is None:
            return None
        return Indexed(
            repo_id,
            row["kind"],
            bytes(row["ref"]),
            bytes(row["commit_id"]),
            bytes(row["tree"]),
            row["indexed_at"],
        )

    def tree_files(self, handle: pygit2.Repository, tree: bytes) -> TreeFiles:
        """The text files of ``tree`` (indexing the blobs not indexed yet, and storing the
        list, when it is not stored)."""
        found = self.stored_tree(tree)
        if found is not None:
            return found
        entries = list(_walk(handle, handle[pygit2.Oid(raw=tree)], b""))
        numbers = self._number(handle, [oid for _, oid in entries])
        files = TreeFiles([], [], array("I"))
        for path, oid in entries:
            number = numbers.get(oid)
            if number is not None:
                files.paths.append(path)
                files.oids.append(oid)
                files.numbers.append(number)
        self.db.execute(
            "INSERT INTO search_trees (tree, paths, oids, numbers) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (tree) DO NOTHING",
            (
                tree,
                zlib.compress(b"\0".join(files.paths), 1),
                zlib.compress(b"".join(files.oids), 1),
                zlib.compress(files.numbers.tobytes(), 1),
            ),
        )
        self._trees.put(tree, files)
        return files

    def stored_tree(self, tree: bytes) -> TreeFiles | None:
        """A tree's file list, from memory or the database; None when it is not indexed."""
        found = self._trees.get(tree)
        if found is not None:
            return found
        row = self.db.one("SELECT paths, oids, numbers FROM search_trees WHERE tree = ?", (tree,))
        if row is None:
            return None
        joined = zlib.decompress(row["paths"])
        raw = zlib.decompress(row["oids"])
        numbers = array("I")
        numbers.frombytes(zlib.decompress(row["numbers"]))
        size = len(raw) // len(numbers) if numbers else 20
        files = TreeFiles(
            joined.split(b"\0") if numbers else [],
            [raw[i : i + size] for i in range(0, len(raw), size)],
            numbers,
        )
        self._trees.put(tree, files)
        return files

    def _number(self, handle: pygit2.Repository, oids: list[bytes]) -> dict[bytes, int]:
        """The numbers of the text blobs among ``oids``, indexing those never seen, a batch
        of ``BATCH_BYTES`` at a time (a segment each)."""
        unique = list(dict.fromkeys(oids))
        numbers, seen = self._known(unique)
        batch: list[tuple[bytes, str, int, set[int]]] = []
        size = 0
        for oid in unique:
            if oid in seen:
                continue
            self.make_way()
            kind, length, grams = self._read(handle, oid)
            batch.append((oid, kind, length, grams))
            size += length if kind == "text" else 0
            if size >= BATCH_BYTES:
                numbers.update(self._store(batch))
                batch, size = [], 0
        if batch:
            numbers.update(self._store(batch))
        return numbers

    def _known(self, oids: Sequence[bytes]) -> tuple[dict[bytes, int], set[bytes]]:
        """Of ``oids``: the numbers of the text blobs already indexed, and every one seen."""
        numbers: dict[bytes, int] = {}
        seen: set[bytes] = set()
        for chunk in _chunks(oids):
            for row in self.db.query(
                f"SELECT id, oid, kind FROM search_blobs WHERE oid IN ({_marks(len(chunk))})",  # noqa: S608
                list(chunk),
            ):
                oid = bytes(row["oid"])
                seen.add(oid)
                if row["kind"] == "text":
                    numbers[oid] = int(row["id"])
        return numbers, seen

    def _read(self, handle: pygit2.Repository, oid: bytes) -> tuple[str, int, set[int]]:
        """What the index keeps of a blob: its kind, size and trigrams."""
        key = pygit2.Oid(raw=oid)
        _, length = handle.odb.read_header(key)
        if length > self.max_file_bytes:
            return "large", length, set()
        blob = handle[key]
        assert isinstance(blob, pygit2.Blob)
        data = bytes(memoryview(blob))
        self.blobs_read += 1
        if b"\0" in data[:BINARY_PROBE]:
            return "binary", length, set()
        return "text", length, file_grams(data)

    def _store(self, batch: list[tuple[bytes, str, int, set[int]]]) -> dict[bytes, int]:
        """Number the blobs of ``batch`` and store the text ones' postings as a new segment,
        in one transaction; the numbers of its text blobs (another node's, for those it
        stored first)."""
        with self.db.transaction():
            numbers, seen = self._known([oid for oid, *_ in batch])
            fresh = [item for item in batch if item[0] not in seen]
            self.db.executemany(
                "INSERT INTO search_blobs (oid, kind, size) VALUES (?, ?, ?)",
                [(oid, kind, length) for oid, kind, length, _ in fresh],
            )
            ids, _ = self._known([oid for oid, kind, *_ in fresh if kind == "text"])
            numbers.update(ids)
            postings: dict[int, list[int]] = {}
            for oid, kind, _, grams in fresh:
                if kind != "text":
                    continue
                number = ids[oid]
                for gram in grams:
                    postings.setdefault(gram, []).append(number)
            if postings:
                segment = self._new_segment(len(ids))
                self.db.executemany(
                    "INSERT INTO search_postings (gram, segment, numbers) VALUES (?, ?, ?)",
                    [(gram, segment, pack_numbers(found)) for gram, found in postings.items()],
                )
        return numbers

    def _new_segment(self, blobs: int) -> int:
        row = self.db.one(
            "INSERT INTO search_segments (blobs, created_at) VALUES (?, ?) RETURNING id",
            (blobs, time.time()),
        )
        assert row is not None
        return int(row["id"])

    def compact(self) -> bool:
        """Merge every segment into one when there are more than ``MAX_SEGMENTS``: a search
        reads one row per trigram and segment."""
        count = self.db.one("SELECT COUNT(*) AS n FROM search_segments")
        if count is None or int(count["n"]) <= MAX_SEGMENTS:
            return False
        with self.db.transaction():
            old = [int(r["id"]) for r in self.db.query("SELECT id FROM search_segments")]
            if len(old) <= MAX_SEGMENTS:
                return False
            merged: dict[int, list[int]] = {}
            for row in self.db.query("SELECT gram, numbers FROM search_postings"):
                merged.setdefault(int(row["gram"]), []).extend(unpack_numbers(row["numbers"]))
            total = self.db.one("SELECT SUM(blobs) AS n FROM search_segments")
            segment = self._new_segment(int(total["n"] or 0) if total else 0)
            self.db.execute("DELETE FROM search_postings WHERE segment <> ?", (segment,))
            self.db.execute("DELETE FROM search_segments WHERE id <> ?", (segment,))
            self.db.executemany(
                "INSERT INTO search_postings (gram, segment, numbers) VALUES (?, ?, ?)",
                [(gram, segment, pack_numbers(found)) for gram, found in merged.items()],
            )
        return True

    # -- reading --------------------------------------------------------------------------------

    def postings(self, grams: Iterable[int]) -> dict[int, set[int]]:
        """The blob numbers holding each of ``grams`` (every segment's)."""
        wanted = sorted(set(grams))
        found: dict[int, set[int]] = {gram: set() for gram in wanted}
        if not wanted:
            return found
        for row in self.db.query(
            f"SELECT gram, numbers FROM search_postings WHERE gram IN ({_marks(len(wanted))})",  # noqa: S608
            wanted,
        ):
            found[int(row["gram"])].update(unpack_numbers(row["numbers"]))
        return found

    def size(self) -> dict[str, int]:
        """Rows and bytes of the index's tables (bytes of their stored values)."""
        sizes: dict[str, int] = {}
        for table, columns in (
            ("search_blobs", "oid"),
            ("search_postings", "numbers"),
            ("search_trees", "paths) + length(oids) + length(numbers"),
        ):
            row = self.db.one(
                f"SELECT COUNT(*) AS n, SUM(length({columns})) AS b FROM {table}"  # noqa: S608
            )
            sizes[table + "_rows"] = int(row["n"]) if row else 0
            sizes[table + "_bytes"] = int(row["b"] or 0) if row else 0
        return sizes


def _walk(
    handle: pygit2.Repository, tree: pygit2.Object, prefix: bytes
) -> Iterable[tuple[bytes, bytes]]:
    """(path, blob id) of each regular file below ``tree``, in path order; symbolic links and
    submodules are not files to search. A stack of the trees being read, not recursion: a
    hostile repository nests directories past the interpreter's recursion limit."""
    assert isinstance(tree, pygit2.Tree)
    stack: list[tuple[Iterator[pygit2.Object], bytes]] = [(iter(tree), prefix)]
    while stack:
        entries, at = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        path = at + (entry.raw_name or b"")
        mode = entry.filemode
        if mode == FileMode.TREE:
            below = handle[entry.id]
            assert isinstance(below, pygit2.Tree)
            stack.append((iter(below), path + b"/"))
        elif mode in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
            yield path, entry.id.raw
