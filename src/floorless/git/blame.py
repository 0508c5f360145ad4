"""Blame through one ``git blame --incremental`` child on a cache miss (libgit2's blame is
5-7x slower than git's).

git reports each run of lines as soon as it has found the commit that last changed them, in
the order it finds them (newest commits first), and writes nothing else: no line text (the
blob is already in hand), no repeated headers. ``IncrementalParser`` reads those reports in
pieces of any size and hands back, in line order, each *group* (a run of consecutive lines
last changed by one commit) as soon as its commit and its end are known, so a page can show
its first lines while git still works on others. Parsing keeps pace with git, so the cold
cost is git's own time plus the rendering of what is left when it ends.

The answer is keyed by commit id and path, so it never needs invalidating.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pygit2

from floorless.core.errors import Busy, GitCommandError
from floorless.git import objects
from floorless.git.env import GitEnvironment
from floorless.git.lenient import AnyCommit
from floorless.git.oid import is_full

CHUNK = 65536


@dataclass(frozen=True)
class BlameCommit:
    id: str
    author: str
    author_time: int
    summary: str
    # where its lines were before it: its parent and the file's path there (git's
    # ``previous``; "" for a commit that added the file, or the root)
    previous: str = ""
    previous_path: str = ""  # the path's bytes, surrogate-escaped (kept as JSON text)


@dataclass(frozen=True)
class BlameGroup:
    """Lines ``first`` to ``first + count - 1`` (numbered from 1), last changed by ``commit``
    ("" for lines git never attributed, which git does not do); ``origin``: the first line's
    number in ``commit``'s version of the file (0: not known)."""

    commit: str
    first: int
    count: int
    origin: int = 0


class IncrementalParser:
    """``git blame --incremental`` output for a file of ``lines`` lines, fed in pieces."""

    def __init__(self, lines: int) -> None:
        self.owners: list[str | None] = [None] * lines
        self.origins: list[int] = [0] * lines  # each line's number in its commit's version
        self.commits: dict[str, BlameCommit] = {}
        self._partial = b""
        self._current: str | None = None  # the commit of the entry being read
        self._headers: dict[bytes, bytes] = {}
        self._range = (0, 0)  # its lines, from 0, end excluded
        self._origin = 0  # the number of its first line in its commit's version
        self._previous: tuple[str, str] = ("", "")
        self._start = 0  # the first line of the group not yet handed out (from 0)
        self._scan = 0  # the first line whose owner is not yet looked at

    def feed(self, data: bytes) -> list[BlameGroup]:
        """Read ``data``; return the groups now complete, in line order."""
        *whole, self._partial = (self._partial + data).split(b"\n")
        for line in whole:
            self._line(line)
        return self._complete()

    def finish(self) -> list[BlameGroup]:
        """The groups left at the end of git's output, the last one included."""
        if self._partial:
            self._line(self._partial)
            self._partial = b""
        groups = self._complete()
        owners = self.owners
        while self._start < len(owners):
            commit = owners[self._start] or ""
            end = self._start + 1
            while end < len(owners) and (owners[end] or "") == commit:
                end += 1
            groups.append(
                BlameGroup(commit, self._start + 1, end - self._start, self.origins[self._start])
            )
            self._start = end
        self._scan = self._start
        return groups

    def _line(self, line: bytes) -> None:
        if self._current is None:  # an entry starts: "<commit> <orig line> <line> <count>"
            parts = line.split(b" ")
            if len(parts) != 4 or not is_full(parts[0]) or not all(p.isdigit() for p in parts[1:]):
                return  # nothing else starts an entry
            self._current = parts[0].decode("ascii").lower()
            first = int(parts[2]) - 1
            self._range = (first, min(first + int(parts[3]), len(self.owners)))
            self._origin = int(parts[1])
            self._previous = ("", "")
            return
        key, _, value = line.partition(b" ")
        if key == b"previous":  # "<commit> <path>": where these lines were before
            before, _, name = value.partition(b" ")
            if is_full(before):
                self._previous = (before.decode("ascii").lower(), _unquote(name))
        elif key == b"filename":  # every entry ends with its file's name
            commit = self._current
            if commit not in self.commits:
                headers = self._headers
                self.commits[commit] = BlameCommit(
                    commit,
                    headers.get(b"author", b"").decode("utf-8", "replace"),
                    _int(headers.get(b"author-time", b"")),
                    headers.get(b"summary", b"").decode("utf-8", "replace"),
                    *self._previous,
                )
            # its lines are owned only now, so a group handed out has its commit known
            first, end = self._range
            if 0 <= first < end:
                self.owners[first:end] = [commit] * (end - first)
                self.origins[first:end] = range(self._origin, self._origin + end - first)
            self._current = None
            self._headers = {}
        elif self._current not in self.commits:  # a commit's headers come once, at its first
            self._headers[key] = value

    def _complete(self) -> list[BlameGroup]:
        groups = []
        owners, start, scan = self.owners, self._start, self._scan
        while scan < len(owners) and owners[scan] is not None:
            if owners[scan] != owners[start]:
                groups.append(
                    BlameGroup(owners[start] or "", start + 1, scan - start, self.origins[start])
                )
                start = scan
            scan += 1
        self._start, self._scan = start, scan
        return groups


_ESCAPES = {b"n": 10, b"t": 9, b'"': 34, b"\\": 92, b"a": 7, b"b": 8, b"f": 12, b"r": 13, b"v": 11}


def _unquote(name: bytes) -> str:
    """A path as git writes it (C-quoted when it has unusual bytes), as surrogate-escaped
    text: its exact bytes come back with ``encode("utf-8", "surrogateescape")``."""
    if len(name) >= 2 and name[:1] == b'"' and name[-1:] == b'"':
        out = bytearray()
        i, body = 0, name[1:-1]
        while i < len(body):
            if body[i : i + 1] == b"\\" and i + 1 < len(body):
                nxt = body[i + 1 : i + 2]
                if nxt.isdigit() and i + 3 < len(body) + 1:
                    out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                    i += 4
                    continue
                out.append(_ESCAPES.get(nxt, nxt[0]))
                i += 2
                continue
            out.append(body[i])
            i += 1
        name = bytes(out)
    return name.decode("utf-8", "surrogateescape")


IGNORE_REVS_FILE = b".git-blame-ignore-revs"
IGNORE_REVS_BYTES = 1 << 16  # a larger list is read this far
IGNORE_REVS_MAX = 1000  # commits passed to git at most


def ignored_revs(repo: pygit2.Repository, commit: AnyCommit) -> tuple[str, ...] | None:
    """The commits ``.git-blame-ignore-revs`` lists at the top of ``commit``'s tree (as
    ``git blame --ignore-revs-file`` reads it: one full commit id a line, ``#`` comments);
    an id this repository has no commit of is left out (git would refuse it). None when
    there is no such file. Read from the blob at that commit, so the answer is the commit's."""
    entry = objects.child(commit.tree, IGNORE_REVS_FILE)
    if entry is None or entry.filemode not in (0o100644, objects.MODE_EXEC):
        return None
    blob = repo.get(entry.id)
    if not isinstance(blob, pygit2.Blob):
        return None
    revs: list[str] = []
    for line in bytes(memoryview(blob)[:IGNORE_REVS_BYTES]).splitlines():
        token = line.split(b"#", 1)[0].strip()
        if not is_full(token) or len(revs) >= IGNORE_REVS_MAX:
            continue
        rev = token.decode("ascii").lower()
        if rev not in revs and isinstance(_commit_or_none(repo, rev), pygit2.Commit):
            revs.append(rev)
    return tuple(revs)


def _commit_or_none(repo: pygit2.Repository, rev: str) -> pygit2.Object | None:
    """The object ``rev`` names, or None: an id of the other hash's length (64 digits in a
    SHA-1 repository) is an error to libgit2, and one stray line of a file any committer
    writes must not break every blame of the repository."""
    try:
        return repo.get(rev)
    except ValueError:  # pygit2's InvalidError
        return None


def _int(value: bytes) -> int:
    try:
        return int(value)
    except ValueError:
        return 0


class BlameRun:
    """A running ``git blame --incremental``: ``groups()`` yields its groups in line order as
    git finds them. It holds one of the forge's git slots while it lives; ``close()`` stops
    git, reaps it and frees the slot, once, however the reading ended."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        errors: IO[bytes],
        lines: int,
        timeout: float,
        release: Callable[[], None],
    ) -> None:
        self.proc = proc
        self.parser = IncrementalParser(lines)
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._errors = errors
        self._release: Callable[[], None] | None = release
        self._lock = threading.Lock()

    @property
    def commits(self) -> dict[str, BlameCommit]:
        return self.parser.commits

    def groups(self) -> Iterator[list[BlameGroup]]:
        """Batches of complete groups, as git's output arrives; the last batch once git has
        ended well. ``GitCommandError`` when git fails or runs past its timeout."""
        stdout = self.proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                if not selector.select(max(0.0, self._deadline - time.monotonic())):
                    self.close()
                    raise GitCommandError(f"git blame took longer than {self.timeout:.0f} s")
                data = os.read(fd, CHUNK)
                if not data:
                    break
                batch = self.parser.feed(data)
                if batch:
                    yield batch
        if self.proc.wait() != 0:
            raise GitCommandError(f"git blame failed: {self._reason()}")
        yield self.parser.finish()

    def _reason(self) -> str:
        self._errors.seek(0)
        lines = self._errors.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit status {self.proc.returncode}"

    def close(self) -> None:
        with self._lock:
            release, self._release = self._release, None
        if release is None:
            return
        proc = self.proc
        try:
            if proc.stdout is not None:
                proc.stdout.close()  # git writing on gets SIGPIPE
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        finally:
            self._errors.close()
            release()


def start_blame(
    env: GitEnvironment,
    git_dir: Path,
    commit: str,
    path: bytes,
    lines: int,
    timeout: float,
    slots: threading.BoundedSemaphore,
    ignore: tuple[str, ...] = (),
) -> BlameRun:
    """Start blaming ``path`` (of ``lines`` lines) at ``commit`` in one git child, holding one
    of ``slots`` until the run is closed; ``Busy`` at once when every slot is taken.
    ``ignore``: commits (full ids, each known to be in the repository) whose changes are
    passed over as ``git blame --ignore-rev`` does; no list a configuration names is read."""
    if not slots.acquire(blocking=False):  # each may run for up to ``timeout``
        raise Busy("too many files are being blamed; try again in a moment", retry_after=5)
    try:
        errors = tempfile.TemporaryFile(dir=env.tmp)  # noqa: SIM115 (the run closes it)
        try:
            proc = env.popen(
                git_dir,
                [
                    "blame",
                    "--incremental",
                    "--ignore-revs-file=",
                    *(f"--ignore-rev={rev}" for rev in ignore),
                    commit,
                    "--",
                    path.decode("utf-8", "surrogateescape"),
                ],
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        except BaseException:
            errors.close()
            raise
    except BaseException:
        slots.release()
        raise
    return BlameRun(proc, errors, lines, timeout, slots.release)
