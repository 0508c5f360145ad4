"""Committing files without a work tree: blobs, trees and a commit written through libgit2,
then the branch moved by compare-and-swap.

The move is ``git update-ref refs/heads/B NEW OLD``, one git child per write. libgit2 can
create a reference only if it is absent, or overwrite it whatever it holds: pygit2 has no
"only if it still names OLD" for an existing branch, so two writers, or a writer and a push
through ``git receive-pack``, could each read the same tip and the later one would silently
drop the earlier one's commit. ``update-ref`` takes git's own ref lock (the one
receive-pack takes) and checks OLD under it: of two racing writers exactly one moves the
branch, and the other sees that it moved.

A writer that loses the race builds its commit again on the new tip, a few times: its
changes still apply when the files it names are as it last saw them (the blob ``sha`` each
update or delete carries is checked against the new tip), so two people editing different
files of a branch both land, and one editing a file the other changed gets a conflict.
Nothing is ever lost: a commit either becomes the branch's tip or is left unreferenced.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from floorless.core.errors import BadRequest, Conflict, FloorlessError, NotFound
from floorless.git import objects
from floorless.git.env import GitEnvironment
from floorless.git.refs import MAX_PATH

OPERATIONS = ("create", "update", "delete")
MODE_FILE = 0o100644
ATTEMPTS = 4  # builds of one write on a tip that keeps moving before it gives up (409)
_ZERO = "0" * 40


class Unprocessable(BadRequest):
    """Input well formed but not applicable to the branch (a file that already exists, a
    branch name taken): Forgejo answers these 422."""

    status = 422


class StaleFile(Conflict):
    """The blob ``sha`` an update or delete names is not the file's current one."""


@dataclass(frozen=True)
class Change:
    """One file operation of a commit, as Forgejo's ``ChangeFileOperation`` takes it."""

    operation: str  # create, update or delete
    path: bytes
    content: bytes | None = None  # the new file's bytes (create, update)
    sha: str | None = None  # the blob the caller last saw (update, delete)
    from_path: bytes | None = None  # an update that also moves the file


@dataclass(frozen=True)
class Written:
    """A commit that became the tip of ``branch``."""

    branch: str
    commit: pygit2.Commit
    parent: bytes | None  # the tip it replaced (None: the branch is new)


def check_write_path(path: str) -> bytes:
    """A path to write, as bytes: relative, no empty, ``.`` or ``..`` component, no NUL,
    no ``.git`` directory (git itself refuses a tree with one)."""
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 path
        raise Unprocessable("a file path must be UTF-8") from exc
    if not raw or len(raw) > MAX_PATH:
        raise Unprocessable("a file path must be 1 to 4096 bytes")
    if b"\0" in raw or b"\\" in raw:
        raise Unprocessable("a file path may not contain NUL or a backslash")
    parts = raw.split(b"/")
    for part in parts:
        if part in (b"", b".", b".."):
            raise Unprocessable(f"invalid file path {path!r}: empty, '.' or '..' component")
        if part.lower() == b".git":
            raise Unprocessable(f"invalid file path {path!r}: '.git' is reserved")
    return raw


def check_branch_name(name: str) -> str:
    """A branch name git would accept (``git check-ref-format``), or 422."""
    if not name or not pygit2.reference_is_valid_name(f"refs/heads/{name}"):
        raise Unprocessable(f"{name!r} is not a valid branch name")
    if name == "HEAD" or name.startswith("-"):
        raise Unprocessable(f"{name!r} is not a valid branch name")
    return name


def branch_tip(handle: pygit2.Repository, branch: str) -> bytes | None:
    """The commit ``branch`` names now, read from the ref database (not a snapshot: the
    write must start from what ``update-ref`` will compare against)."""
    try:
        ref = handle.lookup_reference(f"refs/heads/{branch}")
    except (KeyError, pygit2.InvalidSpecError, ValueError):
        return None
    try:
        return bytes(ref.peel(pygit2.Commit).id.raw)
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise NotFound(f"branch {branch!r} names no commit") from exc


# A tree edit: a nested dict of path components; a leaf is (content, mode) or None to delete.
_Leaf = tuple[bytes, int] | None
_Node = dict[bytes, "_Node | _Leaf"]


def _find(handle: pygit2.Repository, tree: pygit2.Tree | None, path: bytes) -> pygit2.Object | None:
    if tree is None:
        return None
    node: pygit2.Object = tree
    for part in path.split(b"/"):
        if not isinstance(node, pygit2.Tree):
            return None
        found = objects.child(node, part)
        if found is None:
            return None
        node = found
    return node


def _existing_file(
    tree: pygit2.Tree | None, handle: pygit2.Repository, change: Change, path: bytes
) -> pygit2.Blob:
    found = _find(handle, tree, path)
    shown = path.decode("utf-8", "replace")
    if not isinstance(found, pygit2.Blob):
        raise NotFound(f"no file {shown!r} on this branch")
    if not change.sha:
        raise Unprocessable(f"{change.operation} of {shown!r} needs the file's current 'sha'")
    if str(found.id) != change.sha.lower():
        raise StaleFile(
            f"{shown!r} is at {found.id}, not {change.sha}: it changed since it was read"
        )
    return found


def _place(
    handle: pygit2.Repository, tree: pygit2.Tree | None, root: _Node, path: bytes, leaf: _Leaf
) -> None:
    parts = path.split(b"/")
    if leaf is not None:  # every directory on the way is one, or is new
        for cut in range(1, len(parts)):
            found = _find(handle, tree, b"/".join(parts[:cut]))
            if found is not None and not isinstance(found, pygit2.Tree):
                shown = b"/".join(parts[:cut]).decode("utf-8", "replace")
                raise Unprocessable(f"{shown!r} is a file, not a directory")
    node = root
    for part in parts[:-1]:
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise Unprocessable(f"{path.decode('utf-8', 'replace')!r} is under a file changed too")
        node = nxt
    last = parts[-1]
    if last in node:
        raise Unprocessable(f"{path.decode('utf-8', 'replace')!r} is changed twice")
    node[last] = leaf


def _edits(handle: pygit2.Repository, tree: pygit2.Tree | None, changes: Sequence[Change]) -> _Node:
    """Check every change against ``tree`` and turn them into one nested edit: nothing is
    written before every change is known to apply."""
    root: _Node = {}
    for change in changes:
        shown = change.path.decode("utf-8", "replace")
        if change.operation == "create":
            if _find(handle, tree, change.path) is not None:
                raise Unprocessable(f"{shown!r} already exists")
            assert change.content is not None
            _place(handle, tree, root, change.path, (change.content, MODE_FILE))
        elif change.operation == "update":
            source = change.from_path or change.path
            found = _existing_file(tree, handle, change, source)
            mode = found.filemode if found.filemode else MODE_FILE
            if source != change.path:
                if _find(handle, tree, change.path) is not None:
                    raise Unprocessable(f"{shown!r} already exists")
                _place(handle, tree, root, source, None)
            content = change.content if change.content is not None else found.data
            _place(handle, tree, root, change.path, (content, mode))
        elif change.operation == "delete":
            _existing_file(tree, handle, change, change.path)
            _place(handle, tree, root, change.path, None)
        else:
            raise Unprocessable(f"unknown operation {change.operation!r}")
    return root


def _write_tree(
    handle: pygit2.Repository, tree: pygit2.Tree | None, edit: _Node
) -> pygit2.Oid | None:
    """The tree ``tree`` with ``edit`` applied, written; None when it came out empty."""
    builder = handle.TreeBuilder(tree) if tree is not None else handle.TreeBuilder()
    for name, sub in edit.items():
        text = name.decode("utf-8")  # written paths come from JSON: always UTF-8
        current = objects.child(tree, name) if tree is not None else None
        if isinstance(sub, dict):
            if current is not None and not isinstance(current, pygit2.Tree):
                raise Unprocessable(f"{text!r} is a file, not a directory")
            below = _write_tree(handle, current if isinstance(current, pygit2.Tree) else None, sub)
            if below is None:
                if current is not None:
                    builder.remove(text)
            else:
                builder.insert(text, below, pygit2.enums.FileMode.TREE)
        elif sub is None:
            builder.remove(text)
        else:
            builder.insert(text, handle.create_blob(sub[0]), sub[1])
    if len(builder) == 0:
        return None
    return builder.write()


def build_commit(
    handle: pygit2.Repository,
    parent: bytes | None,
    changes: Sequence[Change],
    message: str,
    author: pygit2.Signature,
    committer: pygit2.Signature,
) -> pygit2.Oid:
    """Write the blobs, trees and commit of ``changes`` on ``parent`` (None: a root commit);
    no ref moves."""
    tree = None
    parents: list[pygit2.Oid] = []
    if parent is not None:
        base = objects.get_commit(handle, parent)
        tree = base.tree
        parents = [pygit2.Oid(raw=parent)]
    edit = _edits(handle, tree, changes)
    new_tree = _write_tree(handle, tree, edit)
    if new_tree is None:
        new_tree = handle.TreeBuilder().write()
    if tree is not None and new_tree == tree.id:
        raise Unprocessable("the changes leave every file as it was: nothing to commit")
    return handle.create_commit(None, author, committer, message, new_tree, parents)


def _update_ref(git: GitEnvironment, git_dir: Path, args: list[str]) -> bool:
    """``git update-ref ARGS``: True when the ref moved, False when it was not what the
    caller expected (or another writer held its lock at that moment)."""
    proc = git.popen(git_dir, ["update-ref", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        return True
    words = err.decode("utf-8", "replace")
    if any(m in words for m in ("but expected", "already exists", "cannot lock ref", "unable to")):
        return False
    raise FloorlessError(f"git update-ref failed: {words.strip()}")


def move_branch(
    git: GitEnvironment, git_dir: Path, branch: str, new: pygit2.Oid, old: bytes | None
) -> bool:
    """``git update-ref refs/heads/BRANCH NEW OLD``: True when the branch moved, False when
    it no longer named ``old`` (or, with ``old`` None, already existed)."""
    expected = old.hex() if old is not None else _ZERO
    message = "floorless: moved through the API"
    return _update_ref(git, git_dir, ["-m", message, f"refs/heads/{branch}", str(new), expected])


def delete_branch(git: GitEnvironment, git_dir: Path, branch: str, old: bytes) -> bool:
    """``git update-ref -d refs/heads/BRANCH OLD``: False when it no longer named ``old``."""
    message = "floorless: branch deleted through the API"
    return _update_ref(git, git_dir, ["-m", message, "-d", f"refs/heads/{branch}", old.hex()])


def commit_files(
    handle: pygit2.Repository,
    git: GitEnvironment,
    git_dir: Path,
    branch: str,
    new_branch: str | None,
    changes: Sequence[Change],
    message: str,
    author: pygit2.Signature,
    committer: pygit2.Signature,
    empty_ok: bool = False,
    guard: Callable[[str, bytes | None, bytes], None] | None = None,
) -> Written:
    """Commit ``changes`` on top of ``branch`` and move ``new_branch`` (or ``branch``) to
    it by compare-and-swap; built again on the new tip when the branch moved meanwhile.

    ``empty_ok``: the repository has no branch at all, so ``branch`` may be missing (the
    first commit). StaleFile (409) when a file is no longer what the caller saw; Conflict
    when the branch kept moving. ``guard(branch, old, new)`` may refuse the move by raising
    (a protected branch), after the commit is built and before the branch moves."""
    target = new_branch or branch
    for _attempt in range(ATTEMPTS):
        parent = branch_tip(handle, branch)
        if parent is None and not empty_ok:
            raise NotFound(f"no branch {branch!r}")
        if new_branch and branch_tip(handle, new_branch) is not None:
            raise Unprocessable(f"branch {new_branch!r} already exists")
        commit_id = build_commit(handle, parent, changes, message, author, committer)
        old = None if new_branch else parent
        if guard is not None:
            guard(target, old, bytes(commit_id.raw))
        if move_branch(git, git_dir, target, commit_id, old):
            commit = handle.get(commit_id)
            assert isinstance(commit, pygit2.Commit)
            return Written(target, commit, old)
        if new_branch:
            raise Unprocessable(f"branch {new_branch!r} already exists")
    raise Conflict(f"branch {target!r} kept moving while the change was committed; try again")
