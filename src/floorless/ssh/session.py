"""One SSH session's command, served: a clone, a fetch or a push, by one git process.

The session is the same for the built-in server and for OpenSSH's (``relay.py``): a
``Channel`` carries the client's bytes in and git's out, and an exit status at the end.

- The command is read (``commands.py``) and the caller's access checked
  (``gitservice/access.py``); a repository they may not read is answered exactly as one that
  does not exist. Then one ``git upload-pack`` or ``git receive-pack`` serves the session
  (not ``--stateless-rpc``: it advertises, then reads the client's requests as they come).
- A clone or fetch: every object the client names by id (``want``, v2's ``object-info``) is
  checked before git reads the line naming it, as over HTTP (``git/unreachable.py``): git
  would otherwise send any object the repository still holds, a fork's parent's hidden ones
  among them. git's answer streams back as git writes it.
- A push: git's advertisement goes to the client; the client's commands, push options and
  pack header are read here first (``git/pushreport.py``: the side band taken out of the
  capabilities), the hooks' work files written (``gitservice/push.py``), and the rest of
  the request streams into git. git's report is kept, rewritten and sent once the forge has
  taken the push in, exactly as over HTTP.
- git's error output goes to the server's log, never to the client (a push refused for a
  hidden object must read as one refused for a missing object).
- A session silent for ``idle`` seconds in both directions is closed; a request bigger than
  the limits of HTTP's is cut off.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from floorless.accounts.access import Level
from floorless.core.errors import BadRequest, FloorlessError, Unauthorized
from floorless.forge import Forge
from floorless.git import protocol, pushreport, unreachable
from floorless.gitservice import access, push
from floorless.gitservice.access import Caller
from floorless.lfs import transfers
from floorless.repos.registry import Repo
from floorless.ssh import commands

log = logging.getLogger(__name__)

CHUNK = 65536
STOP_SECONDS = 10.0  # git's time to end after its input closed, before it is killed
_ZERO = frozenset({"0" * 40, "0" * 64})


class Channel(Protocol):
    async def read(self, size: int) -> bytes:
        """Up to ``size`` bytes from the client; b"" once it has sent everything."""

    async def write(self, data: bytes) -> None:
        """Send ``data`` to the client (waiting while it cannot take more)."""

    def error(self, text: str) -> None:
        """Tell the client ``text`` on its error stream."""


class Idle(Exception):
    """Nothing moved for the session's idle time."""


class Session:
    def __init__(
        self,
        forge: Forge,
        caller: Caller,
        channel: Channel,
        public: str,
        git_protocol: str | None = None,
    ) -> None:
        self.forge = forge
        self.caller = caller
        self.channel = channel
        self.public = public
        self.git_protocol = protocol.protocol_header(git_protocol)
        self.idle = forge.settings.ssh_idle_timeout
        self.last = time.monotonic()
        self.proc: asyncio.subprocess.Process | None = None

    # -- the command ------------------------------------------------------------------------

    async def run(self, command: str) -> int:
        """Serve ``command``; the exit status to give the client."""
        try:
            asked = commands.parse(command)
            service = asked.service
            if service == commands.LFS_AUTHENTICATE:  # git's access: reading, or pushing
                service = access.RECEIVE if asked.operation == "upload" else access.UPLOAD
            repo, level = await asyncio.to_thread(
                access.authorize,
                self.forge.registry,
                self.forge.policy,
                self.caller,
                asked.owner,
                asked.name,
                service,
            )
            if asked.service == commands.LFS_AUTHENTICATE:
                if level < Level.WRITE and asked.operation == "upload":  # (a proposer's)
                    self.forge.policy.require(self.caller.viewer, repo, Level.WRITE)
                await self.channel.write(self.lfs_endpoint(repo, level, asked.operation))
                return 0
        except FloorlessError as exc:
            self.channel.error(f"floorless: {exc}\n")
            return 1
        try:
            if asked.service == access.UPLOAD:
                return await self._watched(self.fetch(repo))
            return await self._watched(self.receive(repo, level))
        except Idle:
            self.channel.error(f"floorless: nothing came for {self.idle:g} s; closing\n")
            return 1
        except BadRequest as exc:
            self.channel.error(f"floorless: {exc}\n")
            return 1
        finally:
            await self._stop_git()

    def lfs_endpoint(self, repo: Repo, level: Level, operation: str) -> bytes:
        """``git-lfs-authenticate``'s answer: the repository's LFS endpoint over HTTP and the
        header that lets this caller make one batch of ``operation`` there (``lfs/transfers.py``;
        read-only for a read-only deploy key)."""
        account = self.caller.viewer.account
        if account is None:
            raise Unauthorized("an SSH key with no person behind it")
        scope = "read" if level < Level.WRITE else self.caller.viewer.scope
        header = transfers.make(self.forge.secret, repo.id, account.id, scope, f"batch-{operation}")
        answer = {
            "href": f"{self.public}/{repo.owner}/{repo.name}.git/info/lfs",
            "header": header,
            "expires_in": transfers.LIFETIME,
        }
        return json.dumps(answer).encode() + b"\n"

    async def _watched(self, work: Coroutine[Any, Any, int]) -> int:
        """Run ``work`` until it ends, or until nothing moved for ``idle``."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                left = self.last + self.idle - time.monotonic()
                done, _ = await asyncio.wait({task}, timeout=max(0.05, left))
                if done:
                    return task.result()
                if time.monotonic() - self.last >= self.idle:
                    raise Idle
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def moved(self) -> None:
        self.last = time.monotonic()

    async def _start_git(self, repo: Repo, args: list[str], env: dict[str, str]) -> None:
        git = self.forge.git
        if self.git_protocol is not None:
            env["GIT_PROTOCOL"] = self.git_protocol
        self.proc = await asyncio.create_subprocess_exec(
            *git.command(repo.path, *args),
            env={**git.environ(), **env},
            cwd=str(git.tmp),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        self._errors = asyncio.ensure_future(self._log_errors(repo, self.proc))

    async def _log_errors(self, repo: Repo, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        kept = b""
        while piece := await proc.stderr.read(CHUNK):
            kept = (kept + piece)[-2000:]
        if kept.strip():
            log.info("%s: git over SSH: %s", repo.full_name, kept.decode("utf-8", "replace"))

    async def _stop_git(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), STOP_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        except asyncio.CancelledError:
            proc.kill()
            raise
        await asyncio.gather(self._errors, return_exceptions=True)

    async def _read(self) -> bytes:
        data = await self.channel.read(CHUNK)
        self.moved()
        return data

    async def _send(self, data: bytes) -> None:
        await self.channel.write(data)
        self.moved()

    async def _to_git(self, data: bytes) -> None:
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.write(data)
        await proc.stdin.drain()
        self.moved()

    async def _from_git_to_client(self) -> None:
        """git's output to the client, as git writes it, until git closes it."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        while piece := await proc.stdout.read(CHUNK):
            self.moved()
            await self._send(piece)

    # -- a clone or fetch -------------------------------------------------------------------

    async def fetch(self, repo: Repo) -> int:
        forge = self.forge
        allowed = await asyncio.to_thread(forge.gate.fetchable, repo)
        args = protocol.service_args(access.UPLOAD, repo.path, stateless=False)
        await self._start_git(repo, args, push.committer(self.caller))
        answer = asyncio.ensure_future(self._from_git_to_client())
        asking = asyncio.ensure_future(self._requests_to_git(allowed))
        try:
            done, _ = await asyncio.wait({answer, asking}, return_when=asyncio.FIRST_COMPLETED)
            if answer in done:
                answer.result()  # git ended its answer: the session is over
            elif not asking.result():
                return 128  # refused: git's ERR packet was sent
            else:
                await answer  # the client said all it had to; git ends its answer
        finally:
            for task in (answer, asking):
                task.cancel()
            await asyncio.gather(answer, asking, return_exceptions=True)
        assert self.proc is not None
        return await self.proc.wait()

    async def _requests_to_git(self, allowed: Callable[[bytes], bool | None]) -> bool:
        """The client's requests into git, each object asked for by id checked before git
        reads it. True once the client has sent all (git's input then closed); False when
        one was refused (git's ERR packet sent to the client, git stopped)."""
        screen = unreachable.RequestedIds()
        limit = self.forge.settings.max_fetch_request_bytes
        total = 0
        while data := await self._read():
            total += len(data)
            if total > limit:
                raise BadRequest(f"a fetch's requests are over the limit of {limit} bytes")
            before = len(screen.ids)
            try:
                screen.feed(data)
                refused = None
                if len(screen.ids) > before:
                    ids = screen.ids[before:]
                    refused = await asyncio.to_thread(unreachable.refusal, ids, allowed)
            except ValueError as exc:
                refused = unreachable.err_packet(f"upload-pack: {exc}")
            if refused is not None:
                if self.proc is not None:
                    self.proc.kill()
                await self._send(refused)
                return False
            await self._to_git(data)
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.close()
        return True

    # -- a push -----------------------------------------------------------------------------

    async def receive(self, repo: Repo, level: Level) -> int:
        pushing = push.Push(self.forge, repo, self.caller, level, self.public)
        try:
            return await self._receive(repo, pushing)
        finally:
            pushing.close()

    async def _receive(self, repo: Repo, pushing: push.Push) -> int:
        hooks = self.forge.git.hooks
        args = protocol.service_args(access.RECEIVE, repo.path, hooks, stateless=False)
        await self._start_git(repo, args, pushing.environment())
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        reader = _GitOutput(proc.stdout, self.moved)
        await self._send(await reader.advertisement())
        head = await self._request_head()
        request = pushreport.read_request(iter([head]))
        if request.updates:
            await asyncio.to_thread(pushing.prepare, request)
        await self._to_git(request.head + b"".join(request.rest))
        if not request.updates:  # nothing to push: git ends
            proc.stdin.close() if proc.stdin is not None else None
            await reader.rest()
            return await proc.wait()
        sending = asyncio.ensure_future(self._pack_to_git(len(head)))
        report = asyncio.ensure_future(reader.rest())
        await asyncio.wait({sending, report}, return_when=asyncio.FIRST_COMPLETED)
        if sending.done() and sending.exception() is not None:
            report.cancel()
            await asyncio.gather(report, return_exceptions=True)
            raise sending.exception()  # type: ignore[misc]
        answer = await report  # git has read the whole pack, and ended
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        await proc.wait()
        await self._send(await asyncio.to_thread(pushing.finish, request, answer))
        return 0

    async def _request_head(self) -> bytes:
        """The push's commands, its options and its pack's header as the client sent them
        (and whatever came with them)."""
        buffer = bytearray()
        at = 0

        async def need(size: int) -> None:
            while len(buffer) < at + size:
                data = await self._read()
                if not data:
                    raise BadRequest("malformed git request: the push ends early")
                buffer.extend(data)
                if len(buffer) > pushreport.MAX_PREFIX:
                    raise BadRequest("malformed git request: the push commands never end")

        async def section() -> list[bytes]:
            nonlocal at
            found: list[bytes] = []
            while True:
                await need(4)
                size = pushreport.section_length(bytes(buffer[at : at + 4]))
                if size == 0:
                    at += 4
                    return found
                await need(size)
                found.append(bytes(buffer[at + 4 : at + size]))
                at += size

        await need(4)  # (a client that hangs up at once pushes nothing)
        updates = await section()
        if not updates:
            return bytes(buffer)
        first = updates[0].rstrip(b"\n").partition(b"\0")[2].split()
        if b"push-options" in first:
            await section()
        if _sends_pack(updates):
            await need(12)  # a pack follows: its header says how many objects it has
        return bytes(buffer)

    async def _pack_to_git(self, already: int) -> None:
        """The rest of the push into git, until the client stops sending."""
        limit = self.forge.settings.max_push_bytes
        total = already
        while data := await self._read():
            total += len(data)
            if total > limit:
                raise BadRequest(f"the push is over the limit of {limit} bytes")
            await self._to_git(data)
        proc = self.proc
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()


def _sends_pack(updates: list[bytes]) -> bool:
    """Whether a push's updates are followed by a pack: git sends one unless every update
    deletes its ref."""
    for payload in updates:
        line = payload.rstrip(b"\n").partition(b"\0")[0]
        parts = line.split(b" ")
        if (
            parts[0] != b"shallow"
            and len(parts) >= 2
            and parts[1].decode("ascii", "replace") not in _ZERO
        ):
            return True
    return False


class _GitOutput:
    """git receive-pack's output: its advertisement (pkt-lines to the first flush), then,
    once git has ended, its report."""

    def __init__(self, stream: asyncio.StreamReader, moved: Callable[[], None]) -> None:
        self.stream = stream
        self.moved = moved
        self.buffer = bytearray()

    async def advertisement(self) -> bytes:
        at = 0
        while True:
            while len(self.buffer) < at + 4:
                await self._more()
            raw = bytes(self.buffer[at : at + 4])
            size = int(raw, 16) if raw.isalnum() else -1
            if size < 0:
                raise BadRequest("git's advertisement is malformed")
            if size == 0:
                at += 4
                out = bytes(self.buffer[:at])
                del self.buffer[:at]
                return out
            while len(self.buffer) < at + size:
                await self._more()
            at += size

    async def rest(self) -> bytes:
        while piece := await self.stream.read(CHUNK):
            self.moved()
            self.buffer.extend(piece)
        return bytes(self.buffer)

    async def _more(self) -> None:
        piece = await self.stream.read(CHUNK)
        if not piece:
            raise BadRequest("git ended before it advertised the refs")
        self.moved()
        self.buffer.extend(piece)
