"""Bad input gets a clear 4xx, never a 500 and never a byte from outside the repository;
a broken repository answers an error page while the others keep working."""

from __future__ import annotations

from pathlib import Path

import pytest
from falcon import testing
from support.gitfixtures import DEMO_INVALID_UTF8_PATH, git, git_text
from support.rawcalls import _call

# Text that would prove a response leaked a file from outside the repository's objects.
LEAKS = ("root:x:0:", "repositoryformatversion", "[core]", "bare = true", "logallrefupdates")


@pytest.fixture(scope="module")
def demo(fixture_root: Path) -> Path:
    return fixture_root / "alice" / "demo.git"


def assert_no_leak(result: testing.Result, url: str) -> None:
    body = result.content.decode("utf-8", "replace")
    for marker in LEAKS:
        assert marker not in body, (url, marker)


def assert_html_404(result: testing.Result, url: str) -> None:
    assert result.status_code == 404, (url, result.status_code, result.text[:300])
    assert result.headers["content-type"].startswith("text/html"), url
    assert "404" in result.text and "Not found" in result.text, url


# ------------------------------------------------------------------------------- not found

HTML_404 = [
    "/nobody",
    "/nobody/demo",
    "/alice/nope",
    "/alice/nope/src/branch/main",
    "/alice/demo/src/branch/nope",
    "/alice/demo/src/tag/nope",
    "/alice/demo/src/branch/main/nope.txt",
    "/alice/demo/src/branch/main/README.md/below-a-file",
    "/alice/demo/src/branch/main/vendor/lib/inside-a-submodule",
    "/alice/demo/commits/branch/nope",
    "/alice/demo/commit/" + "0" * 40,
    "/alice/demo/commit/nothex",
    "/alice/demo/blame/branch/main/nope.txt",
    "/alice/demo/blame/branch/main/docs",
    "/alice/demo/blame/branch/main/vendor/lib",
    "/alice/demo/blame/branch/main/link-to-readme",
    "/alice/demo/atom/branch/nope",
    "/alice/demo/no-such-page",
]


@pytest.mark.parametrize("url", HTML_404)
def test_unknown_things_are_html_404(client, url):
    assert_html_404(client.simulate_get(url), url)


@pytest.mark.parametrize(
    "url",
    [
        "/alice/demo/raw/branch/main/nope.txt",
        "/alice/demo/raw/branch/nope/README.md",
        "/alice/nope/raw/branch/main/README.md",
        "/alice/demo/raw/branch/main/docs",
        "/alice/demo/raw/branch/main/vendor/lib",
        "/alice/demo/raw/blob/" + "0" * 40,
        "/alice/demo/raw/blob/nothex",
        "/alice/demo/archive/nope.tar.gz",
        "/alice/demo/archive/main.rar",
        "/alice/demo/commit/" + "0" * 40 + ".diff",
    ],
)
def test_unknown_raw_things_are_plain_404(client, url):
    result = client.simulate_get(url)
    assert result.status_code == 404, (url, result.status_code)
    assert result.headers["content-type"].startswith("text/plain"), url
    assert "404" in result.text


def test_last_commits_endpoint_rejects_non_directories(client, demo):
    main = git_text(demo, "rev-parse", "main")
    for url in (
        f"/alice/demo/-/last/{main}/README.md",
        f"/alice/demo/-/last/{main}/vendor/lib",
        f"/alice/demo/-/last/{main}/nope",
        "/alice/demo/-/last/" + "0" * 40,
        "/alice/demo/-/last/nothex",
    ):
        result = client.simulate_get(url)
        assert result.status_code == 404, (url, result.status_code)


# ------------------------------------------------------------- traversal and hostile paths

HOSTILE = [
    "/alice/demo/raw/branch/main/../../../../../../../../etc/passwd",
    "/alice/demo/src/branch/main/../../../../../../../../etc/passwd",
    "/alice/demo/raw/branch/main/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/alice/demo/raw/branch/main/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/alice/demo/raw/branch/main/../config",
    "/alice/demo/src/branch/main/../config",
    "/alice/demo/raw/branch/main/%2e%2e/config",
    "/alice/demo/raw/branch/main/./../config",
    "/alice/demo/raw/branch/../config",
    "/alice/demo/raw/branch/..%2f..%2fconfig",
    "/alice/demo/raw/commit/../config",
    "/alice/demo/raw/blob/../config",
    "/alice/demo/raw/branch/main/config",
    "/alice/demo/raw/branch/main//etc/passwd",
    "/alice/demo/raw/branch/main/%2Fetc%2Fpasswd",
    "/alice/demo/raw/branch/HEAD/config",
    "/alice/demo/raw/tag/../../config",
    "/alice/demo/blame/branch/main/../config",
    "/alice/demo/commits/branch/main/../../config",
    "/alice/demo/archive/..%2F..%2Fconfig.zip",
    "/alice/demo/archive/--output=%2Ftmp%2Fx.tar.gz",
    "/alice/demo/blame/branch/main/--output=x",
    "/alice/demo.git/config",
    "/alice/demo.git/HEAD",
    "/alice/demo/config",
    "/alice/%2e%2e/alice/demo",
    "/alice/../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/-/static/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/-/static/../../web/app.py",
    "/alice/demo/raw/branch/main/%00",
    "/alice/demo/src/branch/main/README.md%00.txt",
    "/alice/demo/raw/branch/main%00/README.md",
    "/alice/demo%00/raw/branch/main/README.md",
    "/alice/demo/commit/%00",
]


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_paths_never_leave_the_repository(client, url):
    result = client.simulate_get(url)
    assert result.status_code in (400, 404), (url, result.status_code, result.text[:300])
    assert_no_leak(result, url)


def test_nul_byte_is_a_bad_request(client):
    for url in ("/alice/demo/raw/branch/main/%00", "/alice/demo/src/branch/main/a%00b"):
        assert client.simulate_get(url).status_code == 400, url


OVERLONG = "a" * 5000


@pytest.mark.parametrize(
    "url",
    [
        f"/alice/demo/raw/branch/main/{OVERLONG}",
        f"/alice/demo/src/branch/main/{OVERLONG}",
        f"/alice/demo/src/branch/{OVERLONG}",
        f"/alice/demo/src/branch/main/{'a/' * 2500}",
        f"/alice/demo/commits/branch/main/{OVERLONG}",
        f"/alice/demo/blame/branch/main/{OVERLONG}",
        f"/alice/demo/raw/commit/{OVERLONG}",
        f"/alice/demo/archive/{OVERLONG}.zip",
        f"/alice/demo/commit/{OVERLONG}",
        f"/alice/{OVERLONG}",
        f"/{OVERLONG}",
        f"/?q={OVERLONG}",
    ],
)
def test_overlong_input(client, url):
    path, _, query = url.partition("?")
    result = client.simulate_get(path, query_string=query or None)
    assert result.status_code in (200, 400, 404), (url[:80], result.status_code)


@pytest.mark.parametrize(
    "ref",
    [
        "ma~in",
        "main^",
        "main~1",
        "main@{0}",
        "main:README.md",
        "main..release",
        "HEAD",
        "refs/heads/main",
        "-main",
        ".main",
        "main.lock",
        "%FF",
        "%20",
    ],
)
def test_invalid_ref_names(client, ref):
    for kind in ("branch", "tag"):
        for page in ("src", "commits", "raw", "blame"):
            url = f"/alice/demo/{page}/{kind}/{ref}/README.md"
            result = client.simulate_get(url)
            assert result.status_code in (400, 404), (url, result.status_code)
    result = client.simulate_get(f"/alice/demo/archive/{ref}.tar.gz")
    assert result.status_code in (400, 404), (ref, result.status_code)


def test_invalid_commit_ids(client, demo):
    tree = git_text(demo, "rev-parse", "main^{tree}")
    blob = git_text(demo, "rev-parse", "main:README.md")
    tag = git_text(demo, "rev-parse", "v2.0")  # the annotated tag object, not its commit
    for bad in (
        "zzzz",
        "abc",
        "g" * 40,
        "0000",
        "0" * 39,
        "0" * 41,
        tree,
        blob,
        tag,
        tree[:12],
        "a" * 64,
    ):
        for page in ("src", "raw", "commits", "blame"):
            url = f"/alice/demo/{page}/commit/{bad}/README.md"
            result = client.simulate_get(url)
            assert result.status_code in (400, 404), (url, result.status_code)
        for url in (f"/alice/demo/commit/{bad}", f"/alice/demo/commit/{bad}.patch"):
            result = client.simulate_get(url)
            assert result.status_code in (400, 404), (url, result.status_code)


@pytest.mark.parametrize(
    "after", ["zzz", "g" * 40, ",", "0" * 39, "a" * 40 + ",zz", "%00", "A" * 40, "0" * 40 + ";"]
)
def test_bogus_cursor(client, after):
    for url in ("/alice/demo/commits/branch/main", "/alice/demo/commits/branch/main/src/app.py"):
        result = client.simulate_get(url, params={"after": after})
        assert result.status_code in (400, 404), (url, after, result.status_code)


def test_well_formed_cursor_of_an_unknown_commit(client):
    for url in ("/alice/demo/commits/branch/main", "/alice/demo/commits/branch/main/src/app.py"):
        result = client.simulate_get(url, params={"after": "0" * 40})
        assert result.status_code in (200, 400, 404), (url, result.status_code)


@pytest.mark.parametrize("page", ["src", "raw", "commits", "blame"])
def test_bogus_kind(client, page):
    for kind in ("nope", "BRANCH", "heads", "..", "%00"):
        url = f"/alice/demo/{page}/{kind}/main/README.md"
        result = client.simulate_get(url)
        assert result.status_code in (400, 404), (url, result.status_code)


@pytest.mark.parametrize(
    "query",
    [
        "page=abc",
        "page=-3",
        "page=0",
        "page=99999999999999999999",
        "page=1e9",
        "sort=bogus",
        "sort=",
        "q=%00",
        "q=%25%5F%5C",
        "page=" + "9" * 400,
    ],
)
def test_explore_parameters(client, query):
    for url in ("/", "/alice"):
        result = client.simulate_get(url, query_string=query)
        assert result.status_code in (200, 400), (url, query, result.status_code)


def test_method_not_allowed(client):
    for url in ("/alice/demo", "/alice/demo/raw/branch/main/README.md"):
        assert client.simulate_post(url).status_code == 405, url
        assert client.simulate_delete(url).status_code == 405, url


# ------------------------------------------------------------------------------ non-UTF-8




def test_raw_of_a_non_utf8_path_is_exact(client, demo):
    app = client.app
    status, headers, body = _call(app, b"/alice/demo/raw/branch/main/" + DEMO_INVALID_UTF8_PATH)
    assert status.startswith("200"), status
    path = DEMO_INVALID_UTF8_PATH.decode("utf-8", "surrogateescape")  # exact bytes to git
    expected = git(demo, "cat-file", "-p", f"main:{path}")
    assert body == expected == b"latin bytes\n"
    assert "server-timing" in headers
    # the replacement character is a different name: no such file
    status, _, _ = _call(app, b"/alice/demo/raw/branch/main/bad\xef\xbf\xbdname.txt")
    assert status.startswith("404"), status


def test_file_page_of_a_non_utf8_path(client):
    status, headers, body = _call(
        client.app, b"/alice/demo/src/branch/main/" + DEMO_INVALID_UTF8_PATH
    )
    assert status.startswith("200"), status
    assert headers["content-type"].startswith("text/html")
    assert b"latin bytes" in body
    assert b'href="/alice/demo/raw/branch/main/bad%FFname.txt"' in body


def test_history_and_blame_of_a_non_utf8_path(client, demo):
    path = DEMO_INVALID_UTF8_PATH.decode("utf-8", "surrogateescape")
    status, _, body = _call(
        client.app, b"/alice/demo/commits/branch/main/" + DEMO_INVALID_UTF8_PATH
    )
    assert status.startswith("200"), status
    expected = git_text(demo, "log", "--format=%H", "main", "--", path).split()
    assert expected and all(f"/alice/demo/commit/{c}".encode() in body for c in expected)
    status, _, body = _call(client.app, b"/alice/demo/blame/branch/main/" + DEMO_INVALID_UTF8_PATH)
    assert status.startswith("200"), status
    assert b"latin bytes" in body
    assert f'href="/alice/demo/commit/{expected[0]}"'.encode() in body


def test_tree_links_to_the_exact_bytes(client):
    page = client.simulate_get("/alice/demo/src/branch/main").text
    assert 'href="/alice/demo/src/branch/main/bad%FFname.txt"' in page
    assert "bad\ufffdname.txt" in page  # shown with a replacement character
    unicode_name = "\u00fcn\u00efc\u00f8d\u00e9.txt"
    assert "/alice/demo/src/branch/main/%C3%BCn%C3%AFc%C3%B8d%C3%A9.txt" in page
    result = client.simulate_get("/alice/demo/raw/branch/main/" + unicode_name)
    assert result.status_code == 200 and "content \u2713" in result.text
    spaced = client.simulate_get("/alice/demo/raw/branch/main/name%20with%20spaces.txt")
    assert spaced.content == b"spaces in the name\n"


# ------------------------------------------------------------------- a corrupt repository


CORRUPT_PAGES = [
    "/alice/corrupt",
    "/alice/corrupt/src/branch/main",
    "/alice/corrupt/src/branch/main/README.md",
    "/alice/corrupt/raw/branch/main/README.md",
    "/alice/corrupt/blame/branch/main/README.md",
    "/alice/corrupt/archive/main.tar.gz",
]


@pytest.mark.parametrize("url", CORRUPT_PAGES)
def test_corrupt_repository_answers_a_clear_error(client, url):
    result = client.simulate_get(url)
    assert result.status_code == 503, (url, result.status_code, result.text[:300])
    assert "cannot be read" in result.text or "unavailable" in result.text, url
    home = client.simulate_get("/alice/demo")
    assert home.status_code == 200
    assert "Update README" in home.text


def test_corrupt_repository_page_explains(client):
    result = client.simulate_get("/alice/corrupt")
    assert result.headers["content-type"].startswith("text/html")
    assert "Repository unavailable" in result.text
    assert "Other repositories are not affected" in result.text
    raw = client.simulate_get("/alice/corrupt/raw/branch/main/data.txt")
    assert raw.headers["content-type"].startswith("text/plain")


def test_corrupt_repository_other_pages_do_not_500(client, fixture_root):
    commit = git_text(fixture_root / "alice" / "corrupt.git", "rev-parse", "main")
    for url in (
        "/alice/corrupt/commits/branch/main",
        "/alice/corrupt/branches",
        "/alice/corrupt/tags",
        "/alice/corrupt/atom/branch/main",
        f"/alice/corrupt/commit/{commit}",
        f"/alice/corrupt/commit/{commit}.diff",
        f"/alice/corrupt/commit/{commit}.patch",
        "/alice/corrupt/commits/branch/main/README.md",
        f"/alice/corrupt/-/last/{commit}",
    ):
        result = client.simulate_get(url)
        assert result.status_code in (200, 202, 503), (url, result.status_code)
        assert client.simulate_get("/alice/one").status_code == 200


# ------------------------------------------------------------------------- empty repository


def test_empty_repository(client):
    page = client.simulate_get("/alice/empty")
    assert page.status_code == 200
    assert "This repository is empty" in page.text
    assert "git push -u origin main" in page.text
    for url in (
        "/alice/empty/commits/branch/main",
        "/alice/empty/src/branch/main",
        "/alice/empty/raw/branch/main/README.md",
        "/alice/empty/atom/branch/main",
        "/alice/empty/blame/branch/main/README.md",
    ):
        result = client.simulate_get(url)
        assert result.status_code == 404, url
        assert result.headers["content-type"].startswith(
            "text/plain" if "/raw/" in url else "text/html"
        ), url
    assert client.simulate_get("/alice/empty/archive/main.zip").status_code == 404
    for url in ("/alice/empty/branches", "/alice/empty/tags"):
        result = client.simulate_get(url)
        assert result.status_code == 200 and "No " in result.text, url
