"""A history's commits and changed paths, streamed from git children: background work only.

Indexing a whole history in the interpreter (libgit2 tree comparisons, a Python set per
commit) took half an hour for git.git; git does the same work in seconds. Three kinds of children:

- ``topology``: ``git rev-list --reverse --topo-order --parents --timestamp``, the commits
  the index lacks (the tips, less what the index's heads reach), parents before children,
  each with its committer time as git orders by it.
- ``path_log``, ``touching`` and ``parent_lines``: ``git rev-list [-- paths]``, a path's
  first commits, the commits that changed any of a few paths, and every commit with its
  parents, for what a page asks before the index holds it; ``diff_slots``, the same answer
  as ``ChangeStream``'s below, whole, for such a page.
- ``ChangeStream``: one ``git diff-tree --stdin``, fed one line per (commit, parent) (the
  commit alone for a root, against the empty tree), answering in the same order with the
  paths that differ. The index feeds it each commit and its first parent; what a merge's
  other parents are asked is asked in process (``treesame.py``). A page's answer before the
  index (``lastchanged.py``) feeds every parent, limited to the paths it wants; ``git log
  -m`` would leave out the header of an empty diff, so which parent a diff belongs to would
  be lost. ``--always`` prints every header.

All run in floorless's git environment, with replace refs off (libgit2, which pages read
through, knows none), and are read as they write: memory stays bounded by what the caller
keeps.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from floorless.core import background
from floorless.core.errors import GitCommandError
from floorless.git.env import GitEnvironment

# Replace refs off; and git's output buffered whole, as for a file: git flushes each record
# written to a pipe (a diff, a commit), and on git.git's first index the system calls and
# the reader's wakeups so took 4.4 s of its 11.4 (0.4 of 7.7 buffered). No child here is
# waited on for one answer before it is given the next question.
_ENV = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_FLUSH": "0"}
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}  # a path is a path, never a pattern
_READ = 1 << 20
_DIFF_TREE = (
    *("diff-tree", "--stdin", "-r", "--no-renames", "--always", "--root", "-z"),
    *("--name-status", "--ignore-submodules=none"),
)
_TIME_MAX = (1 << 63) - 1
STOP_POLL = 0.05  # seconds between two looks at whether a git child's answer is still wanted


def topology(
    git: GitEnvironment, git_dir: Path, tips: Iterable[bytes], known: Iterable[bytes]
) -> Iterator[tuple[bytes, int, list[bytes]]]:
    """(commit, committer time, parents) of every commit ``tips`` reach and ``known`` do
    not, parents first. ``known`` must all exist (git refuses a missing one)."""
    lines = [t.hex() for t in tips] + ["^" + k.hex() for k in known]
    if not any(not line.startswith("^") for line in lines):
        return
    proc = git.popen(
        git_dir,
        ["rev-list", "--reverse", "--topo-order", "--parents", "--timestamp", "--stdin"],
        extra_env=_ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    writer = _feed(proc.stdin, (line + "\n" for line in lines))
    try:
        for line in proc.stdout:
            fields = line.split()
            yield (
                bytes.fromhex(fields[1].decode("ascii")),
                min(int(fields[0]), _TIME_MAX),
                [bytes.fromhex(p.decode("ascii")) for p in fields[2:]],
            )
        writer.join()
        error = proc.stderr.read()
        if proc.wait() != 0:
            raise GitCommandError(f"git rev-list failed: {_last_line(error)}")
    finally:
        _stop(proc)


def parent_lines(
    git: GitEnvironment, git_dir: Path, start: bytes, options: Sequence[str] = ()
) -> Callable[[], bytes]:
    """``git rev-list --parents [options] start`` as git writes it, a line per commit: its
    id and its parents' in hex (no path: no parent rewritten). Started at once; the
    function returned waits for it and gives its output."""
    return _started(git, git_dir, ["rev-list", "--parents", *options, start.hex()], None, _ENV)


def diff_slots(git: GitEnvironment, git_dir: Path, lines: bytes, recursive: bool = True) -> bytes:
    """``git diff-tree``'s whole answer (as ``ChangeStream``'s, read by ``answered``) for
    ``lines``, a slot each (``commit [parent]`` in hex). Not ``recursive``: the root's
    entries that differ, files or directories."""
    options = _DIFF_TREE if recursive else tuple(o for o in _DIFF_TREE if o != "-r")
    return _started(git, git_dir, list(options), lines, {**_ENV, **_LITERAL})()


def answered(output: bytes) -> Iterator[tuple[bytes, list[bytes]]]:
    """(commit id as hex, paths) per slot of ``git diff-tree -z --name-status --always``'s
    ``output``, in the order the slots were given."""
    tokens = output.split(b"\0")
    if tokens.pop():
        raise GitCommandError("git diff-tree stopped mid-answer")
    yield from _slots_of((tokens,))


def _slots_of(runs: Iterable[list[bytes]]) -> Iterator[tuple[bytes, list[bytes]]]:
    """(commit id as hex, paths) per slot, from the NUL-separated tokens of ``git diff-tree
    -z --name-status --always``, given in runs of whole tokens."""
    header: bytes | None = None
    paths: list[bytes] = []
    want_path = False
    for tokens in runs:
        for token in tokens:
            if want_path:
                paths.append(token)
                want_path = False
            elif len(token) >= 40:  # a commit id: the next slot's header
                if header is not None:
                    yield header, paths
                header, paths = token, []
            else:  # a status letter: a path follows
                want_path = True
    if want_path:
        raise GitCommandError("git diff-tree stopped mid-answer")
    if header is not None:
        yield header, paths


def _started(
    git: GitEnvironment,
    git_dir: Path,
    args: list[str],
    given: bytes | None,
    extra_env: dict[str, str],
) -> Callable[[], bytes]:
    """A git child started, ``given`` its input, and a function that waits for its output:
    both through files, not pipes. A pipe read a chunk at a time by a busy interpreter (each
    chunk waits for its turn at the GIL) held git up: ``git rev-list --parents`` of 100,000
    commits took 1 s instead of 0.1, and two ``git diff-tree`` side by side 3.2 s instead of
    2.4."""
    with contextlib.ExitStack() as opened:
        out, err = (opened.enter_context(tempfile.TemporaryFile(dir=git.tmp)) for _ in "12")
        stdin: IO[bytes] | int = subprocess.DEVNULL
        if given is not None:
            stdin = opened.enter_context(tempfile.TemporaryFile(dir=git.tmp))
            stdin.write(given)
            stdin.seek(0)
        proc = git.popen(git_dir, args, extra_env=extra_env, stdin=stdin, stdout=out, stderr=err)
        files = opened.pop_all()  # (open until the output is read)

    def output() -> bytes:
        with files:
            try:
                code = proc.wait()
            finally:
                _stop(proc)
            if code != 0:
                err.seek(0)
                raise GitCommandError(f"git {args[0]} failed: {_last_line(err.read())}")
            out.seek(0)
            return out.read()

    return output


def path_log(
    git: GitEnvironment,
    git_dir: Path,
    start: bytes,
    path: bytes,
    count: int,
    stopped: Callable[[], bool] | None = None,
) -> list[bytes] | None:
    """The first ``count`` commits of ``git log start -- path`` (``git rev-list``: the same
    walk and simplification, and no ``log.*`` setting of the repository applies); None if
    ``stopped``, asked every STOP_POLL seconds while git runs, said so (git is ended)."""
    return _rev_list(git, git_dir, [f"--max-count={count}", start.hex()], [path], stopped)


def touching(
    git: GitEnvironment, git_dir: Path, start: bytes, paths: Sequence[bytes]
) -> list[bytes]:
    """The commits ``start`` reaches that differ from at least one of their parents (a
    root: from the empty tree) in one of ``paths`` (``git rev-list --full-history``, which
    leaves out only the commits TREESAME to every parent)."""
    found = _rev_list(git, git_dir, ["--full-history", start.hex()], paths)
    assert found is not None  # (never stopped)
    return found


def _rev_list(
    git: GitEnvironment,
    git_dir: Path,
    args: Sequence[str],
    paths: Sequence[bytes],
    stopped: Callable[[], bool] | None = None,
) -> list[bytes] | None:
    limit = ["--", *(os.fsdecode(p) for p in paths)] if paths else []
    proc = git.popen(
        git_dir,
        ["rev-list", *args, *limit],
        extra_env={**_ENV, **_LITERAL},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        while True:
            try:  # (asked again after a timeout, communicate loses nothing git wrote)
                out, error = proc.communicate(timeout=None if stopped is None else STOP_POLL)
                break
            except subprocess.TimeoutExpired:
                if stopped is not None and stopped():
                    return None
    finally:
        _stop(proc)
    if proc.returncode != 0:
        raise GitCommandError(f"git rev-list failed: {_last_line(error)}")
    return [bytes.fromhex(line.decode("ascii")) for line in out.split()]


class ChangeStream:
    """The paths that differ, slot by slot: for each ``(commit, parent or None)`` given, in
    that order, the list of file paths (``git diff-tree -r``: files, links and submodules,
    never directories) that differ between the parent (the empty tree) and the commit."""

    def __init__(
        self,
        git: GitEnvironment,
        git_dir: Path,
        slots: Iterable[tuple[bytes, bytes | None]],
        paths: Sequence[bytes] = (),
        recursive: bool = True,
    ) -> None:
        """``paths``: only those (each a file, or a directory and all below it) are diffed,
        as ``git diff-tree -- paths`` limits; every slot's header is printed still. Not
        ``recursive``: the root tree's entries that differ, files or directories."""
        limit = ["--", *(os.fsdecode(p) for p in paths)] if paths else []
        options = _DIFF_TREE if recursive else tuple(o for o in _DIFF_TREE if o != "-r")
        self._proc = git.popen(
            git_dir,
            [*options, *limit],
            extra_env={**_ENV, **_LITERAL},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdout: IO[bytes] = self._proc.stdout
        lines = ((c.hex() if p is None else f"{c.hex()} {p.hex()}") + "\n" for c, p in slots)
        self._writer = _feed(self._proc.stdin, lines)
        self.slots = self._read()

    def _read(self) -> Iterator[tuple[bytes, list[bytes]]]:
        """(commit id as hex, paths) per slot, in the order the slots were given."""
        return _slots_of(self._tokens())

    def _tokens(self) -> Iterator[list[bytes]]:
        """git's whole tokens, a chunk of its answer at a time."""
        rest = b""
        while True:
            chunk = self._stdout.read1(_READ)  # type: ignore[attr-defined]
            if not chunk:
                break
            tokens = (rest + chunk).split(b"\0")
            rest = tokens.pop()
            yield tokens
        if rest:
            raise GitCommandError("git diff-tree stopped mid-answer")

    def close(self) -> None:
        _stop(self._proc)
        self._writer.join(timeout=5)

    def __enter__(self) -> ChangeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _feed(pipe: IO[bytes], lines: Iterable[str]) -> threading.Thread:
    """Write ``lines`` to a child's stdin from a thread of its own (the child answers as it
    reads: writing all before reading would fill both pipes), then close it."""

    def run() -> None:
        try:
            batch: list[str] = []
            for line in lines:
                batch.append(line)
                if len(batch) >= 1024:
                    pipe.write("".join(batch).encode("ascii"))
                    batch = []
            pipe.write("".join(batch).encode("ascii"))
        except (BrokenPipeError, ValueError, OSError):  # the child was stopped: nothing to do
            pass
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    return background.start(run, "feed")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _last_line(error: bytes) -> str:
    lines = error.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "no message"
