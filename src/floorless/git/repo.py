"""Open repository handles: one per repository, shared by every thread, in a small LRU.

Opening a repository reads its config, HEAD and pack indexes: some filesystem round trips,
with the interpreter held (pygit2 keeps the GIL through every call floorless makes). On slow
storage that is most of a second, so a handle per thread would make each new server thread
stall the whole process once per repository, and would keep one object cache per thread.
One shared handle is opened once, off the request path when the forge adopts the
repository, and every thread's reads warm the same object cache.

Sharing is safe because every call floorless makes on a handle holds the GIL, so no two
overlap: the calls pygit2 implements in its C extension keep it (but ``Walker`` iteration
and ``BlobIO``, which floorless does not use), while those it makes through cffi
(``Repository.config``, ``set_head``, ...) release it, so they are not used on a shared
handle: the one config value pages need is read here, before the handle is shared, and HEAD
is moved with ``create_reference_symbolic``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import RepositoryOpenFlag

from floorless.core import heap, timing
from floorless.core.errors import RepositoryBroken


def open_repository(path: Path) -> pygit2.Repository:
    """Open exactly ``path`` (no discovery walk up the tree); raise RepositoryBroken if git
    cannot read it."""
    try:
        return pygit2.Repository(str(path), flags=RepositoryOpenFlag.NO_SEARCH)
    except (pygit2.GitError, OSError, KeyError) as exc:
        if "unknown object format" in str(exc):  # libgit2 1.9 reads SHA-1 repositories only
            raise RepositoryBroken(
                f"this repository's SHA-256 object ids cannot be read by this server's libgit2"
                f": {exc}"
            ) from exc
        raise RepositoryBroken(f"the repository cannot be opened: {exc}") from exc


@dataclass(frozen=True)
class Packs:
    """A repository's pack directory as last seen: its status, and each pack file in it with
    its inode (a pack replaced under the same name is another file)."""

    directory: tuple[int, int]  # (mtime in ns, inode) of objects/pack
    files: Mapping[str, int]

    def let_go(self, newer: Packs) -> bool:
        """Whether a pack file seen here is gone, or replaced, in ``newer``: a handle opened
        before still maps it."""
        return any(newer.files.get(name) != inode for name, inode in self.files.items())


def read_packs(git_dir: Path, previous: Packs | None = None) -> Packs | None:
    """The pack directory of ``git_dir``; ``previous`` again when the directory's status is
    unchanged (one stat, no listing). None when the storage cannot tell now: a failed stat
    or listing is not an empty directory.

    Every pack a repack adds, removes or replaces is a file created in or removed from
    objects/pack, which changes the directory's mtime; the listing reads inodes from the
    directory entries, without a stat per pack.
    """
    directory = git_dir / "objects" / "pack"
    try:
        st = os.stat(directory)
        status = (st.st_mtime_ns, st.st_ino)
        if previous is not None and previous.directory == status:
            return previous
        with os.scandir(directory) as entries:
            files = {e.name: e.inode() for e in entries if e.name.endswith(".pack")}
    except OSError:
        return None
    return Packs(status, files)


class HandlePool:
    """Open ``pygit2.Repository`` handles keyed by git directory, least recently used
    dropped beyond ``size``.

    A dropped handle is not freed at once, since a thread may still be reading through it:
    pygit2 keeps a reference cycle inside each handle, so it closes (its pack files and
    object cache with it) only when the cycle collector runs, which ``collect`` asks for.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        # each handle with whether its repository sets extensions.objectformat (SHA-256)
        self._handles: OrderedDict[Path, tuple[pygit2.Repository, bool]] = OrderedDict()
        self._lock = threading.Lock()
        self._opening: dict[Path, threading.Lock] = {}
        self._generation: dict[Path, int] = {}
        self._dropped = 0

    def get(self, git_dir: Path) -> pygit2.Repository:
        return self._entry(git_dir)[0]

    def extended_format(self, git_dir: Path) -> bool:
        """Whether the repository sets ``extensions.objectformat`` (a SHA-256 repository):
        known from when its handle was opened."""
        return self._entry(git_dir)[1]

    def _entry(self, git_dir: Path) -> tuple[pygit2.Repository, bool]:
        with self._lock:
            entry = self._handles.get(git_dir)
            if entry is not None:
                self._handles.move_to_end(git_dir)
                return entry
            opening = self._opening.setdefault(git_dir, threading.Lock())
        try:
            # one thread opens; the others wanting the same repository wait for its handle
            with opening:
                with self._lock:
                    entry = self._handles.get(git_dir)
                    generation = self._generation.get(git_dir, 0)
                if entry is None:
                    with timing.phase("git"):
                        handle = open_repository(git_dir)
                        # read while no other thread has the handle (cffi lets go of the GIL)
                        entry = (handle, "extensions.objectformat" in handle.config)
                    with self._lock:
                        if self._generation.get(git_dir, 0) == generation:  # not forgotten since
                            self._handles[git_dir] = entry
                        while len(self._handles) > self.size:
                            self._handles.popitem(last=False)
                            self._dropped += 1
        finally:
            with self._lock:
                if self._opening.get(git_dir) is opening and not opening.locked():
                    del self._opening[git_dir]
        return entry

    def forget(self, git_dir: Path) -> None:
        """Drop the handle (the repository moved or went away; the next use reopens it)."""
        with self._lock:
            self._generation[git_dir] = self._generation.get(git_dir, 0) + 1
            if self._handles.pop(git_dir, None) is not None:
                self._dropped += 1

    def collect(self) -> None:
        """Close the handles dropped since the last call (from a background thread)."""
        with self._lock:
            dropped, self._dropped = self._dropped, 0
        if dropped:
            heap.collect_everything()

    def __len__(self) -> int:
        return len(self._handles)

    def __contains__(self, git_dir: Path) -> bool:
        with self._lock:
            return git_dir in self._handles
