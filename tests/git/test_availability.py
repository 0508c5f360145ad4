"""No client can make the others wait, and a pack cut short under the server fails one request.

A real ``floorless serve``: clients that announce a body and never send it, trickle it, or never
read a download; and a pack file truncated under the server's mapped handle (SIGBUS). Each test
asserts that a page still answers meanwhile (within a client timeout far above a page's cost,
never a measured latency) and what the server did with the stragglers.
"""

from __future__ import annotations

import http.client
import io
import os
import socket
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.forges import wait_for
from support.gitfixtures import build_one, git
from support.serving import Server, serving

from floorless.git.protocol import pkt_line

pytestmark = pytest.mark.network

CLIENT_TIMEOUT = 2  # seconds the server gives a dawdling client, in these tests
PAGE_TIMEOUT = 10  # a page that takes this long is stuck behind the stragglers


def _big_repo(path: Path) -> Path:
    """A repository with an incompressible 12 MB file: its archive and clone fill any socket;
    and a 2 MB one, read in-process by a raw download but too large for libgit2's cache of
    objects read (or code search's index), so read from the pack each time: from past the
    12 MB one (blobs are packed by name)."""
    work = path.with_suffix(".work")
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "noise.bin").write_bytes(os.urandom(12 * 1024 * 1024))
    (work / "tail.bin").write_bytes(os.urandom(2 * 1024 * 1024))
    (work / "README.md").write_text("big\n")
    (work / "notes.txt").write_text("read from the pack only when asked for\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org"}
    env |= {"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org"}
    subprocess.run(["git", "-C", str(work), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "big"], check=True, env=env)
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(work), str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("availability")
    repos = root / "repos"
    build_one(repos / "alice" / "one.git")
    _big_repo(repos / "alice" / "big.git")
    config = root / "floorless.toml"
    config.write_text(f"client_timeout = {CLIENT_TIMEOUT}\nthreads = 4\n")
    with serving(repos, root / "data", "--config", str(config)) as running:
        wait_for(lambda: _get(running, "/alice/big")[0] == 200)
        yield running


def _get(server: Server, path: str, timeout: float = PAGE_TIMEOUT) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _connect(server: Server, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(head)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """What the server sent before it closed the connection (or the test's patience ran out)."""
    sock.settimeout(CLIENT_TIMEOUT * 10)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def test_clients_that_never_send_their_body_do_not_stop_the_pages(server: Server) -> None:
    stalled = [
        _connect(
            server,
            b"POST /-/login HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n",
        )
        for _ in range(6)
    ]
    stalled.append(
        _connect(
            server,
            b"POST /alice/one.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-git-upload-pack-request\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n5\r\n00",
        )
    )
    try:
        for _ in range(3):
            status, body = _get(server, "/alice/one/raw/branch/main/README.md")
            assert status == 200, body
        # every one of them is answered 408 once it has been silent for client_timeout
        for sock in stalled:
            assert _answer(sock).startswith(b"HTTP/1.1 408")
    finally:
        for sock in stalled:
            sock.close()


def test_a_trickled_body_holds_no_request_thread(server: Server) -> None:
    head = (
        b"POST /-/login HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 60\r\n\r\n"
    )
    tricklers = [_connect(server, head) for _ in range(6)]
    try:
        for step in range(4):
            for sock in tricklers:
                sock.sendall(b"a")
            status, _ = _get(server, "/alice/one")
            assert status == 200, f"step {step}"
            time.sleep(CLIENT_TIMEOUT / 4)
    finally:
        for sock in tricklers:
            sock.close()


def test_a_body_over_the_limit_is_refused_before_it_is_read(server: Server) -> None:
    sock = _connect(
        server,
        b"POST /-/login HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 99999999\r\n\r\n",
    )
    try:
        assert _answer(sock).startswith(b"HTTP/1.1 413")
    finally:
        sock.close()


def _unread_fetch(server: Server) -> socket.socket:
    """A v2 fetch of the whole big repository whose answer is never read."""
    tip = git(server.repos / "alice" / "big.git", "rev-parse", "main").decode().strip()
    body = (
        pkt_line(b"command=fetch\n")
        + b"0001"
        + pkt_line(b"no-progress\n")
        + pkt_line(f"want {tip}\n".encode())
        + pkt_line(b"done\n")
        + b"0000"
    )
    head = (
        b"POST /alice/big.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(head + body)
    return sock


def _unread_archive(server: Server) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(b"GET /alice/big/archive/main.tar HTTP/1.1\r\nHost: x\r\n\r\n")
    return sock


def test_downloads_nobody_reads_do_not_stop_the_pages_and_are_dropped(server: Server) -> None:
    readers = [_unread_archive(server), _unread_archive(server)]
    readers += [_unread_fetch(server), _unread_fetch(server)]
    try:
        wait_for(lambda: len(server.descendants()) >= 4, timeout=30)  # four git children
        for _ in range(3):
            assert _get(server, "/alice/one/raw/branch/main/README.md")[0] == 200
            assert _get(server, "/alice/big")[0] == 200
        # after client_timeout without progress the answers are abandoned and git is stopped
        wait_for(lambda: server.descendants() == [], timeout=CLIENT_TIMEOUT * 15)
    finally:
        for sock in readers:
            sock.close()


def test_a_pack_truncated_under_the_server_fails_one_request_and_no_other(
    tmp_path: Path,
) -> None:
    """A pack truncated under the worker's mapping (another host's repack, a failing disk)
    raised SIGBUS and ended the worker: every request in flight, on every repository, was
    lost, and connections were refused until a new one listened. Now the read that finds
    the pack cut short fails alone; a download in flight and the pages asked for meanwhile
    are answered by the same worker, which reopens the repository's handle afterwards."""
    repos = tmp_path / "repos"
    build_one(repos / "alice" / "one.git")
    big = _big_repo(repos / "alice" / "big.git")
    other = _big_repo(repos / "alice" / "other.git")
    noise = (other.with_suffix(".work") / "noise.bin").read_bytes()
    with serving(repos, tmp_path / "data") as server:
        # the home page maps the pack (it reads the commit and tree from it)
        assert _get(server, "/alice/big")[0] == 200
        worker = server.worker_pids()[1]
        # in flight on another repository: a 12 MB archive, its first bytes read
        download = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PAGE_TIMEOUT)
        download.request("GET", "/alice/other/archive/main.tar")
        answer = download.getresponse()
        assert answer.status == 200
        received = [answer.read(65536)]
        # and pages asked for all along, by four clients
        results: list[object] = []
        done = threading.Event()

        def ask() -> None:
            while not done.is_set():
                try:
                    results.append(_get(server, "/alice/one/raw/branch/main/README.md")[0])
                except (http.client.HTTPException, OSError) as exc:
                    results.append(exc)

        askers = [threading.Thread(target=ask) for _ in range(4)]
        for asker in askers:
            asker.start()
        try:
            wait_for(lambda: len(results) >= 8)
            (pack,) = (big / "objects" / "pack").glob("*.pack")
            with open(pack, "r+b") as fh:  # as another host's repack or a failing disk might
                fh.truncate(12)  # the pack's header alone
            # a blob read from the pack comes from the now missing part of the mapping
            status, _ = _get(server, "/alice/big/raw/branch/main/tail.bin")
            assert 500 <= status < 600, status
            asked = len(results)
            wait_for(lambda: len(results) >= asked + 8)
        finally:
            done.set()
            for asker in askers:
                asker.join()
        assert results and all(result == 200 for result in results), results
        while chunk := answer.read(65536):
            received.append(chunk)
        download.close()
        with tarfile.open(fileobj=io.BytesIO(b"".join(received))) as tar:
            (member,) = [m for m in tar.getmembers() if m.name.endswith("noise.bin")]
            extracted = tar.extractfile(member)
            assert extracted is not None and extracted.read() == noise
        assert server.worker_pids()[1] == worker and server.proc.poll() is None
        # the handle is reopened by the next ref check; the repository keeps answering errors
        wait_for(lambda: b"alice/big: handle reopened after a mapped" in server.log.read_bytes())
        status, _ = _get(server, "/alice/big/raw/branch/main/tail.bin")
        assert 400 <= status < 600, status
        assert _get(server, "/alice/one")[0] == 200
        assert server.worker_pids()[1] == worker


def _alive(server: Server, path: str) -> bool:
    try:
        return _get(server, path, timeout=5)[0] == 200
    except (http.client.HTTPException, OSError):
        return False
