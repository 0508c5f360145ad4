"""Git objects as Forgejo's API shapes them: Branch, Tag, Reference, Commit, GitEntry,
ContentsResponse, FileCommitResponse. Field names and types follow Forgejo's swagger
(pyforgejo's models check them in the tests); every URL is absolute, built by ``Links``.

What a shape needs from git that a page does not (a commit's changed files and line counts)
is worked out in-process and kept by commit id: it never changes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pygit2

from floorless.collab.protections import Rule
from floorless.core.caches import Cache, approximate_size
from floorless.forgejo import urls
from floorless.git import diff, objects
from floorless.git.lenient import AnyCommit
from floorless.git.refs import Tag
from floorless.repos.registry import Repo

Json = dict[str, Any]

# Forgejo answers every commit of a repository without signature checking with this
UNSIGNED: Json = {
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


def commit_user(person: objects.Person) -> Json:
    return {"name": person.name, "email": person.email, "date": when(person)}


def payload_user(person: objects.Person) -> Json:
    return {"name": person.name, "email": person.email, "username": ""}


def payload_commit(links: Links, info: objects.CommitInfo) -> Json:
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
) -> Json:
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
    links: Links, handle: pygit2.Repository, found: Tag, info: objects.CommitInfo | None
) -> Json:
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


def reference(links: Links, name: bytes, kind: str, sha: str) -> Json:
    """A ref: ``kind`` "commit" or "tag" (an annotated tag's object)."""
    return {
        "ref": text(name),
        "url": links.api("git", name),
        "object": {"type": kind, "sha": sha, "url": links.api("git", kind + "s", sha)},
    }


def delta_status(status: pygit2.enums.DeltaStatus) -> str:
    """A changed file's status as Forgejo spells it."""
    return _STATUS.get(diff.STATUS.get(status, "modified"), "modified")


# A commit's changed files: as many as it changes (thousands for a big merge), so bounded in
# bytes rather than in commits.
_CHANGES: Cache[bytes, tuple[list[Json], Json]] = Cache.lru(16 << 20, getsizeof=approximate_size)


def changes(handle: pygit2.Repository, commit: AnyCommit) -> tuple[list[Json], Json]:
    """The files the commit changes against its first parent, with their status, and its
    line counts (the commit page's, within its budgets); kept by commit id."""
    key = commit.id.raw
    found = _CHANGES.get(key)
    if found is None:
        counted = diff.commit_diff(handle, commit, STAT_LIMITS)
        files = [
            {
                "filename": text(f.new_path or f.old_path),
                "status": _STATUS.get(f.status, "modified"),
            }
            for f in counted.files
        ]
        stats = {
            "total": counted.additions + counted.deletions,
            "additions": counted.additions,
            "deletions": counted.deletions,
        }
        found = (files, stats)
        _CHANGES.put(key, found)
    return found


# A commit's JSON, kept by where it is shown (the forge's URL, the repository's name: its
# links) and its id: nothing in it can change. Building one (a dozen quoted URLs, its
# parents' dates) took a commits answer of 50 ten times as long as the commits page.
_SHAPED: Cache[tuple[str, str, str, bytes, bool, bool, bool], Json] = Cache.lru(
    32 << 20, getsizeof=approximate_size
)


def commit(
    links: Links,
    handle: pygit2.Repository,
    commit_obj: AnyCommit,
    files: bool = True,
    stat: bool = True,
    verification: bool = True,
) -> Json:
    """A commit as ``commits`` and ``git/commits/{sha}`` answer it (Forgejo's Commit); the
    same dict each time it is asked for again: not to be changed by the caller."""
    key = (
        links.base,
        links.repo.owner,
        links.repo.name,
        commit_obj.id.raw,
        files,
        stat,
        verification,
    )
    return _SHAPED.get_or_make(
        key, lambda: _commit(links, handle, commit_obj, files, stat, verification)
    )


def _commit(
    links: Links,
    handle: pygit2.Repository,
    commit_obj: AnyCommit,
    files: bool,
    stat: bool,
    verification: bool,
) -> Json:
    info = objects.commit_info(commit_obj)
    api = links.commit_api(info.id)
    shaped: Json = {
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
        changed, counts = changes(handle, commit_obj)
        if files:
            shaped["files"] = changed
        if stat:
            shaped["stats"] = counts
    return shaped


def _parent(links: Links, handle: pygit2.Repository, sha: str) -> Json:
    parent = objects.commit_info(objects.get_commit(handle, bytes.fromhex(sha)))
    return {"url": links.commit_api(sha), "sha": sha, "created": when(parent.committer)}


def file_commit(links: Links, handle: pygit2.Repository, commit_obj: pygit2.Commit) -> Json:
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


def git_entry(links: Links, handle: pygit2.Repository, entry: objects.Entry) -> Json:
    """One entry of ``git/trees/{sha}``; ``path`` is below the tree asked for."""
    kind = MODES.get(entry.mode, "blob")
    size = 0
    if kind == "blob":
        size = objects.object_size(handle, objects.to_oid(bytes.fromhex(entry.id))) or 0
    shaped: Json = {
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
) -> Json:
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
    shaped: Json = {
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


# The OpenAPI definitions of these shapes (``openapi.py`` takes them in): each field's type,
# checked against real answers by the tests.
_META = {"url": "string", "sha": "string", "created": "date-time"}
_VERIFICATION = {
    "verified": "boolean",
    "reason": "string",
    "signature": "string",
    "signer": "PayloadUser",
    "payload": "string",
}
SCHEMAS: dict[str, dict[str, str]] = {
    "PayloadUser": {"name": "string", "email": "string", "username": "string"},
    "PayloadCommitVerification": _VERIFICATION,
    "PayloadCommit": {
        "id": "string",
        "message": "string",
        "url": "string",
        "author": "PayloadUser",
        "committer": "PayloadUser",
        "verification": "PayloadCommitVerification",
        "timestamp": "date-time",
        "added": "[string]",
        "removed": "[string]",
        "modified": "[string]",
    },
    "Branch": {
        "name": "string",
        "commit": "PayloadCommit",
        "protected": "boolean",
        "required_approvals": "integer",
        "enable_status_check": "boolean",
        "status_check_contexts": "[string]",
        "user_can_push": "boolean",
        "user_can_merge": "boolean",
        "effective_branch_protection_name": "string",
    },
    "CommitMeta": _META,
    "Tag": {
        "name": "string",
        "message": "string",
        "id": "string",
        "commit": "CommitMeta",
        "zipball_url": "string",
        "tarball_url": "string",
    },
    "GitObject": {"type": "string", "sha": "string", "url": "string"},
    "Reference": {"ref": "string", "url": "string", "object": "GitObject"},
    "CommitUser": {"name": "string", "email": "string", "date": "string"},
    "RepoCommit": {
        "url": "string",
        "author": "CommitUser",
        "committer": "CommitUser",
        "message": "string",
        "tree": "CommitMeta",
        "verification": "PayloadCommitVerification",
    },
    "CommitAffectedFiles": {"filename": "string", "status": "string"},
    "CommitStats": {"total": "integer", "additions": "integer", "deletions": "integer"},
    "Commit": {
        "url": "string",
        "sha": "string",
        "created": "date-time",
        "html_url": "string",
        "commit": "RepoCommit",
        "author": "User",
        "committer": "User",
        "parents": "[CommitMeta]",
        "files": "[CommitAffectedFiles]",
        "stats": "CommitStats",
    },
    "GitEntry": {
        "path": "string",
        "mode": "string",
        "type": "string",
        "size": "integer",
        "sha": "string",
        "url": "string",
    },
    "GitTreeResponse": {
        "sha": "string",
        "url": "string",
        "tree": "[GitEntry]",
        "truncated": "boolean",
        "page": "integer",
        "total_count": "integer",
    },
    "GitBlobResponse": {
        "content": "string",
        "encoding": "string",
        "url": "string",
        "sha": "string",
        "size": "integer",
    },
    "FileLinksResponse": {"self": "string", "git": "string", "html": "string"},
    "ContentsResponse": {
        **{
            k: "string"
            for k in (
                "name",
                "path",
                "sha",
                "last_commit_sha",
                "type",
                "encoding",
                "content",
                "target",
                "url",
                "html_url",
                "git_url",
                "download_url",
                "submodule_git_url",
            )
        },
        "size": "integer",
        "_links": "FileLinksResponse",
    },
    "FileCommitResponse": {
        "url": "string",
        "sha": "string",
        "created": "date-time",
        "html_url": "string",
        "author": "CommitUser",
        "committer": "CommitUser",
        "message": "string",
        "tree": "CommitMeta",
        "parents": "[CommitMeta]",
    },
    "FileResponse": {
        "content": "ContentsResponse",
        "commit": "FileCommitResponse",
        "verification": "PayloadCommitVerification",
    },
    "FilesResponse": {
        "files": "[ContentsResponse]",
        "commit": "FileCommitResponse",
        "verification": "PayloadCommitVerification",
    },
    "FileDeleteResponse": {
        "content": "ContentsResponse",
        "commit": "FileCommitResponse",
        "verification": "PayloadCommitVerification",
    },
    "Compare": {
        "total_commits": "integer",
        "commits": "[Commit]",
        "files": "[CommitAffectedFiles]",
    },
}
