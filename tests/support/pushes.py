"""Raw pushes: pkt-lines, packs made by hand and receive-pack spoken without git, against a
world of repositories and forks."""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.githttp import PASSWORD, Site, commit, git
from support.serving import serving

ZERO = "0" * 40


MADE_UP = "1234567890abcdef1234567890abcdef12345678"


def pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def entry(kind: int, data: bytes, base: bytes = b"") -> bytes:
    """One pack entry: its type and size header, a REF_DELTA's base id, its deflated data."""
    size = len(data)
    first = (kind << 4) | (size & 0x0F)
    size >>= 4
    header = bytearray()
    while size:
        header.append(first | 0x80)
        first = size & 0x7F
        size >>= 7
    header.append(first)
    return bytes(header) + base + zlib.compress(data)


def pack(*entries: bytes) -> bytes:
    body = b"PACK" + (2).to_bytes(4, "big") + len(entries).to_bytes(4, "big") + b"".join(entries)
    return body + hashlib.sha1(body).digest()


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def object_id(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


def raw_push(site: Site, repo: str, user: str, lines: list[bytes], data: bytes) -> bytes:
    """POST a push of the update ``lines`` (capabilities and all, as given) with ``data``
    as its pack; git's answer."""
    request = urllib.request.Request(
        f"{site.server.url}/{repo}.git/git-receive-pack",
        data=b"".join(pkt(line + b"\n") for line in lines) + b"0000" + data,
        headers={
            "Content-Type": "application/x-git-receive-pack-request",
            "Authorization": "Basic "
            + base64.b64encode(f"{user}:{site.token(user)}".encode()).decode(),
        },
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return bytes(response.read())


def receive_pack(site: Site, repo: str, user: str, updates: list[str], data: bytes) -> bytes:
    """A push of ``updates`` ("old new ref") asking for a report on the side band."""
    caps = b"\0report-status side-band-64k agent=test"
    lines = [line.encode() + (caps if i == 0 else b"") for i, line in enumerate(updates)]
    return raw_push(site, repo, user, lines, data)


def api(site: Site, method: str, path: str, user: str, body: object = None) -> tuple[int, object]:
    """An API call as ``user``: its status and its JSON (the text when it is none)."""
    request = urllib.request.Request(
        f"{site.server.url}/api/v1{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"token {site.token(user)}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


class World:
    """alice/proj (public, then private), bob's fork of it made while it was public, and the
    ids bob must never reach: a deleted branch's commit and blob, and what came after."""

    def __init__(self, site: Site, root: Path) -> None:
        self.site = site
        self.work = root / "alice-work"
        git("clone", "-q", site.url("alice/proj", "alice"), str(self.work))
        self.secret = commit(self.work, "secret.txt", "password=hunter2\n", "Oops")
        self.secret_blob = object_id("blob", b"password=hunter2\n")
        git("push", "-q", "origin", "HEAD:refs/heads/oops", cwd=self.work)
        git("push", "-q", "origin", "--delete", "oops", cwd=self.work)
        git("reset", "-q", "--hard", "HEAD~1", cwd=self.work)
        status, _ = api(site, "POST", "/repos/alice/proj/forks", "bob")
        assert status == 202, status
        status, _ = api(site, "PATCH", "/repos/alice/proj", "alice", {"private": True})
        assert status == 200
        self.later = commit(self.work, "plans.txt", "the private plans\n", "Private plans")
        git("push", "-q", "origin", "main", cwd=self.work)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("gate")
    with serving(root / "repos", root / "data") as server:
        for name in ("alice", "bob", "carol"):
            server.admin(
                "user", "create", name, "--email", f"{name}@example.org",
                "--password-stdin", stdin=PASSWORD + "\n",
            )  # fmt: skip
        site = Site(server)
        seed = root / "seed"
        git("init", "-q", str(seed))
        commit(seed, "README.md", "# project\n", "First")
        server.admin("repo", "create", "alice/proj")
        git("push", "-q", site.url("alice/proj", "alice"), "main", cwd=seed)
        yield World(site, root)
