"""The slow-storage simulator (bench/slowfs.py): a real FUSE mount in each test.

Delays are checked through the operation counts the filesystem reports, not wall-clock
time. Without FUSE the mount tests skip, except under CI, which must have it
(scripts/install-bench-deps.sh installs it).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench import slowfs

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.bench

DELAY_MS = 5


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    source, mountpoint = tmp_path / "source", tmp_path / "mnt"
    source.mkdir()
    mountpoint.mkdir()
    (source / "hello.txt").write_text("hello\n")
    (source / "sub").mkdir()
    (source / "sub" / "deep.txt").write_text("deep\n")
    return source, mountpoint


def mounted_here(mountpoint: Path) -> bool:
    target = os.fsencode(os.path.realpath(mountpoint))
    with open("/proc/self/mountinfo", "rb") as table:
        return any(line.split()[4] == target for line in table)


def settled_counts(mount: slowfs.Mount) -> dict[str, int]:
    """Counts once each close's asynchronous ``release`` has arrived (FUSE sends it after
    close(2) has returned)."""
    wait_for(lambda: mount.counts().get("release", 0) >= mount.counts().get("flush", 0))
    return mount.counts()


# Without FUSE.


def test_latency_is_fixed_or_a_seeded_uniform_draw():
    assert slowfs.Latency(30).draw() == pytest.approx(0.030)
    draws = [slowfs.Latency(jitter_ms=(20, 100), seed=7).draw() for _ in range(2)]
    assert draws[0] == draws[1]
    latency = slowfs.Latency(jitter_ms=(20, 100), seed=1)
    assert all(0.020 <= latency.draw() <= 0.100 for _ in range(200))
    assert slowfs.parse_jitter("20-100") == (20.0, 100.0)
    for bad in ("20", "100-20", "a-b", "-5-3"):
        with pytest.raises(ValueError):
            slowfs.parse_jitter(bad)


def test_cli_without_fusermount_exits_2_with_the_reason(tmp_path: Path):
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.slowfs", "mount", str(tmp_path), str(tmp_path)],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "FUSE is unavailable" in done.stderr and "fusermount3" in done.stderr


# With a real mount.


def test_files_and_directories_are_mirrored_both_ways(fuse, dirs):
    source, mnt = dirs
    with slowfs.mounted(source, mnt, delay_ms=DELAY_MS) as mount:
        assert (mnt / "hello.txt").read_text() == "hello\n"
        assert sorted(os.listdir(mnt)) == ["hello.txt", "sub"]  # .slowfs is not listed
        assert (mnt / "sub" / "deep.txt").read_text() == "deep\n"

        (mnt / "new").mkdir()
        (mnt / "new" / "written.txt").write_text("through the mount")
        assert (source / "new" / "written.txt").read_text() == "through the mount"
        (mnt / "new" / "written.txt").rename(mnt / "new" / "renamed.txt")
        os.link(mnt / "new" / "renamed.txt", mnt / "new" / "hard.txt")
        os.symlink("renamed.txt", mnt / "new" / "soft")
        assert os.readlink(mnt / "new" / "soft") == "renamed.txt"
        assert (mnt / "new" / "soft").read_text() == "through the mount"
        os.chmod(mnt / "new" / "renamed.txt", 0o600)
        os.truncate(mnt / "new" / "renamed.txt", 7)
        os.utime(mnt / "new" / "renamed.txt", ns=(1_000_000_000, 2_000_000_000))
        st = (source / "new" / "renamed.txt").stat()
        assert (st.st_mode & 0o777, st.st_size, st.st_mtime_ns, st.st_nlink) == (
            0o600, 7, 2_000_000_000, 2,
        )  # fmt: skip
        assert os.path.islink(source / "new" / "soft")

        (source / "from-source.txt").write_text("made outside")
        assert (mnt / "from-source.txt").read_text() == "made outside"  # nothing cached

        with open(mnt / "open-then-unlinked", "w+") as handle:
            handle.write("still here")
            handle.flush()
            os.unlink(mnt / "open-then-unlinked")
            handle.seek(0)
            assert handle.read() == "still here"
            assert os.fstat(handle.fileno()).st_size == 10
            assert [p.name for p in source.glob(".fuse_hidden*")] != []
        # ... and removed at the last close (release, which FUSE sends after close returns).
        wait_for(lambda: list(source.glob(".fuse_hidden*")) == [])
        for path in (mnt / "new" / "hard.txt", mnt / "new" / "soft", mnt / "new" / "renamed.txt"):
            path.unlink()
        (mnt / "new").rmdir()
        assert sorted(os.listdir(source)) == ["from-source.txt", "hello.txt", "sub"]
        assert os.statvfs(mnt).f_bsize > 0
        assert os.access(mnt / "hello.txt", os.R_OK)
        assert mount.counts()["rmdir"] == 1
    assert not mounted_here(mnt)


def git(*args: str, cwd: Path, home: Path, input: bytes | None = None) -> str:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com",
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_NAME": "A",
        "GIT_COMMITTER_EMAIL": "a@example.com", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
    }  # fmt: skip
    done = subprocess.run(["git", *args], cwd=cwd, env=env, input=input, capture_output=True,
                          check=True, timeout=120)  # fmt: skip
    return done.stdout.decode().strip()


def test_git_works_on_the_mount(fuse, dirs, tmp_path):
    source, mnt = dirs
    home = tmp_path / "githome"
    home.mkdir()
    with slowfs.mounted(source, mnt, delay_ms=0) as mount:
        git("init", "-q", "--bare", "repo.git", cwd=mnt, home=home)
        repo = mnt / "repo.git"
        blob = git("hash-object", "-w", "--stdin", cwd=repo, home=home, input=b"content\n")
        tree = git("mktree", cwd=repo, home=home, input=f"100644 blob {blob}\tfile.txt\n".encode())
        commit = git("commit-tree", tree, "-m", "first", cwd=repo, home=home)
        git("update-ref", "refs/heads/main", commit, cwd=repo, home=home)  # lock + rename
        git("symbolic-ref", "HEAD", "refs/heads/main", cwd=repo, home=home)
        git("gc", "-q", "--prune=now", cwd=repo, home=home)  # packs, unlinks, renames
        assert git("cat-file", "-p", "HEAD:file.txt", cwd=repo, home=home) == "content"
        assert git("fsck", "--strict", cwd=repo, home=home) == ""
        assert {"create", "rename", "unlink", "write"} <= mount.counts().keys()
    # The same repository, read from the source directory: everything went through.
    direct = source / "repo.git"
    assert git("rev-parse", "main", cwd=direct, home=home) == commit
    assert git("log", "--format=%s", cwd=direct, home=home) == "first"
    assert list((direct / "objects" / "pack").glob("*.pack"))


def test_operations_are_counted_and_the_stats_file_is_not(fuse, dirs):
    source, mnt = dirs
    with slowfs.mounted(source, mnt, delay_ms=DELAY_MS) as mount:
        settled_counts(mount)
        mount.reset()
        assert mount.counts() == {} and mount.total() == 0
        assert mount.counts() == {}  # reading the stats file costs nothing

        assert (mnt / "hello.txt").read_bytes() == b"hello\n"
        counts = settled_counts(mount)
        assert counts["open"] == 1 and counts["read"] >= 1 and counts["getattr"] >= 1
        assert counts["flush"] == 1 and counts["release"] == 1
        assert mount.counts() == counts and mount.total() == sum(counts.values())

        # The command line reads the same counters, through the same file.
        shown = subprocess.run(
            [sys.executable, "-m", "bench.slowfs", "stats", str(mnt)],
            cwd=ROOT, capture_output=True, check=True, timeout=60,
        )  # fmt: skip
        assert json.loads(shown.stdout) == counts

        # Every operation waits its delay, one after another for one caller: a lower bound.
        mount.reset()
        started = time.monotonic()
        for _ in range(10):
            os.stat(mnt / "hello.txt")
        elapsed = time.monotonic() - started
        assert mount.counts()["getattr"] >= 10
        assert elapsed >= mount.counts()["getattr"] * DELAY_MS / 1000

        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "missing")
        assert mount.counts()["getattr"] >= 11  # a miss costs a round-trip too


def test_operations_are_told_apart_by_calling_thread(fuse, dirs):
    """A request thread's operations count as a request's; floorless's background threads'
    (named by floorless.core.background) do not."""
    from floorless.core import background

    assert slowfs.BACKGROUND_PREFIX == background.PREFIX
    source, mnt = dirs
    with slowfs.mounted(source, mnt, delay_ms=0) as mount:
        settled_counts(mount)
        mount.reset()
        for _ in range(3):
            os.stat(mnt / "hello.txt")
        done = threading.Event()

        def ref_check() -> None:
            for _ in range(5):
                os.stat(mnt / "hello.txt")
            done.set()
            time.sleep(1)  # alive while the benchmark looks at its name

        background.start(ref_check, "maintain")
        assert done.wait(30)
        served = threading.Event()
        requester: list[int] = []

        def request() -> None:  # named as floorless's request threads are
            background.name_this_thread("fl-request")
            requester.append(threading.get_native_id())
            os.stat(mnt / "sub" / "deep.txt")
            served.set()
            time.sleep(1)

        threading.Thread(target=request).start()
        assert served.wait(30)
        for starter in ("fl-bg-index", "fl-request_0"):  # a child (git) of each, told apart
            environ = {"PATH": os.environ["PATH"], "FLOORLESS_THREAD": starter}
            subprocess.run(["stat", str(mnt / "hello.txt")], env=environ, check=True,
                           capture_output=True)  # fmt: skip
        callers = mount.callers()
        assert sum(callers.values()) == mount.total() >= 10
        me = threading.get_native_id()
        assert me in callers
        theirs = callers[requester[0]]
        assert theirs >= 2  # the lookups of sub and deep.txt
        names = slowfs.read_names(mnt)
        (child,) = [tid for tid, name in names.items() if name == "stat from fl-request_0"]
        assert any(name == "stat from fl-bg-index" for name in names.values())
        assert slowfs.request_ops(mount) == callers[me] + theirs + callers[child]
        mine = Path(f"/proc/self/task/{me}/comm").read_text().strip()
        assert slowfs.request_ops_by_thread(mount) == {
            mine: callers[me],
            "fl-request": theirs,
            "stat from fl-request_0": callers[child],
        }
        assert callers[me] >= 3


@pytest.mark.parametrize("cache_seconds", [0.0, 60.0])
def test_attribute_cache_decides_how_many_stats_reach_the_filesystem(fuse, dirs, cache_seconds):
    source, mnt = dirs
    with slowfs.mounted(source, mnt, delay_ms=DELAY_MS, cache_seconds=cache_seconds) as mount:
        os.stat(mnt / "sub" / "deep.txt")
        mount.reset()
        for _ in range(5):
            os.stat(mnt / "sub" / "deep.txt")
        getattrs = mount.counts().get("getattr", 0)
    if cache_seconds == 0:
        assert getattrs >= 5  # every stat asks (lookups and attributes), as NFS with actimeo=0
    else:
        assert getattrs == 0  # all five answered from the kernel's cache


def test_the_mount_is_removed_when_the_body_raises(fuse, dirs):
    source, mnt = dirs
    with pytest.raises(RuntimeError, match="boom"), slowfs.mounted(source, mnt, delay_ms=0) as m:
        assert mounted_here(mnt)
        raise RuntimeError("boom")
    assert not mounted_here(mnt)
    assert m.process is not None and m.process.returncode is not None


def test_a_busy_mount_is_still_removed(fuse, dirs):
    source, mnt = dirs
    with slowfs.mounted(source, mnt, delay_ms=0) as m:
        busy = os.open(mnt / "hello.txt", os.O_RDONLY)  # fusermount3 -u fails: EBUSY
    try:
        assert not mounted_here(mnt)  # detached lazily
        assert m.process is not None and m.process.returncode is not None
    finally:
        with pytest.raises(OSError) as gone:
            os.close(busy)  # the descriptor is closed; its flush found no server
        assert gone.value.errno == errno.ENOTCONN


def test_cleanup_stale_removes_the_mount_of_a_killed_server(fuse, dirs):
    source, mnt = dirs
    with slowfs.mounted(source, mnt, delay_ms=0) as m:
        assert m.process is not None
        m.process.kill()  # SIGKILL: libfuse cannot unmount
        m.process.wait(timeout=10)
        with pytest.raises(OSError) as dead:
            os.stat(mnt)
        assert dead.value.errno == errno.ENOTCONN
        assert slowfs.cleanup_stale(mnt) is True
        assert not mounted_here(mnt)
        assert slowfs.cleanup_stale(mnt) is False
    assert not mounted_here(mnt)


def test_cli_mounts_in_the_background_and_unmounts(fuse, dirs):
    source, mnt = dirs

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bench.slowfs", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    started = cli("mount", str(source), str(mnt), "--delay-ms", "0", "--jitter", "1-2")
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == str(mnt.resolve())
        assert (mnt / "hello.txt").read_text() == "hello\n"
        assert cli("stats", str(mnt), "--reset").returncode == 0
    finally:
        stopped = cli("unmount", str(mnt))
    assert stopped.returncode == 0, stopped.stderr
    assert not mounted_here(mnt)
    assert cli("unmount", str(mnt)).returncode == 1  # nothing left to unmount
