"""Git objects as Forgejo's API shapes them: Branch, Tag, Reference, Commit, GitEntry,
ContentsResponse, FileCommitResponse. Field names and types follow Forgejo's swagger
(pyforgejo's models check them in the tests); every URL is absolute, built by ``Links``.

What a shape needs from git that a page does not (a commit's changed files and line counts)
is worked out in-process and kept by commit id: it never changes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import NotRequired, TypedDict, cast

import pygit2

from floorless.collab.protections import Rule
from floorless.forgejo import urls
from floorless.forgejo.caches import ShapeCaches
from floorless.forgejo.people import User
from floorless.forgejo.schema import DateTime
from floorless.git import diff, objects, refs
from floorless.git.lenient import AnyCommit
from floorless.repos.registry import Repo

# Forgejo answers every commit of a repository without signature checking with this
UNSIGNED: PayloadCommitVerification = {
    "verified": False,
    "reason": "gpg.error.not_signed_commit",
    "signature": "",
    "signer": None,
    "payload": "",
}
# A commit's files and line counts for the API: as many as the commit page lists
STAT_LIMITS = diff.Limits(files=300, lines_per_file=0, lines_total=0)
_STATUS = {"added": "added", "deleted": "removed", "renamed": "renamed", "copied": "copied"}


@dataclass(frozen=True)
class Links:
    """Absolute URLs of one repository: ``base`` is the forge's public URL."""

    base: str
    repo: Repo

    def api(self, *parts: str | bytes) -> str:
        return self.base + urls.api_repo(self.repo, *parts)

    def page(self, path: str) -> str:
        return self.base + path

    def commit_api(self, sha: str) -> str:
        return self.api("git", "commits", sha)


def text(raw: bytes) -> str:
    """A name or path as JSON shows it: UTF-8, with replacement for other bytes."""
    return raw.decode("utf-8", "replace")


def when(person: objects.Person) -> str:
    return person.when.isoformat()


def commit_user(person: objects.Person) -> CommitUser:
    return {"name": person.name, "email": person.email, "date": when(person)}


def payload_user(person: objects.Person) -> PayloadUser:
    return {"name": person.name, "email": person.email, "username": ""}


def payload_commit(links: Links, info: objects.CommitInfo) -> PayloadCommit:
    """A branch's commit (Forgejo's PayloadCommit): its page as ``url``, the author's date."""
    return {
        "id": info.id,
        "message": info.message,
        "url": links.page(urls.commit(links.repo, info.id)),
        "author": payload_user(info.author),
        "committer": payload_user(info.committer),
        "verification": UNSIGNED,
        "timestamp": when(info.author),
        "added": None,
        "removed": None,
        "modified": None,
    }


def branch(
    links: Links, name: bytes, info: objects.CommitInfo, can_push: bool, rule: Rule | None = None
) -> Branch:
    """Forgejo's ``Branch``; ``rule``, the protection rule that matches it, when it was read
    (for one branch; a list of them leaves it out, to read no more than its page)."""
    return {
        "name": text(name),
        "commit": payload_commit(links, info),
        "protected": rule is not None,
        "required_approvals": 0,
        "enable_status_check": rule is not None and rule.enable_status_check,
        "status_check_contexts": [] if rule is None else list(rule.status_check_contexts),
        "user_can_push": can_push,
        "user_can_merge": can_push,
        "effective_branch_protection_name": "" if rule is None else rule.rule,
    }


def tag(
    links: Links, handle: pygit2.Repository, found: refs.Tag, info: objects.CommitInfo | None
) -> Tag:
    """A tag: ``id`` is the tag object's for an annotated tag, else the commit's; the
    message is the tag's, or the commit's for a lightweight one."""
    name = text(found.name)
    message = info.message if info is not None else ""
    tag_id = found.target.hex() if found.target else (info.id if info else "")
    if found.annotated:
        obj = handle.get(objects.to_oid(found.target))
        if isinstance(obj, pygit2.Tag):
            message = objects.decode_text(obj.raw_message, None)
    archive = links.page(urls.archive(links.repo, found.name, ".zip"))
    return {
        "name": name,
        "message": message,
        "id": tag_id,
        "commit": None
        if info is None
        else {"url": links.commit_api(info.id), "sha": info.id, "created": when(info.committer)},
        "zipball_url": archive,
        "tarball_url": links.page(urls.archive(links.repo, found.name, ".tar.gz")),
    }


def reference(links: Links, name: bytes, kind: str, sha: str) -> Reference:
    """A ref: ``kind`` "commit" or "tag" (an annotated tag's object)."""
    return {
        "ref": text(name),
        "url": links.api("git", name),
        "object": {"type": kind, "sha": sha, "url": links.api("git", kind + "s", sha)},
    }


def delta_status(status: pygit2.enums.DeltaStatus) -> str:
    """A changed file's status as Forgejo spells it."""
    return _STATUS.get(diff.STATUS.get(status, "modified"), "modified")


def changes(
    caches: ShapeCaches, handle: pygit2.Repository, commit: AnyCommit
) -> tuple[list[CommitAffectedFiles], CommitStats]:
    """The files the commit changes against its first parent, with their status, and its
    line counts (the commit page's, within its budgets); kept by commit id."""
    key = commit.id.raw
    found = cast("tuple[list[CommitAffectedFiles], CommitStats] | None", caches.changes.get(key))
    if found is None:
        counted = diff.commit_diff(handle, commit, STAT_LIMITS)
        files: list[CommitAffectedFiles] = [
            {
                "filename": text(f.new_path or f.old_path),
                "status": _STATUS.get(f.status, "modified"),
            }
            for f in counted.files
        ]
        stats: CommitStats = {
            "total": counted.additions + counted.deletions,
            "additions": counted.additions,
            "deletions": counted.deletions,
        }
        found = (files, stats)
        caches.changes.put(key, found)
    return found


def commit(
    caches: ShapeCaches,
    links: Links,
    handle: pygit2.Repository,
    commit_obj: AnyCommit,
    files: bool = True,
    stat: bool = True,
    verification: bool = True,
) -> Commit:
    """A commit as ``commits`` and ``git/commits/{sha}`` answer it (Forgejo's Commit), kept
    by where it is shown (the forge's URL, the repository's name: its links) and its id, as
    nothing in it can change: the same dict each time it is asked for again, not to be
    changed by the caller."""
    key = (
        links.base,
        links.repo.owner,
        links.repo.name,
        commit_obj.id.raw,
        files,
        stat,
        verification,
    )
    return cast(
        Commit,
        caches.commits.get_or_make(
            key, lambda: _commit(caches, links, handle, commit_obj, files, stat, verification)
        ),
    )


def _commit(
    caches: ShapeCaches,
    links: Links,
    handle: pygit2.Repository,
    commit_obj: AnyCommit,
    files: bool,
    stat: bool,
    verification: bool,
) -> Commit:
    info = objects.commit_info(commit_obj)
    api = links.commit_api(info.id)
    shaped: Commit = {
        "url": api,
        "sha": info.id,
        "created": when(info.committer),
        "html_url": links.page(urls.commit(links.repo, info.id)),
        "commit": {
            "url": api,
            "author": commit_user(info.author),
            "committer": commit_user(info.committer),
            "message": info.message,
            "tree": {
                "url": links.api("git", "trees", info.tree),
                "sha": info.tree,
                "created": when(info.committer),
            },
            "verification": UNSIGNED if verification else None,
        },
        "author": None,  # no account is matched to a commit's e-mail
        "committer": None,
        "parents": [_parent(links, handle, p) for p in info.parents],
    }
    if files or stat:
        changed, counts = changes(caches, handle, commit_obj)
        if files:
            shaped["files"] = changed
        if stat:
            shaped["stats"] = counts
    return shaped


def _parent(links: Links, handle: pygit2.Repository, sha: str) -> CommitMeta:
    parent = objects.commit_info(objects.get_commit(handle, bytes.fromhex(sha)))
    return {"url": links.commit_api(sha), "sha": sha, "created": when(parent.committer)}


def file_commit(
    links: Links, handle: pygit2.Repository, commit_obj: pygit2.Commit
) -> FileCommitResponse:
    """The commit a write through ``contents`` made (Forgejo's FileCommitResponse)."""
    info = objects.commit_info(commit_obj)
    return {
        "url": links.commit_api(info.id),
        "sha": info.id,
        "created": when(info.committer),
        "html_url": links.page(urls.commit(links.repo, info.id)),
        "author": commit_user(info.author),
        "committer": commit_user(info.committer),
        "message": info.message,
        "tree": {"url": links.api("git", "trees", info.tree), "sha": info.tree},
        "parents": [_parent(links, handle, p) for p in info.parents],
    }


MODES = {0o040000: "tree", 0o160000: "commit"}


def git_entry(links: Links, handle: pygit2.Repository, entry: objects.Entry) -> GitEntry:
    """One entry of ``git/trees/{sha}``; ``path`` is below the tree asked for."""
    kind = MODES.get(entry.mode, "blob")
    size = 0
    if kind == "blob":
        size = objects.object_size(handle, objects.to_oid(bytes.fromhex(entry.id))) or 0
    shaped: GitEntry = {
        "path": text(entry.path),
        "mode": f"{entry.mode:06o}",
        "type": kind,
        "size": size,
        "sha": entry.id,
    }
    if kind != "commit":
        shaped["url"] = links.api("git", kind + "s", entry.id)
    return shaped


def content_kind(mode: int) -> str:
    if mode == objects.MODE_TREE:
        return "dir"
    if mode == objects.MODE_LINK:
        return "symlink"
    if mode == objects.MODE_SUBMODULE:
        return "submodule"
    return "file"


def contents(
    links: Links,
    handle: pygit2.Repository,
    kind: str,
    ref: bytes,
    path: bytes,
    obj: pygit2.Object,
    mode: int,
    last_commit: bytes | None,
    content: bytes | None = None,
) -> ContentsResponse:
    """A file or directory as ``contents`` answers it (Forgejo's ContentsResponse):
    ``content`` (base64) only for a file read alone; a symlink's ``target``."""
    what = content_kind(mode)
    sha = str(obj.id)
    size = 0
    if what in ("file", "symlink"):
        size = objects.object_size(handle, obj.id) or 0
    self_url = links.base + urls.api_contents(links.repo, path, ref)
    html = links.page(urls.src(links.repo, kind, ref, path))
    git_url = None
    if what == "dir":
        git_url = links.api("git", "trees", sha)
    elif what != "submodule":
        git_url = links.api("git", "blobs", sha)
    shaped: ContentsResponse = {
        "name": text(path.rsplit(b"/", 1)[-1]),
        "path": text(path),
        "sha": sha,
        "last_commit_sha": last_commit.hex() if last_commit else None,
        "type": what,
        "size": size,
        "encoding": None,
        "content": None,
        "target": None,
        "url": self_url,
        "html_url": html,
        "git_url": git_url,
        "download_url": links.page(urls.raw(links.repo, kind, ref, path))
        if what == "file"
        else None,
        "submodule_git_url": None,
        "_links": {"self": self_url, "git": git_url, "html": html},
    }
    if what == "symlink" and isinstance(obj, pygit2.Blob):
        shaped["target"] = text(objects.blob_bytes(obj))
    if content is not None:
        shaped["encoding"] = "base64"
        shaped["content"] = base64.b64encode(content).decode("ascii")
    return shaped


# Forgejo's shapes of git's objects, as the builders above make them; the OpenAPI
# definitions are made from them (``forgejo/schema.py``).


class PayloadUser(TypedDict):
    """Forgejo's ``PayloadUser``."""

    name: str
    email: str
    username: str


class PayloadCommitVerification(TypedDict):
    """Forgejo's ``PayloadCommitVerification``."""

    verified: bool
    reason: str
    signature: str
    signer: PayloadUser | None
    payload: str


class PayloadCommit(TypedDict):
    """Forgejo's ``PayloadCommit``."""

    id: str
    message: str
    url: str
    author: PayloadUser
    committer: PayloadUser
    verification: PayloadCommitVerification | None
    timestamp: DateTime
    added: list[str] | None
    removed: list[str] | None
    modified: list[str] | None


class Branch(TypedDict):
    """Forgejo's ``Branch``."""

    name: str
    commit: PayloadCommit
    protected: bool
    required_approvals: int
    enable_status_check: bool
    status_check_contexts: list[str]
    user_can_push: bool
    user_can_merge: bool
    effective_branch_protection_name: str


class CommitMeta(TypedDict):
    """Forgejo's ``CommitMeta``."""

    url: str
    sha: str
    created: NotRequired[DateTime]


class Tag(TypedDict):
    """Forgejo's ``Tag``."""

    name: str
    message: str
    id: str
    commit: CommitMeta | None
    zipball_url: str
    tarball_url: str


class GitObject(TypedDict):
    """Forgejo's ``GitObject``."""

    type: str
    sha: str
    url: str


class Reference(TypedDict):
    """Forgejo's ``Reference``."""

    ref: str
    url: str
    object: GitObject


class CommitUser(TypedDict):
    """Forgejo's ``CommitUser``."""

    name: str
    email: str
    date: str


class RepoCommit(TypedDict):
    """Forgejo's ``RepoCommit``."""

    url: str
    author: CommitUser
    committer: CommitUser
    message: str
    tree: CommitMeta
    verification: PayloadCommitVerification | None


class CommitAffectedFiles(TypedDict):
    """Forgejo's ``CommitAffectedFiles``."""

    filename: str
    status: str


class CommitStats(TypedDict):
    """Forgejo's ``CommitStats``."""

    total: int
    additions: int
    deletions: int


class Commit(TypedDict):
    """Forgejo's ``Commit``."""

    url: str
    sha: str
    created: DateTime
    html_url: str
    commit: RepoCommit
    author: User | None
    committer: User | None
    parents: list[CommitMeta]
    files: NotRequired[list[CommitAffectedFiles]]
    stats: NotRequired[CommitStats]


class GitEntry(TypedDict):
    """Forgejo's ``GitEntry``."""

    path: str
    mode: str
    type: str
    size: int
    sha: str
    url: NotRequired[str]


class GitTreeResponse(TypedDict):
    """Forgejo's ``GitTreeResponse``."""

    sha: str
    url: str
    tree: list[GitEntry]
    truncated: bool
    page: int
    total_count: int


class GitBlobResponse(TypedDict):
    """Forgejo's ``GitBlobResponse``."""

    content: str
    encoding: str
    url: str
    sha: str
    size: int


class FileLinksResponse(TypedDict):
    """Forgejo's ``FileLinksResponse``."""

    self: str
    git: str | None
    html: str


class ContentsResponse(TypedDict):
    """Forgejo's ``ContentsResponse``."""

    name: str
    path: str
    sha: str
    last_commit_sha: str | None
    type: str
    encoding: str | None
    content: str | None
    target: str | None
    url: str
    html_url: str
    git_url: str | None
    download_url: str | None
    submodule_git_url: str | None
    size: int
    _links: FileLinksResponse


class FileCommitResponse(TypedDict):
    """Forgejo's ``FileCommitResponse``."""

    url: str
    sha: str
    created: DateTime
    html_url: str
    author: CommitUser
    committer: CommitUser
    message: str
    tree: CommitMeta
    parents: list[CommitMeta]


class FileResponse(TypedDict):
    """Forgejo's ``FileResponse``."""

    content: ContentsResponse
    commit: FileCommitResponse
    verification: PayloadCommitVerification


class FilesResponse(TypedDict):
    """Forgejo's ``FilesResponse``."""

    files: list[ContentsResponse]
    commit: FileCommitResponse
    verification: PayloadCommitVerification


class FileDeleteResponse(TypedDict):
    """Forgejo's ``FileDeleteResponse``."""

    content: ContentsResponse
    commit: FileCommitResponse
    verification: PayloadCommitVerification


class Compare(TypedDict):
    """Forgejo's ``Compare``."""

    total_commits: int
    commits: list[Commit]
    files: list[CommitAffectedFiles]
