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

``Garbage`` collects one repository for the forge (``collect``) and every one due
(``collect_due``: its refs moved since its last collection); ``maintenance.py`` schedules it.
Nodes sharing the repositories take turns by a lease, and a collection reopens the handle,
which still maps the packs it removed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pygit2

from floorless.core.errors import FloorlessError
from floorless.db.leases import Leases
from floorless.git.env import GitEnvironment
from floorless.repos.forks import Forks
from floorless.repos.registry import Repo
from floorless.repos.state import RepoStates

log = logging.getLogger(__name__)

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


class Garbage:
    def __init__(
        self,
        git: GitEnvironment,
        states: RepoStates,
        leases: Leases,
        forks: Forks,
        depth: int,
        collected: Callable[[int, pygit2.Repository], None],
    ) -> None:
        self.git = git
        self.states = states
        self.leases = leases
        self.forks = forks
        self.depth = depth  # the gc_pack_depth setting
        # Told of a repository collected, with its reopened handle (the reachability marks:
        # what was removed is named no more).
        self.collected = collected
        self._lock = threading.Lock()

    def collect(self, repo: Repo) -> bool:
        """``git gc --prune=now`` on one repository; False when skipped (a push is running,
        or another node sharing the repositories collects this one now: it collects what
        this node's push left too)."""
        state = self.states.of(repo)
        lease = f"gc {repo.id}"
        with self._lock:
            state.gc_due = False
            if not self.leases.take(lease):
                return False
            try:
                # a fork may reach what its parent no longer does: nothing is pruned
                keep = bool(self.forks.forks_of(repo.owner, repo.name))
                if not collect(self.git, repo.path, keep, self.depth):
                    state.gc_due = True
                    return False
            finally:
                self.leases.release(lease)
            state.reopen()  # the old handle still maps the removed packs
            self.collected(repo.id, state.handle())
            return True

    def collect_due(self) -> None:
        """Collect the garbage of every repository whose refs moved since its last gc."""
        for state in sorted(self.states.all(), key=lambda s: s.path):
            if not state.gc_due:
                continue
            try:
                self.collect(state.repo)
            except (FloorlessError, pygit2.GitError, OSError) as exc:
                log.warning("%s: garbage collection: %s", state.repo.full_name, exc)
