"""An upload cut short leaves nothing, against a real ``floorless serve``: a Git LFS object's
PUT (after its batch) and a release asset's POST (a raw body, or multipart), each sent in part
over a raw socket, then the server's processes killed with SIGKILL while its gateway spools the
body. A new server on the same data directory holds no object and no record of the upload, its
store's ``tmp/`` no part file once its start has swept it (a day-old part file, as a store's
write killed halfway leaves it, is put there before the restart, so the sweep has one to find), and
the same upload then succeeds whole. A client that goes away in the middle of its body (the
server alive) leaves no spooled body and no part file either, and the server goes on serving.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from support.forges import patience, wait_for
from support.githttp import PASSWORD, Site, git
from support.serving import Server, serving

from floorless.files.store import PART_AGE

pytestmark = pytest.mark.network

SIZE = 6 << 20  # past the gateway's 1 MiB in memory: spooled to disk as it arrives
SENT = SIZE // 2  # what arrives before the upload is cut short
LFS_MEDIA = "application/vnd.git-lfs+json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A data directory with alice, her repository ``alice/box`` (one commit) and a release."""
    with serving(tmp_path / "repos", tmp_path / "data") as server:
        server.admin(
            "user", "create", "alice", "--email", "alice@example.org", "--password-stdin",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
        server.admin("repo", "create", "alice/box")
        work = tmp_path / "work"
        git("init", "-q", str(work))
        (work / "README.md").write_text("# box\n")
        git("add", "README.md", cwd=work)
        git("commit", "-q", "-m", "First", cwd=work)
        git("push", "-q", Site(server).url("alice/box", "alice"), "main", cwd=work)
        made = _json(server, "POST", "/api/v1/repos/alice/box/releases", {"tag_name": "v1"})
        (tmp_path / "release").write_text(str(made["id"]))
    return tmp_path


@contextmanager
def _server(root: Path) -> Iterator[Server]:
    with serving(root / "repos", root / "data") as server:
        yield server


def _auth() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}


def _json(
    server: Server, method: str, path: str, body: object | None = None, **headers: str
) -> Any:
    request = urllib.request.Request(
        server.url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json", **_auth(), **headers},
    )
    with urllib.request.urlopen(request, timeout=patience(60)) as answer:
        return json.loads(answer.read())


def _batch(server: Server, operation: str, oid: str) -> dict[str, Any]:
    answer = _json(
        server, "POST", "/alice/box.git/info/lfs/objects/batch",
        {"operation": operation, "transfers": ["basic"], "objects": [{"oid": oid, "size": SIZE}]},
        Accept=LFS_MEDIA, **{"Content-Type": LFS_MEDIA},
    )  # fmt: skip
    (entry,) = answer["objects"]
    assert isinstance(entry, dict)
    return entry


def _release(root: Path) -> int:
    return int((root / "release").read_text())


def _store(server: Server) -> Path:
    return server.data / "storage"


def _parts(server: Server) -> list[str]:
    return sorted(p.name for p in (_store(server) / "tmp").iterdir())


def _objects(server: Server) -> list[str]:
    return sorted(p.name for p in (_store(server) / "sha256").glob("*/*/*"))


class Upload:
    """One upload as raw HTTP/1.1: its request head and its whole body."""

    def __init__(self, server: Server, kind: str, data: bytes) -> None:
        self.data = data
        self.oid = hashlib.sha256(data).hexdigest()
        headers = dict(_auth())
        if kind == "lfs":
            action = _batch(server, "upload", self.oid)["actions"]["upload"]
            path = "/" + action["href"].split("://", 1)[1].partition("/")[2]
            headers = {**action.get("header", {}), "Content-Type": "application/octet-stream"}
            method, body = "PUT", data
        elif kind == "raw":
            path = f"/api/v1/repos/alice/box/releases/{_release(server.data.parent)}/assets"
            path += "?name=kept.bin"
            headers["Content-Type"] = "application/octet-stream"
            method, body = "POST", data
        else:
            path = f"/api/v1/repos/alice/box/releases/{_release(server.data.parent)}/assets"
            boundary = secrets.token_hex(12)
            headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
            method = "POST"
            body = (
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="attachment"; '
                    f'filename="kept.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
                ).encode()
                + data
                + f"\r\n--{boundary}--\r\n".encode()
            )
        headers["Content-Length"] = str(len(body))
        headers["Host"] = f"127.0.0.1:{server.port}"
        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
        self.head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        self.body = body

    def begin(self, server: Server) -> socket.socket:
        """Connect and send the head and part of the body; return once the server's gateway
        is spooling it (its file open in the runtime directory)."""
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=patience(60))
        sock.sendall(self.head + self.body[:SENT])
        wait_for(lambda: _spooling(server) == 1)
        return sock

    def whole(self, server: Server) -> int:
        """Send it all and read the answer's status."""
        with socket.create_connection(("127.0.0.1", server.port), timeout=patience(60)) as sock:
            sock.sendall(self.head + self.body)
            answer = b""
            while b"\r\n" not in answer:
                piece = sock.recv(4096)
                assert piece, answer
                answer += piece
        return int(answer.split(b" ", 2)[1])


def _spooling(server: Server) -> int:
    """How many files the server's worker holds open in its runtime directory's ``tmp/``
    (the gateway's spool of a request body being read)."""
    spool = str(server.data / "run" / "tmp") + "/"
    count = 0
    for pid in server.worker_pids()[1:]:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd).startswith(spool):
                    count += 1
            except FileNotFoundError:
                continue
    return count


def _kill(server: Server) -> int:
    """SIGKILL the server's processes, the ones it started (by their ids); how many."""
    pids = server.worker_pids() + server.descendants()
    for pid in pids:
        with suppress(ProcessLookupError):  # a git child that has just ended
            os.kill(pid, signal.SIGKILL)
    server.proc.wait(timeout=patience(30))
    wait_for(lambda: not any(_alive(pid) for pid in pids))
    return len(pids)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _assets(server: Server, root: Path) -> list[dict[str, Any]]:
    found = _json(server, "GET", f"/api/v1/repos/alice/box/releases/{_release(root)}/assets")
    assert isinstance(found, list)
    return found


def _held(server: Server, kind: str, upload: Upload, root: Path) -> bool:
    """Whether the server has a record of the upload: the LFS object in the repository, or
    the release's asset."""
    if kind == "lfs":
        return "actions" in _batch(server, "download", upload.oid)
    return [a["name"] for a in _assets(server, root)] == ["kept.bin"]


def _download(server: Server, kind: str, upload: Upload, root: Path) -> bytes:
    if kind == "lfs":
        action = _batch(server, "download", upload.oid)["actions"]["download"]
        request = urllib.request.Request(action["href"], headers=action.get("header", {}))
    else:
        (asset,) = _assets(server, root)
        request = urllib.request.Request(asset["browser_download_url"], headers=_auth())
    with urllib.request.urlopen(request, timeout=patience(60)) as answer:
        return bytes(answer.read())


KINDS = ["lfs", "raw", "multipart"]
OK = {"lfs": 200, "raw": 201, "multipart": 201}


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_server_keeps_nothing_of_an_upload_cut_short(root: Path, kind: str) -> None:
    data = os.urandom(SIZE)
    with _server(root) as server:
        upload = Upload(server, kind, data)
        sock = upload.begin(server)
        assert _kill(server) >= 2  # granian's main process and its worker at least
        sock.close()
        # what a store's write killed halfway a day ago leaves, for the start's sweep to find
        # (a younger one may be another process's upload in flight: it is left alone)
        part = _store(server) / "tmp" / "0123456789abcdef01234567.part"
        part.write_bytes(data[:SENT])
        old = time.time() - PART_AGE - 60
        os.utime(part, (old, old))
    with _server(root) as server:
        assert _parts(server) == []
        assert _objects(server) == []
        assert not _held(server, kind, upload, root)
        again = Upload(server, kind, data)
        assert again.whole(server) == OK[kind]
        assert _objects(server) == [upload.oid]
        assert _parts(server) == []
        assert _held(server, kind, upload, root)
        assert _download(server, kind, upload, root) == data


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_gone_mid_body_leaves_no_part_and_the_server_serves_on(
    root: Path, kind: str
) -> None:
    data = os.urandom(SIZE)
    with _server(root) as server:
        upload = Upload(server, kind, data)
        sock = upload.begin(server)
        sock.close()
        wait_for(lambda: _spooling(server) == 0)  # the spool let go when the client went
        assert _parts(server) == []
        assert _objects(server) == []
        assert not _held(server, kind, upload, root)
        assert server.proc.poll() is None
        assert Upload(server, kind, data).whole(server) == OK[kind]
        assert _objects(server) == [upload.oid]
        assert _parts(server) == []
        assert _download(server, kind, upload, root) == data
