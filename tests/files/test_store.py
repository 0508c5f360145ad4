"""The content store: files kept once by their SHA-256, written whole or not at all."""

from __future__ import annotations

import hashlib
import io
import os
import time
from pathlib import Path

import pytest

from floorless.core.errors import TooLarge
from floorless.files.attachments import allowed, clean_name
from floorless.files.store import PART_AGE, Mismatch, Store, Truncated

pytestmark = pytest.mark.unit


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "storage")
    store.prepare()
    return store


def _parts(store: Store) -> list[Path]:
    return list(store.tmp.iterdir())


def test_a_file_is_kept_once_by_its_hash(tmp_path: Path) -> None:
    store = _store(tmp_path)
    data = b"build output\n" * 100_000
    oid = hashlib.sha256(data).hexdigest()
    first = store.write(io.BytesIO(data).read, limit=0)
    second = store.write(io.BytesIO(data).read, limit=0, size=len(data), oid=oid)
    assert (first.oid, first.size, first.new) == (oid, len(data), True)
    assert (second.oid, second.new) == (oid, False)
    assert store.path(oid).read_bytes() == data
    assert list(store.every()) == [oid]
    assert _parts(store) == []


@pytest.mark.parametrize(
    ("body", "size", "oid", "error"),
    [
        (b"x" * 10, 20, None, Truncated),  # cut short
        (b"x" * 30, 20, None, Mismatch),  # more than announced
        (b"x" * 20, 20, "0" * 64, Mismatch),  # not the announced bytes
        (b"x" * 200, None, None, TooLarge),  # over the limit, size not announced
        (b"x" * 20, 200, None, TooLarge),  # announced over the limit
    ],
)
def test_a_bad_upload_leaves_nothing(
    tmp_path: Path, body: bytes, size: int | None, oid: str | None, error: type[Exception]
) -> None:
    store = _store(tmp_path)
    with pytest.raises(error):
        store.write(io.BytesIO(body).read, limit=100, size=size, oid=oid)
    assert list(store.every()) == []
    assert _parts(store) == []


def test_a_start_sweeps_what_a_killed_upload_left(tmp_path: Path) -> None:
    """Once a day old; a younger part file may be a running upload's (another process's
    start, a ``floorless admin`` command's, prepares the store too)."""
    store = _store(tmp_path)
    (store.tmp / "abc.part").write_bytes(b"half")
    (store.tmp / "young.part").write_bytes(b"being written")
    old = time.time() - PART_AGE - 60
    os.utime(store.tmp / "abc.part", (old, old))
    store.prepare()
    assert [p.name for p in _parts(store)] == ["young.part"]


def test_an_id_that_is_no_hash_reaches_no_path(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.size("../../etc/passwd") is None
    assert store.size("A" * 64) is None
    assert store.remove("..") is False


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\x\\build.zip", "build.zip"),
        ("a\x00b\nc.txt", "abc.txt"),
        ("x" * 300 + ".tar.gz", "x" * 252 + ".gz"),  # cut to 255, its ending kept
    ],
)
def test_names_lose_their_directories_and_control_characters(given: str, kept: str) -> None:
    assert clean_name(given) == kept


def test_allowed_types() -> None:
    assert allowed((), "anything.exe")
    assert allowed((".zip", "image/*"), "build.ZIP")
    assert allowed((".zip", "image/*"), "logo.png")
    assert not allowed((".zip", "image/*"), "tool.exe")
    assert allowed(("application/gzip",), "src.tar.gz")
