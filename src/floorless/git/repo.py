"""Open repository handles, kept per thread in a small LRU: opening costs ~50 µs and some
filesystem round trips, so a warm page reuses the handle it had."""

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
    """Per-thread LRU of open ``pygit2.Repository`` handles, keyed by git directory."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._local = threading.local()

    def get(self, git_dir: Path) -> pygit2.Repository:
        handles: OrderedDict[Path, pygit2.Repository] | None = getattr(self._local, "lru", None)
        if handles is None:
            handles = self._local.lru = OrderedDict()
        handle = handles.get(git_dir)
        if handle is not None:
            handles.move_to_end(git_dir)
            return handle
        with timing.phase("git"):
            handle = open_repository(git_dir)
        handles[git_dir] = handle
        while len(handles) > self.size:
            _, old = handles.popitem(last=False)
            old.free()
        return handle

    def forget(self, git_dir: Path) -> None:
        """Drop this thread's handle (after an error, so the next request reopens it)."""
        handles = getattr(self._local, "lru", None)
        if handles is not None:
            old = handles.pop(git_dir, None)
            if old is not None:
                old.free()
