"""AsciiDoc to HTML by Asciidoctor, the reference implementation, in one long-lived worker.

Asciidoctor is what GitHub and GitLab render AsciiDoc with, in its SECURE safe mode: no
include of a file or URL, no docinfo, no reading of the environment. The Python libraries
were no substitute: asciidoc-py honours ``include::/etc/passwd[]`` in its safe mode when the
text comes from memory, evaluates ``ifeval`` with ``eval`` and swaps ``sys.stdout`` for the
whole process; asciidoctrine includes local files.

Why this shape. Asciidoctor is Ruby, so it runs in a process of its own; one for each document
would put a process and ~0.1 s of loading on a page, which a browse page may not spend. So a
forge keeps one worker (``asciidoctor.rb``, shipped beside this module), started on the first
document by a background thread, never a page's: a page writes the document to the worker's
pipe and reads the HTML back (one document at a time), and the page's rendered HTML is cached
by blob id, so a document's second view asks nothing. The worker's pipe is the only way in:
it runs in an empty directory of the runtime directory, with nothing of the server's
environment but ``PATH``, and its output is raw HTML that ``web/documents.py`` passes
through the same allow-list as every document.

What can go wrong costs the page its rendering, never an error: without Ruby or Asciidoctor
(the Debian package ``asciidoctor``), ``convert`` answers None at once (the page shows the
source) and a start is tried again after ``RETRY_SECONDS``. A document that keeps the worker
past ``seconds``, or ends it (a table of 100 million columns meets the worker's memory
limit), is answered None, the worker is ended, and the document's digest is remembered so
that it is not tried again; the next document starts another worker. A worker ended from
outside (killed or terminated: no document does that; one that meets its memory limit says
so and exits) is started again for the next document, and the document it was converting, if
any, is not remembered: its next view tries it again. One that grew past ``RESTART_BYTES``
(Ruby keeps the heap a large document made it take) is ended after its document and replaced
for the next.

A page waits for the worker while one other document is converted (``seconds`` at most), and
at most ``at_once`` pages (half the request threads) are in it at once, converting or
waiting: the others are answered None at once. Without that bound, four requests for
documents that keep the worker busy held all four request threads and every other page
(a raw file, a file page) waited behind them for ``seconds``.

``env-github`` is not set: documents use it to turn on GitHub's own workarounds (emoji
shortcodes as admonition captions, which floorless would show as ``:bulb:``); they get
Asciidoctor's defaults instead, and ``env-floorless``.

It is the web layer that renders with it (``web/documents.py``), but the worker is a child
process with the forge's lifetime: the composition root makes it and ends it with the other
background work in ``Forge.stop``, so it sits below the root, with the process plumbing, and
needs nothing but ``core``'s threads and caches.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import selectors
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from floorless.core import background
from floorless.core.caches import Cache

log = logging.getLogger(__name__)

SCRIPT = Path(__file__).with_name("asciidoctor.rb")
MAX_ANSWER = 32 * 1024 * 1024  # bytes of HTML for one document; a larger one is not shown
MEMORY = 512 * 1024 * 1024  # address space of the worker: ~80 MiB idle, ~230 MiB at most
# for a document at the size limit (a table of 250 KB), 1 GiB for 100 million columns
QUICK = 0.5  # seconds: a worker that ended sooner after a document may have died before it
# Resident memory past which the worker is replaced after a document: Ruby keeps the heap a
# large document grew (~20 MB after a README, ~170 MB after a table of 250 KB)
RESTART_BYTES = 128 * 1024 * 1024
START_SECONDS = 30.0  # for Ruby to load Asciidoctor, on a machine under load
RETRY_SECONDS = 60.0  # after a worker could not start, before another is tried
REMEMBERED = 1024  # digests of documents that failed, not tried again
# How a worker ends when something outside ends it (an administrator, the system short of
# memory, a service manager): no document does that, so the one it was converting is tried
# again. A document can end it otherwise (its memory limit, a crash: SIGSEGV, SIGABRT).
_FROM_OUTSIDE = frozenset({-signal.SIGKILL, -signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP})
_HEADER = struct.Struct(">cI")  # an answer's status and length
_LENGTH = struct.Struct(">I")


def _resident(pid: int) -> int:
    """Bytes of memory process ``pid`` holds (0 when it cannot be read: not Linux)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_bytes().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


class WorkerGone(Exception):
    """The worker ended, or stopped answering within its time."""


class TimedOut(WorkerGone):
    """The worker did not read or answer within its time."""


class Asciidoctor:
    """Converts AsciiDoc to (unsanitized) HTML in one worker process, started when first
    needed. ``ruby`` runs the worker; an empty one turns conversion off."""

    def __init__(self, ruby: str, seconds: float, workdir: Path, at_once: int = 2) -> None:
        self.ruby = ruby
        self.seconds = seconds
        self.workdir = workdir
        # pages in the worker at once, converting or waiting for it: the others show the
        # source at once, so a document that keeps the worker busy holds no more threads
        self.at_once = max(1, at_once)
        self.inside = 0  # pages in the worker now
        self.started = 0  # workers started (for tests and reports)
        self.converted = 0  # documents converted
        self.version: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._starting = False
        self._failed_at: float | None = None
        self._stopped = False
        self._state = threading.Condition()
        self._turn = threading.Lock()  # one document at a time in the worker
        self._failed: Cache[bytes, bool] = Cache.lru(REMEMBERED)

    @property
    def pid(self) -> int | None:
        with self._state:
            return None if self._proc is None else self._proc.pid

    def convert(self, text: str) -> str | None:
        """``text`` as HTML, or None when the worker cannot convert it in time (no Ruby or
        Asciidoctor, a document that failed before, one too slow, busy for too long, or
        ``at_once`` pages in it already)."""
        if not self.ruby:
            return None
        data = text.encode("utf-8", "replace")
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if self._failed.get(digest):
            return None
        with self._state:
            if self.inside >= self.at_once:
                return None  # as many pages as may are in the worker: show this one's source
            self.inside += 1
        try:
            return self._convert(data, digest)
        finally:
            with self._state:
                self.inside -= 1

    def _convert(self, data: bytes, digest: bytes) -> str | None:
        if not self._turn.acquire(timeout=self.seconds):
            return None  # another document holds the worker: show this one's source
        try:
            for attempt in range(2):
                proc = self._ready()
                if proc is None:
                    return None
                began = time.monotonic()
                try:
                    html = self._exchange(proc, data, began + self.seconds)
                except WorkerGone as gone:
                    # a worker that ended at once may have died before this document: one
                    # more try on a new worker tells a document that ends it from that
                    quick = time.monotonic() - began < QUICK
                    timed_out = isinstance(gone, TimedOut)
                    if not timed_out:  # it has ended, or is ending: learn how
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            proc.wait(timeout=QUICK)
                    self._end(proc)
                    if attempt == 0 and quick and not timed_out:
                        continue
                    log.warning("AsciiDoc document not converted: the worker %s", gone)
                    if not timed_out and proc.returncode in _FROM_OUTSIDE:
                        return None  # ended from outside: the next view tries it again
                    html = None
                if html is None:  # remembered: it is not tried again
                    self._failed.put(digest, True)
                else:
                    self.converted += 1
                if proc.poll() is None and _resident(proc.pid) > RESTART_BYTES:
                    self._end(proc)  # idle: the next document starts a smaller one
                return html
            return None
        finally:
            self._turn.release()

    def stop(self) -> None:
        """End the worker (it ends by itself when its input closes) and start no other. A
        document being converted is waited for (``seconds`` at most); past that the worker is
        killed, and the thread converting with it reaps it."""
        with self._state:
            self._stopped = True
        turn = self._turn.acquire(timeout=self.seconds)
        try:
            with self._state:
                proc, self._proc = self._proc, None
            if proc is not None and turn:
                self._end(proc, gently=True)
            elif proc is not None:
                proc.kill()
        finally:
            if turn:
                self._turn.release()

    # -- the worker -----------------------------------------------------------------------------

    def _ready(self) -> subprocess.Popen[bytes] | None:
        """The running worker: one started by the background thread if there is none (unless
        one failed to start less than ``RETRY_SECONDS`` ago), waited for (``START_SECONDS``
        at most: Ruby loads Asciidoctor in ~0.1 s)."""
        deadline = time.monotonic() + START_SECONDS
        with self._state:
            if self._proc is not None and self._proc.poll() is not None:
                dead, self._proc = self._proc, None
                self._close(dead)
            if self._proc is not None or self._stopped:
                return self._proc
            failed = self._failed_at is not None
            if failed and time.monotonic() - (self._failed_at or 0.0) < RETRY_SECONDS:
                return None
            if not self._starting:
                self._starting = True
                background.start(self._start, "asciidoctor")
            while self._starting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._state.wait(remaining)
            return self._proc

    def _start(self) -> None:
        """Start a worker and wait for it to say it is ready (the background thread's work)."""
        proc: subprocess.Popen[bytes] | None = None
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(
                [self.ruby, str(SCRIPT), str(MAX_ANSWER), str(MEMORY)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=self.workdir,
                env=self._environ(),
                start_new_session=True,  # a terminal's Ctrl-C is for the server, which ends it
            )
            assert proc.stdin is not None and proc.stdout is not None
            os.set_blocking(proc.stdin.fileno(), False)
            os.set_blocking(proc.stdout.fileno(), False)
            status, version = self._answer(proc, time.monotonic() + START_SECONDS)
            if status != b"r":
                raise WorkerGone(f"answered {status!r} when starting")
        except (OSError, WorkerGone) as exc:
            log.warning(
                "AsciiDoc is shown as source: Asciidoctor could not start (%s %s): %s",
                self.ruby,
                SCRIPT.name,
                exc,
            )
            if proc is not None:
                self._end(proc)
            with self._state:
                self._failed_at = time.monotonic()
                self._starting = False
                self._state.notify_all()
            return
        with self._state:
            self.started += 1
            self.version = version.decode("utf-8", "replace")
            self._failed_at = None
            self._starting = False
            if self._stopped:
                self._end(proc, gently=True)
            else:
                self._proc = proc
            self._state.notify_all()

    def _environ(self) -> dict[str, str]:
        """Nothing of the server's environment but where programs and gems are."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workdir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TZ": "UTC",  # {localdatetime} and the like name no zone of the server's
        }
        for name in ("GEM_HOME", "GEM_PATH"):
            if name in os.environ:
                env[name] = os.environ[name]
        return env

    def _exchange(self, proc: subprocess.Popen[bytes], data: bytes, deadline: float) -> str | None:
        """Send one document and read its answer: the HTML, or None when the worker says it
        could not convert it."""
        self._write(proc, _LENGTH.pack(len(data)) + data, deadline)
        status, body = self._answer(proc, deadline)
        if status == b"o":
            return body.decode("utf-8", "replace")
        if status == b"e":  # Asciidoctor failed on it (the worker goes on)
            log.info("AsciiDoc document not converted: %s", body.decode("utf-8", "replace"))
            return None
        raise WorkerGone(f"answered {status!r}")

    def _write(self, proc: subprocess.Popen[bytes], data: bytes, deadline: float) -> None:
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        view = memoryview(data)

        def step() -> bool:
            nonlocal view
            view = view[os.write(fd, view) :]
            return not view

        if view:
            _pump(fd, selectors.EVENT_WRITE, deadline, "did not read within its time", step)

    def _answer(self, proc: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes]:
        status, length = _HEADER.unpack(self._read(proc, _HEADER.size, deadline))
        if length > MAX_ANSWER:
            raise WorkerGone(f"an answer of {length} bytes")
        return status, self._read(proc, length, deadline)

    def _read(self, proc: subprocess.Popen[bytes], size: int, deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        missing = size

        def step() -> bool:
            nonlocal missing
            chunk = os.read(fd, min(missing, 1 << 20))
            if not chunk:
                raise WorkerGone("has ended")
            chunks.append(chunk)
            missing -= len(chunk)
            return not missing

        if missing:
            _pump(fd, selectors.EVENT_READ, deadline, "did not answer within its time", step)
        return b"".join(chunks)

    def _end(self, proc: subprocess.Popen[bytes], gently: bool = False) -> None:
        """End ``proc`` (closing its input first when ``gently``) and reap it."""
        with self._state:
            if self._proc is proc:
                self._proc = None
        if gently and proc.stdin is not None:
            with contextlib.suppress(OSError):  # it has ended already
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):  # then it is killed
                proc.wait(timeout=2)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._close(proc)

    @staticmethod
    def _close(proc: subprocess.Popen[bytes]) -> None:
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a pipe to a process killed
                    pipe.close()


def _pump(fd: int, event: int, deadline: float, late: str, step: Callable[[], bool]) -> None:
    """Call ``step`` each time ``fd`` is ready for ``event`` until it says it is done: the
    deadline passing is TimedOut(``late``), the pipe failing WorkerGone."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, event)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimedOut(late)
            if not selector.select(remaining):
                continue
            try:
                if step():
                    return
            except BlockingIOError:
                continue
            except OSError as exc:  # BrokenPipeError: it has ended
                raise WorkerGone(f"has ended ({exc})") from exc
