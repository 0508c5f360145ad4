"""git's smart HTTP protocol, the parts floorless handles itself: pkt-line framing checks, the
service announcement, and protocol v2's capability advertisement (the same for every
repository, so it is asked of git once at start rather than once per clone).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pygit2

from floorless.core.errors import BadRequest, GitCommandError
from floorless.git.env import GitEnvironment

SERVICES = ("git-upload-pack", "git-receive-pack")
# What a clone or fetch may ask for beyond git's defaults: partial clone (``--filter``), and
# the objects a partial clone later fetches by id.
UPLOAD_PACK_CONFIG = (
    "-c",
    "uploadpack.allowFilter=true",
    "-c",
    "uploadpack.allowAnySHA1InWant=true",
)
MAX_PKT = 65520
_PROTOCOL_VALUE = re.compile(r"[A-Za-z0-9=:._-]{1,200}")


def pkt_line(payload: bytes) -> bytes:
    return b"%04x" % (len(payload) + 4) + payload


def service_announcement(service: str) -> bytes:
    """The first lines of a v0 ``info/refs`` answer: ``# service=...`` and a flush."""
    return pkt_line(f"# service={service}\n".encode()) + b"0000"


def protocol_header(value: str | None) -> str | None:
    """The client's ``Git-Protocol`` header, fit to hand to git as ``GIT_PROTOCOL``."""
    if value and _PROTOCOL_VALUE.fullmatch(value):
        return value
    return None


def wants_v2(protocol: str | None) -> bool:
    return protocol is not None and "version=2" in protocol.split(":")


class PktChecker:
    """Checks pkt-line framing as a request body streams past, without holding it.

    With ``commands_only`` (a push) only the part up to the first flush is pkt-lines; what
    follows is the pack, which git checks itself.
    """

    def __init__(self, commands_only: bool) -> None:
        self.commands_only = commands_only
        self.done = False
        self._header = b""
        self._remaining = 0  # payload bytes of the current line still to come
        self.lines = 0

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.done:
            if self._remaining:
                step = min(self._remaining, len(view))
                self._remaining -= step
                view = view[step:]
                continue
            need = 4 - len(self._header)
            self._header += bytes(view[:need])
            view = view[need:]
            if len(self._header) < 4:
                return
            self._line(self._header)
            self._header = b""

    def _line(self, header: bytes) -> None:
        try:
            length = int(header, 16)
        except ValueError:
            length = -1
        if length < 0 or not header.isalnum():
            raise BadRequest("malformed git request: bad pkt-line length")
        self.lines += 1
        if length in (0, 1, 2):  # flush, delimiter, response end
            if length == 0 and self.commands_only:
                self.done = True
            return
        if length < 4 or length > MAX_PKT:
            raise BadRequest(f"malformed git request: pkt-line length {length}")
        self._remaining = length - 4

    def finish(self) -> None:
        if self._header or self._remaining:
            raise BadRequest("malformed git request: the body ends inside a pkt-line")
        if self.commands_only and not self.done:
            raise BadRequest("malformed git request: the push commands never end")
        if not self.lines:
            raise BadRequest("malformed git request: the body is empty")


def service_args(
    service: str, git_dir: Path, hooks: Path | None = None, stateless: bool = True
) -> list[str]:
    """git's arguments to serve one POST of ``service`` (after the ``--git-dir``).

    A push runs floorless's hooks (``hooks``, its hooks directory: ``floorless.collab.githooks``)
    and never a repository's own. It never stores ``refs/for/*``: git hands those updates to the
    ``proc-receive`` hook (the AGit flow), which reads the push options git is told to
    accept. Its pack is always indexed (never unpacked to loose objects), so that the
    pre-receive hook can tell the objects the client sent from the bases git added to a thin
    pack; git's automatic gc never runs (floorless collects, knowing what forks borrow); and
    the refs of the repositories it borrows from are not advertised (``.have``): a fork's
    pusher learns nothing of its parent's refs that way. Without ``hooks`` (listing refs
    only), no hook runs. Without ``stateless`` (SSH) git serves a whole session: it
    advertises first, then reads the client's requests as they come."""
    config = list(UPLOAD_PACK_CONFIG) if service == "git-upload-pack" else []
    if service == "git-receive-pack":
        config = [
            "-c",
            "receive.procReceiveRefs=refs/for",
            "-c",
            "receive.advertisePushOptions=true",
            "-c",
            "receive.unpackLimit=0",
            "-c",
            "receive.autogc=false",
            "-c",
            "core.alternateRefsCommand=true",
            "-c",
            f"core.hooksPath={hooks if hooks is not None else os.devnull}",
        ]
    mode = ["--stateless-rpc"] if stateless else []
    return [*config, service.removeprefix("git-"), *mode, str(git_dir)]


def advertise_args(service: str, git_dir: Path) -> list[str]:
    """git's arguments to list refs and capabilities for ``info/refs``."""
    *head, directory = service_args(service, git_dir)
    return [*head, "--advertise-refs", directory]


def capture_v2_advertisement(env: GitEnvironment) -> bytes:
    """Ask the installed git, once, what its upload-pack advertises in protocol v2."""
    with tempfile.TemporaryDirectory(dir=env.tmp) as scratch:
        path = Path(scratch) / "empty.git"
        pygit2.init_repository(str(path), bare=True)
        result = subprocess.run(
            env.command(path, *advertise_args("git-upload-pack", path)),
            env={**env.environ(), "GIT_PROTOCOL": "version=2"},
            cwd=str(env.tmp),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    if result.returncode != 0 or not result.stdout.startswith(pkt_line(b"version 2\n")):
        message = result.stderr.decode("utf-8", "replace").strip()
        raise GitCommandError(f"git upload-pack cannot advertise protocol v2: {message}")
    return result.stdout
