"""A FUSE passthrough filesystem that behaves like slow network or host-shared storage.

DESIGN.md's failure is git's HOME on a share where every file syscall costs 20-100 ms.
This module reproduces that on one machine: it mirrors a SOURCE directory at a MOUNTPOINT
and sleeps before serving each operation, so every syscall that reaches it pays a
round-trip, and it counts what it served so a benchmark can report operations per page.

How it is built
---------------
- libfuse3 (Debian's ``fuse3``) through the ctypes binding ``mfusepy``, high-level API,
  multi-threaded: operations overlap in their delays as requests to a server would. The
  binding is imported only inside the serving process (``serve``), with
  ``FUSE_LIBRARY_NAME=fuse3`` set first, so the benchmark process never loads libfuse.
- Each operation that reaches the filesystem -- metadata (getattr, which libfuse also uses
  for the kernel's lookups, access, readdir, readlink, statfs), open/read, and the write side
  (create, write, truncate, rename, unlink, ...) including flush/release/fsync -- is counted
  under its FUSE name, then delayed by ``delay_ms`` or by a uniform draw from ``jitter_ms``
  (seeded). A failed operation (a lookup answering ENOENT) costs and counts as well.
- Caching is the kernel's, set by the mount options ``entry_timeout`` and ``attr_timeout``
  (= ``cache_seconds``) and ``negative_timeout`` (= ``negative_cache_seconds``). 0 caches
  nothing, as a network filesystem mounted without attribute caching; 1.0 is virtiofs's
  default (``cache=auto``: 1 s entry and attribute timeouts, misses not cached).
- File contents: ``kernel_cache``/``auto_cache`` are never set, so libfuse opens every file
  with ``keep_cache=0`` and the kernel drops the file's page cache at each open: every open
  reaches the filesystem and the first read after it does too; reads within one open may be
  served from the page cache and grouped by readahead (NFS's close-to-open consistency).
  Files are never opened ``direct_io``: on this kernel FUSE then refuses shared mmaps, which
  libgit2 uses for pack files and packed-refs, while NFS and virtiofs allow them.
- A file unlinked while open is renamed to ``.fuse_hidden*`` in the source directory until
  its last close (libfuse's default; its ``hard_remove`` would make ``fstat`` of such a
  file fail with ESTALE, since the kernel asks for its attributes by path, not handle).
- Counters are read without perturbing them through a virtual directory
  ``MOUNTPOINT/.slowfs/`` (not listed in the root, never delayed, never counted):
  reading ``stats`` returns the counts as JSON, ``callers`` the counts by the calling thread's
  id (the kernel names the thread that made each request: a benchmark can tell a server's
  request threads from its background ones), ``names`` each caller's name as it was when
  first seen, with the floorless thread that started it for a child process such as git;
  writing ``reset`` to ``control`` zeroes the counts.

Processes: ``mounted()`` starts ``python -m bench.slowfs serve ...`` as a child in its own
session (a terminal's Ctrl-C reaches only the benchmark, which then unmounts), waits for the
mount to appear in /proc/self/mountinfo, and always unmounts: ``fusermount3 -u``, then
``-uz`` and killing the child. The child also asks the kernel for SIGTERM when its parent
dies, on which libfuse unmounts. ``cleanup_stale()`` removes a mount left by a crash.

CLI::

    python -m bench.slowfs serve SOURCE MOUNTPOINT [--delay-ms 30] [--jitter 20-100]
                                 [--cache-seconds 0] [--negative-cache-seconds 0] [--seed 0]
    python -m bench.slowfs mount   SOURCE MOUNTPOINT [same options]   # background
    python -m bench.slowfs unmount MOUNTPOINT
    python -m bench.slowfs cleanup MOUNTPOINT
    python -m bench.slowfs stats   MOUNTPOINT [--reset]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import errno
import importlib
import importlib.util
import json
import logging
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

CONTROL_DIR = ".slowfs"
BACKGROUND_PREFIX = "fl-bg-"  # floorless.core.background.PREFIX; bench/ does not import floorless
FSNAME = "slowfs"
MOUNT_TIMEOUT = 20.0
UNMOUNT_TIMEOUT = 10.0
_POLL_SECONDS = 0.005
# Requests served at once (libfuse's default is 10): enough that concurrent clients queue
# on the latency, not on the server.
MAX_THREADS = 64
_REPO_ROOT = Path(__file__).resolve().parents[1]
# Sentinels libfuse passes (tv_sec = 0) for "now" and "leave unchanged" in utimens.
_UTIME_NOW = (1 << 30) - 1
_UTIME_OMIT = (1 << 30) - 2
# Handles of the virtual files, well above any real file descriptor.
_VIRTUAL_HANDLE_BASE = 1 << 40
_PR_SET_PDEATHSIG = 1
_FUSE_MAIN_SIGNALLED = 8


class SlowFSError(RuntimeError):
    """A mount could not be started, or a mount point could not be unmounted."""


# --- latency -----------------------------------------------------------------------------


class Latency:
    """The delay before each operation: fixed, or uniform in a range from a seeded draw."""

    def __init__(
        self, delay_ms: float = 30.0, jitter_ms: tuple[float, float] | None = None, seed: int = 0
    ) -> None:
        if delay_ms < 0:
            raise ValueError(f"delay must be >= 0 ms, not {delay_ms}")
        if jitter_ms is not None and not 0 <= jitter_ms[0] <= jitter_ms[1]:
            raise ValueError(f"jitter must be LOW-HIGH with 0 <= LOW <= HIGH, not {jitter_ms}")
        self.delay_ms = delay_ms
        self.jitter_ms = jitter_ms
        self._random = random.Random(seed)

    def draw(self) -> float:
        """Seconds to sleep before the next operation (callers serialise draws)."""
        if self.jitter_ms is None:
            return self.delay_ms / 1000.0
        low, high = self.jitter_ms
        return self._random.uniform(low, high) / 1000.0


def parse_jitter(text: str) -> tuple[float, float]:
    """``"20-100"`` -> ``(20.0, 100.0)``."""
    low, sep, high = text.partition("-")
    try:
        if not sep:
            raise ValueError(text)
        pair = (float(low), float(high))
    except ValueError:
        raise ValueError(f"jitter must look like 20-100 (milliseconds), not {text!r}") from None
    Latency(jitter_ms=pair)  # validates the range
    return pair


# --- the filesystem (runs inside the serving process) ------------------------------------


class FileInfo(Protocol):
    """The fields of libfuse's ``struct fuse_file_info`` this filesystem uses."""

    fh: int
    flags: int
    direct_io: int


def _oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


_STAT_FIELDS = (
    "st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size", "st_rdev",
    "st_blksize", "st_blocks",
)  # fmt: skip


def _stat_dict(st: os.stat_result) -> dict[str, int]:
    attrs = {name: int(getattr(st, name)) for name in _STAT_FIELDS}
    attrs["st_atime"] = st.st_atime_ns
    attrs["st_mtime"] = st.st_mtime_ns
    attrs["st_ctime"] = st.st_ctime_ns
    return attrs


def _dirent_mode(entry: os.DirEntry[str]) -> int:
    """The file type from readdir's d_type, without a stat."""
    if entry.is_symlink():
        return stat.S_IFLNK
    if entry.is_dir(follow_symlinks=False):
        return stat.S_IFDIR
    if entry.is_file(follow_symlinks=False):
        return stat.S_IFREG
    return 0


@dataclass
class _VirtualFile:
    name: str  # "stats", "callers", "names" or "control"
    content: bytearray


class SlowFS:
    """mfusepy operations: a delayed, counted passthrough of ``source``.

    Operations raise ``OSError`` (mfusepy answers ``-errno``). With ``raw_fi`` the file
    operations receive libfuse's ``fuse_file_info``; ``fi.fh`` holds the source file's
    descriptor, or a virtual handle for ``.slowfs/stats`` and ``.slowfs/control``.
    """

    use_ns = True  # mfusepy: times are integer nanoseconds

    def __init__(
        self,
        source: Path,
        latency: Latency,
        *,
        direct_io: bool,
        caller: Callable[[], tuple[int, int, int]] | None = None,
    ) -> None:
        self.root = str(source.resolve()).rstrip("/")
        self.latency = latency
        self.direct_io = direct_io
        self._caller = caller
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._callers: Counter[int] = Counter()  # by thread id; 0 when the kernel names none
        self._names: dict[int, str] = {}  # each caller's name, read when it is first seen
        self._virtual: dict[int, _VirtualFile] = {}
        self._next_handle = _VIRTUAL_HANDLE_BASE
        self._started_ns = time.time_ns()

    # Counting, delaying, paths.

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))

    def callers(self) -> dict[int, int]:
        with self._lock:
            return dict(sorted(self._callers.items()))

    def names(self) -> dict[int, str]:
        with self._lock:
            return dict(sorted(self._names.items()))

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._callers.clear()

    def _serve(self, op: str) -> None:
        tid = self._caller()[2] if self._caller is not None else 0
        name = None if tid == 0 or tid in self._names else caller_name(tid)
        with self._lock:
            self._counts[op] += 1
            self._callers[tid] += 1
            if name is not None:
                self._names[tid] = name
            delay = self.latency.draw()
        if delay > 0:
            time.sleep(delay)

    def _full(self, path: str | None) -> str:
        if path is None:  # libfuse could not name the file (unlinked meanwhile)
            raise _oserror(errno.ENOENT)
        return self.root + path

    @staticmethod
    def _is_virtual(path: str | None) -> bool:
        return path is not None and (
            path == "/" + CONTROL_DIR or path.startswith("/" + CONTROL_DIR + "/")
        )

    def _refuse_virtual(self, *paths: str | None) -> None:
        if any(self._is_virtual(p) for p in paths):
            raise _oserror(errno.EPERM)

    def _own(self, full: str) -> None:
        """Give a new entry to the calling user, as a kernel filesystem would (root only)."""
        if self._caller is None or os.geteuid() != 0:
            return
        uid, gid, _pid = self._caller()
        if uid != 0:
            os.lchown(full, uid, gid)

    # The virtual control directory.

    def _virtual_attrs(self, path: str) -> dict[str, int]:
        name = path[len(CONTROL_DIR) + 2 :]
        if name == "":
            mode, size = stat.S_IFDIR | 0o755, 0
        elif name in ("stats", "callers", "names"):
            mode, size = stat.S_IFREG | 0o444, len(self._stats_bytes(name))
        elif name == "control":
            mode, size = stat.S_IFREG | 0o644, 0
        else:
            raise _oserror(errno.ENOENT)
        now = self._started_ns
        nlink = 2 if stat.S_ISDIR(mode) else 1
        return {
            "st_mode": mode, "st_nlink": nlink, "st_size": size, "st_uid": os.geteuid(),
            "st_gid": os.getegid(), "st_atime": now, "st_mtime": now, "st_ctime": now,
        }  # fmt: skip

    def _stats_bytes(self, name: str = "stats") -> bytes:
        tables: dict[str, Callable[[], Mapping[Any, Any]]] = {
            "stats": self.counts,
            "callers": self.callers,
            "names": self.names,
        }
        table = tables[name]()
        return (json.dumps(table, sort_keys=True) + "\n").encode()

    def _open_virtual(self, path: str, fi: FileInfo) -> int:
        name = path[len(CONTROL_DIR) + 2 :]
        if name not in ("stats", "callers", "names", "control"):
            raise _oserror(errno.EISDIR if name == "" else errno.ENOENT)
        writing = fi.flags & os.O_ACCMODE != os.O_RDONLY
        if (name != "control") == writing:
            raise _oserror(errno.EACCES)
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
        content = bytearray(self._stats_bytes(name) if name != "control" else b"")
        self._virtual[handle] = _VirtualFile(name, content)
        fi.fh = handle
        fi.direct_io = 1  # size-less content: reads must not be cut at st_size
        return 0

    def _control(self, command: bytes) -> None:
        if command.strip() == b"reset":
            self.reset()
        else:
            raise _oserror(errno.EINVAL)

    # Metadata.

    def getattr(self, path: str | None, fi: FileInfo | None = None) -> dict[str, int]:
        if fi is not None and fi.fh in self._virtual:
            return self._virtual_attrs(f"/{CONTROL_DIR}/{self._virtual[fi.fh].name}")
        if path is not None and self._is_virtual(path):
            return self._virtual_attrs(path)
        self._serve("getattr")
        if fi is not None:
            return _stat_dict(os.fstat(fi.fh))
        return _stat_dict(os.lstat(self._full(path)))

    def access(self, path: str, amode: int) -> int:
        if self._is_virtual(path):
            return 0
        self._serve("access")
        if not os.access(self._full(path), amode):
            raise _oserror(errno.EACCES)
        return 0

    def opendir(self, path: str) -> int:
        if self._is_virtual(path):
            return 0
        self._serve("opendir")
        if not stat.S_ISDIR(os.stat(self._full(path)).st_mode):
            raise _oserror(errno.ENOTDIR)
        return 0

    def readdir(self, path: str | None, fh: int) -> list[tuple[str, dict[str, int], int]]:
        entries: list[tuple[str, dict[str, int], int]] = [
            (".", {"st_mode": stat.S_IFDIR}, 0),
            ("..", {"st_mode": stat.S_IFDIR}, 0),
        ]
        if self._is_virtual(path):
            regular = {"st_mode": stat.S_IFREG}
            virtual = ("stats", "callers", "names", "control")
            return [*entries, *((n, regular, 0) for n in virtual)]
        self._serve("readdir")
        with os.scandir(self._full(path)) as it:
            entries.extend((e.name, {"st_mode": _dirent_mode(e)}, 0) for e in it)
        return entries

    def releasedir(self, path: str | None, fh: int) -> int:
        if not self._is_virtual(path):
            self._serve("releasedir")
        return 0

    def readlink(self, path: str) -> str:
        self._serve("readlink")
        return os.readlink(self._full(path))

    def statfs(self, path: str) -> dict[str, int]:
        if not self._is_virtual(path):
            self._serve("statfs")
        st = os.statvfs(self.root or "/")
        names = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
                 "f_favail", "f_flag", "f_namemax")  # fmt: skip
        return {name: int(getattr(st, name)) for name in names}

    # Files.

    def open(self, path: str, fi: FileInfo) -> int:
        if self._is_virtual(path):
            return self._open_virtual(path, fi)
        self._serve("open")
        fi.fh = os.open(self._full(path), fi.flags)
        if self.direct_io:
            fi.direct_io = 1
        return 0

    def create(self, path: str, mode: int, fi: FileInfo) -> int:
        self._refuse_virtual(path)
        self._serve("create")
        full = self._full(path)
        fi.fh = os.open(full, fi.flags | os.O_CREAT, mode)
        self._own(full)
        if self.direct_io:
            fi.direct_io = 1
        return 0

    def read(self, path: str | None, size: int, offset: int, fi: FileInfo) -> bytes:
        virtual = self._virtual.get(fi.fh)
        if virtual is not None:
            return bytes(virtual.content[offset : offset + size])
        self._serve("read")
        return os.pread(fi.fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fi: FileInfo) -> int:
        virtual = self._virtual.get(fi.fh)
        if virtual is not None:
            virtual.content[offset : offset + len(data)] = data
            return len(data)
        self._serve("write")
        return os.pwrite(fi.fh, data, offset)

    def truncate(self, path: str | None, length: int, fi: FileInfo | None = None) -> int:
        if (fi is not None and fi.fh in self._virtual) or self._is_virtual(path):
            return 0  # "> control" truncates before writing
        self._serve("truncate")
        if fi is not None:
            os.ftruncate(fi.fh, length)
        else:
            os.truncate(self._full(path), length)
        return 0

    def flush(self, path: str | None, fi: FileInfo) -> int:
        virtual = self._virtual.get(fi.fh)
        if virtual is not None:
            # close(2) waits for flush (release is asynchronous): a command written to
            # control has taken effect when the writer's close returns.
            if virtual.name == "control" and virtual.content:
                self._control(bytes(virtual.content))
                virtual.content.clear()
            return 0
        self._serve("flush")
        os.close(os.dup(fi.fh))  # what close(2) would report to this opener
        return 0

    def release(self, path: str | None, fi: FileInfo) -> int:
        if self._virtual.pop(fi.fh, None) is not None:
            return 0
        self._serve("release")
        os.close(fi.fh)
        return 0

    def fsync(self, path: str | None, datasync: int, fi: FileInfo) -> int:
        if fi.fh in self._virtual:
            return 0
        self._serve("fsync")
        if datasync:
            os.fdatasync(fi.fh)
        else:
            os.fsync(fi.fh)
        return 0

    # Namespace and attributes.

    def mkdir(self, path: str, mode: int) -> int:
        self._refuse_virtual(path)
        self._serve("mkdir")
        full = self._full(path)
        os.mkdir(full, mode)
        self._own(full)
        return 0

    def rmdir(self, path: str) -> int:
        self._refuse_virtual(path)
        self._serve("rmdir")
        os.rmdir(self._full(path))
        return 0

    def unlink(self, path: str) -> int:
        self._refuse_virtual(path)
        self._serve("unlink")
        os.unlink(self._full(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        self._refuse_virtual(old, new)
        self._serve("rename")
        os.rename(self._full(old), self._full(new))
        return 0

    def link(self, target: str, source: str) -> int:
        """Hard link: the new name ``target`` for the existing ``source`` (mfusepy's order)."""
        self._refuse_virtual(target, source)
        self._serve("link")
        os.link(self._full(source), self._full(target))
        return 0

    def symlink(self, target: str, source: str) -> int:
        """Symlink: the new name ``target`` holding the text ``source`` (mfusepy's order)."""
        self._refuse_virtual(target)
        self._serve("symlink")
        full = self._full(target)
        os.symlink(source, full)
        self._own(full)
        return 0

    def chmod(self, path: str | None, mode: int) -> int:
        self._refuse_virtual(path)
        self._serve("chmod")
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        self._refuse_virtual(path)
        self._serve("chown")
        os.lchown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        if self._is_virtual(path):
            return 0
        self._serve("utimens")
        full = self._full(path)
        if times is None:
            os.utime(full, follow_symlinks=False)
            return 0
        now = time.time_ns()
        current = os.lstat(full)
        atime, mtime = (
            now if t == _UTIME_NOW else old if t == _UTIME_OMIT else t
            for t, old in zip(times, (current.st_atime_ns, current.st_mtime_ns), strict=True)
        )
        os.utime(full, ns=(atime, mtime), follow_symlinks=False)
        return 0

    def init_with_config(self, conn: Any, config: Any) -> None:
        """libfuse's init: make sure nothing keeps file contents across opens."""
        if config is not None:
            config.kernel_cache = 0
            config.auto_cache = 0


def fuse_options(
    cache_seconds: float, negative_cache_seconds: float, allow_other: bool
) -> dict[str, object]:
    """The mount options handed to libfuse (``-o key=value,...``)."""
    options: dict[str, object] = {
        "fsname": FSNAME,
        "subtype": FSNAME,
        "entry_timeout": cache_seconds,
        "attr_timeout": cache_seconds,
        "negative_timeout": negative_cache_seconds,
        "max_threads": MAX_THREADS,
    }
    if allow_other:
        options["allow_other"] = True
    return options


def _die_with_parent(parent_pid: int) -> None:
    """Ask for SIGTERM (on which libfuse unmounts) when the process that started us dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise _oserror(ctypes.get_errno())
    if os.getppid() != parent_pid:  # it died before prctl took effect
        raise SystemExit("slowfs: the process that started this mount has exited")


def serve(
    source: Path,
    mountpoint: Path,
    latency: Latency,
    cache_seconds: float = 0.0,
    negative_cache_seconds: float = 0.0,
    allow_other: bool = False,
) -> None:
    """Mount and serve in the foreground until unmounted or signalled (SIGINT/SIGTERM)."""
    # Import here, not at the top: the binding loads libfuse when imported, must find
    # libfuse3 rather than a libfuse2 that may also be installed, and the benchmark process
    # that imports this module to start mounts must never load it.
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")
    mfusepy = importlib.import_module("mfusepy")
    os.umask(0)  # the kernel has applied the caller's umask to every mode we receive
    fs = SlowFS(source, latency, direct_io=False, caller=mfusepy.fuse_get_context)
    options = fuse_options(cache_seconds, negative_cache_seconds, allow_other)
    try:
        mfusepy.FUSE(fs, str(mountpoint), raw_fi=True, foreground=True, **options)
    except RuntimeError as exc:
        # fuse_main's status; 8 is "the loop ended on a signal" (SIGTERM/SIGINT/SIGHUP),
        # after which libfuse has unmounted: a normal way to stop.
        if exc.args != (_FUSE_MAIN_SIGNALLED,):
            raise SlowFSError(f"libfuse failed with status {exc.args}") from None


# --- mount table --------------------------------------------------------------------------


def _unescape(field_: bytes) -> bytes:
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field_)


def mount_type(mountpoint: Path) -> str | None:
    """The filesystem type mounted on top at ``mountpoint`` (from /proc/self/mountinfo)."""
    target = os.fsencode(os.path.realpath(mountpoint))
    found: str | None = None
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            fields = line.split()
            if len(fields) < 5 or _unescape(fields[4]) != target:
                continue
            after = fields.index(b"-") if b"-" in fields else -1
            if 0 < after < len(fields) - 1:
                found = fields[after + 1].decode(errors="replace")  # the last one is on top
    return found


def is_mounted(mountpoint: Path) -> bool:
    """True if a FUSE filesystem (live or dead) is mounted at ``mountpoint``."""
    kind = mount_type(mountpoint)
    return kind is not None and kind.startswith("fuse")


def _fusermount(flags: str, mountpoint: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["fusermount3", flags, "--", str(mountpoint)],
        capture_output=True,
        text=True,
        timeout=UNMOUNT_TIMEOUT,
        check=False,
    )


def _detach(mountpoint: Path) -> str | None:
    """Unmount the FUSE mount at ``mountpoint``, lazily if it is busy: the fusermount3 flags
    that did it (``-u`` or ``-uz``), or None if nothing was mounted there."""
    if not is_mounted(mountpoint):
        return None
    errors = []
    for flags in ("-u", "-uz"):
        done = _fusermount(flags, mountpoint)
        if done.returncode == 0 or not is_mounted(mountpoint):
            return flags
        errors.append(done.stderr.strip())
    raise SlowFSError(f"cannot unmount {mountpoint}: {'; '.join(errors)}")


def _stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """Wait ``grace`` seconds for a serving process to exit; then terminate, then kill it."""
    for action, wait in ((None, grace), (process.terminate, 5.0), (process.kill, 5.0)):
        if action is not None and process.poll() is None:
            action()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
            return


def cleanup_stale(mountpoint: Path) -> bool:
    """Unmount what a crash left at ``mountpoint``: a FUSE mount whose server is dead
    ("Transport endpoint is not connected") or alive but orphaned. True if it unmounted."""
    if is_mounted(mountpoint):
        return _detach(mountpoint) is not None
    try:
        os.stat(mountpoint)
    except OSError as exc:  # a dead mount that this mount namespace does not list
        if exc.errno == errno.ENOTCONN:
            return _fusermount("-uz", mountpoint).returncode == 0
    return False


# --- starting and stopping mounts ----------------------------------------------------------


def _static_problem() -> str | None:
    """Why FUSE cannot work here, judged without mounting; None if nothing is missing."""
    if not sys.platform.startswith("linux"):
        return f"slowfs needs Linux FUSE, not {sys.platform}"
    try:
        if not stat.S_ISCHR(os.stat("/dev/fuse").st_mode):
            return "/dev/fuse is not a character device"
    except OSError:
        return "no /dev/fuse (load the fuse module; give a container --device /dev/fuse)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    fusermount = shutil.which("fusermount3")
    if fusermount is None:
        return "no fusermount3 on PATH (apt-get install fuse3; scripts/install-bench-deps.sh)"
    if os.geteuid() != 0 and not os.stat(fusermount).st_mode & stat.S_ISUID:
        return f"{fusermount} is not setuid root, so this user cannot mount"
    if ctypes.util.find_library("fuse3") is None:
        return "libfuse3 not found (apt-get install fuse3)"
    if importlib.util.find_spec("mfusepy") is None:
        return f"mfusepy is not installed for {sys.executable} (pip install mfusepy)"
    return None


def fuse_available() -> str | None:
    """None if slow mounts work here, else why not: checks the pieces, then mounts an empty
    directory once (that is what finds "not permitted", e.g. a container without
    CAP_SYS_ADMIN). Takes a fraction of a second; callers keep the answer."""
    problem = _static_problem()
    if problem is not None:
        return problem
    with tempfile.TemporaryDirectory(prefix="slowfs-probe-") as scratch:
        source, mountpoint = Path(scratch, "source"), Path(scratch, "mnt")
        source.mkdir()
        mountpoint.mkdir()
        try:
            with mounted(source, mountpoint, delay_ms=0) as mount:
                mount.counts()
        except (SlowFSError, OSError) as exc:
            return f"a test mount failed: {exc}"
    return None


@dataclass
class Mount:
    """A live slow mount. Counters are read through ``MOUNTPOINT/.slowfs/`` (uncounted)."""

    mountpoint: Path
    source: Path
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = field(default=None, repr=False)

    def counts(self) -> dict[str, int]:
        """Operations served since mounting or the last reset, by FUSE operation name."""
        return read_counts(self.mountpoint)

    def total(self) -> int:
        return sum(self.counts().values())

    def callers(self) -> dict[int, int]:
        """Operations served since mounting or the last reset, by calling thread id."""
        return read_callers(self.mountpoint)

    def request_total(self) -> int:
        """``total()`` less the operations of floorless's background threads."""
        return request_ops(self)

    def request_threads(self) -> dict[str, int]:
        """``request_total()`` by the name of the thread that made the operations."""
        return request_ops_by_thread(self)

    def reset(self) -> None:
        reset_counts(self.mountpoint)

    def unmount(self) -> None:
        """Unmount (lazily if busy) and stop the serving process. Safe to call twice."""
        lazily = False
        try:
            lazily = _detach(self.mountpoint) == "-uz"
        finally:
            if self.process is not None:
                # After a clean unmount the server exits by itself; after a lazy one it
                # would serve the processes still inside until they leave: stop it now.
                _stop(self.process, grace=0.0 if lazily else UNMOUNT_TIMEOUT)
            if self.log is not None:
                self.log.close()
                self.log = None


def read_counts(mountpoint: Path) -> dict[str, int]:
    counts: dict[str, int] = json.loads(Path(mountpoint, CONTROL_DIR, "stats").read_bytes())
    return counts


def request_ops(mount: Mount) -> int:
    """Operations served since the last reset, less those floorless's background threads made
    (ref checks, indexing: threads it names ``fl-bg-*``, see ``floorless.core.background``) or
    the processes they started (git, told by ``caller_name``), and those the kernel sends on
    its own (thread 0: the release after a last close, whose open
    is counted with the thread that made it): the filesystem work that requests cost. For
    any other server this is every operation but the kernel's."""
    return sum(request_ops_by_thread(mount).values())


def request_ops_by_thread(mount: Mount) -> dict[str, int]:
    """``request_ops`` by the name the calling thread has (``/proc/TID/comm``: floorless's
    request threads are ``fl-request``, its pools' others ``fl-expensive`` and ``fl-stream``;
    ``(ended)`` for a thread gone since), so that a page's operations can be told apart from
    those of threads that are neither the named background ones nor a request's."""
    by_name: dict[str, int] = {}
    names = read_names(mount.mountpoint)
    for tid, count in mount.callers().items():
        if tid == 0:
            continue
        name = names.get(tid, "(ended)")
        thread, _, starter = name.partition(" from ")
        if not (thread.startswith(BACKGROUND_PREFIX) or starter.startswith(BACKGROUND_PREFIX)):
            by_name[name] = by_name.get(name, 0) + count
    return by_name


def caller_name(tid: int) -> str:
    """The name of the thread ``tid`` (``/proc/TID/comm``), and for a process floorless
    started (git), the floorless thread that started it (``FLOORLESS_THREAD`` in its
    environment, see ``floorless.git.env``): ``git from fl-bg-index``."""
    try:
        name = Path(f"/proc/{tid}/comm").read_text().strip()
    except OSError:
        return "(ended)"
    try:
        environ = Path(f"/proc/{tid}/environ").read_bytes().split(b"\0")
    except OSError:
        return name
    for item in environ:
        if item.startswith(b"FLOORLESS_THREAD="):
            return f"{name} from {item.split(b'=', 1)[1].decode(errors='replace')}"
    return name


def read_names(mountpoint: Path) -> dict[int, str]:
    table = json.loads(Path(mountpoint, CONTROL_DIR, "names").read_bytes())
    return {int(tid): str(name) for tid, name in table.items()}


def read_callers(mountpoint: Path) -> dict[int, int]:
    table = json.loads(Path(mountpoint, CONTROL_DIR, "callers").read_bytes())
    return {int(tid): int(n) for tid, n in table.items()}


def reset_counts(mountpoint: Path) -> None:
    Path(mountpoint, CONTROL_DIR, "control").write_bytes(b"reset\n")


def _serve_command(
    source: Path,
    mountpoint: Path,
    delay_ms: float,
    jitter_ms: tuple[float, float] | None,
    cache_seconds: float,
    negative_cache_seconds: float,
    seed: int,
    allow_other: bool,
    parent_pid: int | None,
) -> list[str]:
    command = [sys.executable, "-m", "bench.slowfs", "serve", str(source), str(mountpoint)]
    command += ["--delay-ms", repr(delay_ms), "--seed", str(seed)]
    command += ["--cache-seconds", repr(cache_seconds)]
    command += ["--negative-cache-seconds", repr(negative_cache_seconds)]
    if jitter_ms is not None:
        command += ["--jitter", f"{jitter_ms[0]!r}-{jitter_ms[1]!r}"]
    if allow_other:
        command.append("--allow-other")
    if parent_pid is not None:
        command += ["--parent-pid", str(parent_pid)]
    return command


def _log_tail(log: IO[bytes]) -> str:
    log.seek(0)
    lines = log.read().decode(errors="replace").strip().splitlines()
    return "\n".join(lines[-15:]) or "(no output)"


def start(
    source: Path,
    mountpoint: Path,
    delay_ms: float = 30.0,
    jitter_ms: tuple[float, float] | None = None,
    cache_seconds: float = 0.0,
    seed: int = 0,
    *,
    negative_cache_seconds: float = 0.0,
    allow_other: bool = False,
    die_with_parent: bool = True,
) -> Mount:
    """Start a serving child and return once the mount is live. Prefer ``mounted()``, which
    always unmounts; this is for a mount that outlives its caller (the ``mount`` command).

    With ``die_with_parent`` the server stops (and libfuse unmounts) when the *thread* that
    called this exits, as Linux's parent-death signal works: start long-lived mounts from
    the main thread, or pass False and unmount yourself."""
    Latency(delay_ms, jitter_ms)  # validate before starting anything
    if cache_seconds < 0 or negative_cache_seconds < 0:
        raise ValueError("cache timeouts must be >= 0 seconds")
    source = Path(source).resolve()
    mountpoint = Path(os.path.realpath(mountpoint))
    if not source.is_dir():
        raise SlowFSError(f"source {source} is not a directory")
    if is_mounted(mountpoint):
        raise SlowFSError(
            f"{mountpoint} already has a FUSE mount; remove it with "
            f"`python -m bench.slowfs cleanup {mountpoint}`"
        )
    if not mountpoint.is_dir():
        raise SlowFSError(f"mount point {mountpoint} is not a directory")
    command = _serve_command(
        source, mountpoint, delay_ms, jitter_ms, cache_seconds, negative_cache_seconds, seed,
        allow_other, os.getpid() if die_with_parent else None,
    )  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
    log = tempfile.TemporaryFile(prefix="slowfs-log-")  # noqa: SIM115 (the Mount owns it)
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", env=env,
            start_new_session=True,
        )  # fmt: skip
    except BaseException:
        log.close()
        raise
    mount = Mount(mountpoint=mountpoint, source=source, process=process, log=log)
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mountpoint):
            if process.poll() is not None:
                raise SlowFSError(
                    f"slowfs exited with status {process.returncode} before mounting "
                    f"{mountpoint}:\n{_log_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise SlowFSError(
                    f"{mountpoint} not mounted after {MOUNT_TIMEOUT:.0f} s:\n{_log_tail(log)}"
                )
            time.sleep(_POLL_SECONDS)
    except BaseException:
        mount.unmount()
        raise
    return mount


@contextlib.contextmanager
def mounted(
    source: Path,
    mountpoint: Path,
    delay_ms: float = 30.0,
    jitter_ms: tuple[float, float] | None = None,
    cache_seconds: float = 0.0,
    seed: int = 0,
    *,
    negative_cache_seconds: float = 0.0,
    allow_other: bool = False,
) -> Iterator[Mount]:
    """Mirror ``source`` at ``mountpoint`` slowly for the body of a ``with`` block.

    ``delay_ms`` before every operation, or a uniform draw from ``jitter_ms`` (low, high)
    seeded by ``seed``; ``cache_seconds`` is the kernel's entry and attribute timeout (0:
    nothing cached; 1.0: virtiofs's default) and ``negative_cache_seconds`` the timeout for
    names found missing. ``allow_other`` lets other users in (root only; no permission
    checks beyond the server's: a benchmark machine's option). The mount is removed on any
    exit, KeyboardInterrupt included.
    """
    mount = start(
        source, mountpoint, delay_ms, jitter_ms, cache_seconds, seed,
        negative_cache_seconds=negative_cache_seconds, allow_other=allow_other,
    )  # fmt: skip
    try:
        yield mount
    finally:
        mount.unmount()


# --- command line -------------------------------------------------------------------------


def _jitter_argument(text: str) -> tuple[float, float]:
    try:
        return parse_jitter(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.slowfs",
        description="A FUSE passthrough that adds latency to every operation and counts them.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_ in (
        ("serve", "mount and serve in the foreground until unmounted"),
        ("mount", "mount in the background, print the mount point, return"),
    ):
        sub = commands.add_parser(name, help=help_)
        sub.add_argument("source", type=Path)
        sub.add_argument("mountpoint", type=Path)
        sub.add_argument("--delay-ms", type=float, default=30.0, help="delay per operation")
        sub.add_argument("--jitter", type=_jitter_argument, metavar="LOW-HIGH",
                         help="uniform random delay in ms instead (e.g. 20-100)")  # fmt: skip
        sub.add_argument("--cache-seconds", type=float, default=0.0,
                         help="kernel entry/attribute cache timeout (1.0 = virtiofs)")  # fmt: skip
        sub.add_argument("--negative-cache-seconds", type=float, default=0.0,
                         help="kernel cache timeout for missing names")  # fmt: skip
        sub.add_argument("--seed", type=int, default=0, help="seed of the jitter draws")
        sub.add_argument("--allow-other", action="store_true",
                         help="let other users use the mount (root only)")  # fmt: skip
        if name == "serve":
            sub.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    for name, help_ in (
        ("unmount", "unmount a slow mount"),
        ("cleanup", "unmount a mount left behind by a crash"),
        ("stats", "print the operation counts as JSON"),
    ):
        sub = commands.add_parser(name, help=help_)
        sub.add_argument("mountpoint", type=Path)
        if name == "stats":
            sub.add_argument("--reset", action="store_true", help="then zero the counters")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command: str = args.command
    if command in ("serve", "mount", "unmount", "cleanup"):
        problem = _static_problem()
        if problem is not None:
            print(f"slowfs: FUSE is unavailable: {problem}", file=sys.stderr)
            return 2
    try:
        if command == "serve":
            logging.basicConfig(level=logging.WARNING, format="slowfs: %(message)s")
            if args.parent_pid is not None:
                _die_with_parent(args.parent_pid)
            latency = Latency(args.delay_ms, args.jitter, args.seed)
            serve(args.source, args.mountpoint, latency, args.cache_seconds,
                  args.negative_cache_seconds, args.allow_other)  # fmt: skip
        elif command == "mount":
            mount = start(
                args.source, args.mountpoint, args.delay_ms, args.jitter, args.cache_seconds,
                args.seed, negative_cache_seconds=args.negative_cache_seconds,
                allow_other=args.allow_other, die_with_parent=False,
            )  # fmt: skip
            print(mount.mountpoint)
        elif command == "unmount":
            if _detach(args.mountpoint) is None:
                print(f"slowfs: nothing is mounted at {args.mountpoint}", file=sys.stderr)
                return 1
        elif command == "cleanup":
            print("unmounted" if cleanup_stale(args.mountpoint) else "nothing to clean up")
        else:
            print(json.dumps(read_counts(args.mountpoint), indent=2, sort_keys=True))
            if args.reset:
                reset_counts(args.mountpoint)
    except (SlowFSError, ValueError, OSError) as exc:
        print(f"slowfs: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
