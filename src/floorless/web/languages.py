"""The language bar of a repository's home: the bytes of each language in a tree, counted in
a background thread and kept by tree id (a tree never changes, so its count never goes
stale). A page asks ``Languages.get``: the count if it is known; a small tree (at most
``INLINE`` entries, a few milliseconds) is counted there and then; a larger one (git.git's
4,500 files) is never walked on a request's path: it is queued, None comes back at once, and
the page shows a placeholder and is not kept until the count is there.

A file's language is the Pygments lexer its name picks (no content is read: sizes come from
object headers); prose and data formats are left out, as GitHub's linguist leaves out all
but programming and markup languages."""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

import pygit2
from cachetools import LRUCache

from floorless.core import background
from floorless.git import objects
from floorless.web.markup import lexer_class

log = logging.getLogger(__name__)

# what is documentation, configuration or data rather than a program
SKIPPED = frozenset(
    {
        "Text only",
        "Markdown",
        "reStructuredText",
        "AsciiDoc",
        "JSON",
        "JSONLD",
        "YAML",
        "TOML",
        "INI",
        "XML",
        "CSV",
        "Diff",
        "Gettext Catalog",
        "Properties",
        "Groff",
        "TeX",
        "BibTeX",
    }
)
MAX_FILES = 200_000  # a tree past this is counted this far
INLINE = 1_000  # entries a page may walk itself
SHOWN = 6  # languages named; the rest are "Other"


@dataclass(frozen=True)
class Share:
    name: str
    bytes: int
    percent: float


def count(
    handle: pygit2.Repository, tree: pygit2.Tree, limit: int = MAX_FILES, whole: bool = False
) -> list[Share] | None:
    """Bytes per language below ``tree``, largest first, the smallest grouped as Other; past
    ``limit`` entries, what was counted so far, or None when ``whole`` is asked for."""
    totals: dict[str, int] = {}
    seen = 0
    stack = [tree]
    while stack and seen < limit:
        for entry in stack.pop():
            seen += 1
            if seen > limit:
                break
            if entry.type == pygit2.enums.ObjectType.TREE:
                sub = handle.get(entry.id)
                if isinstance(sub, pygit2.Tree):
                    stack.append(sub)
                continue
            if entry.type != pygit2.enums.ObjectType.BLOB or entry.filemode == 0o120000:
                continue
            lexer = lexer_class(entry.name or "")
            if lexer is None or lexer.name in SKIPPED:
                continue
            size = objects.object_size(handle, entry.id) or 0
            totals[lexer.name] = totals.get(lexer.name, 0) + size
    if whole and seen > limit:
        return None
    total = sum(totals.values())
    if not total:
        return []
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    shown, rest = ranked[:SHOWN], ranked[SHOWN:]
    shares = [Share(name, size, 100 * size / total) for name, size in shown]
    if rest:
        other = sum(size for _, size in rest)
        shares.append(Share("Other", other, 100 * other / total))
    return shares


class Languages:
    """Counts by tree id (``entries`` of them kept), and the one thread that makes them."""

    def __init__(self, entries: int = 2048) -> None:
        self.known: LRUCache[bytes, list[Share]] = LRUCache(maxsize=entries)
        self.queued: set[bytes] = set()
        self.lock = threading.Lock()
        self.work: queue.Queue[tuple[Path, bytes]] = queue.Queue()
        self.thread: threading.Thread | None = None

    def get(self, handle: pygit2.Repository, git_dir: Path, tree: bytes) -> list[Share] | None:
        with self.lock:
            found = self.known.get(tree)
        if found is not None:
            return found
        top = handle.get(pygit2.Oid(raw=tree))
        small = count(handle, top, INLINE, whole=True) if isinstance(top, pygit2.Tree) else []
        with self.lock:
            if small is not None:
                self.known[tree] = small
                return small
            if tree not in self.queued:
                self.queued.add(tree)
                self.work.put((git_dir, tree))
                if self.thread is None:
                    self.thread = background.start(self._run, "languages")
        return None

    def _run(self) -> None:
        while True:
            git_dir, tree_id = self.work.get()
            shares: list[Share] = []
            try:
                handle = pygit2.Repository(str(git_dir))
                tree = handle.get(pygit2.Oid(raw=tree_id))
                if isinstance(tree, pygit2.Tree):
                    shares = count(handle, tree) or []
            except (pygit2.GitError, OSError, ValueError) as exc:
                log.warning("languages of %s in %s: %s", tree_id.hex(), git_dir, exc)
            with self.lock:
                self.known[tree_id] = shares
                self.queued.discard(tree_id)
