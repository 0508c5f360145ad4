"""What the refs no longer reach: which commits they do reach, what else an unreachable
commit may have left behind, and which objects a fetch request asks for by id.

These are the git-level pieces of "unreachable means gone" (``floorless/index/reachability.py``
holds the per-repository state built from them):

- ``mark_reachable`` marks, over the index's ``CommitGraph``, every commit the given tips
  reach. When the previous marks' tips are all reached again (a fast-forward, a new branch) it
  walks only the new commits; otherwise (a branch deleted or rewound) it walks the graph.
- ``introduced`` lists the trees and blobs a commit brings that its first parent lacks (all of
  them for a root commit). Any tree or blob of an unreachable commit that no reachable commit
  holds was brought by some unreachable commit: follow, from the commit that has it, the parent
  that has it at the same path, until a commit lacks it in its first parent (or is a root).
  So the objects ``introduced`` by the unreachable commits cover every tree and blob they left
  behind; those a reachable commit holds too (the usual case after a cherry-pick, a rebase
  or a squash merge, once the branch is deleted) are taken out again by ``reached_among``,
  git's own listing of what the tips reach.
- ``find_commit`` is the bounded walk a page may afford while the index catches up.
- ``screen_wants`` reads a whole ``git-upload-pack`` request before git does, collects the
  object ids it names (``want`` in protocol v0 and v2, ``oid`` in v2's ``object-info``) and
  answers git's ``ERR`` packet for the first one not allowed: protocol v2 (and v0 with
  ``allowAnySHA1InWant``, which partial clones need) would otherwise send any object the
  repository still holds. ``have`` lines are left alone: git only acknowledges those it
  holds, and sends nothing of them.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

import pygit2

from floorless.core.errors import BadRequest
from floorless.git.env import GitEnvironment
from floorless.git.history import CommitGraph
from floorless.git.lenient import AnyCommit, read_commit
from floorless.git.objects import MODE_SUBMODULE, MODE_TREE
from floorless.git.oid import parse_full
from floorless.git.protocol import MAX_PKT, pkt_line

CHUNK = 65536


def mark_reachable(
    graph: CommitGraph,
    tips: Iterable[bytes],
    previous: bytearray | None = None,
    previous_tips: Iterable[bytes] = (),
) -> bytearray:
    """One byte per commit of ``graph`` (by its sequence number), 1 where ``tips`` reach it.

    ``previous`` are the marks of ``previous_tips``: they are extended rather than rebuilt
    when the walk from ``tips``, stopping at marked commits, meets every previous tip (then
    nothing the previous tips reached was lost).
    """
    starts = [graph.seq[t] for t in tips if t in graph]
    size = len(graph.oids)
    if previous is not None:
        marks = bytearray(previous)
        marks.extend(bytes(max(0, size - len(marks))))
        met: set[int] = set()
        _walk(graph, starts, marks, met)
        old = {graph.seq[t] for t in previous_tips if t in graph}
        if old <= met:
            return marks
    marks = bytearray(size)
    _walk(graph, starts, marks, None)
    return marks


def _walk(graph: CommitGraph, starts: list[int], marks: bytearray, met: set[int] | None) -> None:
    parents = graph.parents
    stack = list(starts)
    while stack:
        node = stack.pop()
        if marks[node]:
            if met is not None:
                met.add(node)
            continue
        marks[node] = 1
        stack.extend(p for p in parents[node] if not marks[p] or met is not None)


def introduced(repo: pygit2.Repository, commit: AnyCommit) -> frozenset[bytes]:
    """The ids of the trees and blobs ``commit`` has that its first parent does not have at the
    same path (every tree and blob of a root commit)."""
    found: set[bytes] = set()
    base = commit.parents[0].tree if commit.parent_ids else None
    pending: list[tuple[pygit2.Tree | None, pygit2.Tree]] = [(base, commit.tree)]
    if base is None or base.id != commit.tree.id:
        found.add(commit.tree.id.raw)
    while pending:
        old, new = pending.pop()
        before = {e.raw_name: e for e in old} if old is not None else {}
        for entry in new:
            if entry.filemode == MODE_SUBMODULE:
                continue  # a commit of another repository
            was = before.get(entry.raw_name)
            if was is not None and was.id == entry.id:
                continue
            found.add(entry.id.raw)
            if entry.filemode == MODE_TREE:
                subtree = repo.get(entry.id)
                if isinstance(subtree, pygit2.Tree):
                    older = None
                    if was is not None and was.filemode == MODE_TREE:
                        candidate = repo.get(was.id)
                        older = candidate if isinstance(candidate, pygit2.Tree) else None
                    pending.append((older, subtree))
    return frozenset(found)


def reached_among(
    git: GitEnvironment, git_dir: Path, tips: Iterable[bytes], candidates: frozenset[bytes]
) -> frozenset[bytes]:
    """Of ``candidates`` (tree and blob ids), those ``tips`` reach, as git lists them: one
    ``git rev-list --objects`` child, read as it writes and stopped once every candidate is
    found. For background work only: it reads the whole history."""
    found: set[bytes] = set()
    proc = git.popen(
        git_dir,
        ["rev-list", "--objects", "--no-object-names", "--stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"".join(tip.hex().encode() + b"\n" for tip in tips))
        proc.stdin.close()
        for line in proc.stdout:
            oid = bytes.fromhex(line.strip().decode("ascii"))
            if oid in candidates:
                found.add(oid)
                if len(found) == len(candidates):
                    break
    finally:
        proc.kill()
        proc.stdout.close()
        proc.wait()
    return frozenset(found)


def find_commit(
    repo: pygit2.Repository, tips: Iterable[bytes], target: bytes, budget: int | None
) -> bool | None:
    """Whether ``tips`` reach the commit ``target``; None when ``budget`` commits were read
    without an answer. Parents are read one commit at a time (no ``Walker``: it lets go of
    the interpreter on a handle other threads share)."""
    seen: set[bytes] = set()
    stack = list(tips)
    visited = 0
    while stack:
        oid = stack.pop()
        if oid == target:
            return True
        if oid in seen:
            continue
        seen.add(oid)
        visited += 1
        if budget is not None and visited > budget:
            return None
        obj = read_commit(repo, pygit2.Oid(raw=oid))
        if obj is not None:
            stack.extend(p.raw for p in obj.parent_ids if p.raw not in seen)
    return False


class RequestedIds:
    """The object ids (raw bytes) an upload-pack request names by id, collected as its body
    streams past. A body that is not whole pkt-lines is refused as ``protocol.PktChecker``
    refuses it (BadRequest); a malformed id raises ValueError."""

    def __init__(self) -> None:
        self.ids: list[bytes] = []
        self._command = b""
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data
        at = 0
        while len(buffer) - at >= 4:
            header = buffer[at : at + 4]
            try:
                length = int(header, 16) if header.isalnum() else -1
            except ValueError:
                length = -1
            if length in (0, 1, 2):  # flush, delimiter, response end
                at += 4
                continue
            if length < 4 or length > MAX_PKT:
                raise BadRequest("malformed git request: bad pkt-line length")
            if len(buffer) - at < length:
                break
            self._line(buffer[at + 4 : at + length].rstrip(b"\n"))
            at += length
        self._buffer = buffer[at:]

    def _line(self, payload: bytes) -> None:
        if payload.startswith(b"command="):
            self._command = payload[len(b"command=") :]
        word, _, rest = payload.partition(b" ")
        if word == b"want" or (word == b"oid" and self._command == b"object-info"):
            self.ids.append(_oid(rest.split(b" ", 1)[0]))

    def finish(self) -> list[bytes]:
        if self._buffer:
            raise BadRequest("malformed git request: the body ends inside a pkt-line")
        return self.ids


def requested_ids(body: bytes) -> list[bytes]:
    """The object ids an upload-pack request body names by id, in order."""
    found = RequestedIds()
    found.feed(body)
    return found.finish()


def _oid(text: bytes) -> bytes:
    oid = parse_full(text)  # SHA-1 or SHA-256
    if oid is None:
        raise ValueError("a requested object id is malformed")
    return oid


def err_packet(message: str) -> bytes:
    """git's ``ERR`` pkt-line: the client stops and shows ``message``."""
    return pkt_line(f"ERR {message}\n".encode())


def refusal(ids: Iterable[bytes], allowed: Callable[[bytes], bool | None]) -> bytes | None:
    """git's ``ERR`` packet for the first of ``ids`` that may not be sent (what git itself
    says of an object it will not send), or for one not known yet (try again); None when
    all may."""
    for oid in dict.fromkeys(ids):
        answer = allowed(oid)
        if answer is None:
            return err_packet("upload-pack: this repository's history is being indexed; retry")
        if not answer:
            return err_packet(f"upload-pack: not our ref {oid.hex()}")
    return None


def screen_wants(
    body: Iterable[bytes], allowed: Callable[[bytes], bool | None], scratch: Path
) -> tuple[Iterator[bytes], bytes | None]:
    """Read a whole upload-pack request (a fetch's negotiation: its size is bounded by the
    caller) before git sees any of it, keeping it in memory up to 1 MiB and in a file in
    ``scratch`` beyond; then ``(the same body again, None)``, or ``(nothing, git's ERR
    packet)`` when it asks for an object by id that ``allowed`` refuses."""
    spool = tempfile.SpooledTemporaryFile(max_size=1 << 20, dir=str(scratch))  # noqa: SIM115
    found = RequestedIds()
    try:
        for piece in body:
            spool.write(piece)
            found.feed(piece)
        answer = refusal(found.finish(), allowed)
    except ValueError as exc:
        answer = err_packet(f"upload-pack: {exc}")
    except BaseException:
        spool.close()
        raise
    if answer is not None:
        spool.close()
        return iter(()), answer
    spool.seek(0)
    return _replay(spool), None


def _replay(spool: IO[bytes]) -> Iterator[bytes]:
    with spool:
        while piece := spool.read(CHUNK):
            yield piece
