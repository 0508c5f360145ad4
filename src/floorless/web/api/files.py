"""Writing through ``/api/v1/repos/{owner}/{repo}/...``: files (``contents``), in Forgejo's
shapes, and branches (created, deleted). Each needs WRITE on the repository.

A write commits without a work tree and moves the branch by compare-and-swap
(``floorless.git.write``), then is taken in as a push is (``forge.moves.after_push``): pages, the
index, pull requests and other nodes follow at once. Input is checked whole before anything
is written: a wrong type, content that is not base64, a stale blob id, a path or branch
name git would refuse are each a 4xx with nothing written (a field floorless does not know
is ignored, as Forgejo ignores it: clients send the fields of newer versions).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Required, TypedDict

import falcon
import pygit2

from floorless.accounts.access import Level
from floorless.core import dates
from floorless.core.errors import BadRequest, Conflict, FloorlessError, Forbidden, NotFound
from floorless.forge import Forge
from floorless.forgejo import git as shapes
from floorless.forgejo import payloads as hookpayloads
from floorless.forgejo import schema, urls
from floorless.forgejo.git import Branch, FileDeleteResponse, FileResponse, FilesResponse
from floorless.forgejo.schema import Doc
from floorless.git import objects, write
from floorless.git.write import Change, Unprocessable, check_branch_name, check_write_path
from floorless.repos.registry import Repo
from floorless.web.api.base import Operation
from floorless.web.api.gitbase import GitApi, may_write, read_body, resolve_ref
from floorless.web.api.repository import Target
from floorless.web.auth import viewer_of
from floorless.web.context import RepoView
from floorless.web.public import public_url

log = logging.getLogger(__name__)

VERBS = {"create": "Add", "update": "Update", "delete": "Delete"}


class FileOptions(TypedDict, total=False):
    """What every write through ``contents`` takes (Forgejo's ``FileOptions``)."""

    branch: Annotated[str, Doc("the branch to commit on (the default branch when not given)")]
    new_branch: Annotated[str, Doc("a new branch to create with the commit, from branch")]
    message: Annotated[str, Doc("the commit message (one is made when not given)")]
    author: Annotated[
        dict[str, Any], Doc("name and email of the author (the caller when not given)")
    ]
    committer: Annotated[
        dict[str, Any], Doc("name and email of the committer (the author when not given)")
    ]
    dates: Annotated[dict[str, Any], Doc("author and committer dates, RFC 3339")]
    signoff: Annotated[bool, Doc("not supported: ignored")]


_CONTENT = Doc("the file's new content, in base64")
_SHA = Doc("the blob id of the file as last read")


class CreateFileOptions(FileOptions, total=False):
    """What ``POST contents/{path}`` takes (Forgejo's ``CreateFileOptions``)."""

    content: Required[Annotated[str, _CONTENT]]


class UpdateFileOptions(FileOptions, total=False):
    """What ``PUT contents/{path}`` takes (Forgejo's ``UpdateFileOptions``)."""

    content: Required[Annotated[str, _CONTENT]]
    sha: Required[Annotated[str, _SHA]]
    from_path: str


class DeleteFileOptions(FileOptions, total=False):
    """What ``DELETE contents/{path}`` takes (Forgejo's ``DeleteFileOptions``)."""

    sha: Required[Annotated[str, _SHA]]


class ChangeFileOperation(TypedDict, total=False):
    """One change of ``POST contents`` (Forgejo's ``ChangeFileOperation``)."""

    operation: Required[Annotated[str, Doc("create, update or delete")]]
    path: Required[Annotated[str, Doc("the file's path")]]
    content: Annotated[str, _CONTENT]
    sha: Annotated[str, Doc("the blob id of the file as last read (update, delete)")]
    from_path: Annotated[str, Doc("the path it is moved from (update)")]


class ChangeFilesOptions(FileOptions, total=False):
    """What ``POST contents`` takes (Forgejo's ``ChangeFilesOptions``)."""

    files: Annotated[list[ChangeFileOperation], Doc("operation, path, content, sha, from_path")]


class Identity(TypedDict, total=False):
    """An author or committer of a write (Forgejo's ``Identity``)."""

    name: str
    email: str


class Dates(TypedDict, total=False):
    """The dates of a write (Forgejo's ``CommitDateOptions``), RFC 3339."""

    author: str
    committer: str


class CreateBranchRepoOption(TypedDict, total=False):
    """What ``POST branches`` takes (Forgejo's ``CreateBranchRepoOption``)."""

    new_branch_name: Required[Annotated[str, Doc("the branch's name")]]
    old_ref_name: Annotated[str, Doc("the branch, tag or commit it starts at")]
    old_branch_name: Annotated[str, Doc("the branch it starts at (deprecated)")]


CREATE_FILE = Operation(
    "create a file",
    FileResponse,
    201,
    body=CreateFileOptions,
    operation_id="repoCreateFile",
    tag="repository",
    needs=Level.WRITE,
)
UPDATE_FILE = Operation(
    "update a file (moved too, with from_path)",
    FileResponse,
    body=UpdateFileOptions,
    operation_id="repoUpdateFile",
    tag="repository",
    needs=Level.WRITE,
)
DELETE_FILE = Operation(
    "delete a file",
    FileDeleteResponse,
    body=DeleteFileOptions,
    operation_id="repoDeleteFile",
    tag="repository",
    needs=Level.WRITE,
)
CHANGE_FILES = Operation(
    "create, update and delete several files in one commit",
    FilesResponse,
    201,
    body=ChangeFilesOptions,
    operation_id="repoChangeFiles",
    tag="repository",
    needs=Level.WRITE,
)
CREATE_BRANCH = Operation(
    "create a branch",
    Branch,
    201,
    body=CreateBranchRepoOption,
    operation_id="repoCreateBranch",
    tag="repository",
    needs=Level.WRITE,
)
DELETE_BRANCH = Operation(
    "delete a branch (not the default)",
    None,
    204,
    operation_id="repoDeleteBranch",
    tag="repository",
    needs=Level.WRITE,
)


def checked(body: Mapping[str, Any], shape: type, what: str = "body") -> None:
    """Each field of its declared type in ``shape`` (JSON null for an optional one), else
    422; a field not known here is ignored, as the framework (``base.py``) and Forgejo's
    decoder ignore it."""
    fields = schema.fields(shape)
    for key, value in body.items():
        kind = fields.get(key)
        if kind is None:
            continue
        expected = schema.python_type(kind)
        if value is not None and (
            not isinstance(value, expected) or (expected is not bool and isinstance(value, bool))
        ):
            raise Unprocessable(f"{key!r} must be a {expected.__name__}")


def _content(value: Any) -> bytes:
    if not isinstance(value, str):
        raise Unprocessable("'content' (the file's bytes in base64) is required")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise Unprocessable("'content' is not base64") from exc


def _date(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Unprocessable(f"dates.{name} must be a date")
    try:
        found = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise Unprocessable(f"dates.{name} is not an RFC 3339 date") from exc
    if found.tzinfo is None:
        raise Unprocessable(f"dates.{name} needs a time zone")
    return found


def _identity(value: Any, name: str) -> tuple[str, str] | None:
    if value is None:
        return None
    checked(value, Identity, name)
    who, email = value.get("name") or "", value.get("email") or ""
    if not who and not email:
        return None
    if not who or not email or any(c in who + email for c in "<>\n\0"):
        raise Unprocessable(f"{name} needs a name and an e-mail address, without <, > or newlines")
    return who, email


def signatures(
    req: falcon.Request, body: Mapping[str, Any]
) -> tuple[pygit2.Signature, pygit2.Signature]:
    """The author and committer: as given (one standing for the other when only one is),
    else the caller; at the given ``dates``, else now."""
    account = viewer_of(req).account
    assert account is not None  # WRITE was required
    author = _identity(body.get("author"), "author")
    committer = _identity(body.get("committer"), "committer")
    me = (account.name, account.email or f"{account.name}@noreply.invalid")
    author = author or committer or me
    committer = committer or author
    when = body.get("dates") or {}
    checked(when, Dates, "dates")
    now = objects.now()
    author_at = _date(when.get("author"), "author") or now
    committer_at = _date(when.get("committer"), "committer") or now

    def sign(who: tuple[str, str], at: datetime) -> pygit2.Signature:
        offset = at.utcoffset()
        minutes = int(offset.total_seconds() // 60) if offset is not None else 0
        seconds = int(dates.clamp(at.timestamp()))
        return pygit2.Signature(who[0], who[1], seconds, minutes)

    return sign(author, author_at), sign(committer, committer_at)


def _message(changes: list[Change], given: Any) -> str:
    if isinstance(given, str) and given.strip():
        return given if given.endswith("\n") else given + "\n"
    lines = [f"{VERBS[c.operation]} '{c.path.decode('utf-8', 'replace')}'" for c in changes]
    if len(lines) == 1:
        return lines[0] + "\n"
    return f"Change {len(lines)} files\n\n" + "\n".join(lines) + "\n"


def tell_hooks(
    forge: Forge,
    req: falcon.Request,
    repo: Repo,
    old: bytes | None,
    new: bytes | None,
    branch: str,
) -> None:
    """A branch this API moved (``old`` to ``new``, None for none) is a push by the caller
    to the repository's webhooks, as one over git is (``hookpayloads.pushed``)."""
    size = len(old or new or b"") * 2
    update = hookpayloads.Update(
        old.hex() if old else "0" * size, new.hex() if new else "0" * size, f"refs/heads/{branch}"
    )
    try:
        public = public_url(forge.settings, req)
        hookpayloads.pushed(forge, repo, viewer_of(req).account, [update], public)
    except (FloorlessError, OSError, ValueError) as exc:
        log.warning("%s: the webhook events of %s: %s", repo.full_name, branch, exc)


def guard(
    forge: Forge,
    req: falcon.Request,
    view: RepoView,
    branch: str,
    old: bytes | None,
    new: bytes | None,
) -> None:
    """Refuse a move of ``branch`` by the caller that its protection rule refuses a push
    (``Protections.guard``, the rule ``floorless.collab.githooks`` applies to git pushes)."""
    viewer = viewer_of(req)
    forge.protections.guard(
        view.repo,
        view.handle,
        viewer.name,
        view.level >= Level.ADMIN,
        branch,
        old.hex() if old else "",
        new.hex() if new else "",
    )


class Writer(GitApi):
    """Commits a list of changes and answers with the commit and each file."""

    def commit(
        self, req: falcon.Request, view: RepoView, body: Mapping[str, Any], changes: list[Change]
    ) -> tuple[write.Written, shapes.Links]:
        snapshot = view.snapshot
        empty = snapshot.is_empty
        branch = body.get("branch") or ""
        if not branch:
            branch = (snapshot.default_branch or b"main").decode("utf-8", "replace")
        check_branch_name(branch)
        new_branch = body.get("new_branch") or None
        if new_branch is not None:
            check_branch_name(new_branch)
        if empty and new_branch:  # nothing to start it from: the caller names it as branch
            raise Unprocessable("an empty repository has no branch to start a new one from")
        author, committer = signatures(req, body)
        message = _message(changes, body.get("message"))
        written = write.commit_files(
            view.handle,
            self.forge.git,
            view.repo.path,
            branch,
            new_branch,
            changes,
            message,
            author,
            committer,
            empty_ok=empty,
            guard=lambda target, old, new: guard(self.forge, req, view, target, old, new),
        )
        self.forge.moves.after_push(view.repo)
        new = bytes(written.commit.id.raw)
        tell_hooks(self.forge, req, view.repo, written.parent, new, written.branch)
        return written, shapes.Links(public_url(self.forge.settings, req), view.repo)

    def file(
        self, links: shapes.Links, view: RepoView, written: write.Written, path: bytes
    ) -> shapes.ContentsResponse | None:
        """The file ``path`` as the new commit has it (None: it was deleted)."""
        try:
            obj, mode = objects.lookup(view.handle, written.commit, path)
        except NotFound:
            return None
        content = objects.blob_bytes(obj) if isinstance(obj, pygit2.Blob) else None
        ref = written.branch.encode()
        return shapes.contents(
            links, view.handle, "branch", ref, path, obj, mode, written.commit.id.raw, content
        )

    def answer_one(
        self,
        resp: falcon.Response,
        links: shapes.Links,
        view: RepoView,
        written: write.Written,
        path: bytes,
        status: int,
    ) -> None:
        self.send(
            resp,
            {
                "content": self.file(links, view, written, path),
                "commit": shapes.file_commit(links, view.handle, written.commit),
                "verification": shapes.UNSIGNED,
            },
            status,
        )

    def _one(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        target: Target,
        operation: str,
        shape: type,
        status: int,
    ) -> None:
        view = target.view
        body = read_body(req)
        checked(body, shape)
        path = check_write_path(urls.exact_tail(req).decode("utf-8", "surrogateescape"))
        sha = body.get("sha")
        if operation != "create" and not sha:
            raise Unprocessable("'sha', the file's current blob id, is required")
        from_path = body.get("from_path")
        change = Change(
            operation,
            path,
            _content(body.get("content")) if operation != "delete" else None,
            sha,
            check_write_path(from_path) if from_path else None,
        )
        written, links = self.commit(req, view, body, [change])
        self.answer_one(resp, links, view, written, path, status)


class FileContents(Writer):
    """``POST``, ``PUT`` and ``DELETE contents/{path}``: create, update, delete one file."""

    operations: ClassVar[dict[str, Operation]] = {
        "post": CREATE_FILE,
        "put": UPDATE_FILE,
        "delete": DELETE_FILE,
    }

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str
    ) -> None:
        self._one(req, resp, target, "create", CreateFileOptions, 201)

    def on_put(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        self._one(req, resp, target, "update", UpdateFileOptions, 200)

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str
    ) -> None:
        self._one(req, resp, target, "delete", DeleteFileOptions, 200)


class ChangeFiles(Writer):
    """``POST contents``: several files changed in one commit (Forgejo's ChangeFilesOptions)."""

    operations: ClassVar[dict[str, Operation]] = {"post": CHANGE_FILES}

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view = target.view
        body = read_body(req)
        checked(body, ChangeFilesOptions)
        files = body.get("files")
        if not files:
            raise Unprocessable("'files' must list at least one change")
        if len(files) > 1000:
            raise Unprocessable("at most 1000 files in one commit")
        changes = []
        for item in files:
            if not isinstance(item, dict):
                raise Unprocessable("each of 'files' must be an object")
            checked(item, ChangeFileOperation, "file")
            operation = item.get("operation")
            if operation not in write.OPERATIONS:
                raise Unprocessable("'operation' must be create, update or delete")
            if not isinstance(item.get("path"), str):
                raise Unprocessable("each file needs a 'path'")
            if operation != "create" and not item.get("sha"):
                raise Unprocessable(f"{operation} of {item['path']!r} needs 'sha'")
            from_path = item.get("from_path")
            changes.append(
                Change(
                    operation,
                    check_write_path(item["path"]),
                    _content(item.get("content")) if operation != "delete" else None,
                    item.get("sha"),
                    check_write_path(from_path) if from_path else None,
                )
            )
        written, links = self.commit(req, view, body, changes)
        self.send(
            resp,
            {
                "files": [self.file(links, view, written, c.path) for c in changes],
                "commit": shapes.file_commit(links, view.handle, written.commit),
                "verification": shapes.UNSIGNED,
            },
            201,
        )


class CreateBranch(GitApi):
    """``POST branches``: ``new_branch_name`` from ``old_ref_name`` (a branch, tag or
    commit) or ``old_branch_name``, else the default branch; 409 when the name is taken."""

    operations: ClassVar[dict[str, Operation]] = {"post": CREATE_BRANCH}

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view, links = target.view, target.links
        body = read_body(req)
        checked(body, CreateBranchRepoOption)
        name = body.get("new_branch_name")
        if not isinstance(name, str):
            raise Unprocessable("'new_branch_name' is required")
        check_branch_name(name)
        start = body.get("old_ref_name") or body.get("old_branch_name")
        if start:
            resolved = resolve_ref(view, start.encode("utf-8", "surrogateescape"))
        elif view.snapshot.home is not None:
            resolved = resolve_ref(view, view.snapshot.home[1])
        else:
            raise NotFound("the repository is empty")
        if write.branch_tip(view.handle, name) is not None:
            raise Conflict(f"branch {name!r} already exists")
        guard(self.forge, req, view, name, None, resolved.commit)
        moved = write.move_branch(
            self.forge.git, view.repo.path, name, objects.to_oid(resolved.commit), None
        )
        if not moved:
            raise Conflict(f"branch {name!r} already exists")
        self.forge.moves.after_push(view.repo)
        tell_hooks(self.forge, req, view.repo, None, resolved.commit, name)
        info = objects.commit_info(objects.get_commit(view.handle, resolved.commit))
        self.send(resp, shapes.branch(links, name.encode(), info, may_write(view)), 201)


class DeleteBranch(GitApi):
    """``DELETE branches/{branch}``: never the default branch (403)."""

    operations: ClassVar[dict[str, Operation]] = {"delete": DELETE_BRANCH}

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str
    ) -> None:
        view = target.view
        name = urls.exact_tail(req)
        if (
            name not in view.snapshot.branches
            and write.branch_tip(view.handle, name.decode("utf-8", "surrogateescape")) is None
        ):
            raise NotFound("branch not found")
        if name == view.snapshot.default_branch:
            raise Forbidden("the default branch cannot be deleted")
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest("a branch deleted through the API must have a UTF-8 name") from exc
        tip = write.branch_tip(view.handle, text)
        if tip is None:
            raise NotFound("branch not found")
        guard(self.forge, req, view, text, tip, None)
        if not write.delete_branch(self.forge.git, view.repo.path, text, tip):
            raise Conflict("the branch moved meanwhile; try again")
        self.forge.moves.after_push(view.repo)
        tell_hooks(self.forge, req, view.repo, tip, None, text)
        resp.status = falcon.HTTP_204
