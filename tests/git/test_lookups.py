"""A tree entry looked up by name leaves nothing behind, however often it is asked for:
pygit2's lookup keeps a reference to the name it is given, so a name decoded afresh for each
lookup (every page's path, the index's) was kept for good (``git/objects.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pygit2
import pytest

from floorless.git.objects import child, entry_at

pytestmark = pytest.mark.unit


def _tree(path: Path) -> pygit2.Tree:
    repo = pygit2.init_repository(str(path), bare=True)
    builder = repo.TreeBuilder()
    builder.insert("name.txt", repo.create_blob(b"x\n"), pygit2.GIT_FILEMODE_BLOB)
    builder.insert("caf\xe9", repo.create_blob(b"y\n"), pygit2.GIT_FILEMODE_BLOB)
    tree = repo[builder.write()]
    assert isinstance(tree, pygit2.Tree)
    return tree


def test_thousands_of_lookups_of_one_name_keep_no_string(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "r.git")
    name = b"name.txt"
    assert child(tree, name) is not None and child(tree, b"missing") is None
    before = sys.getallocatedblocks()
    for _ in range(3_000):
        found = child(tree, bytes(bytearray(name)))  # a new bytes object, a new name each time
        assert found is not None and found.raw_name == name
        assert child(tree, b"missing") is None
        entry_at(tree, "name" + ".txt".lower())
    assert sys.getallocatedblocks() - before < 300  # (pygit2 alone: one string a lookup)


def test_a_name_is_matched_on_its_exact_bytes(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "r.git")
    found = child(tree, "café".encode())
    assert found is not None and found.raw_name == "café".encode()
    assert child(tree, b"caf\xe9") is None  # the same letters in Latin-1 name nothing here
