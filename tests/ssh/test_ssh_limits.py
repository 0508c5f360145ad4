"""The built-in SSH server under bad input and load: garbage on the port, too many keys tried,
silent connections and sessions, and more connections than it holds; through all of it the
pages go on answering and git over SSH goes on working."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.forges import patience
from support.githttp import commit, git
from support.serving import Server, free_port, serving
from support.sshing import Ssh, create_people, make_key, ssh_options

pytestmark = pytest.mark.network

IDLE = 2.0
MAX_PUSH = 300_000
MAX_CONNECTIONS = 40
SIGNING_IN_PER_ADDRESS = 20  # (server.MAX_SIGNING_IN_PER_ADDRESS)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Ssh, Path]]:
    root = tmp_path_factory.mktemp("ssh-limits")
    config = root / "floorless.toml"
    config.write_text(
        f"ssh_idle_timeout = {IDLE}\nssh_max_connections = {MAX_CONNECTIONS}\n"
        f"max_push_bytes = {MAX_PUSH}\n"
    )
    port = free_port()
    with serving(
        root / "repos", root / "data", "--ssh-port", str(port), "--config", str(config)
    ) as server:
        create_people(server, "alice")
        keys = root / "keys"
        key = make_key(keys, "alice")
        server.admin("key", "add", "alice", stdin=key.with_suffix(".pub").read_text())
        server.admin("repo", "create", "alice/pub")
        alice = Ssh(port, key, root / "known_hosts")
        seed = root / "seed"
        git("init", "-q", str(seed))
        commit(seed, "README.md", "# limits\n", "first")
        alice.git("push", "-q", alice.url("alice/pub"), "main", cwd=seed)
        yield server, alice, keys


def _pages_answer(server: Server) -> bool:
    return httpx.get(f"{server.url}/alice/pub", timeout=10).status_code == 200


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (reading what it sends)."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


def test_garbage_on_the_port_is_dropped(limited: tuple[Server, Ssh, Path]) -> None:
    server, alice, _ = limited
    junks = (b"GET / HTTP/1.1\r\n\r\n", b"\x00" * 5000, b"SSH-2.0-x\r\n" + b"\xff" * 70000)
    for junk in junks:
        with socket.create_connection(("127.0.0.1", alice.port)) as sock:
            sock.sendall(junk)
            assert _closed_within(sock, patience(15))
    assert _pages_answer(server)
    assert alice.git("ls-remote", alice.url("alice/pub")).returncode == 0


def test_too_many_keys_tried_closes_the_connection(limited: tuple[Server, Ssh, Path]) -> None:
    _, alice, keys = limited
    strangers = [make_key(keys / "strangers", f"s{n}") for n in range(8)]
    tried = subprocess.run(
        ["ssh", *ssh_options([*strangers, alice.key], alice.port, alice.known_hosts),
         "git@127.0.0.1"],
        capture_output=True, timeout=patience(60), check=False,
    )  # fmt: skip
    # the server hung up after six refused keys: alice's key, tried ninth, never got its turn
    assert tried.returncode == 255 and b"Hello, alice" not in tried.stdout
    assert alice.ssh().returncode == 1  # alone, it signs in


def test_a_silent_connection_is_closed(limited: tuple[Server, Ssh, Path]) -> None:
    _, alice, _ = limited
    with socket.create_connection(("127.0.0.1", alice.port)) as sock:
        sock.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")  # and then nothing: never signs in
        began = time.monotonic()
        assert _closed_within(sock, patience(30))
        assert time.monotonic() - began >= IDLE * 0.9


def test_a_silent_session_is_closed(limited: tuple[Server, Ssh, Path]) -> None:
    """A client that asks for a fetch and then says nothing: git's advertisement, then the
    server gives up on it."""
    _, alice, keys = limited
    out_path, err_path = keys / "silent.out", keys / "silent.err"
    with out_path.open("wb") as out_file, err_path.open("wb") as err_file:
        proc = subprocess.Popen(
            ["ssh", *alice.options(), "git@127.0.0.1", "git-upload-pack", "'alice/pub.git'"],
            stdin=subprocess.PIPE, stdout=out_file, stderr=err_file,
        )  # fmt: skip
        try:  # its input stays open, and silent
            proc.wait(timeout=patience(60))
        finally:
            proc.kill()
            assert proc.stdin is not None
            proc.stdin.close()
    assert b"refs/heads/main" in out_path.read_bytes()  # the advertisement came
    err = err_path.read_bytes()
    assert proc.returncode == 1 and f"nothing came for {IDLE:g} s".encode() in err


def test_more_connections_than_held(limited: tuple[Server, Ssh, Path]) -> None:
    server, alice, _ = limited
    sockets = []
    try:
        for _ in range(200):
            sock = socket.create_connection(("127.0.0.1", alice.port))
            sock.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            sockets.append(sock)
        assert _pages_answer(server)  # while they are open
        # those past the limit of one address's connections signing in, at once
        past = sockets[SIGNING_IN_PER_ADDRESS + 5 :]
        assert sum(_closed_within(sock, 0.2) for sock in past) == len(past)
        # another address signs in meanwhile (127.0.0.2 is loopback too)
        other = subprocess.run(
            ["ssh", *alice.options(), "-b", "127.0.0.2", "git@127.0.0.1"],
            capture_output=True, timeout=patience(60), check=False,
        )  # fmt: skip
        assert other.returncode == 1 and b"Hello, alice" in other.stdout, other.stderr
    finally:
        for sock in sockets:
            sock.close()
    deadline = time.monotonic() + patience(30)
    while alice.git("ls-remote", alice.url("alice/pub"), check=False).returncode != 0:
        assert time.monotonic() < deadline, "git over SSH never came back"
        time.sleep(0.2)
    assert _pages_answer(server)


def test_a_push_over_the_size_limit_is_cut_off(limited: tuple[Server, Ssh, Path]) -> None:
    _, alice, keys = limited
    work = keys / "big"
    alice.git("clone", "-q", alice.url("alice/pub"), str(work))
    before = alice.git("ls-remote", alice.url("alice/pub"), "main").stdout
    (work / "big.bin").write_bytes(os.urandom(MAX_PUSH * 2))  # does not compress
    git("add", "big.bin", cwd=work)
    git("commit", "-q", "-m", "too big", cwd=work)
    pushed = alice.git("push", "origin", "HEAD:refs/heads/big", cwd=work, check=False)
    assert pushed.returncode != 0
    assert f"the push is over the limit of {MAX_PUSH} bytes" in pushed.stderr
    assert alice.git("ls-remote", alice.url("alice/pub")).stdout.count("refs/heads/") == 1
    assert alice.git("ls-remote", alice.url("alice/pub"), "main").stdout == before
