"""Releases (Forgejo's ``release``): a tag with a title, Markdown notes, draft and
pre-release flags, an author and attachments.

A release names its tag; when that tag does not exist yet, publishing the release makes a
lightweight tag at ``target`` (a branch or a commit id) and tells the ref-move hub, so that
caches and the index follow as for any other ref move. A draft makes no tag until it is
published. Deleting a release deletes its attachments and leaves the tag.

What the webhooks hear is told from here (``on_change``), whichever way the change came (the
API, a page): a tag made or deleted (``Tagged``, Forgejo's ``create`` and ``delete``, a push of
the tag too when made), and a published release made, edited or deleted (``ReleaseChange``,
Forgejo's ``published``, ``updated`` and ``deleted``). A draft's making and editing tell
nothing, as on Forgejo; publishing it is its ``published``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pygit2

from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, Busy, Conflict, FloorlessError, NotFound
from floorless.db import Database, Row
from floorless.files.attachments import Attachment, Attachments
from floorless.repos.moves import Moves
from floorless.repos.registry import Repo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Release:
    id: int
    repo_id: int
    publisher_id: int | None
    tag_name: str
    target: str
    commit_id: str | None
    title: str
    note: str
    draft: bool
    prerelease: bool
    created_at: float
    updated_at: float


def _release(row: Row) -> Release:
    return Release(
        id=row["id"],
        repo_id=row["repo_id"],
        publisher_id=row["publisher_id"],
        tag_name=row["tag_name"],
        target=row["target"] or "",
        commit_id=row["commit_id"],
        title=row["title"] or "",
        note=row["note"] or "",
        draft=bool(row["draft"]),
        prerelease=bool(row["prerelease"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


@dataclass(frozen=True)
class ReleaseChange:
    """A published release ``published``, ``updated`` or ``deleted``, for
    ``Releases.on_change``: ``release`` as it is now (as it was, when deleted, with its files
    as they were in ``assets``); ``actor_id`` who did it (the release's publisher when the
    caller did not say)."""

    release: Release
    actor_id: int | None
    action: str
    assets: tuple[Attachment, ...] | None = None


@dataclass(frozen=True)
class Tagged:
    """The tag ``ref`` (its full name) made (``old`` all zeros) or deleted (``new`` all
    zeros) in ``repo`` through the domain, not by a push, for ``Releases.on_change``: its
    object ids as a push's update names them; ``actor_id`` who did it."""

    repo: Repo
    ref: str
    old: str
    new: str
    actor_id: int | None


def _actor(actor: Account | None, fallback: int | None = None) -> int | None:
    return actor.id if actor is not None else fallback


# The longest tag name made here (bytes): a loose ref is a file, whose name and git's
# ``.lock`` beside it must fit a file system's 255 (Forgejo keeps 255 characters).
MAX_TAG = 250
# libgit2 refuses to look up a ref name this long or longer (a ValueError, not an absence).
MAX_REF = 1024


def check_tag_name(name: str) -> str:
    """``name`` when it may name a tag; BadRequest saying why not otherwise."""
    if not name or not pygit2.reference_is_valid_name("refs/tags/" + name):
        raise BadRequest(f"not a valid tag name: {name!r}")
    if len(name.encode()) > MAX_TAG:
        raise BadRequest(f"a tag name is at most {MAX_TAG} bytes")
    return name


def _ref(handle: pygit2.Repository, name: str) -> pygit2.Reference | None:
    """The reference ``name``; None when there is none, or there can be none by that name."""
    if len(name.encode()) >= MAX_REF or not pygit2.reference_is_valid_name(name):
        return None
    return handle.references.get(name)


class Releases:
    def __init__(
        self,
        db: Database,
        open_repo: Callable[[Repo], pygit2.Repository],
        moves: Moves,
        attachments: Attachments,
        reachable: Callable[[Repo, pygit2.Oid], bool | None],
    ) -> None:
        self.db = db
        self.open_repo = open_repo
        self.moves = moves
        self.attachments = attachments
        # Whether the repository's refs reach a commit (the object gate's answer; None while
        # not known yet): a target named by id must be one, as a page's commit id must.
        self.reachable = reachable
        # Called with each ``ReleaseChange`` and ``Tagged`` once it is written: webhooks'
        # events are sent from here (``forge.py``), so that no caller has to remember them.
        self.on_change: list[Callable[[ReleaseChange | Tagged], object]] = []

    def changed(self, change: ReleaseChange | Tagged) -> None:
        """Tell ``on_change`` of ``change``; a listener's failure is logged, never the
        writer's."""
        for listener in self.on_change:
            try:
                listener(change)
            except FloorlessError as exc:
                log.warning("a release's or tag's event: %s", exc)

    # -- tags ------------------------------------------------------------------------------

    def resolve(self, repo: Repo, target: str) -> pygit2.Commit:
        """The commit ``target`` (a branch, a tag or a commit id) names in ``repo``;
        NotFound with a clear message when none. A commit named by id (or an expression) must
        be one the repository's refs reach: a fork reads its parent's objects, and a tag made
        at one only the parent, private since, reaches would serve it to the fork's readers
        (as would one at a deleted branch's commit, which is gone); Busy while the index
        cannot tell yet."""
        handle = self.open_repo(repo)
        for name in (f"refs/heads/{target}", f"refs/tags/{target}"):
            found_ref = _ref(handle, name)
            if found_ref is not None:
                peeled = found_ref.peel(pygit2.Commit)
                assert isinstance(peeled, pygit2.Commit)
                return peeled
        try:
            found = handle.revparse_single(target) if target else None
            commit = found.peel(pygit2.Commit) if found is not None else None
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            commit = None
        reached = self.reachable(repo, commit.id) if isinstance(commit, pygit2.Commit) else False
        if reached is None:
            raise Busy("the history is being indexed; try again in a moment", retry_after=1)
        if not reached or not isinstance(commit, pygit2.Commit):
            raise NotFound(f"no branch or commit {target!r} in {repo.full_name}")
        return commit

    def tag_commit(self, repo: Repo, tag: str) -> str | None:
        """The commit id the tag ``tag`` names, None when there is no such tag."""
        found = _ref(self.open_repo(repo), f"refs/tags/{tag}")
        return None if found is None else str(found.peel(pygit2.Commit).id)

    def create_tag(
        self,
        repo: Repo,
        tag: str,
        target: str,
        message: str = "",
        tagger: pygit2.Signature | None = None,
        *,
        actor: Account | None = None,
        actor_id: int | None = None,
    ) -> str:
        """Make the tag ``tag`` at ``target`` (annotated when ``message`` is given), tell
        the ref-move hub and ``on_change`` (by ``actor``, else the account ``actor_id``); the
        commit id it names. Conflict when it exists already."""
        check_tag_name(tag)
        commit = self.resolve(repo, target)
        handle = self.open_repo(repo)
        name = f"refs/tags/{tag}"
        if name in handle.references:
            raise Conflict(f"the tag {tag} exists already")
        if message:
            signature = tagger or pygit2.Signature("floorless", "floorless@localhost")
            made = handle.create_tag(
                tag, commit.id, pygit2.enums.ObjectType.COMMIT, signature, message
            )
        else:
            made = commit.id
            handle.references.create(name, made)
        self.moves.refs_moved(repo)
        new = str(made)
        self.changed(Tagged(repo, name, "0" * len(new), new, _actor(actor, actor_id)))
        return str(commit.id)

    def delete_tag(self, repo: Repo, tag: str, *, actor: Account | None = None) -> None:
        """Delete the tag ``tag``, tell the ref-move hub and ``on_change`` (by ``actor``);
        NotFound when none."""
        handle = self.open_repo(repo)
        name = f"refs/tags/{tag}"
        found = _ref(handle, name)
        if found is None:
            raise NotFound(f"no tag {tag} in {repo.full_name}")
        old = str(found.target)
        handle.references.delete(name)
        self.moves.refs_moved(repo)
        self.changed(Tagged(repo, name, old, "0" * len(old), _actor(actor)))

    # -- releases --------------------------------------------------------------------------

    def create(
        self,
        repo: Repo,
        publisher_id: int | None,
        tag_name: str,
        *,
        target: str = "",
        title: str = "",
        note: str = "",
        draft: bool = False,
        prerelease: bool = False,
        actor: Account | None = None,
    ) -> Release:
        """A new release of ``repo`` for ``tag_name``. Unless a draft, the tag is made at
        ``target`` (the default branch when empty) when it does not exist yet, and the
        release is ``published`` (by ``actor``, else its publisher)."""
        check_tag_name(tag_name)
        if self.by_tag(repo.id, tag_name) is not None:
            raise Conflict(f"a release for the tag {tag_name} exists already")
        commit_id = self.tag_commit(repo, tag_name)
        if commit_id is None:
            target = target or self.default_branch(repo)
            if draft:
                commit_id = str(self.resolve(repo, target).id)  # checked, not yet tagged
            else:
                commit_id = self.create_tag(
                    repo, tag_name, target, actor=actor, actor_id=publisher_id
                )
        now = time.time()
        self.db.execute(
            "INSERT INTO releases (repo_id, publisher_id, tag_name, target, commit_id, title,"
            " note, draft, prerelease, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                repo.id,
                publisher_id,
                tag_name,
                target,
                commit_id,
                title,
                note,
                int(draft),
                int(prerelease),
                now,
                now,
            ),
        )
        made = self.by_tag(repo.id, tag_name)
        assert made is not None
        if not made.draft:
            self.changed(ReleaseChange(made, _actor(actor, publisher_id), "published"))
        return made

    def default_branch(self, repo: Repo) -> str:
        handle = self.open_repo(repo)
        if handle.head_is_unborn:
            raise NotFound(f"{repo.full_name} has no commits to tag")
        head = handle.references["HEAD"].target
        return str(head).removeprefix("refs/heads/")

    def by_id(self, repo_id: int, release_id: int) -> Release | None:
        row = self.db.one(
            "SELECT * FROM releases WHERE id = ? AND repo_id = ?", (release_id, repo_id)
        )
        return _release(row) if row is not None else None

    def by_tag(self, repo_id: int, tag_name: str) -> Release | None:
        row = self.db.one(
            "SELECT * FROM releases WHERE repo_id = ? AND tag_name = ?", (repo_id, tag_name)
        )
        return _release(row) if row is not None else None

    def latest(self, repo_id: int) -> Release | None:
        """The newest release that is neither a draft nor a pre-release."""
        row = self.db.one(
            "SELECT * FROM releases WHERE repo_id = ? AND draft = 0 AND prerelease = 0"
            " ORDER BY created_at DESC, id DESC LIMIT 1",
            (repo_id,),
        )
        return _release(row) if row is not None else None

    def listing(self, repo_id: int, *, drafts: bool = False) -> list[tuple[int, str, float]]:
        """Every release's id, tag and date, newest first (drafts only when ``drafts``): what
        a page that merges releases with tags orders before it reads the few it shows."""
        sql = "SELECT id, tag_name, created_at FROM releases WHERE repo_id = ?"
        if not drafts:
            sql += " AND draft = 0"
        sql += " ORDER BY created_at DESC, id DESC"
        rows = self.db.remembered(sql, (repo_id,), ("releases",))
        return [(int(r["id"]), str(r["tag_name"]), float(r["created_at"])) for r in rows]

    def by_ids(self, repo_id: int, ids: Iterable[int]) -> dict[int, Release]:
        """The releases ``ids`` of ``repo_id``, in one statement."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        rows = self.db.query(
            f"SELECT * FROM releases WHERE repo_id = ? AND id IN ({marks})",  # noqa: S608
            (repo_id, *wanted),
        )
        return {int(r["id"]): _release(r) for r in rows}

    def list(
        self,
        repo_id: int,
        *,
        drafts: bool = False,
        draft: bool | None = None,
        prerelease: bool | None = None,
        page: int = 1,
        limit: int = 30,
    ) -> list[Release]:
        """``repo_id``'s releases, newest first; drafts only when ``drafts`` (a writer)."""
        sql = "SELECT * FROM releases WHERE repo_id = ?"
        params: list[object] = [repo_id]
        if not drafts:
            sql += " AND draft = 0"
        if draft is not None:
            sql += " AND draft = ?"
            params.append(int(draft))
        if prerelease is not None:
            sql += " AND prerelease = ?"
            params.append(int(prerelease))
        sql += " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
        params += [limit, (max(page, 1) - 1) * limit]
        return [_release(row) for row in self.db.query(sql, tuple(params))]

    def edit(
        self,
        repo: Repo,
        release: Release,
        *,
        tag_name: str | None = None,
        target: str | None = None,
        title: str | None = None,
        note: str | None = None,
        draft: bool | None = None,
        prerelease: bool | None = None,
        actor: Account | None = None,
    ) -> Release:
        """``release`` changed; publishing a draft (``draft=False``) makes its tag. A draft
        published is ``published``, a published release edited ``updated`` (by ``actor``,
        else its publisher); a draft edited, or made one again, tells nothing."""
        tag = release.tag_name if tag_name is None else check_tag_name(tag_name)
        if tag != release.tag_name and self.by_tag(repo.id, tag) is not None:
            raise Conflict(f"a release for the tag {tag} exists already")
        aim = release.target if target is None else target
        is_draft = release.draft if draft is None else draft
        commit_id = self.tag_commit(repo, tag)
        if commit_id is None:
            if is_draft:
                commit_id = str(self.resolve(repo, aim or self.default_branch(repo)).id)
            else:
                commit_id = self.create_tag(
                    repo,
                    tag,
                    aim or self.default_branch(repo),
                    actor=actor,
                    actor_id=release.publisher_id,
                )
        self.db.execute(
            "UPDATE releases SET tag_name = ?, target = ?, commit_id = ?, title = ?, note = ?,"
            " draft = ?, prerelease = ?, updated_at = ? WHERE id = ?",
            (
                tag,
                aim,
                commit_id,
                release.title if title is None else title,
                release.note if note is None else note,
                int(is_draft),
                int(release.prerelease if prerelease is None else prerelease),
                time.time(),
                release.id,
            ),
        )
        changed = self.by_id(repo.id, release.id)
        assert changed is not None
        if not changed.draft:
            action = "published" if release.draft else "updated"
            self.changed(ReleaseChange(changed, _actor(actor, release.publisher_id), action))
        return changed

    def delete(self, release: Release, *, actor: Account | None = None) -> None:
        """Delete ``release`` and its attachments; its tag stays. A published release is
        ``deleted`` (by ``actor``, else its publisher), with its files as they were."""
        assets = None
        if not release.draft:
            assets = tuple(self.attachments.of_releases([release.id]).get(release.id, []))
        self.attachments.delete_of_release(release.id)
        self.db.execute("DELETE FROM releases WHERE id = ?", (release.id,))
        if assets is not None:
            actor_id = _actor(actor, release.publisher_id)
            self.changed(ReleaseChange(release, actor_id, "deleted", assets))
