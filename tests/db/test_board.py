"""The notice board processes sharing an SQLite database post their changes on (``board.py``):
what one posts another reads, its own is skipped, a reader left too far behind is told it
lost some, and a board another user could write to is refused."""

from __future__ import annotations

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


def test_a_board_of_another_version_or_open_to_others_is_not_used_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "b.board"
    Board(path).post(1, 2, 3)
    with path.open("r+b") as raw:
        raw.write(b"oldboard")
    assert Board(path).count() == 0  # begun anew
    path.chmod(0o666)
    with pytest.raises(FloorlessError, match="open to others"):
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
