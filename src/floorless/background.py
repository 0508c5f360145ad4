"""Background threads: started with a name the operating system sees as well.

Linux shows a thread's name (``/proc/<tid>/comm``, ``top -H``) only when the thread sets it
itself; Python's ``threading`` names stay inside Python. Tools that watch a running forge
(the benchmark's slow-filesystem counter among them) tell floorless's background work from its
request threads by these names, which all start with ``PREFIX``.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

PREFIX = "fl-bg-"
_PR_SET_NAME = 15
_libc: ctypes.CDLL | None = None


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, from the symbols the interpreter already has loaded: no search for
    the library (``ctypes.util.find_library`` runs ``ldconfig``, a process)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    prctl: Callable[..., int] = _libc.prctl
    return prctl


def start(target: Callable[[], None], name: str) -> threading.Thread:
    """Start a daemon thread running ``target``, named ``PREFIX + name`` (at most 15 bytes)
    for Python and for the operating system."""
    full = (PREFIX + name)[:15]

    def run() -> None:
        try:
            prctl = _prctl()
            if prctl is not None:
                prctl(_PR_SET_NAME, full.encode(), 0, 0, 0)
        except (OSError, AttributeError):  # not Linux: the name stays Python's own
            pass
        target()

    thread = threading.Thread(target=run, name=full, daemon=True)
    thread.start()
    return thread
