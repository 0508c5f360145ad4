"""A directory listing with the last commit of each entry, and its README, shared by the
repository home and the tree pages."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pygit2

from floorless import timing
from floorless.caches import Cache
from floorless.git import objects
from floorless.git.refs import Resolved
from floorless.web.context import RepoView
from floorless.web.markup import is_markdown, render_markdown
from floorless.web.render import text, urlpath

README_NAMES = ("readme.md", "readme.markdown", "readme", "readme.txt", "readme.rst")
MAX_README = 512 * 1024


@dataclass(frozen=True)
class Row:
    entry: objects.Entry
    last: objects.CommitInfo | None


def tree_context(
    view: RepoView,
    kind: str,
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
        last = view.forge.indexer.last_commits(
            view.repo, resolved.commit, resolved.path, [e.name for e in entries]
        )
    else:
        entries, more = objects.list_tree_page(tree, resolved.path, after, limit)
        if more:
            following = quote(entries[-1].name, safe="")
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
    ref_base = f"{kind}/{urlpath(resolved.ref)}"
    return {
        "rows": rows,
        "last_ready": last is not None,
        "readme": readme(view, tree, ref_base, resolved.path, cache),
        "ref_base": ref_base,
        "paged": {"total": total, "limit": limit, "after": after, "next": following}
        if total > limit or after is not None
        else None,
    }


def readme(
    view: RepoView,
    tree: pygit2.Tree,
    ref_base: str,
    directory: bytes,
    cache: Cache[Hashable, object],
) -> dict[str, Any] | None:
    candidates = {
        (e.raw_name or b"").lower(): e for e in tree if e.filemode in (0o100644, 0o100755)
    }
    for name in README_NAMES:
        entry = candidates.get(name.encode())
        if entry is None:
            continue
        filename = text(entry.raw_name)
        size = objects.object_size(view.handle, entry.id)
        if size is not None and size > view.forge.settings.max_blob_page_bytes:
            return {"name": filename, "html": "", "plain": None, "too_large": size}
        blob = view.handle.get(entry.id)
        if not isinstance(blob, pygit2.Blob) or blob.is_binary:
            continue
        dir_text = text(directory)
        key = (str(entry.id), view.base, ref_base, dir_text, filename)

        def make(
            blob: pygit2.Blob = blob, filename: str = filename, dir_text: str = dir_text
        ) -> str:
            content = objects.blob_bytes(blob, MAX_README).decode("utf-8", "replace")
            if is_markdown(filename):
                return render_markdown(
                    content, f"{view.base}/src/{ref_base}", f"{view.base}/raw/{ref_base}", dir_text
                )
            return ""

        html = cache.get_or_make(key, make)
        plain = None
        if not html:
            plain = objects.blob_bytes(blob, MAX_README).decode("utf-8", "replace")
        return {"name": filename, "html": html, "plain": plain, "too_large": None}
    return None
