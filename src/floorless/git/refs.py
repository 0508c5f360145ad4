"""Refs: snapshots read once and kept in memory, and the longest-prefix ``ref/path`` resolver.

A page never reads ref files: it asks the repository's state (``floorless.repos.state``), which
keeps the snapshot that a push through floorless invalidates at once and that a background
check, stat-first (``ref_fingerprint``), refreshes every ``ref_check_interval`` seconds for
changes made behind floorless's back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

from floorless.core.errors import BadRequest, RepositoryBroken, UnknownRevision
from floorless.git.lenient import read_commit
from floorless.git.oid import is_abbreviation, is_full

HEADS = b"refs/heads/"
TAGS = b"refs/tags/"
PULLS = b"refs/pull/"


@dataclass(frozen=True)
class Tag:
    name: bytes
    commit: bytes | None  # the commit it peels to; None for a tag of a tree or blob
    target: bytes  # the object the ref points at (an annotated tag object, or the commit)
    annotated: bool


@dataclass(frozen=True)
class RefSnapshot:
    """All branches and tags of a repository at one moment, as raw bytes; and its pull
    requests' refs (``refs/pull/{n}/head``, ``refs/pull/{n}/merge``), which are no branches
    (no page lists them) but whose commits may be fetched and shown like a branch's."""

    head: bytes | None  # HEAD's symbolic target, e.g. b"refs/heads/main"
    branches: Mapping[bytes, bytes]  # short name -> commit id (20 raw bytes)
    tags: Mapping[bytes, Tag]
    detached: bytes | None = None  # HEAD's commit when HEAD is detached
    pulls: Mapping[bytes, bytes] = field(default_factory=dict)  # full ref name -> commit id
    loaded_at: float = field(default_factory=time.monotonic)
    _newest: tuple[list[bytes], list[bytes]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def default_branch(self) -> bytes | None:
        if self.head and self.head.startswith(HEADS):
            return self.head[len(HEADS) :]
        return None

    @cached_property
    def sorted_branches(self) -> list[bytes]:
        return sorted(self.branches)

    @cached_property
    def sorted_tags(self) -> list[bytes]:
        return sorted(self.tags)

    def newest_first(
        self, committed: Callable[[bytes], int], tagged: Callable[[bytes], int | None]
    ) -> tuple[list[bytes], list[bytes]]:
        """Branch names (the default branch first) and tag names, each newest first by the
        time ``committed`` gives their commit id, ties by name; a tag of a tree or a blob last.
        An annotated tag is dated by when ``tagged`` says its tag object was made (its tagger's
        date, else its commit's: ``git for-each-ref --sort=-creatordate``, as Forgejo lists
        tags). Every caller passes the same two, so the order kept here is one order.

        Worked out once per snapshot and kept on it (the ref switcher asks for every path of
        every page): a commit's time never changes, and refs that move make a new snapshot.
        """
        found = self._newest
        if found is None:
            default = self.default_branch
            branches = sorted(
                self.branches,
                key=lambda name: (name != default, -committed(self.branches[name]), name),
            )

            def tag_key(name: bytes) -> tuple[bool, int, bytes]:
                tag = self.tags[name]
                if tag.commit is None:
                    return (True, 0, name)
                made = tagged(tag.target) if tag.annotated else None
                return (False, -(made if made is not None else committed(tag.commit)), name)

            found = (branches, sorted(self.tags, key=tag_key))
            object.__setattr__(self, "_newest", found)  # frozen, like a cached_property
        return found

    @cached_property
    def home(self) -> tuple[str, bytes, bytes] | None:
        """What the repository's home page shows, as (kind, ref, commit): the default branch;
        else a detached HEAD's commit; else the first branch; else the last tag by name (a
        repository of tags only). None for an empty repository."""
        branch = self.default_branch
        if branch is not None and branch in self.branches:
            return "branch", branch, self.branches[branch]
        if self.detached is not None:
            return "commit", self.detached.hex().encode(), self.detached
        if self.branches:  # HEAD names a missing branch
            first = self.sorted_branches[0]
            return "branch", first, self.branches[first]
        tagged = [name for name in self.sorted_tags if self.tags[name].commit is not None]
        if tagged:
            commit = self.tags[tagged[-1]].commit
            assert commit is not None
            return "tag", tagged[-1], commit
        return None

    @property
    def is_empty(self) -> bool:
        return not self.branches and not self.tags

    @cached_property
    def tip_set(self) -> frozenset[bytes]:
        """``tips()``, computed once per snapshot."""
        return frozenset(self.tips())

    @cached_property
    def tag_objects(self) -> frozenset[bytes]:
        """The annotated tag objects the tags point at."""
        return frozenset(t.target for t in self.tags.values() if t.annotated)

    def tips(self) -> set[bytes]:
        found = set(self.branches.values())
        found.update(t.commit for t in self.tags.values() if t.commit is not None)
        if self.detached is not None:
            found.add(self.detached)
        found.update(self.pulls.values())
        return found

    def same_refs(self, other: RefSnapshot) -> bool:
        mine = (self.head, self.detached, self.branches, self.tags, self.pulls)
        return mine == (other.head, other.detached, other.branches, other.tags, other.pulls)


def read_snapshot(repo: pygit2.Repository) -> RefSnapshot:
    """Read every branch, tag and pull request ref (one pass over the ref database)."""
    try:
        head_ref = repo.lookup_reference("HEAD")
        head = head_ref.raw_target if isinstance(head_ref.raw_target, bytes) else None
        detached = None
        if head is None:
            try:
                detached = head_ref.peel(pygit2.Commit).id.raw
            except (pygit2.GitError, KeyError, ValueError, pygit2.InvalidSpecError):
                detached = None
        branches: dict[bytes, bytes] = {}
        tags: dict[bytes, Tag] = {}
        pulls: dict[bytes, bytes] = {}
        unreadable = 0
        for ref in repo.references.iterator():
            name: bytes = ref.raw_name
            if name.startswith(HEADS):
                commit = _peeled_commit(repo, ref)
                if commit is None:
                    unreadable += 1  # a branch whose commit is missing is left out
                    continue
                branches[name[len(HEADS) :]] = commit
            elif name.startswith(TAGS):
                tags[name[len(TAGS) :]] = _read_tag(repo, name[len(TAGS) :], ref)
            elif name.startswith(PULLS):
                commit = _peeled_commit(repo, ref)
                if commit is not None:  # (a missing commit: nothing to fetch)
                    pulls[name] = commit
    except pygit2.GitError as exc:
        raise RepositoryBroken(f"the repository's refs cannot be read: {exc}") from exc
    if unreadable and not branches:  # not empty: its data cannot be read
        raise RepositoryBroken(f"no branch's commit can be read ({unreadable} branches)")
    return RefSnapshot(head=head, branches=branches, tags=tags, detached=detached, pulls=pulls)


def _peeled_commit(repo: pygit2.Repository, ref: pygit2.Reference) -> bytes | None:
    """The commit a branch or tag names, through an annotated tag; also a commit libgit2
    cannot parse (git/lenient.py)."""
    try:
        return bytes(ref.peel(pygit2.Commit).id.raw)
    except (pygit2.GitError, KeyError, ValueError, pygit2.InvalidSpecError):
        pass
    target = ref.target
    try:
        for _ in range(8):  # a tag of a tag of a commit
            if not isinstance(target, pygit2.Oid):
                return None
            obj = repo.get(target) if repo.odb.read_header(target)[0] == ObjectType.TAG else None
            if not isinstance(obj, pygit2.Tag):
                break
            target = obj.target
        commit = read_commit(repo, target) if isinstance(target, pygit2.Oid) else None
    except (pygit2.GitError, KeyError, ValueError):
        return None
    return commit.id.raw if commit is not None else None


def _read_tag(repo: pygit2.Repository, short: bytes, ref: pygit2.Reference) -> Tag:
    target = ref.target
    kind = None
    if isinstance(target, pygit2.Oid):
        try:  # the header alone: the object may be a commit libgit2 cannot parse
            kind = repo.odb.read_header(target)[0]
        except (pygit2.GitError, KeyError, ValueError):
            kind = None
    return Tag(
        name=short,
        commit=_peeled_commit(repo, ref),
        target=target.raw if kind is not None and isinstance(target, pygit2.Oid) else b"",
        annotated=kind == ObjectType.TAG,
    )


Fingerprint = tuple[tuple[str, int, int, int] | None, ...]


def ref_fingerprint(git_dir: Path) -> Fingerprint:
    """What changes whenever a ref does: the status of HEAD, packed-refs, the reftable list and
    every directory below refs/ (git moves a ref by renaming a new file into its directory).

    Plain ``os.stat`` and ``os.scandir`` calls let other threads run while the storage takes
    its time; reading the refs through libgit2 would hold the interpreter for all of it.
    """
    dirs = [git_dir]
    try:
        common = (git_dir / "commondir").read_text().strip()
    except OSError:
        common = ""
    if common:
        dirs.append((git_dir / common).resolve())
    marks: list[tuple[str, int, int, int] | None] = []
    for base in dirs:
        for name in ("HEAD", "packed-refs", "reftable/tables.list"):
            marks.append(_mark(base / name))
        pending = [base / "refs"]
        while pending:
            directory = pending.pop()
            marks.append(_mark(directory))
            try:
                with os.scandir(directory) as entries:
                    pending.extend(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
            except OSError:
                continue
    return tuple(marks)


def _mark(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path.name, st.st_mtime_ns, st.st_ino, st.st_size)


@dataclass(frozen=True)
class Resolved:
    """What a ``{kind}/{ref}/{path}`` URL tail names."""

    kind: str  # "branch", "tag" or "commit"
    ref: bytes  # the ref's short name, or the full hex commit id
    commit: bytes  # raw commit id
    path: bytes  # the rest, b"" for the root


MAX_PATH = 4096


def check_path(path: bytes) -> bytes:
    """Reject paths that can never name a tree entry: NUL, ``.``/``..``, overlong."""
    if len(path) > MAX_PATH:
        raise BadRequest("path too long")
    if b"\0" in path:
        raise BadRequest("NUL byte in path")
    parts = [p for p in path.split(b"/") if p]
    if any(p in (b".", b"..") for p in parts):
        raise BadRequest("'.' and '..' are not allowed in paths")
    return b"/".join(parts)


def resolve(
    snapshot: RefSnapshot,
    kind: str,
    tail: bytes,
    expand: Callable[[bytes], bytes | None] | None = None,
) -> Resolved:
    """Split ``tail`` into a ref and a path by the longest ref that prefixes it.

    ``kind`` is "branch", "tag" or "commit"; for "commit" the first segment is a commit id (full
    or abbreviated, of either hash: ``floorless.git.oid``; ``expand`` turns an abbreviation
    into a full id). Ref names may contain
    slashes (``feature/x``), so ``feature/x/docs/a.md`` is tried as ``feature/x`` +
    ``docs/a.md`` before ``feature`` + ``x/docs/a.md``.
    """
    tail = tail.strip(b"/")
    if b"\0" in tail or len(tail) > MAX_PATH:
        raise BadRequest("invalid ref or path")
    parts = tail.split(b"/")
    if kind == "commit":
        first = parts[0].lower()
        if not is_abbreviation(first):
            raise UnknownRevision("not a commit id")
        full = first if is_full(first) else (expand(first) if expand else None)
        if full is None:
            raise UnknownRevision("no such commit")
        return Resolved(
            "commit", full, bytes.fromhex(full.decode()), check_path(b"/".join(parts[1:]))
        )
    table: Mapping[bytes, object]
    if kind == "branch":
        table = snapshot.branches
    elif kind == "tag":
        table = snapshot.tags
    else:
        raise UnknownRevision(f"unknown ref kind {kind!r}")
    for cut in range(len(parts), 0, -1):
        name = b"/".join(parts[:cut])
        if name in table:
            target = table[name]
            commit = target.commit if isinstance(target, Tag) else target
            if not isinstance(commit, bytes):
                raise UnknownRevision("this tag does not point at a commit")
            return Resolved(kind, name, commit, check_path(b"/".join(parts[cut:])))
    raise UnknownRevision(f"no such {kind}")
