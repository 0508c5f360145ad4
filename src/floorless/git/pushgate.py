"""What a push may point a ref at: objects it sent, and objects its pusher can read.

git accepts a ref update when the new object and everything it reaches exist in the
repository's object store, and a fork's store includes its parent's (alternates). Existing is
not the same as being readable: a deleted branch's commits stay in the store until garbage
collection, and what a parent gained after it went private is there too. So a push that sent
nothing but named such an id would make it readable, and git's answer (``missing necessary
objects`` or ``ok``) would tell whether it exists. This module is the rule the forge's
pre-receive hook applies instead (``hooks/pre_receive.py``):

- Every object the new tips reach must either have been **sent in the push** or be reachable
  from an **allowed tip**, else the whole push is refused. The allowed tips are the
  repository's own refs, and the refs of each repository it borrows from whose contents the
  pusher may read now. ``git rev-list --objects NEW --not ALLOWED`` lists what the allowed
  tips do not reach; each listed object must be in the push's pack (git's quarantine
  directory, before it joins the store).
- A thin pack's deltas name bases the pusher says the repository has; ``git index-pack
  --fix-thin`` copies each base from the store into the pack. A base is therefore never
  counted as sent (the pack's first ``count`` objects, by offset, are what the client sent;
  the rest are bases), and each must be in the trees of the commits the push builds on (the
  parents of its new commits, which the first rule already holds to allowed ones), as a blob
  or a tree: a gitlink names a commit, it does not reach it. Otherwise a delta could copy a
  hidden blob into a new one, or the base itself could be pointed at.

Both refusals are worded as git words a missing object, so that no answer tells an object
that is hidden from one that does not exist (``pushreport.py`` makes the whole answer the
same). The work is proportional to what the push sends: ``rev-list`` stops at the allowed
tips, and the trees walked are those of the commits the push builds on.
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType

MISSING = "missing necessary objects"
TREE_ENTRIES_MAX = 5_000_000  # entries read looking for a thin pack's bases
LIST_SECONDS = 600.0  # the longest the push's objects may take to list
_IDX_MAGIC = b"\xfftOc"


@dataclass(frozen=True)
class Pushed:
    """What a push sent: the objects of its pack as the client sent them, and the bases
    ``index-pack --fix-thin`` added from the store."""

    sent: frozenset[bytes]
    bases: frozenset[bytes]


def idx_entries(path: Path, hash_size: int) -> list[tuple[int, bytes]]:
    """(offset, raw id) of every object a pack index (version 2) lists."""
    data = path.read_bytes()
    if data[:4] != _IDX_MAGIC or struct.unpack(">I", data[4:8])[0] != 2:
        raise ValueError(f"{path.name}: not a version 2 pack index")
    count = struct.unpack(">I", data[8 + 255 * 4 : 8 + 256 * 4])[0]
    ids_at = 8 + 256 * 4
    offsets_at = ids_at + count * hash_size + count * 4
    large_at = offsets_at + count * 4
    found = []
    for i in range(count):
        oid = data[ids_at + i * hash_size : ids_at + (i + 1) * hash_size]
        (offset,) = struct.unpack(">I", data[offsets_at + i * 4 : offsets_at + i * 4 + 4])
        if offset & 0x80000000:
            at = large_at + (offset & 0x7FFFFFFF) * 8
            (offset,) = struct.unpack(">Q", data[at : at + 8])
        found.append((offset, oid))
    return found


def pushed(quarantine: Path | None, count: int | None, hash_size: int) -> Pushed:
    """The objects a push brought, read from git's quarantine directory. ``count`` is the
    number of objects the client's pack header announced (None when it sent no pack)."""
    if quarantine is None or not quarantine.is_dir():
        return Pushed(frozenset(), frozenset())
    sent: set[bytes] = set()
    bases: set[bytes] = set()
    packs = sorted((quarantine / "pack").glob("*.idx")) if (quarantine / "pack").is_dir() else []
    for index in packs:
        entries = sorted(idx_entries(index, hash_size))
        keep = count if count is not None and len(packs) == 1 else 0
        sent.update(oid for _, oid in entries[:keep])
        bases.update(oid for _, oid in entries[keep:])
    for folder in quarantine.iterdir():  # loose objects (unpack-objects), if any
        if len(folder.name) == 2 and folder.is_dir():
            for item in folder.iterdir():
                try:
                    sent.add(bytes.fromhex(folder.name + item.name))
                except ValueError:
                    continue
    return Pushed(frozenset(sent), frozenset(bases - sent))


def listed(
    git_dir: Path, tips: Iterable[str], allowed: Iterable[str], timeout: float = LIST_SECONDS
) -> list[bytes] | None:
    """The objects ``tips`` reach that ``allowed`` do not (raw ids), by ``git rev-list
    --objects`` in the hook's environment (which sees the quarantine); None when some object
    is missing."""
    lines = [*tips, *(f"^{tip}" for tip in allowed)]
    try:
        proc = subprocess.run(
            ["git", f"--git-dir={git_dir}", "rev-list", "--objects", "--stdin"],
            input=("\n".join(lines) + "\n").encode(),
            capture_output=True,
            env=os.environ,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        return None
    found = []
    for line in proc.stdout.splitlines():
        try:
            found.append(bytes.fromhex(line.split(b" ", 1)[0].decode()))
        except ValueError:
            return None
    return found


def refused(
    git_dir: Path,
    handle: pygit2.Repository,
    updates: Mapping[str, str],
    allowed: Sequence[str],
    push: Pushed,
) -> tuple[dict[str, str], bool]:
    """The updates (ref -> new id, hex) refused for what they point at, each with git's
    reason; and whether the pack's thin bases are all allowed (when not, the whole push is
    to be refused as git refuses a pack it cannot complete).

    One object the push neither sent nor may reach refuses every update of the push, not
    only its own: then nothing of the pack is kept (no delta made from a hidden base lands
    in the store), ``atomic`` or not makes no difference, and the answer is the same whether
    the object is hidden or does not exist at all (git refuses the update of a missing
    object itself, before the hook, but it too is among those the hook is given). One
    ``git rev-list`` for the whole push, whatever the number of updates.

    ``handle`` reads the store and the quarantine (``Repository`` with the quarantine added
    as an alternate)."""
    tips = [new for new in updates.values() if set(new) != {"0"}]
    if not tips:
        return {}, True
    everything = listed(git_dir, tips, allowed)
    if everything is None or not push.sent.issuperset(everything):
        return {ref: MISSING for ref in updates}, True
    return {}, bases_allowed(handle, everything, push)


def bases_allowed(handle: pygit2.Repository, new: Sequence[bytes], push: Pushed) -> bool:
    """Whether each thin-pack base is in a tree of a commit the push builds on: a parent,
    outside the push, of one of its new commits."""
    if not push.bases:
        return True
    wanted = set(push.bases)
    edges: list[pygit2.Oid] = []
    fresh = set(new)
    for raw in new:
        try:
            obj = handle.get(pygit2.Oid(raw=raw))
        except (ValueError, pygit2.GitError):
            return False
        if obj is None or obj.type != ObjectType.COMMIT:
            continue
        assert isinstance(obj, pygit2.Commit)
        edges.extend(p for p in obj.parent_ids if p.raw not in fresh)
    seen: set[bytes] = set()
    budget = TREE_ENTRIES_MAX
    for edge in edges:
        try:
            commit = handle.get(edge)
        except (ValueError, pygit2.GitError):
            return False
        if not isinstance(commit, pygit2.Commit):
            continue
        stack = [commit.tree_id]
        while stack and wanted:
            tree_id = stack.pop()
            if tree_id.raw in seen:
                continue
            seen.add(tree_id.raw)
            wanted.discard(tree_id.raw)
            tree = handle.get(tree_id)
            if not isinstance(tree, pygit2.Tree):
                continue
            for entry in tree:
                budget -= 1
                if budget < 0:
                    return False
                if entry.type == ObjectType.TREE:
                    stack.append(entry.id)
                elif entry.type == ObjectType.BLOB:  # a gitlink names, it does not reach
                    wanted.discard(entry.id.raw)
        if not wanted:
            return True
    return not wanted
