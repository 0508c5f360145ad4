"""A directory listing with the last commit of each entry, and its README, shared by the
repository home and the tree pages."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import pygit2

from floorless.core import timing
from floorless.core.caches import Cache
from floorless.forgejo import urls
from floorless.git import objects
from floorless.git.refs import Resolved
from floorless.web import documents
from floorless.web.context import RepoView
from floorless.web.render import text

# in GitHub's order of preference
README_NAMES = (
    "readme.md",
    "readme.markdown",
    "readme.rst",
    "readme.adoc",
    "readme.asciidoc",
    "readme.ipynb",
    "readme",
    "readme.txt",
)
MAX_README = 512 * 1024  # bytes of a README shown as plain text


@dataclass(frozen=True)
class Row:
    entry: objects.Entry
    last: objects.CommitInfo | None


def tree_context(
    view: RepoView,
    resolved: Resolved,
    tree: pygit2.Tree,
    cache: Cache[Hashable, object],
    after: bytes | None = None,
) -> dict[str, Any]:
    """The listing; a directory of more than ``max_tree_entries`` is listed that many at a
    time, from the entry after ``after``, and without last commits (finding them would cost
    the index a walk for every entry)."""
    limit = view.forge.settings.max_tree_entries
    with timing.phase("git"):
        total = len(tree)
    following = None
    if after is None and total <= limit:
        entries = objects.list_tree(tree, resolved.path)
        last = view.forge.answers.last_commits(
            view.repo, resolved.commit, resolved.path, [e.name for e in entries]
        )
    else:
        entries, more = objects.list_tree_page(tree, resolved.path, after, limit)
        if more:
            following = urls.src(
                view.repo, resolved.kind, resolved.ref, resolved.path, after=entries[-1].name
            )
        last = {}
    infos: dict[bytes, objects.CommitInfo] = {}
    rows = []
    for entry in entries:
        info = None
        if last is not None and last.get(entry.name) is not None:
            oid = last[entry.name]
            assert oid is not None
            if oid not in infos:
                infos[oid] = objects.commit_info(objects.get_commit(view.handle, oid))
            info = infos[oid]
        rows.append(Row(entry, info))
    shown = readme(view, tree, resolved, cache)
    return {
        "rows": rows,
        "last_ready": last is not None,
        # kept as a final page: a README not rendered may be next time (AsciiDoc's worker)
        "final": last is not None and not (shown and shown["unrendered"]),
        "progress": None if last is not None else view.forge.indexer.progress(view.repo.id),
        "readme": shown,
        "paged": {"total": total, "limit": limit, "after": after, "next": following}
        if total > limit or after is not None
        else None,
    }


def readme(
    view: RepoView,
    tree: pygit2.Tree,
    resolved: Resolved,
    cache: Cache[Hashable, object],
) -> dict[str, Any] | None:
    limit = view.forge.settings.max_render_bytes
    candidates = {
        (e.raw_name or b"").lower(): e for e in tree if e.filemode in (0o100644, 0o100755)
    }
    for name in README_NAMES:
        entry = candidates.get(name.encode())
        if entry is None:
            continue
        filename = text(entry.raw_name)
        raw_url = urls.raw(
            view.repo, resolved.kind, resolved.ref, _join(resolved.path, entry.raw_name or b"")
        )
        size = objects.object_size(view.handle, entry.id)
        if size is not None and size > view.forge.settings.max_blob_page_bytes:
            return {
                "name": filename,
                "html": "",
                "plain": None,
                "too_large": size,
                "raw": raw_url,
                "unrendered": False,
            }
        blob = view.handle.get(entry.id)
        if not isinstance(blob, pygit2.Blob) or blob.is_binary:
            continue
        # the rendered links depend on the repository, the ref and the directory
        where = urls.src(view.repo, resolved.kind, resolved.ref, resolved.path)
        key = (str(entry.id), where, filename, limit)

        def make(blob: pygit2.Blob = blob, filename: str = filename) -> str | None:
            data = objects.blob_bytes(blob, limit + 1)
            links = markdown_links(view, resolved)
            asciidoc = view.forge.asciidoctor.convert
            return documents.render(filename, data, links, resolved.path, limit, asciidoc)

        # not rendered (None) is not kept: AsciiDoc's worker may be there next time
        made = cache.get_or_make(key, make)
        html = made or ""
        plain = None
        if not html:
            plain = objects.blob_bytes(blob, MAX_README).decode("utf-8", "replace")
        return {
            "name": filename,
            "html": html,
            "plain": plain,
            "too_large": None,
            "raw": raw_url,
            "unrendered": made is None and documents.kind(filename) is not None,
        }
    return None


def _join(directory: bytes, name: bytes) -> bytes:
    return directory + b"/" + name if directory else name


def markdown_links(view: RepoView, resolved: Resolved) -> Callable[[bytes, bool], str]:
    """Where a relative link (or, for an image, its source) in a rendered file points: the
    file page (the raw file) of that path at the same ref."""

    def link(target: bytes, image: bool) -> str:
        page = urls.raw if image else urls.src
        return page(view.repo, resolved.kind, resolved.ref, target)

    return link
