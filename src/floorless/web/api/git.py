"""Reading a repository through ``/api/v1/repos/{owner}/{repo}/...``: branches, tags, refs,
commits, trees, blobs and comparisons, in Forgejo's shapes (files: ``contents.py``).

All in-process (``gitbase``): a list of commits pages through the walks the indexer keeps
(``views/commits.py``), never counting or skipping the whole history; a count is sent
(``X-Total-Count``) only when it is already known.
"""

from __future__ import annotations

import base64
import time
from dataclasses import replace
from typing import Annotated, ClassVar, Required, TypedDict

import falcon
import pygit2
from pygit2.enums import ObjectType

from floorless.accounts.access import Level
from floorless.core import timing
from floorless.core.errors import BadRequest, Conflict, NotFound
from floorless.forgejo import git as shapes
from floorless.forgejo import urls
from floorless.forgejo.caches import ShapeCaches
from floorless.forgejo.git import Commit, GitBlobResponse, GitTreeResponse, Reference, Tag
from floorless.forgejo.schema import Doc
from floorless.git import objects
from floorless.git.oid import is_full
from floorless.git.refs import check_path
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.files import CreateBranch, DeleteBranch
from floorless.web.api.gitbase import (
    GitApi,
    may_write,
    object_by_id,
    page_headers,
    paging,
    query_bytes,
    ref_or_default,
    resolve_ref,
)
from floorless.web.api.repository import Target
from floorless.web.context import RepoView
from floorless.web.history import Cursor, history_page


class CommitsQuery(Paged, total=False):
    """What ``GET`` of ``Commits`` reads from its query."""

    sha: Annotated[str, Doc("the branch, tag or commit to list from")]
    path: Annotated[str, Doc("only commits that change this path")]
    stat: Annotated[bool, Doc("with each commit's line counts (true when not given)")]
    files: Annotated[bool, Doc("with each commit's changed files (true when not given)")]
    verification: Annotated[bool, Doc("with each commit's verification (true when not given)")]


class CommitQuery(TypedDict, total=False):
    """What ``GET`` of ``GitCommit`` reads from its query."""

    stat: Annotated[bool, Doc("with each commit's line counts (true when not given)")]
    files: Annotated[bool, Doc("with each commit's changed files (true when not given)")]
    verification: Annotated[bool, Doc("with each commit's verification (true when not given)")]


class TreeQuery(TypedDict, total=False):
    """What ``GET`` of ``Tree`` reads from its query."""

    recursive: Annotated[bool, Doc("every entry below, not only the tree's own")]
    page: Annotated[int, Doc("page number (1-based)")]
    per_page: Annotated[int, Doc("entries per page (at most 1000)")]


HISTORY_WAIT = 5.0  # seconds a list of commits waits for a walk going on in the background
TREE_PER_PAGE = 1000  # Forgejo's DEFAULT_GIT_TREES_PER_PAGE
MAX_TREE_ENTRIES = 100_000  # a recursive tree listed past this is cut (``truncated``)


class Branches(CreateBranch):
    """``GET branches``: newest first, the default branch first of all (``POST``: files.py)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list branches",
            list[shapes.Branch],
            query=Paged,
            paged=True,
            operation_id="repoListBranches",
            tag="repository",
        ),
        **CreateBranch.operations,
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view, links = target.view, target.links
        page, limit = paging(req)
        names, _ = view.snapshot.newest_first(*objects.ref_dates(view.handle))
        chosen = names[(page - 1) * limit : page * limit]
        answer = [
            shapes.branch(
                links,
                name,
                objects.commit_info(objects.get_commit(view.handle, view.snapshot.branches[name])),
                may_write(view),
            )
            for name in chosen
        ]
        page_headers(req, resp, page, limit, len(names), page * limit < len(names), links.base)
        self.send(resp, answer)


class Branch(DeleteBranch):
    """``GET branches/{branch}``: the name may have slashes (``DELETE``: files.py)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a branch", shapes.Branch, operation_id="repoGetBranch", tag="repository"
        ),
        **DeleteBranch.operations,
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        view, links = target.view, target.links
        name = urls.exact_tail(req)
        commit = view.snapshot.branches.get(name)
        if commit is None:
            raise NotFound("branch not found")
        info = objects.commit_info(objects.get_commit(view.handle, commit))
        rule = self.forge.protections.for_branch(view.repo, shapes.text(name))
        self.send(resp, shapes.branch(links, name, info, may_write(view), rule))


def _tag(view: RepoView, links: shapes.Links, name: bytes) -> Tag:
    found = view.snapshot.tags[name]
    info = None
    if found.commit is not None:
        info = objects.commit_info(objects.get_commit(view.handle, found.commit))
    return shapes.tag(links, view.handle, found, info)


class CreateTagOption(TypedDict, total=False):
    """Forgejo's ``CreateTagOption``."""

    tag_name: Required[Annotated[str, Doc("the tag's name")]]
    target: Annotated[str, Doc("the branch or commit it names (the default branch if empty)")]
    message: Annotated[str, Doc("an annotated tag's message (none: a lightweight tag)")]


class Tags(GitApi):
    """``GET tags``: newest first; ``POST``: a tag made, as a writer's push would."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list tags",
            list[Tag],
            query=Paged,
            paged=True,
            operation_id="repoListTags",
            tag="repository",
        ),
        "post": Operation(
            "make a tag (annotated when a message is given)",
            Tag,
            status=201,
            body=CreateTagOption,
            signed_in=True,
            operation_id="repoCreateTag",
            needs=Level.WRITE,
            first="writer",
            tag="repository",
        ),
    }

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        account = self.writer(req)
        body = self.body(req)
        name = str(body["tag_name"]).strip()
        releases = self.forge.releases
        where = str(body.get("target") or "") or releases.default_branch(target.repo)
        tagger = pygit2.Signature(account.name, account.email or f"{account.name}@localhost")
        try:
            releases.create_tag(
                target.repo, name, where, str(body.get("message") or ""), tagger, actor=account
            )
        except (BadRequest, NotFound) as exc:  # a bad name, or a target naming nothing
            raise Unprocessable(str(exc)) from exc
        target.__dict__.pop("view", None)  # (read again: it holds the tag now)
        self.send(resp, _tag(target.view, target.links, name.encode()), 201)

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view, links = target.view, target.links
        page, limit = paging(req)
        _, names = view.snapshot.newest_first(*objects.ref_dates(view.handle))
        chosen = names[(page - 1) * limit : page * limit]
        page_headers(req, resp, page, limit, len(names), page * limit < len(names), links.base)
        self.send(resp, [_tag(view, links, name) for name in chosen])


class TagOne(GitApi):
    """``GET tags/{tag}``: the name may have slashes."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation("get a tag", Tag, operation_id="repoGetTag", tag="repository"),
        "delete": Operation(
            "delete a tag (not one a release belongs to: 409)",
            None,
            status=204,
            signed_in=True,
            operation_id="repoDeleteTag",
            needs=Level.WRITE,
            first="writer",
            tag="repository",
        ),
    }

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str
    ) -> None:
        account = self.writer(req)
        name = urls.exact_tail(req).decode("utf-8", "replace")
        if self.forge.releases.by_tag(target.repo.id, name) is not None:
            raise Conflict("the tag has a release: delete the release first")
        self.forge.releases.delete_tag(target.repo, name, actor=account)
        self.nothing(resp)

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        view, links = target.view, target.links
        name = urls.exact_tail(req)
        if name not in view.snapshot.tags:
            raise NotFound("tag not found")
        self.send(resp, _tag(view, links, name))


class Refs(GitApi):
    """``GET git/refs`` and ``git/refs/{prefix}``: every branch and tag whose full name
    starts with ``refs/{prefix}`` (a list even of one, as Forgejo answers); 404 for none."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list refs (under a prefix)",
            list[Reference],
            operation_id="repoListAllGitRefs",
            tag="repository",
        )
    }

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str = ""
    ) -> None:
        view, links = target.view, target.links
        prefix = b"refs/" + urls.exact_tail(req) if tail else b"refs/"
        found: list[Reference] = []
        snapshot = view.snapshot
        for name in snapshot.sorted_branches:
            full = b"refs/heads/" + name
            if full.startswith(prefix):
                found.append(shapes.reference(links, full, "commit", snapshot.branches[name].hex()))
        for name in snapshot.sorted_tags:
            full = b"refs/tags/" + name
            tag = snapshot.tags[name]
            if full.startswith(prefix) and tag.target:
                kind = "tag" if tag.annotated else "commit"
                found.append(shapes.reference(links, full, kind, tag.target.hex()))
        if not found:
            raise NotFound("no such ref")
        self.send(resp, found)


class RefsUnder(Refs):
    """``GET git/refs/{prefix}``: as ``git/refs``, under Forgejo's name for it."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": replace(Refs.operations["get"], operation_id="repoListGitRefs")
    }


class GitCommit(GitApi):
    """``GET git/commits/{sha}``: a commit id (full or abbreviated), or a ref."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a commit",
            Commit,
            query=CommitQuery,
            operation_id="repoGetSingleCommit",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, sha: str) -> None:
        view, links = target.view, target.links
        resolved = resolve_ref(view, urls.exact_tail(req, "sha"))
        commit = view.commit(resolved)
        asked = self.query(req)
        self.send(
            resp,
            shapes.commit(
                self.forge.shapes,
                links,
                view.handle,
                commit,
                files=asked.get("files", True),
                stat=asked.get("stat", True),
                verification=asked.get("verification", True),
            ),
        )


class Commits(GitApi):
    """``GET commits?sha=&path=&page=&limit=&stat=&files=&verification=``: ``git log``
    newest first, a page at a time from the walks the indexer keeps."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list commits",
            list[Commit],
            query=CommitsQuery,
            paged=True,
            operation_id="repoGetAllCommits",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        view, links = target.view, target.links
        if view.snapshot.is_empty:
            raise Conflict("Git Repository is empty.")
        resolved = ref_or_default(view, req, "sha")
        raw_path = query_bytes(req, "path")
        path = check_path(raw_path) if raw_path else b""
        page, limit = paging(req)
        skip = (page - 1) * limit
        asked = self.query(req)
        files = asked.get("files", True)
        stat = asked.get("stat", True)
        verification = asked.get("verification", True)
        cursor = Cursor(resolved.commit, skip) if skip else None
        deadline = time.monotonic() + HISTORY_WAIT
        while True:
            found = history_page(view, resolved.commit, path or None, cursor, limit)
            if found is not None:
                break
            if time.monotonic() > deadline:
                raise falcon.HTTPServiceUnavailable(
                    description="this history is being walked; try again in a moment",
                    retry_after=1,
                )
            time.sleep(0.05)
        total = None
        if not path:
            total = self.forge.answers.known_commit_count(view.repo.id, resolved.commit)
        answer = [
            shapes.commit(
                self.forge.shapes,
                links,
                view.handle,
                objects.get_commit(view.handle, oid),
                files=files,
                stat=stat,
                verification=verification,
            )
            for oid in found.commits
        ]
        page_headers(req, resp, page, limit, total, found.more, links.base)
        self.send(resp, answer)


class Tree(GitApi):
    """``GET git/trees/{sha}?recursive=&page=&per_page=``: the tree of a commit (by id or
    ref) or a tree by id; recursive lists as ``git ls-tree -r -t`` does."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a tree", GitTreeResponse, query=TreeQuery, operation_id="GetTree", tag="repository"
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, sha: str) -> None:
        view, links = target.view, target.links
        wanted = urls.exact_tail(req, "sha")
        tree: pygit2.Object
        header = None
        if is_full(wanted.lower()):
            header = objects.object_header(
                view.handle, objects.to_oid(bytes.fromhex(wanted.decode()))
            )
        if header is not None and header[0] == ObjectType.TREE:
            tree = object_by_id(view, wanted, ObjectType.TREE)
        else:
            tree = view.commit(resolve_ref(view, wanted)).tree
        assert isinstance(tree, pygit2.Tree)
        asked = self.query(req)
        recursive = asked.get("recursive", False)
        page = asked.get("page", 1)
        per_page = min(asked.get("per_page", TREE_PER_PAGE), TREE_PER_PAGE)
        entries = _entries(self.forge.shapes, tree, recursive)
        start = (page - 1) * per_page
        chosen = entries[start : start + per_page]
        self.send(
            resp,
            {
                "sha": str(tree.id),
                "url": links.api("git", "trees", str(tree.id)),
                "tree": [shapes.git_entry(links, view.handle, e) for e in chosen],
                "truncated": len(entries) > per_page or len(entries) >= MAX_TREE_ENTRIES,
                "page": page,
                "total_count": len(entries),
            },
        )


def _entries(caches: ShapeCaches, tree: pygit2.Tree, recursive: bool) -> list[objects.Entry]:
    """The tree's entries in git's order, and with ``recursive`` every tree's below its
    own entry (depth first, as ``git ls-tree -r -t``), at most MAX_TREE_ENTRIES; kept by
    the tree's id (a listing never changes), so the pages of a recursive listing walk the
    tree once."""
    key = (tree.id.raw, recursive)
    found = caches.listings.get(key)
    if found is not None:
        return found
    found = []

    def walk(node: pygit2.Tree, base: bytes) -> None:
        for entry in node:
            if len(found) >= MAX_TREE_ENTRIES:
                return
            name = entry.raw_name or b""
            path = base + b"/" + name if base else name
            found.append(objects.Entry(name, path, entry.filemode, str(entry.id)))
            if recursive and isinstance(entry, pygit2.Tree):
                walk(entry, path)

    with timing.phase("git"):
        walk(tree, b"")
    caches.listings.put(key, found)
    return found


class Blob(GitApi):
    """``GET git/blobs/{sha}``: the content in base64 while it fits the in-process budget
    (Forgejo leaves it out past its own limit too)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation("get a blob", GitBlobResponse, operation_id="GetBlob", tag="repository")
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, sha: str) -> None:
        view, links = target.view, target.links
        wanted = urls.exact_tail(req, "sha")
        header = None
        if is_full(wanted.lower()):
            header = objects.object_header(
                view.handle, objects.to_oid(bytes.fromhex(wanted.decode()))
            )
        if header is None or header[0] != ObjectType.BLOB:
            raise NotFound("no such blob")
        blob = object_by_id(view, wanted, ObjectType.BLOB)
        assert isinstance(blob, pygit2.Blob)
        size = header[1]
        content = None
        if size <= self.forge.settings.max_raw_in_process_bytes:
            content = base64.b64encode(objects.blob_bytes(blob)).decode("ascii")
        self.send(
            resp,
            {
                "content": content,
                "encoding": "base64" if content is not None else None,
                "url": links.api("git", "blobs", str(blob.id)),
                "sha": str(blob.id),
                "size": size,
            },
        )


MAX_COMPARE_COMMITS = 250  # commits listed by a comparison, newest first (as GitHub lists)
MAX_COMPARE_WALK = 10_000  # commits counted at most: ``total_commits`` stops there


class Compare(GitApi):
    """``GET compare/{base}...{head}`` (or ``..``): the commits of ``head`` that ``base``
    lacks, newest first, and the files changed since their merge base (three dots, as
    Forgejo compares)."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "compare two commits", shapes.Compare, operation_id="repoCompareDiff", tag="repository"
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        view, links = target.view, target.links
        spec = urls.exact_tail(req)
        base_name, dots, head_name = spec.partition(b"...")
        if not dots:
            base_name, dots, head_name = spec.partition(b"..")
        if not dots or not base_name or not head_name:
            raise NotFound("compare what: use base...head")
        base = resolve_ref(view, base_name).commit
        head = resolve_ref(view, head_name).commit
        handle = view.handle
        with timing.phase("git"):
            found = handle.merge_base(objects.to_oid(base), objects.to_oid(head))
            walker = handle.walk(objects.to_oid(head), pygit2.enums.SortMode.TIME)
            walker.hide(objects.to_oid(base))
            listed: list[pygit2.Commit] = []
            total = 0
            for commit in walker:
                if total < MAX_COMPARE_COMMITS:
                    listed.append(commit)
                total += 1
                if total >= MAX_COMPARE_WALK:
                    break
        files = []
        if found is not None:
            start = objects.get_commit(handle, found.raw)
            end = objects.get_commit(handle, head)
            with timing.phase("git"):
                changed = start.tree.diff_to_tree(end.tree)
                changed.find_similar()
                deltas = list(changed.deltas)
            files = [
                {
                    "filename": shapes.text(d.new_file.raw_path or d.old_file.raw_path),
                    "status": shapes.delta_status(d.status),
                }
                for d in deltas
            ]
        self.send(
            resp,
            {
                "total_commits": total,
                "commits": [
                    shapes.commit(self.forge.shapes, links, handle, c, files=False, stat=False)
                    for c in listed
                ],
                "files": files,
            },
        )
