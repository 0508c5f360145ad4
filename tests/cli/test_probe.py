"""``floorless probe``: Server-Timing parsing, URL discovery, and the floor it reports for a
stand-in forge with an artificial per-page floor and for a floorless started by the test."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from click.testing import CliRunner
from support.forges import start_forge, wait_indexed
from support.gitfixtures import build_one

from floorless.cli import main
from floorless.probe.client import Client, Response
from floorless.probe.discover import CGIT, FORGEJO, GITEA, detect_kind, find_repository, plan
from floorless.probe.run import parse_server_timing, percentile
from floorless.web.app import create_app

FLOOR_MS = 50


def probe(*args: str):
    result = CliRunner().invoke(main, ["probe", *args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


# ------------------------------------------------------------------------------- parsing


def test_server_timing_is_parsed():
    values = [
        'git;dur=0.31, db;dur=0.07;desc="a, b; c", render;dur=0.52',
        'total;dur=1.10, spawn;desc="processes";dur=0, cache;desc="hit", bad;dur=x',
        "git;dur=1",
    ]
    assert parse_server_timing(values) == {
        "git": pytest.approx(1.31), "db": 0.07, "render": 0.52, "total": 1.1, "spawn": 0.0,
    }  # fmt: skip
    assert parse_server_timing([]) == {}


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 0.5) == 10.0
    assert percentile(values, 0.95) == 19.0
    assert percentile([3.0], 0.95) == 3.0


def response(html: str, url: str = "http://forge.test/", **headers: str) -> Response:
    from email.message import Message

    message = Message()
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    return Response(url, 200, message, html.encode(), 0.0)


def test_forges_are_recognised_and_their_repositories_found():
    gitea = response(
        '<meta name="author" content="Gitea - Git with a cup of tea">'
        '<a href="/explore/repos">Explore</a><a href="/alice">alice</a>'
        '<a href="https://elsewhere.test/x/y">x</a><a href="/alice/demo">demo</a>'
    )
    assert detect_kind(gitea) == GITEA
    assert find_repository("http://forge.test/", gitea, GITEA) == "alice/demo"
    assert detect_kind(response("Powered by Forgejo")) == FORGEJO
    cgit = response(
        "<meta name='generator' content='cgit v1.2.3'/>"
        "<a href='/?s=name'>Name</a><a href='/tools/demo.git/'>demo</a>",
        url="http://forge.test/",
    )
    assert detect_kind(cgit) == CGIT
    assert find_repository("http://forge.test/", cgit, CGIT) == "tools/demo.git"
    floorless = response("<p>gitea</p>", Server_Timing='total;dur=1, spawn;desc="p";dur=0')
    assert detect_kind(floorless) == "floorless"


# ------------------------------------------------------------------ a stand-in forge


PAGES = {
    "/": '<html><head><link href="/assets/css/index.css" rel="stylesheet"></head>'
    '<body>Powered by Gitea <a href="/explore/repos">Explore</a></body></html>',
    "/explore/repos": '<link rel="stylesheet" href="/assets/css/index.css">'
    '<a href="/alice">alice</a> / <a href="/alice/demo">demo</a>',
    "/alice/demo": '<a href="/alice/demo/src/branch/trunk">trunk</a>'
    '<a href="/alice/demo/src/branch/trunk/docs">docs</a>'
    '<a href="/alice/demo/src/branch/trunk/Readme.rst">Readme.rst</a>',
    "/alice/demo/raw/branch/trunk/Readme.rst": "Hello.\n",
    "/alice/demo/commits/branch/trunk": "<ul><li>a commit</li></ul>",
    "/assets/css/index.css": "body { margin: 0 }\n",
}


class StandIn(BaseHTTPRequestHandler):
    """Gitea's URL shapes; every page below /alice/demo waits FLOOR_MS first."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        body = PAGES.get(path)
        if path.startswith("/alice/demo"):
            time.sleep(FLOOR_MS / 1000)
        status = 200 if body is not None else 404
        data = (body or "not found").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(server) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def stand_in() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    server.daemon_threads = True
    with serving(server) as url:
        yield url


@pytest.mark.network
def test_discovery_on_the_stand_in(stand_in):
    with Client(timeout=10) as client:
        found = plan(client, stand_in)
    assert (found.kind, found.repository, found.branch) == (GITEA, "alice/demo", "trunk")
    urls = {p.key: p.url for p in found.pages}
    assert urls == {
        "home": f"{stand_in}/alice/demo",
        "raw": f"{stand_in}/alice/demo/raw/branch/trunk/Readme.rst",
        "commits": f"{stand_in}/alice/demo/commits/branch/trunk",
        "outside": f"{stand_in}/explore/repos",
        "static": f"{stand_in}/assets/css/index.css",
    }


@pytest.mark.network
def test_probe_reports_the_stand_ins_floor(stand_in):
    result = probe(stand_in, "--requests", "5", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kind"] == GITEA and report["baseline_class"] == "outside"
    by_class = {c["class"]: c for c in report["classes"]}
    assert all(c["n"] == 5 and c["statuses"] == {"200": 5} for c in by_class.values())
    assert by_class["outside"]["p50_ms"] < FLOOR_MS * 0.8
    for key in ("home", "raw", "commits"):
        assert by_class[key]["p50_ms"] >= FLOOR_MS * 0.8
    assert report["floor_ms"] >= FLOOR_MS * 0.8  # generous: a behaviour check, not a benchmark
    assert by_class["home"]["server_timing_medians"] == {}


@pytest.mark.network
def test_probe_text_table_and_overrides(stand_in):
    result = probe(stand_in, "--repo", "alice/demo", "--requests", "2",
                   "--url", "static=/missing.css")  # fmt: skip
    assert result.exit_code == 1  # the static asset answered 404
    assert "404" in result.output and "/missing.css" in result.output
    assert "floor: " in result.output and "No Server-Timing header" in result.output


@pytest.mark.network
def test_probe_is_bounded_in_time(stand_in):
    began = time.monotonic()
    result = probe(stand_in, "--requests", "1000", "--max-seconds", "0.3", "--json")
    assert time.monotonic() - began < 10
    report = json.loads(result.output)
    assert 0 <= report["rounds"] < 1000


# ------------------------------------------------------------------ a real floorless


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


@pytest.fixture
def floorless_server(tmp_path: Path) -> Iterator[str]:
    build_one(tmp_path / "repos" / "alice" / "one.git")
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        wait_indexed(forge)
        server = make_server(
            "127.0.0.1", 0, create_app(forge),
            server_class=_ThreadingWSGIServer, handler_class=_QuietHandler,
        )  # fmt: skip
        with serving(server) as url:
            yield url
    finally:
        forge.stop()


@pytest.mark.network
def test_probe_against_floorless(floorless_server):
    result = probe(floorless_server, "--requests", "5", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["kind"], report["repository"], report["branch"]) == (
        "floorless", "alice/one", "main",
    )  # fmt: skip
    by_class = {c["class"]: c for c in report["classes"]}
    assert by_class["raw"]["url"].endswith("/alice/one/raw/branch/main/README.md")
    assert by_class["static"]["url"].endswith("/-/static/style.css")
    assert all(c["statuses"] == {"200": 5} for c in by_class.values())
    assert report["floor_ms"] is not None
    for key in ("home", "raw", "commits"):
        timing = by_class[key]["server_timing_medians"]
        assert {"git", "db", "render", "total", "spawn"} <= timing.keys()
        assert timing["spawn"] == 0  # no git process on a browse page
    text = probe(floorless_server, "--requests", "2").output
    assert "Server-Timing, medians" in text and "spawn" in text


# ------------------------------------------------------------------ bad input, cleanly


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_url():
    result = probe(f"http://127.0.0.1:{closed_port()}/")
    assert result.exit_code == 3
    assert "connection refused" in result.output


@pytest.mark.parametrize(
    "url", ["ftp://example.org/", "example.org", "http://:80/", "http://h:99999/"]
)
def test_urls_that_are_not_http(url):
    result = probe(url)
    assert result.exit_code == 3
    assert "floorless probe:" in result.output


def test_a_bad_url_override_is_a_usage_error():
    result = probe("http://127.0.0.1:1/", "--url", "nonsense")
    assert result.exit_code == 2 and "CLASS=URL" in result.output
