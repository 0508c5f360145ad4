"""Pushes under stress against a real ``floorless serve``: two at once on one branch, one cut
off mid-pack, one of 200 MB; and malformed git requests. Afterwards the repository is whole
(``git fsck``), its refs are exactly as git's locking left them, no git process lingers, and
the server answers everyone else."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.forges import patience, wait_for
from support.githttp import PASSWORD, commit, git, rev
from support.serving import Server, serving

from floorless.git.protocol import pkt_line

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("git-faults")
    with serving(root / "repos", root / "data") as running:
        running.admin(
            "user",
            "create",
            "pat",
            "--email",
            "pat@example.org",
            "--password-stdin",
            stdin=PASSWORD + "\n",
        )
        yield running


def url(server: Server, repo: str) -> str:
    return f"http://pat:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{server.port}/{repo}.git"


def git_dir(server: Server, repo: str) -> Path:
    owner, name = repo.split("/")
    return server.repos / owner / f"{name}.git"


def no_git_left(server: Server) -> bool:
    return server.descendants() == []


def assert_whole(server: Server, repo: str) -> None:
    git("--git-dir", str(git_dir(server, repo)), "fsck", "--strict", "--no-dangling")
    leftovers = [p.name for p in (git_dir(server, repo) / "objects").glob("incoming-*")]
    assert leftovers == []
    wait_for(lambda: no_git_left(server), timeout=30)
    assert raw(server, "GET", f"/{repo}")[0] == 200


def new_repo(server: Server, tmp_path: Path, name: str) -> Path:
    """An empty repository on the server and a local one with a first commit pushed."""
    server.admin("repo", "create", f"pat/{name}")
    work = tmp_path / name
    git("init", "-q", str(work))
    commit(work, "base.txt", "base\n", "base")
    git("push", "-q", url(server, f"pat/{name}"), "main", cwd=work)
    return work


def test_two_pushes_to_one_branch_at_once(server: Server, tmp_path: Path) -> None:
    base = new_repo(server, tmp_path, "race")
    clones = []
    for side in ("left", "right"):
        clone = tmp_path / side
        git("clone", "-q", url(server, "pat/race"), str(clone))
        (clone / f"{side}.bin").write_bytes(os.urandom(3_000_000))  # long enough to overlap
        git("add", ".", cwd=clone)
        git("commit", "-q", "-m", side, cwd=clone)
        clones.append(clone)
    results: dict[str, object] = {}

    def push(clone: Path) -> None:
        results[clone.name] = git("push", "origin", "main", cwd=clone, check=False)

    threads = [threading.Thread(target=push, args=(c,)) for c in clones]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=patience(120))
    won = [name for name, r in results.items() if r.returncode == 0]
    assert len(won) == 1, {n: r.stderr for n, r in results.items()}
    lost = next(name for name in results if name not in won)
    assert results[lost].returncode != 0
    assert rev(git_dir(server, "pat/race"), "main") == rev(tmp_path / won[0] / ".git", "HEAD")
    assert base.exists()
    assert_whole(server, "pat/race")


def _push_request(work: Path, old: str, branch: str) -> bytes:
    """A complete receive-pack request body for pushing ``work``'s HEAD to ``branch``."""
    new = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    command = f"{old} {new} refs/heads/{branch}\0 report-status\n".encode()
    pack = git_bytes(work, "pack-objects", "--stdout", "--revs", stdin=f"{new}\n^{old}\n".encode())
    return b"%04x" % (len(command) + 4) + command + b"0000" + pack


def git_bytes(work: Path, *args: str, stdin: bytes) -> bytes:
    import subprocess

    return subprocess.run(
        ["git", *args],
        cwd=work,
        input=stdin,
        capture_output=True,
        check=True,
        timeout=patience(120),
    ).stdout


def _headers(length: int | None) -> bytes:
    auth = base64.b64encode(f"pat:{PASSWORD}".encode()).decode()
    size = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        "POST /pat/cut.git/git-receive-pack HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\n"
        f"Authorization: Basic {auth}\r\n"
        "Content-Type: application/x-git-receive-pack-request\r\n"
        f"{size}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_push_cut_off_mid_pack_changes_nothing(
    server: Server, tmp_path: Path, framing: str
) -> None:
    work = tmp_path / "cut"
    if not git_dir(server, "pat/cut").exists():
        new_repo(server, tmp_path, "cut")
        work = tmp_path / "cut"
    else:
        git("clone", "-q", url(server, "pat/cut"), str(work))
    old = rev(git_dir(server, "pat/cut"), "main")
    refs_before = git("--git-dir", str(git_dir(server, "pat/cut")), "for-each-ref").stdout
    (work / "payload.bin").write_bytes(os.urandom(4_000_000))
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "never arrives", cwd=work)
    body = _push_request(work, old, "main")
    half = body[: len(body) // 2]
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        if framing == "length":
            sock.sendall(_headers(len(body)) + half)
        else:
            sock.sendall(_headers(None) + b"%x\r\n" % len(half) + half + b"\r\n")
        time.sleep(0.5)  # git is reading the pack now
    wait_for(lambda: no_git_left(server), timeout=60)
    assert git("--git-dir", str(git_dir(server, "pat/cut")), "for-each-ref").stdout == refs_before
    assert_whole(server, "pat/cut")
    # the same push, whole, still works afterwards
    git("push", "-q", url(server, "pat/cut"), "main", cwd=work)
    assert (
        rev(git_dir(server, "pat/cut"), "main") == git("rev-parse", "HEAD", cwd=work).stdout.strip()
    )


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RssSampler(threading.Thread):
    """The largest resident size of each of ``pids``, sampled every 20 ms while it runs."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = {pid: _rss(pid) for pid in pids}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            for pid in self.pids:
                self.peak[pid] = max(self.peak[pid], _rss(pid))


def test_a_200_mb_push_keeps_the_server_small(server: Server, tmp_path: Path) -> None:
    work = new_repo(server, tmp_path, "big")
    for n in range(4):
        (work / f"blob{n}.bin").write_bytes(os.urandom(50 * 1024 * 1024))
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "200 MB of noise", cwd=work)
    objects = git_dir(server, "pat/big") / "objects"
    stored_before = sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())
    pids = server.worker_pids()
    before = {pid: _rss(pid) for pid in pids}
    sampler = RssSampler(pids)
    sampler.start()
    try:
        git("-c", "http.postBuffer=1048576", "push", "-q", url(server, "pat/big"), "main", cwd=work)
    finally:
        sampler.done.set()
        sampler.join()
    growth = max(sampler.peak[pid] - before[pid] for pid in pids)
    stored = sum(p.stat().st_size for p in objects.rglob("*") if p.is_file()) - stored_before
    print(f"\n200 MB push: {stored / 2**20:.0f} MiB stored, server grew {growth / 2**20:.1f} MiB")
    assert stored > 200 * 1024 * 1024
    assert growth < 32 * 1024 * 1024, f"the server grew by {growth / 2**20:.0f} MiB"
    head = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    assert rev(git_dir(server, "pat/big"), "main") == head
    assert_whole(server, "pat/big")


def raw(
    server: Server, method: str, path: str, body: bytes = b"", **headers: str
) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    auth = base64.b64encode(f"pat:{PASSWORD}".encode()).decode()
    try:
        conn.request(method, path, body=body, headers={"Authorization": f"Basic {auth}", **headers})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


UPLOAD = {"Content-Type": "application/x-git-upload-pack-request"}


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "message"),
    [
        ("/pat/bad.git/git-upload-pack", b"zzzzwant", UPLOAD, 400, "pkt-line"),
        ("/pat/bad.git/git-upload-pack", b"0003", UPLOAD, 400, "pkt-line"),
        ("/pat/bad.git/git-upload-pack", b"ffff" + b"x" * 100, UPLOAD, 400, "pkt-line"),
        ("/pat/bad.git/git-upload-pack", b"0032want", UPLOAD, 400, "ends inside"),
        ("/pat/bad.git/git-upload-pack", b"", UPLOAD, 400, "empty"),
        ("/pat/bad.git/git-upload-pack", b"0010command=nope0000", UPLOAD, 400, "refused"),
        (
            "/pat/bad.git/git-receive-pack",
            b"0009done\n0000",
            {"Content-Type": "application/x-git-receive-pack-request"},
            400,
            "refused",
        ),
        (
            "/pat/bad.git/git-receive-pack",
            b"000cdeadbeef",
            {"Content-Type": "application/x-git-receive-pack-request"},
            400,
            "never end",
        ),
        (
            "/pat/bad.git/git-upload-pack",
            b"0000",
            {"Content-Type": "text/plain"},
            415,
            "Content-Type",
        ),
        (
            "/pat/bad.git/git-upload-pack",
            b"0000",
            {**UPLOAD, "Content-Encoding": "br"},
            415,
            "Content-Encoding",
        ),
        (
            "/pat/bad.git/git-upload-pack",
            b"not gzip",
            {**UPLOAD, "Content-Encoding": "gzip"},
            400,
            "gzip",
        ),
        ("/pat/bad.git/info/refs?service=git-evil", b"", {}, 403, "smart HTTP"),
        ("/pat/bad.git/info/refs", b"", {}, 403, "smart HTTP"),
    ],
)
def test_malformed_requests_get_a_clear_4xx(
    server: Server, path: str, body: bytes, headers: dict, status: int, message: str
) -> None:
    if not git_dir(server, "pat/bad").exists():
        server.admin("repo", "create", "pat/bad")
    method = "POST" if "service" not in path and not path.endswith("info/refs") else "GET"
    got, text = raw(server, method, path, body, **headers)
    assert got == status, text
    assert message in text
    wait_for(lambda: no_git_left(server), timeout=30)
    assert raw(server, "GET", "/")[0] == 200


def test_an_oversize_body_is_refused_before_git_starts(server: Server) -> None:
    if not git_dir(server, "pat/bad").exists():
        server.admin("repo", "create", "pat/bad")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    auth = base64.b64encode(f"pat:{PASSWORD}".encode()).decode()
    conn.putrequest("POST", "/pat/bad.git/git-upload-pack")
    conn.putheader("Authorization", f"Basic {auth}")
    conn.putheader("Content-Type", UPLOAD["Content-Type"])
    conn.putheader("Content-Length", str(10**12))
    conn.endheaders()
    response = conn.getresponse()  # answered without reading the terabyte
    text = response.read().decode()
    conn.close()
    assert response.status == 413 and "limit" in text
    assert no_git_left(server)
    assert raw(server, "GET", "/")[0] == 200


def test_a_gzip_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    import gzip

    config = _small_limits(tmp_path)
    with serving(tmp_path / "repos", tmp_path / "data", "--config", str(config)) as small:
        small.admin(
            "user",
            "create",
            "pat",
            "--email",
            "p@example.org",
            "--password-stdin",
            stdin=PASSWORD + "\n",
        )
        work = new_repo(small, tmp_path, "bomb")
        tip = git("rev-parse", "HEAD", cwd=work).stdout.strip()
        # A negotiation git keeps reading: one want, then 16 MiB of haves, 30 KiB compressed.
        have = pkt_line(f"have {'1' * 40}\n".encode())
        body = pkt_line(f"want {tip}\n".encode()) + b"0000" + have * 330_000 + pkt_line(b"done\n")
        bomb = gzip.compress(body)
        assert len(bomb) < 100_000 < 2**20 < len(body)
        status, text = raw(
            small,
            "POST",
            "/pat/bomb.git/git-upload-pack",
            bomb,
            **{**UPLOAD, "Content-Encoding": "gzip"},
        )
        assert status == 413 and "limit" in text
        wait_for(lambda: no_git_left(small), timeout=30)
        # the same negotiation, small enough, is answered
        small_body = gzip.compress(
            pkt_line(f"want {tip}\n".encode()) + b"0000" + pkt_line(b"done\n")
        )
        status, _ = raw(
            small,
            "POST",
            "/pat/bomb.git/git-upload-pack",
            small_body,
            **{**UPLOAD, "Content-Encoding": "gzip"},
        )
        assert status == 200


def _small_limits(tmp_path: Path) -> Path:
    config = tmp_path / "limits.toml"
    config.write_text("max_fetch_request_bytes = 1048576\n")
    return config


def test_a_fetch_that_git_answers_while_reading_does_not_stall(
    server: Server, tmp_path: Path
) -> None:
    """In protocol v0 git acknowledges each known ``have`` as it reads: thousands of them fill
    its output pipe before the request ends. The server must keep reading git's output."""
    work = new_repo(server, tmp_path, "chatty")
    tip = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    want = pkt_line(f"want {tip} multi_ack_detailed side-band-64k\n".encode())
    body = want + b"0000" + pkt_line(f"have {tip}\n".encode()) * 5000 + b"0000"
    for _ in range(3):  # more than the server's spare threads, were they to hang
        status, _ = raw(server, "POST", "/pat/chatty.git/git-upload-pack", body, **UPLOAD)
        assert status == 200
    wait_for(lambda: no_git_left(server), timeout=30)
    assert raw(server, "GET", "/")[0] == 200
