"""The gateway's WSGI environ: the same one granian's WSGI interface built, byte for byte where
views rely on it, and nothing a client can smuggle past a proxy."""

from __future__ import annotations

import io
import sys

import pytest

from floorless.web.gateway import Limits, wsgi_environ

pytestmark = pytest.mark.unit


def scope(path: bytes, headers: list[tuple[bytes, bytes]], query: bytes = b"") -> dict:
    return {
        "type": "http",
        "method": "GET",
        "path": path.decode("utf-8", "replace"),
        "raw_path": path,
        "query_string": query,
        "headers": headers,
        "server": ("127.0.0.1", 3000),
        "client": ("10.0.0.2", 51000),
        "scheme": "http",
        "http_version": "1.1",
    }


async def _ask(gateway, path: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """The ASGI messages ``gateway`` sends for a GET of ``path`` with no body."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await gateway(scope(path.encode(), []), receive, send)
    return sent


def test_the_path_keeps_its_exact_bytes_and_the_query_its_encoding() -> None:
    environ = wsgi_environ(scope(b"/a%2Fb/%ff/x%20y", [], b"q=%20a&b"), io.BytesIO(), 0)
    assert environ["PATH_INFO"].encode("latin-1") == b"/a/b/\xff/x y"
    assert environ["QUERY_STRING"] == "q=%20a&b"
    assert environ["REMOTE_ADDR"] == "10.0.0.2" and environ["SERVER_PORT"] == "3000"


def test_repeated_headers_are_joined_and_cookies_with_semicolons() -> None:
    headers = [(b"x-a", b"1"), (b"x-a", b"2"), (b"cookie", b"a=1"), (b"cookie", b"b=2")]
    environ = wsgi_environ(scope(b"/", headers), io.BytesIO(), 0)
    assert environ["HTTP_X_A"] == "1,2"
    assert environ["HTTP_COOKIE"] == "a=1; b=2"


def test_a_header_name_with_an_underscore_is_dropped() -> None:
    """``X_Forwarded_For`` would land beside the proxy's ``X-Forwarded-For`` (as its right-most
    address, the one believed) under the same WSGI name."""
    headers = [(b"x-forwarded-for", b"203.0.113.7"), (b"x_forwarded_for", b"6.6.6.6")]
    environ = wsgi_environ(scope(b"/", headers), io.BytesIO(), 0)
    assert environ["HTTP_X_FORWARDED_FOR"] == "203.0.113.7"


def test_a_body_read_whole_has_its_length_and_no_transfer_encoding() -> None:
    headers = [(b"transfer-encoding", b"chunked"), (b"content-type", b"text/plain")]
    environ = wsgi_environ(scope(b"/", headers), io.BytesIO(b"hello"), 5)
    assert environ["CONTENT_LENGTH"] == "5" and environ["CONTENT_TYPE"] == "text/plain"
    assert "HTTP_TRANSFER_ENCODING" not in environ
    assert environ["wsgi.input"].read() == b"hello"


def test_each_route_class_has_its_body_limit() -> None:
    limits = Limits(client_timeout=30, push_bytes=3, fetch_bytes=2, form_bytes=1)
    assert limits.body_limit("/a/b.git/git-receive-pack") == 3
    assert limits.body_limit("/a/b/git-upload-pack") == 2
    assert limits.body_limit("/-/login") == 1


def test_a_cheap_page_never_waits_for_a_thread_behind_dear_ones(tmp_path) -> None:
    """Blames, commits, compares and archives have request threads of their own: while every
    one of them is busy, a file page still gets a thread at once."""
    import asyncio
    import threading

    from floorless.web.gateway import EXPENSIVE, Gateway

    release = threading.Event()
    finished: list[str] = []

    def app(environ, start_response):
        if EXPENSIVE.match(environ["PATH_INFO"]):
            release.wait(30)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    gateway = Gateway(app, Limits(30, 1, 1, 1), 2, tmp_path, expensive_threads=1)

    async def ask(path: str) -> None:
        sent = await _ask(gateway, path)
        assert sent[0]["status"] == 200
        finished.append(path)

    async def main() -> None:
        expensive = [
            asyncio.create_task(ask(p))
            for p in ("/a/b/blame/branch/main/x", "/a/b/commit/abc", "/a/b/archive/main.zip")
        ]
        await asyncio.sleep(0)
        await asyncio.wait_for(ask("/a/b/src/branch/main/x"), 10)
        assert finished == ["/a/b/src/branch/main/x"]  # the expensive ones are all still waiting
        release.set()
        await asyncio.wait_for(asyncio.gather(*expensive), 10)

    try:
        asyncio.run(main())
    finally:
        release.set()
        gateway.close()
    assert len(finished) == 4


def test_the_dear_lane_is_chosen_by_the_page() -> None:
    from floorless.web.gateway import EXPENSIVE

    for path in ("/a/b/blame/branch/main/f", "/a/b/commit/abc.diff", "/a/b/compare/x...y",
                 "/a/b/archive/main.tar.gz", "//a/b//commit/abc"):  # fmt: skip
        assert EXPENSIVE.match(path), path
    for path in ("/a/b", "/a/b/src/branch/main/commit", "/a/b/raw/branch/main/blame",
                 "/a/b/commits/branch/main", "/-/login", "/a/commit"):  # fmt: skip
        assert not EXPENSIVE.match(path), path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's thread names")
def test_request_threads_carry_their_lane_in_the_name_the_system_shows(tmp_path) -> None:
    """What a tool reading ``/proc/<tid>/comm`` sees (the benchmark's slow-filesystem count
    tells request threads from background ones by it): each lane's own name."""
    import asyncio
    import threading
    from pathlib import Path

    from floorless.core import background
    from floorless.web.gateway import Gateway

    def comm() -> str:
        return Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [comm().encode()]

    gateway = Gateway(app, Limits(30, 1, 1, 1), 2, tmp_path, expensive_threads=1)

    async def ask(path: str) -> bytes:
        sent = await _ask(gateway, path)
        return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

    try:
        assert asyncio.run(ask("/a/b/src/branch/main/x")) == b"fl-request"
        assert asyncio.run(ask("/a/b/blame/branch/main/x")) == b"fl-expensive"
    finally:
        gateway.close()
    names: list[str] = []
    background.start(lambda: names.append(comm()), "probe").join(5)
    assert names == ["fl-bg-probe"]
