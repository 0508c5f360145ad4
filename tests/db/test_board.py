"""The notice board processes sharing an SQLite database post their changes on (``board.py``):
what one posts another reads, its own is skipped, a reader left too far behind is told it
lost some, and a board another user could write to is refused."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from floorless.core.errors import FloorlessError
from floorless.db import board as boards
from floorless.db.board import SLOTS, Board
from floorless.db.notices import Notices
from floorless.db.store import SQLite


def test_what_one_process_posts_another_reads(tmp_path: Path) -> None:
    path = tmp_path / "b.board"
    first = Board(path)
    seen = first.count()
    pid = os.fork()
    if pid == 0:  # another process: its own mapping of the same file
        try:
            other = Board(path)
            other.post(7, 42, 1)
            other.post(7, 43, 2)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert first.count() == seen + 2
    assert first.since(seen) == ([(7, 42, 1), (7, 43, 2)], seen + 2, False)
    assert first.since(seen + 2) == ([], seen + 2, False)


def test_a_reader_left_more_than_the_ring_behind_is_told_it_lost_some(tmp_path: Path) -> None:
    board = Board(tmp_path / "b.board")
    for n in range(SLOTS + 1):
        board.post(1, n, 1)
    notices, posted, lost = board.since(0)
    assert (notices, posted, lost) == ([], SLOTS + 1, True)
    notices, _, lost = board.since(1)  # exactly the ring: every one still there
    assert not lost and [repo for _, repo, _ in notices] == list(range(1, SLOTS + 1))


def test_a_board_of_another_version_or_that_others_may_write_is_not_used_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "b.board"
    Board(path).post(1, 2, 3)
    with path.open("r+b") as raw:
        raw.write(b"oldboard")
    assert Board(path).count() == 0  # begun anew
    path.chmod(0o644)  # others may read it: nothing to fear
    Board(path)
    path.chmod(0o666)
    with pytest.raises(FloorlessError, match="others may write"):
        Board(path)
    link = tmp_path / "link.board"
    link.symlink_to(path)
    with pytest.raises(OSError):
        Board(link)


def test_a_board_lies_beside_its_database_and_one_is_made_for_each(tmp_path: Path) -> None:
    assert boards.board_of(tmp_path / "f.sqlite3") == tmp_path / "f.sqlite3-board"
    db = SQLite(tmp_path / "f.sqlite3")
    notices = Notices(db, "node-a", lambda repo, event: None)
    assert notices.board is not None and notices.board.path == tmp_path / "f.sqlite3-board"
    assert notices.shared  # a process alone still posts: a command line may be beside it


def test_a_board_that_cannot_be_made_is_refused_only_where_processes_need_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.sqlite3-board").mkdir()  # not a file: no board can be made there
    db = SQLite(tmp_path / "f.sqlite3")
    assert Notices(db, "alone", lambda repo, event: None).board is None
    db.shared = True  # several processes: each would be blind to the others' pushes
    with pytest.raises(FloorlessError, match="cannot tell each other"):
        Notices(db, "one of several", lambda repo, event: None)


def test_a_node_hears_the_others_notices_once_and_never_its_own(tmp_path: Path) -> None:
    heard: dict[str, list[tuple[int, str]]] = {"a": [], "b": []}
    nodes = {}
    for name in ("a", "b"):
        db = SQLite(tmp_path / "f.sqlite3")
        take = heard[name].append
        nodes[name] = Notices(db, f"node-{name}", lambda r, e, t=take: t((r, e)))
    lost: list[str] = []
    nodes["b"].on_listening = lambda: lost.append("b")
    nodes["a"].send(5, "moved")
    nodes["a"].send(6, "gone")
    nodes["a"].catch_up()
    nodes["b"].catch_up()
    nodes["b"].catch_up()
    assert heard == {"a": [], "b": [(5, "moved"), (6, "gone")]}
    for n in range(SLOTS + 1):  # b falls behind the ring: it forgets everything instead
        nodes["a"].send(n, "indexed")
    nodes["b"].catch_up()
    assert lost == ["b"] and len(heard["b"]) == 2
    nodes["a"].send(9, "indexed")
    nodes["b"].catch_up()
    assert heard["b"][-1] == (9, "indexed")


def _two_nodes(tmp_path: Path) -> tuple[dict[str, Notices], dict[str, list[tuple[int, str]]]]:
    heard: dict[str, list[tuple[int, str]]] = {"a": [], "b": []}
    nodes = {}
    for name in ("a", "b"):
        take = heard[name].append
        db = SQLite(tmp_path / "f.sqlite3")
        nodes[name] = Notices(db, f"node-{name}", lambda r, e, t=take: t((r, e)))
    return nodes, heard


def test_a_thread_finds_nothing_new_only_once_the_notices_are_taken_in(tmp_path: Path) -> None:
    """While one thread takes notices in, another that looks must not find the board read
    and go on with memory the notices were about to let go of."""
    nodes, _ = _two_nodes(tmp_path)
    b = nodes["b"]
    seen_meanwhile: list[bool] = []
    b.heard = lambda repo, event: seen_meanwhile.append(b.board.count() == b._seen)
    nodes["a"].send(1, "moved")
    b.catch_up()
    assert seen_meanwhile == [False]  # an other thread would have waited for the lock
    assert b.board.count() == b._seen


def test_a_board_removed_and_made_anew_is_followed(tmp_path: Path) -> None:
    nodes, heard = _two_nodes(tmp_path)
    forgotten: list[str] = []
    nodes["b"].on_listening = lambda: forgotten.append("b")
    (tmp_path / "f.sqlite3-board").unlink()  # a process started since makes another
    newcomer = Notices(SQLite(tmp_path / "f.sqlite3"), "node-c", lambda r, e: None)
    newcomer.send(3, "moved")
    nodes["b"].catch_up()
    assert heard["b"] == []  # still on the old board: nothing
    nodes["b"]._same_board()  # its look at the board's file finds another there
    assert forgotten == ["b"]  # what was posted before is lost to it: everything read again
    newcomer.send(4, "gone")
    nodes["b"].catch_up()
    assert heard["b"] == [(4, "gone")]


def test_a_database_given_through_a_link_has_its_board_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link.sqlite3").symlink_to(tmp_path / "real" / "f.sqlite3")
    assert boards.board_of(tmp_path / "link.sqlite3") == tmp_path / "real" / "f.sqlite3-board"


def test_a_board_held_by_a_stopped_process_costs_a_notice_not_a_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, heard = _two_nodes(tmp_path)
    nodes["a"].send(1, "moved")
    monkeypatch.setattr(boards, "POST_WAIT", 0.05)
    holder = os.open(tmp_path / "f.sqlite3-board", os.O_RDWR)  # another open file: its lock
    try:  # conflicts with every node's
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(FloorlessError, match="held by another process"):
            nodes["a"].send(2, "moved")
        nodes["b"].catch_up()  # cannot read now: returns, and reads at its next look
        assert heard["b"] == []
    finally:
        os.close(holder)
    nodes["b"].catch_up()
    assert heard["b"] == [(1, "moved")]
