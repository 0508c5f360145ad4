"""The built-in SSH server: asyncssh on an event loop of its own, in a thread of each server
process (with several, each listens on the port: the system spreads connections over them).

- Host keys (Ed25519 and ECDSA) are made once in the data directory (``<data>/ssh/``) and kept:
  a client that trusted the server goes on trusting it after a restart.
- Public keys alone sign in, a person's or a deploy key (``accounts/keys.py``); the user name
  is not asked (``git@``, or any). Each key a client offers is one question to the database;
  after ``MAX_AUTH_TRIES`` refused keys the connection is closed.
- A signed-in connection runs git's two commands (``session.py``); ``ssh -T`` without a
  command is greeted with the person's name; shells, terminals, subsystems, port, agent and
  X11 forwarding are refused.
- Each session reads its key and its person again: one connection (a client's ``ControlMaster``)
  may last for hours, and a key removed or a person gone since it signed in starts nothing
  more on it, as through OpenSSH's server (``relay.py``). At most ``MAX_SESSIONS`` sessions
  at once on one connection (OpenSSH's ``MaxSessions``): each is a git process.
- At most ``ssh_max_connections`` connections at once per process; one silent for
  ``ssh_idle_timeout`` seconds is closed, signed in or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh

from floorless.accounts.access import Viewer
from floorless.accounts.keys import SshKey
from floorless.core import timing
from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.gitservice.access import Caller
from floorless.ssh import commands, relay
from floorless.ssh.session import Session

log = logging.getLogger(__name__)
logging.getLogger("asyncssh").setLevel(logging.WARNING)  # (it logs every connection's steps)

MAX_AUTH_TRIES = 6  # refused keys before the connection is closed (OpenSSH's MaxAuthTries)
MAX_SESSIONS = 10  # sessions at once on one connection (OpenSSH's MaxSessions)
# Connections from one address not signed in yet: more are closed at once, so that one
# client's half-open connections cannot take the whole of ``ssh_max_connections`` for the
# sign-in time (what OpenSSH's MaxStartups guards against). A clone signs in within a second.
MAX_SIGNING_IN_PER_ADDRESS = 20
SIGN_IN_SECONDS = 60.0  # at most, to sign in (OpenSSH's LoginGraceTime is 120)
# Ed25519, and ECDSA for the clients without it. No RSA host key: with one, asyncssh offers
# RSA key exchange too, and each connection's handshake took 200 ms instead of 15.
HOST_KEYS: tuple[tuple[str, str], ...] = (
    ("ssh-ed25519", "host_ed25519_key"),
    ("ecdsa-sha2-nistp256", "host_ecdsa_key"),
)


def host_key_dir(settings: Settings) -> Path:
    return settings.data / "ssh"


def host_keys(settings: Settings) -> list[Path]:
    """The server's host keys, made now if missing (each written whole, then linked into
    place: two processes starting at once keep the one that got there first)."""
    directory = host_key_dir(settings)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    paths = []
    for algorithm, name in HOST_KEYS:
        path = directory / name
        if not path.exists():
            key = asyncssh.generate_private_key(algorithm)
            scratch = directory / f".{name}.{os.getpid()}"
            fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(key.export_private_key("openssh"))
            with contextlib.suppress(FileExistsError):
                os.link(scratch, path)
            scratch.unlink()
        paths.append(path)
    return paths


def fingerprints(settings: Settings) -> list[str]:
    """The host keys' SHA-256 fingerprints, as ``ssh-keygen -l`` and a client's first
    connection show them (for ``doctor``); none when they are not made yet."""
    found = []
    for _, name in HOST_KEYS:
        path = host_key_dir(settings) / name
        if path.exists():
            key = asyncssh.read_private_key(str(path))
            found.append(f"{key.get_algorithm()} {key.get_fingerprint('sha256')}")
    return found


def public_of(settings: Settings) -> str:
    """The forge's address for links made outside a web request (a push's messages)."""
    if settings.base_url:
        return settings.base_url.rstrip("/")
    return f"http://{settings.host}:{settings.port}"


def caller_of(forge: Forge, key: SshKey) -> Caller | None:
    """Who signs in with ``key``: its person, or for a deploy key the person who added it (or
    the repository's owner); None when nobody is left."""
    accounts = forge.accounts
    if key.repo_id is None:
        account = accounts.by_id(key.user_id) if key.user_id is not None else None
        return Caller(Viewer(account)) if account is not None else None
    account = accounts.by_id(key.added_by) if key.added_by is not None else None
    if account is None:
        repo = forge.registry.by_id(key.repo_id)
        account = accounts.get(repo.owner) if repo is not None else None
    return Caller(Viewer(account), deploy=key) if account is not None else None


def greeting(caller: Caller, key: SshKey) -> str:
    if caller.deploy is not None:
        what = "read-only" if key.read_only else "read and write"
        return (
            f"Hello! The deploy key {key.title!r} is signed in ({what}), but floorless gives no"
            " shell: use it with git clone, fetch and push.\n"
        )
    return (
        f"Hello, {caller.viewer.name}! You are signed in with the key {key.title!r}, but floorless"
        " gives no shell: use git clone, fetch and push.\n"
    )


class SshServer:
    """The built-in server of one process; ``start()`` returns once it listens."""

    def __init__(self, forge: Forge, host: str | None = None, port: int | None = None) -> None:
        settings = forge.settings
        self.forge = forge
        self.host = host if host is not None else (settings.ssh_host or settings.host)
        self.port = port if port is not None else settings.ssh_port
        self.any_port = port == 0  # asked for a free port (tests), not for no server
        self.connections = 0
        self.unsigned: dict[str, int] = {}  # connections not signed in yet, by address
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listener: asyncssh.SSHAcceptor | None = None
        self.relay: relay.Listener | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    def start(self) -> None:
        keys = host_keys(self.forge.settings) if self.port or self.any_port else []
        self._thread = threading.Thread(target=self._run, args=(keys,), name="fl-ssh", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def _run(self, keys: list[Path]) -> None:
        loop = self.loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._listen(keys))
        except BaseException as exc:  # noqa: BLE001 (told to start(), which raises it)
            self._failure = exc
            loop.run_until_complete(self._close())  # (the relay, if it started)
            loop.close()
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _listen(self, keys: list[Path]) -> None:
        settings = self.forge.settings
        listener = relay.Listener(self.forge, self.serve_relayed)
        try:
            await listener.start()
            self.relay = listener
        except OSError as exc:  # the built-in server may still serve
            log.error("ssh: OpenSSH's relay cannot listen: %s", exc)
        if not self.port and not self.any_port:
            return  # OpenSSH's server alone: the relay's socket
        self.listener = await asyncssh.create_server(
            lambda: _Connection(self),
            self.host,
            self.port,
            server_host_keys=[str(k) for k in keys],
            process_factory=self._process,
            encoding=None,
            allow_pty=False,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_scp=False,
            login_timeout=min(settings.ssh_idle_timeout, SIGN_IN_SECONDS),
            keepalive_interval=0,
            reuse_port=True,
            reuse_address=True,
        )
        if self.port == 0:
            self.port = self.listener.get_port()

    async def _close(self) -> None:
        if self.relay is not None:
            await self.relay.stop()
        if self.listener is not None:
            self.listener.close()
            await self.listener.wait_closed()

    def stop(self) -> None:
        loop, self.loop = self.loop, None
        if loop is None or self._thread is None:
            return
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # (closed meanwhile)
                asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=10)
                loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)

    def signed_in(self, key: SshKey) -> None:
        """Note the key's use (its last use, on the settings page), off the loop."""
        assert self.loop is not None
        self.loop.run_in_executor(None, self.forge.keys.used, key)

    async def _process(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        connection = process.get_extra_info("connection")
        owner = connection.get_owner()
        assert isinstance(owner, _Connection)
        owner.sessions += 1
        timer = timing.start_request()  # (this task's: the processes it starts are counted)
        try:
            if owner.sessions > MAX_SESSIONS:
                text = f"floorless: at most {MAX_SESSIONS} sessions at once on a connection\n"
                process.stderr.write(text.encode())
                status = 1
            else:
                key, caller = await self._current(owner)
                status = await self.serve(caller, key, process)
        except (ConnectionError, asyncssh.Error) as exc:  # the client went away
            log.info("ssh session: the connection ended: %s", exc)
            status = 1
        except Exception:
            log.exception("ssh session")
            status = 1
        finally:
            owner.sessions -= 1
            owner.moved()
        log.info(
            "ssh: %s %s: exit %d in %.2f s, processes: %d (signing in: %d)",
            owner.key.fingerprint if owner.key is not None else "-",
            process.command or process.subsystem or "(no command)",
            status,
            timer.total(),
            timer.spawns,
            owner.signing_in.spawns,
        )
        with contextlib.suppress(OSError, asyncssh.Error, BrokenPipeError):
            process.exit(status)

    async def _current(self, owner: _Connection) -> tuple[SshKey | None, Caller | None]:
        """The connection's key and who it signs in, as the database says now."""
        if owner.key is None:
            return None, None
        forge = self.forge
        key = await asyncio.to_thread(forge.keys.get, owner.key.id)
        if key is None or key.fingerprint != owner.key.fingerprint:
            return None, None
        return key, await asyncio.to_thread(caller_of, forge, key)

    async def serve(
        self,
        caller: Caller | None,
        key: SshKey | None,
        process: asyncssh.SSHServerProcess[bytes],
    ) -> int:
        if key is None:
            process.stderr.write(b"floorless: this key is not known (removed?)\n")
            return 1
        if caller is None:
            process.stderr.write(b"floorless: this key's account is gone\n")
            return 1
        if process.subsystem:
            process.stderr.write(f"floorless: {commands.ONLY}\n".encode())
            return 1
        if process.command is None:
            process.stdout.write(greeting(caller, key).encode())
            return 1
        channel = _ProcessChannel(process)
        environment = process.env or {}
        version = environment.get("GIT_PROTOCOL")
        session = Session(
            self.forge,
            caller,
            channel,
            public_of(self.forge.settings),
            version if isinstance(version, str) else None,
        )
        return await session.run(process.command)

    async def serve_relayed(
        self, key: SshKey, command: str | None, version: str | None, channel: relay.Served
    ) -> int:
        """A session OpenSSH's server authenticated and ``floorless ssh serve`` relays."""
        caller = await asyncio.to_thread(caller_of, self.forge, key)
        if caller is None:
            channel.error("floorless: this key's account is gone\n")
            return 1
        await asyncio.to_thread(self.forge.keys.used, key)
        if not command:
            await channel.write(greeting(caller, key).encode())
            return 1
        session = Session(self.forge, caller, channel, public_of(self.forge.settings), version)
        timer = timing.start_request()
        status = await session.run(command)
        log.info(
            "ssh (relayed): %s %s: exit %d in %.2f s, processes: %d",
            key.fingerprint,
            command,
            status,
            timer.total(),
            timer.spawns,
        )
        return status


class _ProcessChannel:
    def __init__(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        self.process = process

    async def read(self, size: int) -> bytes:
        try:
            return await self.process.stdin.read(size)
        except (asyncssh.BreakReceived, asyncssh.SignalReceived, asyncssh.TerminalSizeChanged):
            return b""

    async def write(self, data: bytes) -> None:
        self.process.stdout.write(data)
        await self.process.stdout.drain()

    def error(self, text: str) -> None:
        self.process.stderr.write(text.encode("utf-8", "replace"))


class _Connection(asyncssh.SSHServer):
    """One client's connection: its key once signed in, and the server's count."""

    def __init__(self, server: SshServer) -> None:
        self.server = server
        self.key: SshKey | None = None
        self.caller: Caller | None = None
        self.refused = 0
        self.tries = 0
        self.sessions = 0
        self.signing_in = timing.RequestTimer()
        self.address = ""  # while it has not signed in: counted in the server's unsigned
        self.conn: asyncssh.SSHServerConnection | None = None
        self._offered: tuple[SshKey, Caller] | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._last = 0.0

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.server.connections += 1
        limit = self.server.forge.settings.ssh_max_connections
        if self.server.connections > limit:
            log.warning("ssh: %d connections at once; closing a new one", limit)
            conn.close()
            return
        peer = conn.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        waiting = self.server.unsigned
        if waiting.get(address, 0) >= MAX_SIGNING_IN_PER_ADDRESS:
            log.warning("ssh: %s has %d connections signing in; closing a new one",
                        address, MAX_SIGNING_IN_PER_ADDRESS)  # fmt: skip
            conn.close()
            return
        waiting[address] = waiting.get(address, 0) + 1
        self.address = address
        self.moved()
        self._watch()

    def _signed_in_or_gone(self) -> None:
        if self.address:
            waiting = self.server.unsigned
            waiting[self.address] -= 1
            if not waiting[self.address]:
                del waiting[self.address]
            self.address = ""

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections -= 1
        self._signed_in_or_gone()
        if self._idle is not None:
            self._idle.cancel()

    def moved(self) -> None:
        self._last = asyncio.get_running_loop().time()

    def _watch(self) -> None:
        """Close the connection once it held no session for the idle time (a session
        watches itself: ``Session``)."""
        loop = asyncio.get_running_loop()
        idle = self.server.forge.settings.ssh_idle_timeout
        if self.sessions == 0 and loop.time() - self._last >= idle and self.conn is not None:
            self.conn.close()
            return
        self._idle = loop.call_later(max(0.05, self._last + idle - loop.time()), self._watch)

    def begin_auth(self, username: str) -> bool:
        return True  # every connection signs in with a key

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        self.moved()
        timing.start_request_with(self.signing_in)  # what signing in costs, counted apart
        self.tries += 1  # (a known key with a bad signature is accepted here, then refused)
        if self.tries > 2 * MAX_AUTH_TRIES and self.conn is not None:
            self.conn.close()
            return False
        fingerprint = key.get_fingerprint("sha256")
        forge = self.server.forge
        found = await asyncio.to_thread(forge.keys.by_fingerprint, fingerprint)
        caller = await asyncio.to_thread(caller_of, forge, found) if found is not None else None
        if found is None or caller is None:
            self.refused += 1
            if self.refused >= MAX_AUTH_TRIES and self.conn is not None:
                self.conn.close()
            return False
        self._offered = (found, caller)  # the last key accepted: the one that signs in
        return True

    def auth_completed(self) -> None:
        self.moved()
        self._signed_in_or_gone()
        if self._offered is not None:
            self.key, self.caller = self._offered
            self.server.signed_in(self.key)

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False  # no port forwarding

    def connection_requested(self, *args: Any) -> bool:
        return False

    def unix_connection_requested(self, dest_path: str) -> bool:
        return False

    def unix_server_requested(self, listen_path: str) -> bool:
        return False


def start_in_process(forge: Forge) -> Callable[[], None]:
    """This server process's SSH side: the relay's socket for OpenSSH's server, and the
    built-in server when ``ssh_port`` asks for one. Its stop."""
    server = SshServer(forge)
    try:
        server.start()
    except OSError as exc:  # (the port taken, say): the pages are served all the same
        log.error(
            "ssh: cannot listen on %s:%d: %s; no git over SSH in this process",
            server.host,
            server.port,
            exc,
        )
        return server.stop
    if server.listener is not None:
        log.info("ssh: listening on %s:%d", server.host, server.port)
    return server.stop
