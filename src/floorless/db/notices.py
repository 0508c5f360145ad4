"""Telling every node what one node changed: PostgreSQL's ``LISTEN``/``NOTIFY``.

Nodes share the database and the repositories directory, but each keeps its own memory of
them: ref snapshots, page caches, the history index's graph. When one node moves a ref, or
removes or renames a repository, or stores more of an index, it sends a notice on one
channel; every node listens on a connection of its own, in a background thread, and takes
the notice in as if the change had been made locally (``repos/peers.py``).

A notice is ``NODE REPO_ID EVENT`` (``moved``: refs moved; ``gone``: deleted or renamed;
``indexed``: more of the index is stored). A node hears its own notices too, and skips them.

While the listener is not connected (the database is down, or was, and notices sent
meanwhile are lost) ``listening`` is false and the forge checks a repository's refs on
each of its requests instead; once it is back, ``on_listening`` runs so that the forge can
drop what it may have missed.

Every write to a table whose rows nodes remember between requests (``schema.REMEMBERED``)
is told too, by a trigger in the writing transaction, on the channel ``floorless_tables``:
the listener has the database forget what it remembers of that table. Remembered answers
are used only while the listener is connected (``Database.coherent``); at each
(re)connection everything remembered is forgotten.

On SQLite the processes sharing the database are on one machine (the workers of one
server, or several servers, or a command line beside one): the notices go on a board in
memory they share (``board.py``), which each process reads as a request comes in
(``catch_up``: a repository's refs are not read from stale memory once another process has
moved them) and every ``BOARD_LOOK`` seconds besides. Their writes to tables are not told:
nothing read from SQLite is remembered between requests (``coherent`` stays false), and
``listening`` is always true.
"""

from __future__ import annotations

import logging
import os
import selectors
import threading
from collections.abc import Callable

import psycopg
from psycopg.conninfo import make_conninfo

from floorless.core import background
from floorless.core.errors import FloorlessError
from floorless.db.board import Board, board_of, node_number
from floorless.db.store import ALIVE, Database, SQLite

log = logging.getLogger(__name__)

CHANNEL = "floorless"
TABLES_CHANNEL = "floorless_tables"  # written by the trigger of schema version 8
EVENTS = frozenset({"moved", "gone", "indexed", "statuses"})
KEEPALIVE = 10.0  # seconds of quiet after which the listener checks its connection
RETRY_FIRST, RETRY_MOST = 0.1, 5.0  # seconds between attempts to connect again, doubling
BOARD_LOOK = 0.25  # seconds between two looks at the board of a process no request asks
_CODES = {"moved": 1, "gone": 2, "indexed": 3, "statuses": 4}
_EVENTS = {code: event for event, code in _CODES.items()}

Heard = Callable[[int, str], None]


class Notices:
    def __init__(self, db: Database, node: str, heard: Heard) -> None:
        self.db = db
        self.node = node
        self.heard = heard
        self.on_listening: Callable[[], None] | None = None
        self.board = _board(db)
        self.shared = db.dialect == "postgresql" or self.board is not None
        self._number = node_number(node)
        self._seen = self.board.count() if self.board is not None else 0
        self._catching = threading.Lock()
        self._deaf = False  # the listener runs and is not connected
        self._connected = False  # the listener is connected, and has been since the last forget
        if self.shared and self.board is None:
            db.coherent = lambda: self._connected
        self._stop = threading.Event()
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.received = 0  # from other nodes
        self.connections = 0  # times the listener connected and caught up on what it missed

    @property
    def listening(self) -> bool:
        """False while the listener runs and is not connected: notices sent now are lost.
        (A forge that does not listen at all, one the command line made, does no more than
        one request's work: nothing it keeps can grow stale.)"""
        return not self._deaf

    def send(self, repo_id: int, event: str) -> None:
        """Tell every other node; nothing on SQLite. Delivered when sent: call it after the
        change is done (on disk, and committed)."""
        if not self.shared:
            return
        assert event in EVENTS
        if self.board is not None:
            try:
                self.board.post(self._number, repo_id, _CODES[event])
            except (OSError, ValueError) as exc:  # (ValueError: a board already closed)
                raise FloorlessError(f"the notice board: {exc}") from exc
        else:
            self.db.query("SELECT pg_notify(?, ?)", (CHANNEL, f"{self.node} {repo_id} {event}"))
        self.sent += 1

    def catch_up(self) -> None:
        """Take in what the other processes posted on the board since the last look (nothing
        to do without a board, or when nothing was posted: one read of shared memory).
        Returns once it is taken in, also when another thread was taking it in."""
        board = self.board
        if board is None or board.count() == self._seen:
            return
        with self._catching:
            try:
                notices, posted, lost = board.since(self._seen)
            except (OSError, ValueError) as exc:  # held (a process stopped mid-post), closed
                log.warning("the notice board cannot be read now: %s", exc)
                return  # the next look tries again; the ref checks meanwhile
            if lost:
                log.warning("notices of other processes were lost: reading everything again")
                if self.on_listening is not None:
                    self.on_listening()
            for node, repo_id, code in [] if lost else notices:
                event = _EVENTS.get(code)
                if node == self._number or event is None:
                    continue
                self.received += 1
                try:
                    self.heard(repo_id, event)
                except Exception:  # one notice must not stop the hearing of every later one
                    log.exception("taking in %s of repository %d failed", event, repo_id)
            # only now: a thread that finds nothing new returns at once, and must find what
            # was posted taken in
            self._seen = posted

    def _same_board(self) -> None:
        """Open the board anew if the file at its path is no longer the one mapped here (it
        was removed, and a process starting since made another): a process left on the old
        one would hear nothing more, and post where no one reads. What was posted on the
        new one before is lost here: everything is read again."""
        board = self.board
        if board is None or board.current():
            return
        with self._catching:
            try:
                fresh = Board(board.path)
            except (OSError, FloorlessError) as exc:
                log.warning("the notice board cannot be opened again: %s", exc)
                return
            log.warning("the notice board %s was made anew: reading everything again", board.path)
            self.board, self._seen = fresh, fresh.count()
            if self.on_listening is not None:
                self.on_listening()

    # -- the listener -------------------------------------------------------------------------

    def start(self) -> None:
        if not self.shared or self._thread is not None:
            return
        self._stop.clear()
        if self.board is not None:  # never deaf: the board keeps what is posted meanwhile
            self._thread = background.start(self._look, "listen")
            return
        self._deaf = True
        self._wake_r, self._wake_w = os.pipe()
        self._thread = background.start(self._run, "listen")

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        if self.board is not None:
            self._thread.join(timeout=10)
            self._thread = None
            return
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=10)
        if not self._thread.is_alive():  # else it still selects on them: left to it
            os.close(self._wake_r)
            os.close(self._wake_w)
        self._thread = None
        self._deaf = False

    def _look(self) -> None:
        """The board looked at every BOARD_LOOK seconds, for the process no request asks (an
        index stored by another is followed, a moved repository's memory let go)."""
        while not self._stop.wait(BOARD_LOOK):
            try:
                self._same_board()
                self.catch_up()
            except Exception:  # the next look tries again
                log.exception("reading the other processes' notices failed")

    def _run(self) -> None:
        delay = RETRY_FIRST
        while not self._stop.is_set():
            try:
                address = make_conninfo(self.db.url, **ALIVE)
                with psycopg.connect(address, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    conn.execute(f"LISTEN {TABLES_CHANNEL}")
                    self.db.changed()  # written while not listening: unheard
                    self._connected = True
                    if self.on_listening is not None:
                        self.on_listening()  # what was missed before LISTEN
                    # listening only once what was missed is taken in: a request in between
                    # still reads the refs' files itself, and sees no snapshot older than LISTEN
                    self.connections += 1
                    self._deaf = False
                    log.info("listening for other nodes' changes")
                    delay = RETRY_FIRST
                    self._serve(conn)
            except psycopg.Error as exc:
                if not self._deaf:
                    log.warning("no longer hearing other nodes' changes: %s", exc)
            finally:
                self._connected = False
                self._deaf = True
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, RETRY_MOST)

    def _serve(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """Take notices in as they come until stopped (or the connection fails: raises)."""
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ, "db")
            selector.register(self._wake_r, selectors.EVENT_READ, "stop")
            while not self._stop.is_set():
                ready = selector.select(KEEPALIVE)
                if any(key.data == "stop" for key, _ in ready):
                    return
                if not ready:  # quiet: is the connection still there?
                    conn.execute("SELECT 1")
                for note in conn.notifies(timeout=0):
                    if note.channel == TABLES_CHANNEL:
                        self.db.told(note.payload, note.pid)
                    else:
                        self._take(note.payload)

    def _take(self, payload: str) -> None:
        node, _, rest = payload.partition(" ")
        number, _, event = rest.partition(" ")
        if node == self.node or event not in EVENTS or not (number.isascii() and number.isdigit()):
            return
        self.received += 1
        try:
            self.heard(int(number), event)
        except Exception:  # one notice must not stop the hearing of every later one
            log.exception("taking in %r failed", payload)


def _board(db: Database) -> Board | None:
    """The board of an SQLite database's processes; None for PostgreSQL, or when the
    board cannot be made and this process serves alone (a read-only directory: nothing it
    keeps is told to others, as before boards)."""
    if not isinstance(db, SQLite):
        return None
    try:
        return Board(board_of(db.path))
    except (OSError, FloorlessError) as exc:
        if db.shared:  # several processes, each blind to the others' changes: refused
            raise FloorlessError(f"the processes cannot tell each other of changes: {exc}") from exc
        log.warning(
            "no notice board beside %s (%s): other processes' changes are seen only"
            " by the ref checks",
            db.path,
            exc,
        )
        return None
