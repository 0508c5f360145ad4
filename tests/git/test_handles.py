"""The repository handle pool: one handle per repository for every thread, and dropped
handles really closed (pygit2 handles sit in a reference cycle, so dropping the last
reference alone leaves their pack files open until the cycle collector runs)."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

from support.gitfixtures import build_one, build_solo, git

from floorless.git.repo import HandlePool


def _open_files_below(path: Path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(path)):
                count += 1
        except OSError:
            continue
    return count


def _packed(path: Path) -> Path:
    git(path, "repack", "-adq")
    return path


def test_every_thread_gets_the_same_handle(tmp_path: Path) -> None:
    pool = HandlePool(4)
    path = build_one(tmp_path / "one.git")
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def take() -> None:
        barrier.wait()
        seen.append(pool.get(path))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(seen) == 8 and all(handle is seen[0] for handle in seen)
    assert len(pool) == 1


def test_a_dropped_handle_closes_its_pack_files(tmp_path: Path) -> None:
    gc.disable()  # only the pool's collect may run the cycle collector here
    try:
        pool = HandlePool(1)
        first = _packed(build_one(tmp_path / "first.git"))
        second = _packed(build_solo(tmp_path / "second.git"))
        handle = pool.get(first)
        handle.get(handle.head.target)  # reads the pack
        del handle
        assert _open_files_below(first) > 0
        pool.get(second)  # the pool holds one: the first is dropped
        assert len(pool) == 1
        assert _open_files_below(first) > 0  # dropped, but still in its reference cycle
        pool.collect()
        assert _open_files_below(first) == 0
    finally:
        gc.enable()


def test_a_forgotten_handle_is_reopened(tmp_path: Path) -> None:
    pool = HandlePool(4)
    path = build_one(tmp_path / "one.git")
    before = pool.get(path)
    pool.forget(path)
    assert len(pool) == 0
    assert pool.get(path) is not before
