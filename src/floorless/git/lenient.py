"""Commits libgit2 refuses to parse, read from their bytes the way git reads them.

git stores, and serves, a commit whose date does not fit in 64 bits or that has no author
line; libgit2 will not parse such a commit at all, so a repository whose branch tip is one
would answer nothing but errors. ``read_commit`` returns libgit2's commit when it can, and
otherwise a ``LenientCommit`` built from the raw object: the headers git itself reads, a date
git cannot hold read as 0 (git shows the epoch too), a missing person as empty. It answers
the attributes floorless reads of a commit, so pages, the indexer and the reachability walks
take either.
"""

from __future__ import annotations

from typing import TypeAlias

import pygit2
from pygit2.enums import ObjectType

_INT64 = (1 << 63) - 1


class LenientSignature:
    """An author or committer line as git splits it: ``name <email> seconds +hhmm``."""

    def __init__(self, line: bytes | None) -> None:
        self.raw_name = b""
        self.raw_email = b""
        self.time = 0
        self.offset = 0
        if line is None:
            return
        opening = line.find(b"<")
        closing = line.find(b">", opening + 1)
        if opening < 0 or closing < 0:
            self.raw_name = line.strip()
            return
        self.raw_name = line[:opening].strip()
        self.raw_email = line[opening + 1 : closing]
        fields = line[closing + 1 :].split()
        if fields and (fields[0].isascii() and fields[0].isdigit()):
            seconds = int(fields[0])
            self.time = seconds if seconds <= _INT64 else 0
        if (
            len(fields) > 1
            and len(fields[1]) == 5
            and fields[1][1:].isascii()
            and fields[1][1:].isdigit()
        ):
            sign = -1 if fields[1][:1] == b"-" else 1
            self.offset = sign * (int(fields[1][1:3]) * 60 + int(fields[1][3:5]))

    @property
    def name(self) -> str:
        return self.raw_name.decode("utf-8", "replace")

    @property
    def email(self) -> str:
        return self.raw_email.decode("utf-8", "replace")


class LenientCommit:
    """A commit libgit2 will not parse, from its raw bytes."""

    type = ObjectType.COMMIT

    def __init__(self, repo: pygit2.Repository, oid: pygit2.Oid, data: bytes) -> None:
        self._repo = repo
        self.id = oid
        head, _, self.raw_message = data.partition(b"\n\n")
        self.parent_ids: list[pygit2.Oid] = []
        self.tree_id: pygit2.Oid | None = None
        self.message_encoding: str | None = None
        people: dict[bytes, bytes] = {}
        for line in head.split(b"\n"):
            if line.startswith(b" "):
                continue  # the continuation of a multi-line header (a signature)
            key, _, value = line.partition(b" ")
            if key == b"tree" and self.tree_id is None:
                self.tree_id = _oid(value)
            elif key == b"parent":
                parent = _oid(value)
                if parent is not None:
                    self.parent_ids.append(parent)
            elif key in (b"author", b"committer"):
                people.setdefault(key, value)
            elif key == b"encoding":
                self.message_encoding = value.decode("ascii", "replace")
        self.author = LenientSignature(people.get(b"author"))
        self.committer = LenientSignature(people.get(b"committer"))
        self.commit_time = self.committer.time
        self.commit_time_offset = self.committer.offset

    @property
    def message(self) -> str:
        return self.raw_message.decode("utf-8", "replace")

    @property
    def tree(self) -> pygit2.Tree:
        tree = self._repo.get(self.tree_id) if self.tree_id is not None else None
        if not isinstance(tree, pygit2.Tree):
            raise pygit2.GitError(f"commit {self.id} has no readable tree")
        return tree

    @property
    def parents(self) -> list[AnyCommit]:
        found = (read_commit(self._repo, p) for p in self.parent_ids)
        return [p for p in found if p is not None]


AnyCommit: TypeAlias = pygit2.Commit | LenientCommit


def read_commit(repo: pygit2.Repository, oid: pygit2.Oid) -> AnyCommit | None:
    """The commit ``oid`` names; a ``LenientCommit`` when libgit2 cannot parse it; None when
    it is not a commit. A missing object raises as ``repo.get`` does (KeyError, GitError)."""
    try:
        obj = repo.get(oid)
    except pygit2.GitError:
        kind, data = repo.odb.read(oid)  # the bytes, unparsed; missing raises
        if kind != ObjectType.COMMIT:
            raise
        return LenientCommit(repo, oid, bytes(data))
    return obj if isinstance(obj, pygit2.Commit) else None


def _oid(text: bytes) -> pygit2.Oid | None:
    try:
        return pygit2.Oid(hex=text.strip().decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
