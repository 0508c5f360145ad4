"""The other nodes sharing the database: what this node tells them of its repositories, and
what it does with what they tell it.

Several nodes may share one PostgreSQL database and one repositories directory, each with its
own memory of the repositories (``state.py``). ``db/notices.py`` carries the notices; this is
the forge's side of them, kept beside the repositories' states because that memory is what a
notice changes: a repository moved or gone elsewhere is taken in as if it were done here, at
once, and an index stored elsewhere is followed (``on_indexed``: the indexer's). On SQLite
the processes sharing the database are the nodes, and post their notices on a board.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from floorless.core.errors import FloorlessError
from floorless.db import Database
from floorless.db.notices import Notices
from floorless.repos.state import RepoStates

log = logging.getLogger(__name__)


class Peers:
    def __init__(self, db: Database, node: str, states: RepoStates) -> None:
        self.states = states
        self.notices = Notices(db, node, self.heard)
        self.notices.on_listening = self.missed
        # Called with a repository's id when another node stored more of its index, or may
        # have (while this node was not listening): the composition root has the indexer load it.
        self.on_indexed: list[Callable[[int], None]] = []
        # Called with a repository's id when another process posted a status of one of its
        # commits (told on SQLite's board, where table writes are not told)
        self.on_statuses: list[Callable[[int], None]] = []

    def tell(self, repo_id: int, event: str) -> None:
        """Tell the other nodes sharing the database. A notice that cannot
        be sent is lost to them: their ref check finds the change, their next request of
        the index after the lease expires."""
        try:
            self.notices.send(repo_id, event)
        except FloorlessError as exc:
            log.warning("telling other nodes that repository %d %s: %s", repo_id, event, exc)

    def heard(self, repo_id: int, event: str) -> None:
        """Another node moved a repository's refs, removed or renamed it, or stored more of
        its index: take it in as if it were done here. (A repository created elsewhere
        needs no notice: its row is read on each request.)"""
        if event == "indexed":
            for listener in self.on_indexed:
                listener(repo_id)
            return
        if event == "statuses":
            for listener in self.on_statuses:
                listener(repo_id)
            return
        state = self.states.by_id(repo_id)
        if state is None:
            return
        if event == "gone":
            state.forget()
        else:  # the next request reads the refs, and has the index follow
            state.refs_moved()

    def missed(self) -> None:
        """Listening (again): notices sent while this node was not listening are lost, so
        every repository's refs are read again at its next request, and every index waiting
        for another node's lease loads what was stored."""
        for state in self.states.all():
            state.refs_moved()
            for listener in self.on_indexed:
                listener(state.repo.id)
