"""A git file that shrinks under libgit2's mapping is an error for one request, not the end of
the process.

libgit2 reads pack files, their indexes, multi-pack indexes and commit-graphs through
``mmap``. When such a file is truncated, or removed on a network share by another host,
while it is mapped, reading a page past its new end raises ``SIGBUS`` in whichever thread
reads it. Its default action ends the process: every request in flight, on every
repository, is lost, and until a new worker listens, connections are refused (granian gives
each worker its own listening socket on Linux). No Python code can catch the signal.

``guard()`` installs a handler for it, through ``sigaction`` (``ctypes``), that does one thing:
for a fault past the end of a mapped file (``BUS_ADRERR``) below a repository's ``objects/``
directory, it maps a page of zeros over the missing one and lets the read go on. libgit2
then reads an invalid object header or stream and says so (``GitError``): the request
answers 503, the others never notice. Each absorbed fault is counted (``faults()``); the
background ref check reopens the handles that may map such a file (``RepoState.check``),
and the new handle sees the file as it is now. Any other ``SIGBUS`` (another file, another
cause, a handler that cannot do its work) puts the previous action back and lets the fault
happen again, which then ends the process as it always did.

Linux on x86-64 and AArch64 only, where ``siginfo_t`` and ``struct sigaction`` have the
layouts declared here; elsewhere ``guard()`` does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import platform
import signal
import sys
from typing import Any

log = logging.getLogger(__name__)

_BUS_ADRERR = 2  # si_code: the address is past the end of the object mapped
_SA_SIGINFO = 4
_MAP_FIXED = 0x10
_PAGE = mmap.PAGESIZE
_MAPPED = (b"/objects/pack/", b"/objects/info/")  # packs, indexes, commit-graphs


class _SigInfo(ctypes.Structure):
    _fields_ = [
        ("si_signo", ctypes.c_int),
        ("si_errno", ctypes.c_int),
        ("si_code", ctypes.c_int),
        ("si_addr", ctypes.c_void_p),  # the first member of the union, aligned to a pointer
    ]


class _SigAction(ctypes.Structure):
    _fields_ = [
        ("sa_sigaction", ctypes.c_void_p),
        ("sa_mask", ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong)))),
        ("sa_flags", ctypes.c_int),
        ("sa_restorer", ctypes.c_void_p),
    ]


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(_SigInfo), ctypes.c_void_p)


class _Guard:
    """The installed handler and what it needs, kept alive for the life of the process."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.sigaction.argtypes = [
            ctypes.c_int,
            ctypes.POINTER(_SigAction),
            ctypes.POINTER(_SigAction),
        ]
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        self.previous = _SigAction()
        self.handler = _HANDLER(self._on_fault)
        self.count = 0
        self.files: list[bytes] = []  # the files faulted in, the latest few
        self.reported = 0  # the count when ``news`` last told of faults

    def install(self) -> None:
        action = _SigAction()
        action.sa_sigaction = ctypes.cast(self.handler, ctypes.c_void_p).value
        action.sa_flags = _SA_SIGINFO
        if self.libc.sigaction(signal.SIGBUS, ctypes.byref(action), ctypes.byref(self.previous)):
            raise OSError(ctypes.get_errno(), "sigaction(SIGBUS) failed")

    def _on_fault(self, signo: int, info: Any, context: int) -> None:
        # Runs inside the signal handler, on the faulting thread. It must not raise (the
        # fault would come back at once, for ever): it makes the page readable, or gives up
        # and lets the previous action have the fault.
        try:
            absorbed = self._absorb(info.contents)
        except BaseException:  # noqa: BLE001 - anything at all: give up, as below
            absorbed = False
        if not absorbed:
            self.libc.sigaction(signal.SIGBUS, ctypes.byref(self.previous), None)

    def _absorb(self, info: _SigInfo) -> bool:
        address = int(info.si_addr or 0)
        if info.si_code != _BUS_ADRERR or not address:
            return False
        path = _mapped_file(address)
        if path is None or not any(part in path for part in _MAPPED):
            return False
        page = address - address % _PAGE
        got = self.libc.mmap(
            page,
            _PAGE,
            mmap.PROT_READ | mmap.PROT_WRITE,
            mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED,
            -1,
            0,
        )
        if got != page:
            return False
        self.count += 1
        self.files = [*self.files[-9:], path]
        return True


def _mapped_file(address: int) -> bytes | None:
    """The file mapped at ``address`` (as ``/proc/self/maps`` names it), if one is."""
    with open("/proc/self/maps", "rb") as maps:
        for line in maps:
            fields = line.split(None, 5)
            low, _, high = fields[0].partition(b"-")
            if int(low, 16) <= address < int(high, 16):
                return fields[5].rstrip(b"\n") if len(fields) == 6 else None
    return None


_guard: _Guard | None = None


def supported() -> bool:
    return sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")


def guard() -> bool:
    """Install the handler in this process (once); whether it is installed."""
    global _guard
    if _guard is not None:
        return True
    if not supported():
        return False
    made = _Guard()
    made.install()
    _guard = made
    return True


def faults() -> int:
    """How many faults the handler has absorbed in this process (0 without it)."""
    return _guard.count if _guard is not None else 0


def news() -> list[str]:
    """The last files faulted in if there were faults since the last call, once (for the
    log); [] when there were none."""
    if _guard is None or _guard.reported == _guard.count:
        return []
    _guard.reported = _guard.count
    return [f.decode("utf-8", "replace") for f in _guard.files]
