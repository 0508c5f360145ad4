"""The relay's socket and frames (``relay.py``), and the relaying process itself: what
``floorless ssh serve`` runs, importing nothing of the forge (it starts for every session)."""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import socket
import struct
import sys
from pathlib import Path

from floorless.core.config import Settings

CHUNK = 65536
HEADER = struct.Struct(">cI")
MAX_ADDRESS = 107  # bytes of a Unix socket's path (sun_path, without its NUL)


def socket_dir(settings: Settings) -> Path:
    return settings.runtime_dir / "ssh"


def socket_path(settings: Settings) -> Path:
    return socket_dir(settings) / "relay.sock"


def socket_address(settings: Settings) -> str:
    """Where the relay listens: ``socket_path``, or, when that path is longer than a Unix
    socket's address may be (107 bytes: a deep data directory), a name in Linux's abstract
    namespace made from it. An abstract socket has no file to guard it; the forge's end
    answers only its own user (``relay.py``)."""
    path = str(socket_path(settings))
    if len(os.fsencode(path)) <= MAX_ADDRESS:
        return path
    return "\0floorless-ssh-" + hashlib.sha256(os.fsencode(path)).hexdigest()[:32]


def frame(kind: bytes, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def relay(settings: Settings, key_id: int, command: str | None, version: str | None) -> int:
    """Carry this process's standard input and output to the forge and back; the exit
    status the forge gave."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(socket_address(settings))
    except OSError:
        sys.stderr.write("floorless: the forge is not running (no SSH relay socket)\n")
        return 1
    hello = json.dumps({"key": key_id, "command": command, "protocol": version}).encode()
    conn.sendall(frame(b"h", hello))
    stdin, stdout, stderr = sys.stdin.fileno(), sys.stdout.fileno(), sys.stderr.fileno()
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdin, selectors.EVENT_READ)
        selector.register(conn, selectors.EVENT_READ)
        while True:
            for ready, _ in selector.select():
                if ready.fd == stdin:
                    data = os.read(stdin, CHUNK)
                    try:
                        conn.sendall(frame(b"i", data) if data else frame(b"e", b""))
                    except OSError:  # the forge has ended the session: read what it said
                        data = b""
                    if not data:
                        selector.unregister(stdin)
                    continue
                data = conn.recv(CHUNK)
                if not data:
                    return 1  # the forge went away mid-session
                buffer += data
                while len(buffer) >= HEADER.size:
                    kind, size = HEADER.unpack(buffer[: HEADER.size])
                    if len(buffer) < HEADER.size + size:
                        break
                    payload = buffer[HEADER.size : HEADER.size + size]
                    buffer = buffer[HEADER.size + size :]
                    if kind == b"x":
                        return int(struct.unpack(">i", payload)[0])
                    _write_all(stdout if kind == b"o" else stderr, payload)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
