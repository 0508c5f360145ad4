"""A real webhook receiver on loopback and the quick delivery settings, for every test that
watches deliveries."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import pytest

from floorless.forge import Forge
from floorless.web.app import create_app
from support.accounts import PASSWORD
from support.api import BASE, token_for
from support.forges import start_forge

FAST = {"webhook_timeout": 0.5, "webhook_retry_seconds": 0.05}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str
    got: list[Received] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)  # path -> 500s still to answer
    release: threading.Event = field(default_factory=threading.Event)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.got if r.path == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            me = found[0]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            me.got.append(Received(self.path, dict(self.headers.items()), body))
            if self.path.startswith("/hang"):
                me.release.wait(30)
                return
            if self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", f"http://localhost:{self.server.server_port}/ok")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if me.failures.get(self.path, 0) > 0:
                me.failures[self.path] -= 1
                self.send_response(500)
                self.send_header("Content-Length", "4")
                self.end_headers()
                self.wfile.write(b"down")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("X-Seen", "yes")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    found.append(Receiver(f"http://127.0.0.1:{server.server_port}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found[0]
    finally:
        found[0].release.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Site:
    forge: Forge
    url: str
    http: httpx.Client
    token: str

    def hook(self, repo: str, **body: Any) -> dict[str, Any]:
        answer = self.http.post(
            f"/api/v1/repos/{repo}/hooks",
            headers={"Authorization": f"token {self.token}"},
            json={"type": "forgejo", "active": True, **body},
        )
        assert answer.status_code == 201, answer.text
        made: dict[str, Any] = answer.json()
        return made


def _site(tmp_path: Path, **settings: Any) -> Iterator[Site]:
    (tmp_path / "repos").mkdir()
    forge = start_forge(tmp_path / "repos", tmp_path / "data", **settings)
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.registry.create("ann", "plans")
    server = make_server(
        "127.0.0.1", 0, create_app(forge), server_class=_Server, handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        # the API in-process (pyforgejo's helpers name their own host); git over the socket
        transport = httpx.WSGITransport(app=create_app(forge))
        with httpx.Client(transport=transport, base_url=BASE) as http:
            yield Site(forge, url, http, token_for(http, "ann"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        forge.stop()


def git(cwd: Path, *args: str, when: int = 1_700_000_000) -> str:
    """The real git client, never prompting, its dates ``when``."""
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_COMMITTER_NAME": "Tester",
        "GIT_COMMITTER_EMAIL": "tester@example.org",
        "GIT_AUTHOR_DATE": f"{when} +0100",
        "GIT_COMMITTER_DATE": f"{when} +0100",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _commit(work: Path, message: str, when: int) -> str:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message, "--author=Ann <ann@example.org>", when=when)
    return git(work, "rev-parse", "HEAD")
