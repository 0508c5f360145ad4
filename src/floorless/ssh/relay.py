"""git over OpenSSH's own server: ``floorless ssh serve KEY-ID`` relays the session to the
running forge, which serves it as a built-in session (``session.py``).

OpenSSH signs the client in (its ``AuthorizedKeysCommand``, ``floorless ssh authorized-keys``,
lists each key with a forced command naming the key) and runs ``floorless ssh serve KEY-ID``
with the client's command in ``SSH_ORIGINAL_COMMAND``. That process holds nothing of the
forge: it connects to a socket of the forge's runtime directory, sends what it was asked, and
then carries bytes both ways. The forge does the rest, so a push through OpenSSH has every
effect one through the built-in server or HTTP has (caches, index, pull requests, webhooks).

The socket (``<runtime>/ssh/relay.sock``) is the forge's user's alone (its directory is
``0700``, and each connection's peer is checked to be that user): whoever reaches it speaks
for any key. One process of the server holds it at a time (``relay.lock``); should that
process end, another takes it within ``RETRY_SECONDS``.

Frames, both ways: a kind byte, a 4-byte big-endian length, the payload. To the forge first
``h`` (JSON: ``key``, ``command``, ``protocol``), then ``i`` (input) and ``e`` (input ended);
back ``o`` (output), ``r`` (error output) and ``x`` (the exit status, 4 bytes: the end).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import IO, Protocol

from floorless.accounts.keys import SshKey
from floorless.forge import Forge
from floorless.ssh.wire import CHUNK, HEADER, frame, socket_address, socket_dir

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0
MAX_HELLO = 16_384


class Served(Protocol):
    async def read(self, size: int) -> bytes: ...

    async def write(self, data: bytes) -> None: ...

    def error(self, text: str) -> None: ...


Handler = Callable[[SshKey, str | None, str | None, Served], Awaitable[int]]


class Listener:
    """The forge's end: the socket, taken when this process may hold it."""

    def __init__(self, forge: Forge, handler: Handler) -> None:
        self.forge = forge
        self.handler = handler
        self.server: asyncio.AbstractServer | None = None
        self._lock: IO[bytes] | None = None
        self._retry: asyncio.Task[None] | None = None

    async def start(self) -> None:
        directory = socket_dir(self.forge.settings)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
        if not await self._take():
            self._retry = asyncio.ensure_future(self._keep_trying())

    async def _keep_trying(self) -> None:
        while not await self._take():
            await asyncio.sleep(RETRY_SECONDS)

    async def _take(self) -> bool:
        settings = self.forge.settings
        lock = open(socket_dir(settings) / "relay.lock", "ab")  # noqa: SIM115 (held while serving)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            return False
        self._lock = lock
        address = socket_address(settings)
        abstract = address.startswith("\0")
        if not abstract:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)  # left by a process that ended
        self.server = await asyncio.start_unix_server(self._serve, path=address)
        if not abstract:
            os.chmod(address, 0o600)
        return True

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            address = socket_address(self.forge.settings)
            if not address.startswith("\0"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(address)
        if self._lock is not None:
            self._lock.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status = 1
        channel = _Relayed(reader, writer)
        try:
            peer = writer.get_extra_info("socket")
            creds = peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            if uid != os.getuid():
                log.warning("ssh relay: a connection from uid %d refused", uid)
                return
            kind, payload = await channel.frame()
            if kind != b"h" or len(payload) > MAX_HELLO:
                return
            hello = json.loads(payload)
            key = await asyncio.to_thread(self.forge.keys.get, int(hello["key"]))
            if key is None:
                channel.error("floorless: this key is not known (removed?)\n")
            else:
                command, version = hello.get("command"), hello.get("protocol")
                status = await self.handler(
                    key,
                    command if isinstance(command, str) else None,
                    version if isinstance(version, str) else None,
                    channel,
                )
        except (OSError, ValueError, KeyError, TypeError, asyncio.IncompleteReadError) as exc:
            log.info("ssh relay: %s", exc)
        except Exception:
            log.exception("ssh relay")
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(frame(b"x", struct.pack(">i", status)))
                await writer.drain()
                writer.close()


class _Relayed:
    """A relayed session as ``session.Channel``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.ended = False

    async def frame(self) -> tuple[bytes, bytes]:
        head = await self.reader.readexactly(HEADER.size)
        kind, size = HEADER.unpack(head)
        if size > 1 << 20:
            raise ValueError("a relay frame is too big")
        return kind, await self.reader.readexactly(size)

    async def read(self, size: int) -> bytes:
        while not self.ended:
            try:
                kind, payload = await self.frame()
            except asyncio.IncompleteReadError:
                self.ended = True
                break
            if kind == b"e":
                self.ended = True
            elif kind == b"i" and payload:
                return payload
        return b""

    async def write(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            self.writer.write(frame(b"o", data[start : start + CHUNK]))
        await self.writer.drain()

    def error(self, text: str) -> None:
        self.writer.write(frame(b"r", text.encode("utf-8", "replace")))
