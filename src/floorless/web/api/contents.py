"""Files through ``/api/v1/repos/{owner}/{repo}/...``: ``contents`` (a file with its content,
or a directory's entries; written through ``files.py``), ``raw`` and ``media`` (the web's raw
answer), ``archive`` (the web's archive, one git child, as on the web).

floorless keeps no LFS objects, so ``media`` answers a file's own bytes, as ``raw`` does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, ClassVar, TypedDict

import falcon
import pygit2

from floorless.core.errors import BadRequest, NotFound
from floorless.forgejo import git as shapes
from floorless.forgejo.git import ContentsResponse
from floorless.forgejo.schema import Doc
from floorless.git import objects
from floorless.git.refs import Resolved
from floorless.web import archives as archive
from floorless.web.api.base import Operation
from floorless.web.api.files import ChangeFiles, FileContents
from floorless.web.api.gitbase import (
    GitApi,
    default_ref,
    path_of,
    query_bytes,
    ref_or_default,
    resolve_ref,
)
from floorless.web.api.repository import Target
from floorless.web.blobs import send_blob
from floorless.web.context import RepoView


class RefQuery(TypedDict, total=False):
    """What ``GET`` of ``ContentsRoot`` reads from its query."""

    ref: Annotated[str, Doc("a branch, tag or commit id (the default branch if not given)")]


_CONTENTS = Operation(
    "get a file (with content) or a directory's entries",
    ContentsResponse,
    query=RefQuery,
    operation_id="repoGetContents",
    tag="repository",
)
_CONTENTS_ROOT = Operation(
    "get the root directory's entries",
    list[ContentsResponse],
    query=RefQuery,
    operation_id="repoGetContentsList",
    tag="repository",
)


class ContentsReader(GitApi):
    """``GET contents[/{path}]?ref=``: a file (with its content) or a directory's entries."""

    def on_get(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str = ""
    ) -> None:
        view, links = target.view, target.links
        path = path_of(req) if tail else b""
        resolved = ref_or_default(view, req)
        commit = view.commit(resolved)
        obj, mode = objects.lookup(view.handle, commit, path)
        answers = self.forge.answers
        if isinstance(obj, pygit2.Tree):
            entries = objects.list_tree(obj, path)
            last = None
            if len(entries) <= self.forge.settings.max_tree_entries:
                last = answers.last_commits(
                    view.repo, resolved.commit, path, [e.name for e in entries]
                )
            answer = []
            for entry in entries:
                child = objects.child(obj, entry.name)
                assert child is not None
                answer.append(
                    shapes.contents(
                        links,
                        view.handle,
                        resolved.kind,
                        resolved.ref,
                        entry.path,
                        child,
                        entry.mode,
                        last.get(entry.name) if last else None,
                    )
                )
            self.send(resp, answer)
            return
        directory, _, name = path.rpartition(b"/")
        last = answers.last_commits(view.repo, resolved.commit, directory, [name])
        content = None
        if isinstance(obj, pygit2.Blob) and shapes.content_kind(mode) == "file":
            size = objects.object_size(view.handle, obj.id) or 0
            if size <= self.forge.settings.max_raw_in_process_bytes:
                content = objects.blob_bytes(obj)
        self.send(
            resp,
            shapes.contents(
                links,
                view.handle,
                resolved.kind,
                resolved.ref,
                path,
                obj,
                mode,
                last.get(name) if last else None,
                content,
            ),
        )


class Contents(ContentsReader, FileContents):
    """``contents/{path}``: read (GET), create (POST), update (PUT), delete (DELETE)."""

    operations: ClassVar[dict[str, Operation]] = {"get": _CONTENTS, **FileContents.operations}


class ContentsRoot(ContentsReader, ChangeFiles):
    """``contents``: the root directory (GET), several files changed at once (POST)."""

    operations: ClassVar[dict[str, Operation]] = {"get": _CONTENTS_ROOT, **ChangeFiles.operations}


class RawFile(GitApi):
    """``GET raw/{path}?ref=`` (and ``media/``: floorless keeps no LFS objects, so a file is
    its own bytes): the file's exact bytes, as the web's raw view sends them (a large one
    streamed from a git child, as there). Without ``ref``, the path may begin with a ref
    (Forgejo's older ``raw/{ref}/{path}``), else the default branch is read."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a file's bytes",
            None,
            query=RefQuery,
            operation_id="repoGetRawFile",
            tag="repository",
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        view = target.view
        path = path_of(req)
        ref = query_bytes(req, "ref")
        resolved = resolve_ref(view, ref) if ref else _leading_ref(view, path)
        if resolved is None:
            resolved = default_ref(view)
        elif not ref:
            path = resolved.path
        commit = view.commit(resolved)
        blob, _mode = objects.lookup(view.handle, commit, path)
        if not isinstance(blob, pygit2.Blob):
            raise NotFound("not a file")
        name = path.rsplit(b"/", 1)[-1]
        send_blob(self.forge, req, resp, view, blob, name, resolved.kind == "commit")


def _leading_ref(view: RepoView, path: bytes) -> Resolved | None:
    """The branch or tag a raw file's path begins with, if any (the longest)."""
    for kind in ("branch", "tag"):
        try:
            found = view.resolve(kind, path)
        except (NotFound, BadRequest):
            continue
        if found.path:
            return found
    return None


class MediaFile(RawFile):
    """``GET media/{path}``: as ``raw/``, under the name Forgejo gives its LFS-aware twin."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": replace(RawFile.operations["get"], operation_id="repoGetRawFileOrLFS")
    }


class Archive(GitApi):
    """``GET archive/{ref}.tar.gz`` (``.zip``, ``.tar``): the web's archive, one git child."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get an archive of a ref", None, operation_id="repoGetArchive", tag="repository"
        )
    }

    def first(self, req: falcon.Request, operation: Operation) -> None:
        """An archive's errors are plain text, as the web's archive's (a missing
        repository's too)."""
        req.context.plain = True

    def on_head(
        self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str
    ) -> None:
        archive.headers(resp, archive.target_in(target.view, req))

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, tail: str) -> None:
        archive.send(self.forge, resp, archive.target_in(target.view, req))
