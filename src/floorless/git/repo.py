"""Open repository handles: one per repository, shared by every thread, in a small LRU.

Opening a repository reads its config, HEAD and pack indexes: some filesystem round trips,
with the interpreter held (pygit2 keeps the GIL through every call floorless makes). On slow
storage that is most of a second, so a handle per thread would make each new server thread
stall the whole process once per repository, and would keep one object cache per thread.
One shared handle is opened once, off the request path when the forge adopts the
repository, and every thread's reads warm the same object cache. Sharing is safe because
floorless never calls into libgit2 without the GIL (it walks history itself, not through
``pygit2.Walker``, the one reader that lets go of it), so no two calls overlap.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import pygit2
from pygit2.enums import RepositoryOpenFlag

from floorless import timing
from floorless.errors import RepositoryBroken


def open_repository(path: Path) -> pygit2.Repository:
    """Open exactly ``path`` (no discovery walk up the tree); raise RepositoryBroken if git
    cannot read it."""
    try:
        return pygit2.Repository(str(path), flags=RepositoryOpenFlag.NO_SEARCH)
    except (pygit2.GitError, OSError, KeyError) as exc:
        raise RepositoryBroken(f"the repository cannot be opened: {exc}") from exc


class HandlePool:
    """Open ``pygit2.Repository`` handles keyed by git directory, least recently used
    dropped beyond ``size``. A dropped handle is not freed: a thread may still be reading
    through it, and it closes when the last reference goes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._handles: OrderedDict[Path, pygit2.Repository] = OrderedDict()
        self._lock = threading.Lock()
        self._opening: dict[Path, threading.Lock] = {}

    def get(self, git_dir: Path) -> pygit2.Repository:
        with self._lock:
            handle = self._handles.get(git_dir)
            if handle is not None:
                self._handles.move_to_end(git_dir)
                return handle
            opening = self._opening.setdefault(git_dir, threading.Lock())
        # one thread opens; the others wanting the same repository wait for its handle
        with opening:
            with self._lock:
                handle = self._handles.get(git_dir)
            if handle is None:
                with timing.phase("git"):
                    handle = open_repository(git_dir)
                with self._lock:
                    self._handles[git_dir] = handle
                    while len(self._handles) > self.size:
                        self._handles.popitem(last=False)
        with self._lock:
            if self._opening.get(git_dir) is opening and not opening.locked():
                del self._opening[git_dir]
        return handle

    def forget(self, git_dir: Path) -> None:
        """Drop the handle (the repository moved or went away; the next use reopens it)."""
        with self._lock:
            self._handles.pop(git_dir, None)

    def __len__(self) -> int:
        return len(self._handles)
