"""Forks on disk: a repository made from another that borrows its parent's objects.

A fork is a new bare repository (made through the registry, so its creation is as safe
against a crash as any other: ``lifecycle.py``) whose ``objects/info/alternates`` names the
parent's objects directory, and whose branches and tags are written as refs to the parent's
commits: no object is copied, so forking a repository of any size takes as long as writing
its refs. What is pushed to the fork afterwards is stored in the fork alone; the parent never
reads a fork's objects.

Borrowing has three consequences the forge takes care of:

- the parent's garbage collection must keep what it no longer reaches (a fork may still
  reach it): a repository with forks is collected with ``--prune=never`` (``garbage.py``);
- deleting the parent would take the fork's history with it: first each fork is made whole
  (``git repack -a -d`` while the alternates are still there copies what it borrows into its
  own pack), then its alternates line goes;
- the alternates path is absolute (libgit2 follows relative alternates one level only, and a
  fork of a fork is two), so renaming the parent writes the new path into each fork's
  alternates before the directory moves and removes the old one after.

A pull request from a fork into its parent needs the head's commits in the parent (its
``refs/pull/N/head`` is fetched from there): ``fetch_head_into_base`` fetches them, one git
process when the pull request is opened or its head moves, never on a page.

This is the repository layer's half of forking: what a fork is, on disk and in the ``forks``
table. Who may fork what, into whose name, and the event it makes are the collaboration
layer's (``collab/forks.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from floorless.core.errors import FloorlessError, NotFound
from floorless.db import Database
from floorless.git.env import GitEnvironment
from floorless.git.refs import HEADS, TAGS, RefSnapshot
from floorless.repos.registry import Registry, Repo
from floorless.repos.state import RepoStates

REPACK_TIMEOUT = 6 * 3600.0
FETCH_TIMEOUT = 600.0


@dataclass(frozen=True)
class ForkRow:
    owner: str
    name: str
    parent_owner: str
    parent_name: str


def alternates_file(repo: Repo) -> Path:
    return repo.path / "objects" / "info" / "alternates"


def objects_dir(git_dir: Path) -> str:
    return str((git_dir / "objects").resolve())


def owns(git_dir: Path, oid: bytes) -> bool:
    """Whether the object ``oid`` is in the repository's own objects (packed or loose), not
    in those it borrows through alternates."""
    objects = str(git_dir / "objects")
    odb = pygit2.Odb()
    try:
        odb.add_backend(pygit2.OdbBackendPack(objects), 2)
        odb.add_backend(pygit2.OdbBackendLoose(objects, 0, False), 1)
        return odb.exists(pygit2.Oid(raw=oid))
    except (pygit2.GitError, ValueError, OSError):
        return False


class Forks:
    """The forks table and the alternates files: who borrows from whom, kept whole across a
    parent's rename and deletion."""

    def __init__(
        self, db: Database, git: GitEnvironment, registry: Registry, states: RepoStates
    ) -> None:
        self.db = db
        self.git = git
        self.registry = registry
        self.states = states

    def parent_of(self, owner: str, name: str) -> ForkRow | None:
        row = self.db.one("SELECT * FROM forks WHERE owner = ? AND name = ?", (owner, name))
        if row is None:
            return None
        return ForkRow(row["owner"], row["name"], row["parent_owner"], row["parent_name"])

    def forks_of(self, owner: str, name: str) -> list[ForkRow]:
        rows = self.db.query(
            "SELECT * FROM forks WHERE parent_owner = ? AND parent_name = ? ORDER BY owner, name",
            (owner, name),
        )
        return [ForkRow(r["owner"], r["name"], r["parent_owner"], r["parent_name"]) for r in rows]

    def ancestors(self, repo: Repo) -> list[Repo | None]:
        """The repositories ``repo`` was forked from, nearest first, the objects of each
        borrowed by the one before; None for one that is gone (and ends the line)."""
        found: list[Repo | None] = []
        names = repo.parent
        while names is not None and len(found) < 100:
            try:
                lender: Repo | None = self.registry.get(*names)
            except NotFound:
                lender = None
            found.append(lender)
            names = lender.parent if lender is not None else None
        return found

    def lend(self, parent: Repo, repo: Repo, snapshot: RefSnapshot) -> None:
        """Make ``repo`` (just created, empty) borrow ``parent``'s objects and hold its refs as
        ``snapshot`` has them: its branches, tags and default branch; then record the fork."""
        alternates = alternates_file(repo)
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(objects_dir(parent.path) + "\n")
        handle = pygit2.Repository(str(repo.path))  # opened after the alternates exist
        for short, commit in snapshot.branches.items():
            _write_ref(handle, HEADS + short, commit)
        for short, tag in snapshot.tags.items():
            if tag.target:
                _write_ref(handle, TAGS + short, tag.target)
        if snapshot.head is not None:
            handle.references.create("HEAD", snapshot.head.decode(), force=True)
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO forks (owner, name, parent_owner, parent_name, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (repo.owner, repo.name, parent.owner, parent.name, time.time()),
            )

    def make_whole(self, repo: Repo) -> None:
        """Copy into ``repo`` every object it borrows, then stop borrowing (its parent is about
        to go). ``git repack -a -d`` without ``-l`` packs the objects its refs reach wherever
        they are; ``git fsck --connectivity-only`` checks nothing is missing before the
        alternates go."""
        alternates = alternates_file(repo)
        if not alternates.exists():
            return
        self.git.run(repo.path, ("repack", "-a", "-d", "-q"), timeout=REPACK_TIMEOUT)
        kept = alternates.with_name("alternates.detached")
        alternates.rename(kept)
        try:
            self.git.run(
                repo.path, ("fsck", "--connectivity-only", "--no-dangling"), REPACK_TIMEOUT
            )
        except FloorlessError:
            kept.rename(alternates)  # still borrowing: the parent is not deleted
            raise
        kept.unlink()
        self.states.of(repo).reopen()

    def before_delete(self, parent: Repo) -> None:
        """Make every fork of ``parent`` whole; raises (and the deletion does not happen) when
        one cannot be."""
        for child in self.children(parent):
            self.make_whole(child)
        self.db.execute(
            "DELETE FROM forks WHERE parent_owner = ? AND parent_name = ?",
            (parent.owner, parent.name),
        )

    def children(self, parent: Repo) -> list[Repo]:
        found = []
        for row in self.forks_of(parent.owner, parent.name):
            try:
                found.append(self.registry.get(row.owner, row.name))
            except NotFound:
                continue
        return found

    def before_rename(self, parent: Repo, new_git_dir: Path) -> list[Repo]:
        """Add the parent's objects directory under its new name to each fork's alternates (a
        missing directory listed there is skipped by git and libgit2), so that no moment of
        the rename leaves a fork without its objects."""
        children = self.children(parent)
        new = str(new_git_dir.resolve() / "objects")
        for child in children:
            alternates = alternates_file(child)
            lines = alternates.read_text().splitlines() if alternates.exists() else []
            if new not in lines:
                _write_atomically(alternates, [*lines, new])
        return children

    def after_rename(self, children: list[Repo], old_git_dir: Path) -> None:
        """Drop the parent's old objects directory from each fork's alternates."""
        old = str(old_git_dir.resolve() / "objects")
        for child in children:
            alternates = alternates_file(child)
            try:
                lines = alternates.read_text().splitlines()
            except OSError:
                continue
            _write_atomically(alternates, [line for line in lines if line != old])
            self.states.of(child).reopen()

    def fetch_head_into_base(self, base: Repo, head: Repo, oid: str) -> None:
        """Make the commit ``oid`` (hex) of ``head`` (a fork, or any repository) and everything
        it reaches present in ``base``: one ``git fetch`` from ``head``'s directory when
        ``base`` lacks it, nothing when it has it. No ref is written in ``base``: the caller
        points ``refs/pull/N/head`` at it (``Moves.set_pull_ref``)."""
        target = pygit2.Oid(hex=oid)
        try:
            self.states.of(base).handle().odb.read_header(target)
            return
        except (KeyError, ValueError, pygit2.GitError):
            pass
        self.git.run(
            base.path,
            (
                "-c",
                "uploadpack.allowAnySHA1InWant=true",
                "fetch",
                "--no-tags",
                "--no-write-fetch-head",
                "--quiet",
                str(head.path),
                oid,
            ),
            timeout=FETCH_TIMEOUT,
        )
        self.states.of(base).reopen()  # new packs: a handle opened before may not see them


def _write_ref(handle: pygit2.Repository, name: bytes, target: bytes) -> None:
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:  # a ref libgit2 cannot name: left out
        return
    handle.references.create(text, pygit2.Oid(raw=target), force=True)


def _write_atomically(path: Path, lines: list[str]) -> None:
    scratch = path.with_name(path.name + ".new")
    scratch.write_text("".join(line + "\n" for line in lines))
    scratch.replace(path)
