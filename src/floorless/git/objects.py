"""Reading commits, trees and blobs in-process through libgit2."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pygit2

from floorless import timing
from floorless.errors import NotFound, RepositoryBroken, UnknownRevision

MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_SUBMODULE = 0o160000
MODE_EXEC = 0o100755


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    when: datetime

    @classmethod
    def of(cls, sig: pygit2.Signature) -> Person:
        tz = timezone(timedelta(minutes=sig.offset))
        return cls(
            name=sig.raw_name.decode("utf-8", "replace"),
            email=sig.raw_email.decode("utf-8", "replace"),
            when=datetime.fromtimestamp(sig.time, tz),
        )


@dataclass(frozen=True)
class CommitInfo:
    id: str
    parents: tuple[str, ...]
    author: Person
    committer: Person
    message: str
    tree: str

    @property
    def summary(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def body(self) -> str:
        parts = self.message.split("\n", 1)
        return parts[1].strip("\n") if len(parts) > 1 else ""

    @property
    def short(self) -> str:
        return self.id[:10]

    @property
    def time(self) -> datetime:
        return self.committer.when


@dataclass(frozen=True)
class Entry:
    """One entry of a tree, with its kind spelled out."""

    name: bytes
    path: bytes
    mode: int
    id: str

    @property
    def kind(self) -> str:
        if self.mode == MODE_TREE:
            return "tree"
        if self.mode == MODE_SUBMODULE:
            return "submodule"
        if self.mode == MODE_LINK:
            return "link"
        return "blob"


def commit_info(commit: pygit2.Commit) -> CommitInfo:
    return CommitInfo(
        id=str(commit.id),
        parents=tuple(str(p) for p in commit.parent_ids),
        author=Person.of(commit.author),
        committer=Person.of(commit.committer),
        message=commit.raw_message.decode(_encoding(commit), "replace"),
        tree=str(commit.tree_id),
    )


def _encoding(commit: pygit2.Commit) -> str:
    encoding = commit.message_encoding or "utf-8"
    try:
        "".encode(encoding)
    except LookupError:
        return "utf-8"
    return encoding


def get_commit(repo: pygit2.Repository, commit_id: bytes) -> pygit2.Commit:
    with timing.phase("git"):
        try:
            obj = repo.get(pygit2.Oid(raw=commit_id))
        except (pygit2.GitError, ValueError) as exc:
            raise RepositoryBroken(f"cannot read commit: {exc}") from exc
    if not isinstance(obj, pygit2.Commit):
        raise UnknownRevision("no such commit")
    return obj


def expand_commit_id(repo: pygit2.Repository, prefix: bytes) -> bytes | None:
    """Full hex id of the commit an abbreviated hex id names, or None."""
    with timing.phase("git"):
        try:
            obj = repo.get(prefix.decode())
        except (pygit2.GitError, ValueError, KeyError):
            return None
    if isinstance(obj, pygit2.Commit):
        return str(obj.id).encode()
    return None


def child(tree: pygit2.Tree, name: bytes) -> pygit2.Object | None:
    """The entry ``name`` of ``tree``, matched on its exact bytes."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        try:
            found = tree[text]
        except KeyError:
            found = None
        if found is not None and found.raw_name == name:
            return found
    for entry in tree:
        if entry.raw_name == name:
            return entry
    return None


def lookup(
    repo: pygit2.Repository, commit: pygit2.Commit, path: bytes
) -> tuple[pygit2.Object, int]:
    """The object at ``path`` in ``commit`` and its file mode; NotFound when there is none."""
    with timing.phase("git"):
        tree = commit.tree
        if not path:
            return tree, MODE_TREE
        parts = path.split(b"/")
        node: pygit2.Object = tree
        mode = MODE_TREE
        for i, part in enumerate(parts):
            if not isinstance(node, pygit2.Tree):
                raise NotFound("no such path")
            entry = child(node, part)
            if entry is None:
                raise NotFound("no such path")
            mode = entry.filemode
            if mode == MODE_SUBMODULE:
                if i != len(parts) - 1:
                    raise NotFound("no such path (inside a submodule)")
                return entry, mode
            node = entry
        return node, mode


def list_tree(tree: pygit2.Tree, base: bytes) -> list[Entry]:
    """Entries of a tree, directories first, then by name (as forges show them)."""
    with timing.phase("git"):
        entries = [
            Entry(
                name=e.raw_name or b"",
                path=(base + b"/" + (e.raw_name or b"")) if base else (e.raw_name or b""),
                mode=e.filemode,
                id=str(e.id),
            )
            for e in tree
        ]
    entries.sort(key=lambda e: (e.mode != MODE_TREE, e.name.lower()))
    return entries


def blob_bytes(blob: pygit2.Blob, limit: int | None = None) -> bytes:
    """The blob's content (at most ``limit`` bytes), read once through a memoryview."""
    with timing.phase("git"):
        view = memoryview(blob)
        return bytes(view if limit is None else view[:limit])


def now() -> datetime:
    return datetime.now(UTC)
