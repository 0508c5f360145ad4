"""Garbage collection: remove from disk what no ref reaches any more.

A deleted or rewound branch's commits stop being served at once (``reachability.py``); this
removes them, and every tree and blob only they held, with git's own ``git gc --prune=now``:
one git child per repository, in floorless's isolated git environment, with reflogs expired
in the same run so that they keep nothing alive. ``floorless admin gc`` runs it on demand; the
forge runs it every ``gc_interval`` seconds on the repositories whose refs moved since.

``--prune=now`` removes every unreachable loose object whatever its age, so a push that is
storing its objects at that very moment could lose them before its ref update: a repository
with a push in progress (git's incoming quarantine directory exists) is skipped, and is tried
again at the next run.

It is also the forge's housekeeping of its packs: the packs it writes keep chains of deltas at
most ``pack.depth`` (the ``gc_pack_depth`` setting) deep, and the longer chains of a pack made
elsewhere (git's default depth is 50) are cut as it is rewritten. libgit2 rebuilds an object
from its whole chain on each read where git keeps the bases it has rebuilt, so the trees a
commit page's diff descends into are read about twice as fast 10 deep as 50 deep.
"""

from __future__ import annotations

from pathlib import Path

from floorless.git.env import GitEnvironment

GC_TIMEOUT = 6 * 3600.0
PACK_DEPTH = 10  # the gc_pack_depth setting's default
GC_ARGS = (
    "-c",
    "gc.reflogExpire=now",
    "-c",
    "gc.reflogExpireUnreachable=now",
    "-c",
    "gc.auto=0",
    "gc",
    "--prune=now",
    "--quiet",
)


def pushing(git_dir: Path) -> bool:
    """Whether a push into ``git_dir`` is storing objects now (its quarantine exists)."""
    return any((git_dir / "objects").glob("tmp_objdir-incoming-*"))


def collect(
    git: GitEnvironment, git_dir: Path, keep: bool = False, depth: int = PACK_DEPTH
) -> bool:
    """Run ``git gc --prune=now`` on one repository, its pack's delta chains at most
    ``depth`` deep; False when it was skipped (a push is in progress). Raises GitCommandError
    when git fails. ``keep``: a repository whose objects forks borrow (``forks.py``) is packed
    without pruning anything, since a fork's refs may still reach what its own no longer do."""
    if pushing(git_dir):
        return False
    args = (*GC_ARGS[:-2], "--prune=never", "--quiet") if keep else GC_ARGS
    git.run(git_dir, ("-c", f"pack.depth={depth}", *args), timeout=GC_TIMEOUT)
    return True
