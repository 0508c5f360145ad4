"""``/src/{kind}/{ref}/{path}``: a directory, a file, a symlink or a submodule."""

from __future__ import annotations

import configparser
from typing import Any, cast
from urllib.parse import unquote_to_bytes

import falcon
import pygit2
from markupsafe import Markup

from floorless.core.errors import NotFound
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.lenient import AnyCommit
from floorless.git.refs import Resolved
from floorless.lfs.objects import pointer_at
from floorless.web import documents
from floorless.web.blobs import image_type
from floorless.web.context import RepoView
from floorless.web.markup import highlight_lines, numbered_rows
from floorless.web.render import filesize, text
from floorless.web.views.base import RefPage
from floorless.web.views.tree import markdown_links, tree_context

FAILED = "it could not be rendered"  # why a document is shown as its source, for now


def query_bytes(req: falcon.Request, name: str) -> bytes | None:
    """The exact bytes of query parameter ``name`` (a file name need not be UTF-8), or None."""
    for part in req.query_string.split("&"):
        key, _, value = part.partition("=")
        if key == name:
            return unquote_to_bytes(value.replace("+", " "))
    return None


MAX_GITMODULES = 1 << 20  # a larger .gitmodules is not read: the submodule shows no URL


def crumbs(path: bytes) -> list[tuple[str, bytes]]:
    """(name, path from the root) for each component of ``path``."""
    parts = [p for p in path.split(b"/") if p]
    return [(text(p), b"/".join(parts[: i + 1])) for i, p in enumerate(parts)]


class Source(RefPage):
    page = "src"
    query = ("after",)  # a large directory's next entries

    def show(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, resolved: Resolved
    ) -> bool:
        commit = view.commit(resolved)
        obj, mode = objects.lookup(view.handle, commit, resolved.path)
        context = view.template_context(
            resolved=resolved,
            crumbs=crumbs(resolved.path),
            home=False,
            latest=objects.commit_info(commit),
        )
        if isinstance(obj, pygit2.Tree):
            context.update(
                tree_context(
                    view,
                    resolved,
                    obj,
                    self.renderer.caches["readme"],
                    after=query_bytes(req, "after"),
                )
            )
            context["commit_count"] = None
            self.html(resp, "tree.html", **context)
            return bool(context["final"])
        if mode == objects.MODE_SUBMODULE:
            context.update(submodule=_submodule(view, commit, resolved.path, str(obj.id)))
            self.html(resp, "special.html", **context)
            return False
        assert isinstance(obj, pygit2.Blob)
        if mode == objects.MODE_LINK:
            size = objects.object_size(view.handle, obj.id) or 0
            if size > self.settings.max_blob_page_bytes:  # no system takes a path this long
                context.update(link_target=f"({size} bytes: too long to show)", link_url=None)
            else:
                target = objects.blob_bytes(obj)
                inside = _link_target(resolved.path, target)
                context.update(
                    link_target=text(target),
                    link_url=None
                    if inside is None
                    else urls.src(view.repo, resolved.kind, resolved.ref, inside),
                )
            self.html(resp, "special.html", submodule=None, **context)
            return False
        context.update(self._file(view, resolved, obj))
        self.html(resp, "blob.html", **context)
        # a document not rendered may be next time (AsciiDoc's worker may be starting), and
        # an LFS object not uploaded yet may be
        missing = context["lfs"] is not None and not context["lfs"]["held"]
        return bool(context["unrendered"] != FAILED) and not missing

    def _file(self, view: RepoView, resolved: Resolved, blob: pygit2.Blob) -> dict[str, Any]:
        name = resolved.path.rsplit(b"/", 1)[-1]
        size = objects.object_size(view.handle, blob.id)
        if size is None:  # unreadable: reading the blob says why
            size = blob.size
        info: dict[str, Any] = {
            "size": size,
            "blob_id": str(blob.id),
            "image": None,
            "binary": False,
            "too_large": False,
            "rows": None,
            "line_count": 0,
            "truncated": False,
            "rendered": None,
            "svg": name.lower().endswith(b".svg"),
            "unrendered": None,  # why a document is shown as its source
            "lfs": None,  # a Git LFS pointer's object: its size, whether the repository holds it
            "media": None,  # the URL of the file's real bytes, when not the blob's
        }
        pointer = pointer_at(view.handle, blob.id)
        if pointer is not None:
            held = view.forge.lfs.size(view.repo.id, pointer.oid) == pointer.size
            info["lfs"] = {"size": pointer.size, "held": held, "oid": pointer.oid}
            if held:  # the real file's page: its size, a download, an image's preview
                info["size"] = pointer.size
                info["media"] = urls.media(view.repo, resolved.kind, resolved.ref, resolved.path)
                info["image" if image_type(name) else "binary"] = True
                return info
        if image_type(name):
            info["image"] = True
            return info
        if size > self.settings.max_blob_page_bytes:  # not read: it would hold the interpreter
            info["too_large"] = True
            return info
        if blob.is_binary:
            info["binary"] = True
            return info
        limit = self.settings.max_file_view
        info["truncated"] = size > limit
        filename = text(name)
        enabled = size <= self.settings.max_highlight

        def content() -> str:  # read only on a cache miss
            return objects.blob_bytes(blob, limit).decode("utf-8", "replace")

        key = (str(blob.id), filename, enabled, limit)
        info["rows"], info["line_count"] = cast(
            tuple[Markup, int],
            self.renderer.caches["highlight"].get_or_make(
                key, lambda: _rows(highlight_lines(filename, content(), enabled))
            ),
        )
        found = documents.kind(filename)
        most = documents.largest(found, self.settings.max_render_bytes)
        if found and size > most:
            info["unrendered"] = f"it is larger than {filesize(most)}, the most that is rendered"
        elif found:
            directory = resolved.path.rpartition(b"/")[0]
            where = urls.src(view.repo, resolved.kind, resolved.ref, directory)
            limit = self.settings.max_render_bytes
            info["rendered"] = self.renderer.caches["readme"].get_or_make(
                (str(blob.id), where, filename, limit),
                lambda: documents.render(
                    filename,
                    objects.blob_bytes(blob, limit + 1),
                    markdown_links(view, resolved),
                    directory,
                    limit,
                    view.forge.asciidoctor.convert,
                ),
            )
            if info["rendered"] is None:
                info["unrendered"] = FAILED
        return info


def _link_target(path: bytes, target: bytes) -> bytes | None:
    """The path a symlink at ``path`` points at inside the repository, or None when it
    leaves it."""
    if target.startswith(b"/"):
        return None
    parts = path.split(b"/")[:-1]
    for part in target.split(b"/"):
        if part in (b"", b"."):
            continue
        if part == b"..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return b"/".join(parts)


def _submodule(view: RepoView, commit: AnyCommit, path: bytes, oid: str) -> dict[str, str]:
    url = ""
    try:
        obj, _ = objects.lookup(view.handle, commit, b".gitmodules")
    except NotFound:  # no .gitmodules: the submodule is shown without its URL
        obj = None
    if (
        isinstance(obj, pygit2.Blob)
        and (objects.object_size(view.handle, obj.id) or 0) <= MAX_GITMODULES
    ):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(objects.blob_bytes(obj).decode("utf-8", "replace"))
        except configparser.Error:
            parser = configparser.ConfigParser()
        for section in parser.sections():
            if parser.get(section, "path", fallback="").encode() == path:
                url = parser.get(section, "url", fallback="")
    return {"commit": oid, "url": url}


def _rows(lines: list[str]) -> tuple[Markup, int]:
    return numbered_rows(lines), len(lines)
