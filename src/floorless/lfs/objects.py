"""The Git LFS objects each repository holds: a row per (repository, object) in
``lfs_objects``, the bytes once in the content store whichever repositories hold them.

A repository holds an object once someone who may push to it uploaded its bytes there: an
upload is taken only when the bytes' size and SHA-256 are the ones announced, so holding an
object means having had its bytes. That the store has the same bytes from another repository
gives nobody a right to them: a batch request asks for an upload whenever the repository
itself does not hold the object (the bytes are then kept once all the same).

A fork starts with its parent's rows at the moment it is made (``lend``: rows, not bytes), as
its git objects start with the parent's refs; what the parent gets afterwards stays the
parent's, and a fork outlives its parent's deletion with what it had. A merged pull request
brings the objects its commits point to from the head's repository into the base's
(``bring``). When the last row of some bytes goes (a repository deleted), the store's files
are collected by ``files.attachments.collect``, which counts these rows as references.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pygit2

from floorless.db import Database
from floorless.files.store import Store, valid_oid
from floorless.lfs.pointers import MAX_POINTER, Pointer, parse

# The most objects one batch request may name (git-lfs sends 100 at a time).
MAX_BATCH = 1000


@dataclass(frozen=True)
class Usage:
    objects: int
    bytes: int


class LfsObjects:
    def __init__(self, db: Database, store: Store, max_bytes: int) -> None:
        self.db = db
        self.store = store
        self.max_bytes = max_bytes  # 0: no limit

    def held(self, repo_id: int, oids: Iterable[str]) -> dict[str, int]:
        """Which of ``oids`` the repository holds, with their sizes: one statement for a
        batch's worth."""
        wanted = sorted({oid for oid in oids if valid_oid(oid)})
        found: dict[str, int] = {}
        for start in range(0, len(wanted), MAX_BATCH):  # (a merge may name many more)
            some = wanted[start : start + MAX_BATCH]
            marks = ", ".join("?" * len(some))
            rows = self.db.query(
                f"SELECT oid, size FROM lfs_objects WHERE repo_id = ? AND oid IN ({marks})",  # noqa: S608
                (repo_id, *some),
            )
            found.update((r["oid"], int(r["size"])) for r in rows)
        return found

    def size(self, repo_id: int, oid: str) -> int | None:
        """The size of the object ``oid`` if the repository holds it and the store has it."""
        size = self.held(repo_id, [oid]).get(oid)
        if size is None or self.store.size(oid) != size:
            return None
        return size

    def upload(self, repo_id: int, oid: str, size: int, read: Callable[[int], bytes]) -> bool:
        """Take the object ``oid`` of ``size`` bytes from ``read`` into the repository: its
        bytes are checked against both (the store's ``Mismatch``, ``Truncated``, and
        ``TooLarge`` past ``lfs_max_bytes``). True when the repository did not hold it yet."""
        if self.held(repo_id, [oid]).get(oid) == size and self.store.size(oid) == size:
            while read(1 << 20):  # already here: the body is read and let go
                pass
            return False
        stored = self.store.write(read, limit=self.max_bytes, size=size, oid=oid)
        return self._hold(repo_id, stored.oid, stored.size)

    def _hold(self, repo_id: int, oid: str, size: int) -> bool:
        return bool(
            self.db.execute(
                "INSERT INTO lfs_objects (repo_id, oid, size, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (repo_id, oid) DO NOTHING",
                (repo_id, oid, size, time.time()),
            )
        )

    def lend(self, parent_id: int, fork_id: int) -> int:
        """Give a new fork the rows its parent has now; the number given."""
        return self.db.execute(
            "INSERT INTO lfs_objects (repo_id, oid, size, created_at)"
            " SELECT ?, oid, size, created_at FROM lfs_objects WHERE repo_id = ?"
            " ON CONFLICT (repo_id, oid) DO NOTHING",
            (fork_id, parent_id),
        )

    def bring(self, source_id: int, target_id: int, pointers: Iterable[Pointer]) -> int:
        """Give ``target`` the objects of ``pointers`` that ``source`` holds (a pull request's
        commits, merged from a fork); the number given."""
        held = self.held(source_id, (p.oid for p in pointers))
        return sum(self._hold(target_id, oid, size) for oid, size in held.items())

    def usage(self, repo_id: int) -> Usage:
        row = self.db.one(
            "SELECT COUNT(*) AS objects, COALESCE(SUM(size), 0) AS bytes FROM lfs_objects"
            " WHERE repo_id = ?",
            (repo_id,),
        )
        assert row is not None
        return Usage(int(row["objects"]), int(row["bytes"]))

    def missing(self, repo_id: int, pointers: Iterable[Pointer]) -> list[Pointer]:
        """The pointers whose objects the repository does not hold, or the store lacks."""
        unique = {p.oid: p for p in pointers}
        held = self.held(repo_id, unique)
        return [
            p
            for oid, p in sorted(unique.items())
            if held.get(oid) != p.size or self.store.size(oid) != p.size
        ]


def pointers_between(
    handle: pygit2.Repository, new: pygit2.Oid, old: pygit2.Oid | None, limit: int = 10_000
) -> Iterator[Pointer]:
    """The pointers among the files the commits from ``old`` (exclusive) to ``new`` add or
    change, up to ``limit`` commits."""
    walker = handle.walk(new, pygit2.enums.SortMode.TOPOLOGICAL)
    if old is not None:
        walker.hide(old)
    for count, commit in enumerate(walker):
        if count >= limit:
            return
        if commit.parents:
            diff = commit.parents[0].tree.diff_to_tree(commit.tree)
        else:
            diff = commit.tree.diff_to_tree(swap=True)  # everything a first commit has
        for delta in diff.deltas:
            found = pointer_at(handle, delta.new_file.id)
            if found is not None:
                yield found


def pointer_at(handle: pygit2.Repository, blob_id: pygit2.Oid) -> Pointer | None:
    """The pointer the blob ``blob_id`` is, if it is one: its header is read first, and only
    a blob small enough to be a pointer is read whole."""
    if blob_id.raw == bytes(20):  # a file deleted
        return None
    try:
        kind, size = handle.odb.read_header(blob_id)
    except (KeyError, pygit2.GitError):
        return None
    if kind != pygit2.enums.ObjectType.BLOB or size >= MAX_POINTER:
        return None
    blob = handle.get(blob_id)
    return parse(blob.data) if isinstance(blob, pygit2.Blob) else None


def reachable_pointers(
    handle: pygit2.Repository, listing: bytes
) -> Iterator[tuple[bytes, Pointer]]:
    """(path, pointer) for each pointer among the objects of ``listing``, the lines of ``git
    rev-list --objects --filter=blob:limit=...`` (an id, then a path for trees and blobs)."""
    seen: set[bytes] = set()
    for line in listing.splitlines():
        oid, _, path = line.partition(b" ")
        if not path or oid in seen:
            continue
        seen.add(oid)
        try:
            found = pointer_at(handle, pygit2.Oid(hex=oid.decode()))
        except ValueError:  # not an object id
            continue
        if found is not None:
            yield path, found
