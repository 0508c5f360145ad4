"""One URL module: every link is built by ``floorless.forgejo.urls`` and keeps the exact bytes of
refs and paths; every link a page shows answers; templates join no URL pieces themselves;
and object ids are recognised at either hash's length (SHA-1 and SHA-256)."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote_to_bytes, urljoin, urlsplit

import falcon
import pygit2
import pytest
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import DEMO_INVALID_UTF8_PATH, git, git_text

from floorless.core.errors import BadRequest, UnknownRevision
from floorless.forgejo import urls
from floorless.git import oid
from floorless.git.blame import BlameGroup, IncrementalParser
from floorless.git.refs import RefSnapshot, Tag, resolve
from floorless.git.unreachable import requested_ids
from floorless.web.app import create_app
from floorless.web.history import Cursor

REPO = SimpleNamespace(owner="alice", name="demo")
SHA1 = "0123456789abcdef0123456789abcdef01234567"
SHA256 = "0123456789abcdef" * 4

# ---------------------------------------------------------------------------- the builders

BUILT = [
    (urls.home(REPO), "/alice/demo"),
    (urls.home(SimpleNamespace(owner="a b", name="c%d")), "/a%20b/c%25d"),
    (urls.clone(REPO), "/alice/demo.git"),
    (urls.owner("alice"), "/alice"),
    (urls.owner("alice", "x y", "name", 2), "/alice?q=x%20y&sort=name&page=2"),
    (urls.explore(), "/"),
    (urls.explore("q&r", "recent", 3), "/?q=q%26r&sort=recent&page=3"),
    (urls.explore(page=1), "/"),
    (urls.login(), "/-/login"),
    (
        urls.login(next="/alice/demo/settings?x=1"),
        "/-/login?next=%2Falice%2Fdemo%2Fsettings%3Fx%3D1",
    ),
    (urls.logout(), "/-/logout"),
    (urls.tokens(), "/-/tokens"),
    (urls.new_repo(), "/-/new"),
    (urls.static("style.css"), "/-/static/style.css"),
    (urls.src(REPO, "branch", b"main"), "/alice/demo/src/branch/main"),
    (urls.src(REPO, "branch", b"main", b""), "/alice/demo/src/branch/main"),
    (urls.src(REPO, "branch", "main", "src/app.py"), "/alice/demo/src/branch/main/src/app.py"),
    # a ref's slashes stay slashes: the router takes the longest ref that prefixes the tail
    (urls.src(REPO, "branch", b"feature/x", b"docs"), "/alice/demo/src/branch/feature/x/docs"),
    # every byte kept, escaped where a URL would read it otherwise
    (urls.src(REPO, "tag", b"v 1", b"a b.txt"), "/alice/demo/src/tag/v%201/a%20b.txt"),
    (urls.src(REPO, "branch", b"100%", b"50%.txt"), "/alice/demo/src/branch/100%25/50%25.txt"),
    (urls.src(REPO, "branch", b"a#b", b"c#d"), "/alice/demo/src/branch/a%23b/c%23d"),
    (urls.src(REPO, "branch", b"a?b", b"c?d"), "/alice/demo/src/branch/a%3Fb/c%3Fd"),
    (
        urls.src(REPO, "branch", b"main", b"bad\xffname.txt"),
        "/alice/demo/src/branch/main/bad%FFname.txt",
    ),
    (urls.src(REPO, "branch", b"main", "\u00fc.txt"), "/alice/demo/src/branch/main/%C3%BC.txt"),
    (
        urls.src(REPO, "branch", b"main", b"a;b=c&d+e"),
        "/alice/demo/src/branch/main/a%3Bb%3Dc%26d%2Be",
    ),
    (urls.src(REPO, "commit", SHA1, b"docs"), f"/alice/demo/src/commit/{SHA1}/docs"),
    (
        urls.src(REPO, "branch", b"main", b"big", after=b"f\xff 1"),
        "/alice/demo/src/branch/main/big?after=f%FF%201",
    ),
    (urls.raw(REPO, "branch", b"main", b"README.md"), "/alice/demo/raw/branch/main/README.md"),
    (urls.blame(REPO, "tag", b"v1.0", b"src/app.py"), "/alice/demo/blame/tag/v1.0/src/app.py"),
    (urls.commits(REPO, "branch", b"main"), "/alice/demo/commits/branch/main"),
    (urls.commits(REPO, "branch", b"main", b"src"), "/alice/demo/commits/branch/main/src"),
    (urls.ref_page("raw", REPO, "branch", b"main", b"x"), "/alice/demo/raw/branch/main/x"),
    (urls.default_page(REPO, "commits"), "/alice/demo/commits"),
    (urls.commit(REPO, SHA1), f"/alice/demo/commit/{SHA1}"),
    (urls.commit(REPO, SHA256), f"/alice/demo/commit/{SHA256}"),
    (urls.commit(REPO, bytes.fromhex(SHA256)), f"/alice/demo/commit/{SHA256}"),
    (urls.commit(REPO, SHA1, "diff"), f"/alice/demo/commit/{SHA1}.diff"),
    (urls.commit(REPO, SHA1, "patch"), f"/alice/demo/commit/{SHA1}.patch"),
    (urls.raw_blob(REPO, bytes.fromhex(SHA1)), f"/alice/demo/raw/blob/{SHA1}"),
    (urls.branches(REPO), "/alice/demo/branches"),
    (urls.tags(REPO), "/alice/demo/tags"),
    (urls.settings(REPO), "/alice/demo/settings"),
    (urls.archive(REPO, b"feature/x"), "/alice/demo/archive/feature/x.tar.gz"),
    (urls.archive(REPO, b"v1.0", ".zip"), "/alice/demo/archive/v1.0.zip"),
    (urls.feed(REPO, b"feature/x"), "/alice/demo/atom/branch/feature/x"),
    (urls.feed(REPO, b"main", "rss"), "/alice/demo/rss/branch/main"),
    (urls.last_commits(REPO, bytes.fromhex(SHA1)), f"/alice/demo/-/last/{SHA1}"),
    (urls.last_commits(REPO, bytes.fromhex(SHA1), b"a b/c"), f"/alice/demo/-/last/{SHA1}/a%20b/c"),
    (urls.same_page(), "?"),
    (urls.same_page(after="ab,cd", seen=None), "?after=ab%2Ccd"),
]


@pytest.mark.parametrize(("built", "expected"), BUILT)
def test_builders(built, expected):
    assert built == expected


@pytest.mark.parametrize(
    ("ref", "path"),
    [
        (b"main", b"bad\xffname.txt"),
        (b"feature/x", b"dir with space/%41#?.txt"),
        (b"\xc3\xbc/\xfe", b"\x01\x7f~!$&'()*+,;=:@"),
    ],
)
def test_refs_and_paths_round_trip(ref, path):
    """What the router gets back (percent-decoded) is the very bytes put in."""
    url = urls.src(REPO, "branch", ref, path)
    assert "?" not in url and "#" not in url
    tail = unquote_to_bytes(url.removeprefix("/alice/demo/src/branch/"))
    assert tail == ref + b"/" + path


@pytest.mark.parametrize(
    "call",
    [
        lambda: urls.ref_page("tree", REPO, "branch", b"main"),
        lambda: urls.src(REPO, "blob", b"main"),
        lambda: urls.commit(REPO, SHA1, "zip"),
        lambda: urls.archive(REPO, b"main", ".rar"),
        lambda: urls.feed(REPO, b"main", "json"),
    ],
)
def test_builders_refuse_what_no_route_serves(call):
    with pytest.raises(ValueError):
        call()


# ---------------------------------------------------------------------- parsing the tail


def _request(template: str, path: bytes) -> falcon.Request:
    req = falcon.Request(testing.create_environ(path="/"))
    req.env["PATH_INFO"] = path.decode("latin-1")
    req.uri_template = template
    return req


@pytest.mark.parametrize(
    ("template", "path", "field", "tail"),
    [
        ("/{owner}/{repo}/src/{kind}/{tail:path}", b"/a/b/src/branch/main/x", "tail", b"main/x"),
        ("/{owner}/{repo}/src/{kind}/{tail:path}", b"//a/b/src/branch/m/\xff", "tail", b"m/\xff"),
        ("/{owner}/{repo}/src/{kind}/{tail:path}", b"/a/b/src/main/x/", "kind", b"main/x/"),
        ("/{owner}/{repo}/src/{kind}", b"/a/b/src/branch", "tail", b""),
        ("/{owner}/{repo}/-/last/{sha}/{tail:path}", b"/a/b/-/last/abcd/d/e", "sha", b"abcd/d/e"),
        ("/{owner}/{repo}/archive/{tail:path}", b"/a/b.git/archive/f/x.zip", "tail", b"f/x.zip"),
    ],
)
def test_exact_tail(template, path, field, tail):
    assert urls.exact_tail(_request(template, path), field) == tail


def test_exact_tail_refuses_nul():
    with pytest.raises(BadRequest):
        urls.exact_tail(_request("/{owner}/{repo}/raw/{kind}/{tail:path}", b"/a/b/raw/x/m\0"))


def test_no_view_reparses_the_path():
    """Views take their parameters from the route and the tail from ``urls.exact_tail``."""
    views = resources.files("floorless.web") / "views"
    for source in views.iterdir():
        if not source.name.endswith(".py"):
            continue
        code = source.read_text()
        for pattern in (r"req\.path\b", r"PATH_INFO", r"\.split\(\"/\"\)\[", r"raw_tail"):
            assert not re.search(pattern, code), (source.name, pattern)


# ---------------------------------------------------------------------- the templates

_URL_ATTRIBUTE = re.compile(r'\b(?:href|src|action|data-last|data-refs)="([^"]*)"')


def test_templates_build_no_urls_themselves():
    """A template writes a link as one call of ``urls`` (or a URL its view built), never by
    joining pieces: no ``{{ base }}/...``, no literal ``/src/``."""
    templates = resources.files("floorless.web") / "templates"
    for template in templates.iterdir():
        text = template.read_text()
        literal = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "", text)
        for piece in ("/src/", "/raw/", "/blame/", "/commits/", "/commit/", "/-/", "/branches"):
            assert piece not in literal, (template.name, piece)
        assert not re.search(r"\bbase\b", " ".join(re.findall(r"\{\{(.*?)\}\}", text))), (
            template.name
        )
        assert "urlpath" not in text and "urlencode" not in text, template.name
        for value in _URL_ATTRIBUTE.findall(text):
            if value.startswith(("#", "data:")) or value == "":
                continue
            # one expression: the whole URL, built in one place (a feed's after the site's)
            assert re.fullmatch(r"(\{\{ public \}\})?\{\{[^{}]*\}\}", value), (template.name, value)
        for value in re.findall(r"<(?:id|link|guid)>(.*?)</", text):  # the feeds
            # the site's address, then one expression: a call of urls, or what the view built
            assert re.fullmatch(r"\{\{ public \}\}\{\{[^{}]*\}\}", value), value


# --------------------------------------------------------------- every link a page shows


class _Links(HTMLParser):
    """Every link of a page, each marked when it lies in the ref switch or its list (which
    keep the path shown, whether or not the other ref has it) or in a rendered Markdown file
    (whose author chose where it points)."""

    GUARDED = (("details", "refswitch"), ("div", "reflist"), ("div", "markdown"))

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, bool]] = []  # (attribute, value, guarded)
        self._open: list[str] = []  # the guarded elements' tags, and the same tags inside them

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if any(tag == t and c in classes for t, c in self.GUARDED) or (tag in self._open):
            self._open.append(tag)
        for name in ("href", "src", "action", "data-last", "data-refs"):
            value = found.get(name)
            if value is not None and tag != "use":
                self.links.append((name, value, bool(self._open)))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()


def _get(app: falcon.App, url: str) -> tuple[int, str, str]:
    """GET ``url`` as the server hands it to the app: the percent-decoded path's exact bytes
    as latin-1 text (the test client would replace the bytes that are not UTF-8)."""
    parts = urlsplit(url)
    environ = testing.create_environ(query_string=parts.query)
    environ["PATH_INFO"] = unquote_to_bytes(parts.path).decode("latin-1")
    captured: dict[str, object] = {}

    def start_response(status, headers, exc_info=None):
        captured["status"] = int(status.split()[0])
        captured["type"] = dict((k.lower(), v) for k, v in headers).get("content-type", "")

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return captured["status"], captured["type"], body.decode("utf-8", "replace")


def _exists(repo: Path, url: str) -> bool:
    """Whether the ref and path a ``/{page}/{kind}/{ref}/{path}`` URL names exist."""
    parts = urlsplit(url).path.split("/", 5)
    kind, tail = parts[4], unquote_to_bytes(parts[5])
    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    branches = {r[len(b"refs/heads/") :] for r in refs if r.startswith(b"refs/heads/")}
    tags = {r[len(b"refs/tags/") :] for r in refs if r.startswith(b"refs/tags/")}
    snapshot = RefSnapshot(
        head=None,
        branches={b: b"\0" * 20 for b in branches},
        tags={t: Tag(t, b"\0" * 20, b"\0" * 20, False) for t in tags},
    )
    resolved = resolve(snapshot, kind, tail)
    prefix = {"branch": b"refs/heads/", "tag": b"refs/tags/", "commit": b""}[kind]
    spec = prefix + resolved.ref + b":" + resolved.path
    found = subprocess.run(
        ["git", "--git-dir", str(repo), "cat-file", "-e", spec.decode("utf-8", "surrogateescape")],
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


@pytest.fixture(scope="module")
def own_client(fixture_root, tmp_path_factory):
    """A forge of its own: following every link blames files and fills caches that other
    tests expect to find empty."""
    root = tmp_path_factory.mktemp("crawl")
    for name in ("alice/demo.git", "alice/history.git", "alice/corrupt.git", "alice/one.git"):
        shutil.copytree(fixture_root / name, root / "repos" / name, symlinks=True)
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    yield testing.TestClient(create_app(forge))
    forge.stop()


def test_every_link_on_the_demo_pages_answers(own_client, fixture_root):
    """Crawl the demo repository's pages from its home: every link, image, form action and
    last-commit endpoint they show answers (a page, a redirect, or 405 for a form's GET), never
    404. A ref switch link keeps the path shown, and a rendered README's link goes where its
    author said: those are 404 exactly where that ref lacks the path, checked against git."""
    demo = fixture_root / "alice" / "demo.git"
    main = git_text(demo, "rev-parse", "main")
    seeds = [
        "/alice/demo",
        "/alice/demo/src/branch/main/src/app.py",
        "/alice/demo/blame/branch/main/src/app.py",
        "/alice/demo/src/branch/main/link-to-readme",
        "/alice/demo/src/branch/main/vendor/lib",
        "/alice/demo/src/branch/main/images/logo.png",
        f"/alice/demo/commit/{main}",
        "/alice/demo/commits/branch/main/src",
        "/alice/history/commits/branch/main",
        "/",
        "/alice",
    ]
    queue = list(seeds)
    crawled: set[str] = set()
    checked: dict[str, int] = {}
    while queue and len(crawled) < 250:
        page = queue.pop(0)
        if page in crawled:
            continue
        crawled.add(page)
        status, content_type, text = _get(own_client.app, page)
        assert status == 200, (page, status)
        if not content_type.startswith("text/html"):
            continue
        parser = _Links()
        parser.feed(text)
        for attribute, value, guarded in parser.links:
            if value.startswith(("#", "data:", "http:", "https:", "mailto:")):
                continue
            url = urljoin("http://localhost" + page, value)
            url = url.removeprefix("http://localhost").partition("#")[0]
            assert url.startswith("/"), (page, value)
            if url not in checked:
                checked[url] = _get(own_client.app, url)[0]
            status = checked[url]
            if status == 404 and guarded:
                assert not _exists(demo, url), (page, url)
                continue
            allowed = (200, 202, 302, 303) if attribute != "action" else (200, 303, 405)
            if url == "/alice/corrupt":  # a fixture git cannot read: an error, not absent
                allowed = (503,)
            assert status in allowed, (page, attribute, value, status)
            if (
                status == 200
                and url.startswith(("/alice/demo", "/alice/history/commits"))
                and "/raw/" not in url
                and "/archive/" not in url
                and ("/-/" not in url or "/-/refs?" in url)  # the ref switcher's list
                and not url.endswith((".diff", ".patch"))
            ):
                queue.append(url)
    assert len(crawled) >= 40 and len(checked) >= 150, (len(crawled), len(checked))
    # the odd names were among them, and their links took the exact bytes there
    odd = urls.src(REPO, "branch", b"main", DEMO_INVALID_UTF8_PATH)
    assert odd in checked and checked[odd] == 200
    assert urls.raw(REPO, "branch", b"main", "images/logo.png") in checked
    # the ref switcher's lists were followed, keeping the page and the path shown
    assert urls.ref_switch(REPO, "blame", "src/app.py") in crawled
    assert urls.blame(REPO, "tag", b"v1.0", "src/app.py") in checked
    assert any("/rss/" not in u and "/-/last/" in u for u in checked)


# ------------------------------------------------------------------ object ids, either hash


@pytest.mark.parametrize(
    ("text", "full", "abbreviation"),
    [
        (SHA1, True, True),
        (SHA256, True, True),
        (SHA1.upper(), True, True),
        (SHA1[:4], False, True),
        (SHA1[:3], False, False),
        (SHA1 + "a", False, True),  # 41 digits: an abbreviation of a SHA-256 id
        (SHA256 + "a", False, False),
        ("g" * 40, False, False),
        ("", False, False),
        (SHA1 + "\n", False, False),
    ],
)
def test_object_ids_of_either_length(text, full, abbreviation):
    assert oid.is_full(text) is full
    assert oid.is_full(text.encode()) is full
    assert oid.is_abbreviation(text) is abbreviation
    assert (oid.parse_full(text) is not None) is full


def test_id_lists_and_raw_ids():
    assert oid.parse_list(f"{SHA1},{SHA256}", 2) == [bytes.fromhex(SHA1), bytes.fromhex(SHA256)]
    assert oid.parse_list("", 2) == []
    assert oid.parse_list(f"{SHA1},", 2) is None
    assert oid.parse_list(f"{SHA1},{SHA1},{SHA1}", 2) is None
    assert oid.is_raw(b"\1" * 20) and oid.is_raw(b"\1" * 32) and not oid.is_raw(b"\1" * 21)
    assert oid.parse_full(b"\xff" * 40) is None


def test_a_sha256_commit_id_resolves():
    snapshot = RefSnapshot(head=None, branches={}, tags={})
    asked: list[bytes] = []

    def expand(prefix: bytes) -> bytes | None:
        asked.append(prefix)
        return SHA256.encode() if SHA256.startswith(prefix.decode()) else None

    found = resolve(snapshot, "commit", SHA256.encode() + b"/docs/a.md", expand)
    assert (found.ref, found.commit, found.path) == (
        SHA256.encode(),
        bytes.fromhex(SHA256),
        b"docs/a.md",
    )
    assert asked == []  # a whole id needs no look-up
    for length in (4, 12, 41, 50, 63):
        prefix = SHA256[:length].encode()
        assert resolve(snapshot, "commit", prefix, expand).commit == bytes.fromhex(SHA256)
    with pytest.raises(UnknownRevision):
        resolve(snapshot, "commit", SHA256.encode() + b"0", expand)


def test_cursor_takes_either_length():
    for sha in (SHA256, SHA1):
        cursor = Cursor.parse(sha, "50")
        assert cursor == Cursor(bytes.fromhex(sha), 50)
        assert cursor.params() == {"after": sha, "skip": "50", "path": None}
        assert Cursor.parse(cursor.params()["after"], None) == Cursor(bytes.fromhex(sha), 0)
    assert Cursor(bytes.fromhex(SHA1)).params() == {"after": SHA1, "skip": None, "path": None}
    followed = Cursor(bytes.fromhex(SHA1), 3, b"old/name.py")
    assert followed.params() == {"after": SHA1, "skip": "3", "path": "old/name.py"}
    assert Cursor.parse(SHA1, "3", "old/name.py") == followed


def test_blame_output_of_a_sha256_repository(tmp_path):
    """``git blame --incremental`` in a real SHA-256 repository, parsed."""
    work = tmp_path / "s256"
    subprocess.run(
        ["git", "init", "-q", "-b", "main", "--object-format=sha256", str(work)], check=True
    )
    (work / "a.txt").write_bytes(b"one\ntwo\n")
    git(work, "add", "a.txt")
    git(work, "commit", "-q", "-m", "first", when=1_700_000_000)
    head = git_text(work, "rev-parse", "HEAD")
    assert len(head) == 64
    parser = IncrementalParser(2)
    groups = parser.feed(git(work, "blame", "--incremental", "HEAD", "--", "a.txt"))
    assert groups + parser.finish() == [BlameGroup(head, 1, 2, 1)]
    assert parser.commits[head].summary == "first"


def test_protocol_requests_name_ids_of_either_length():
    body = b"".join(
        b"%04x" % (len(line) + 4) + line
        for line in (f"want {SHA1}\n".encode(), f"want {SHA256}\n".encode())
    )
    assert requested_ids(body + b"0000") == [bytes.fromhex(SHA1), bytes.fromhex(SHA256)]


@pytest.fixture(scope="module")
def sha256_forge(tmp_path_factory, fixture_root):
    """A forge over a real SHA-256 repository beside an ordinary one."""
    root = tmp_path_factory.mktemp("s256")
    work = root / "work"
    subprocess.run(
        ["git", "init", "-q", "-b", "main", "--object-format=sha256", str(work)], check=True
    )
    (work / "README.md").write_bytes(b"# SHA-256\n")
    git(work, "add", "README.md")
    git(work, "commit", "-q", "-m", "first", when=1_700_000_000)
    repos = root / "repos"
    (repos / "zed").mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(repos / "zed" / "s256.git")], check=True
    )
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--bare",
            str(fixture_root / "alice" / "one.git"),
            str(repos / "zed" / "one.git"),
        ],
        check=True,
    )
    forge = start_forge(repos, root / "data")
    wait_indexed(forge)
    yield forge, git_text(work, "rev-parse", "HEAD")
    forge.stop()


def _libgit2_reads_sha256(path: Path) -> bool:
    try:
        pygit2.Repository(str(path))
    except (pygit2.GitError, ValueError):
        return False
    return True


def test_a_sha256_repository(sha256_forge):
    """With a libgit2 that reads SHA-256 repositories, its commits answer by their 64-digit
    ids; libgit2 1.9 (pygit2 1.21) cannot open one, and then each of its pages answers a
    clear 503 naming the reason, never a 500, while other repositories keep working."""
    forge, head = sha256_forge
    client = testing.TestClient(create_app(forge))
    pages = [
        "/zed/s256",
        f"/zed/s256/commit/{head}",
        f"/zed/s256/commit/{head[:12]}",
        f"/zed/s256/src/commit/{head}/README.md",
        f"/zed/s256/raw/commit/{head}/README.md",
        "/zed/s256/commits/branch/main",
    ]
    readable = _libgit2_reads_sha256(forge.registry.get("zed", "s256").path)
    for url in pages:
        result = client.simulate_get(url)
        if readable:
            assert result.status_code == 200, (url, result.status_code)
        else:
            assert result.status_code == 503, (url, result.status_code)
            assert "SHA-256" in result.text, (url, result.text[:300])
    assert client.simulate_get("/zed/one").status_code == 200
    assert client.simulate_get("/zed").status_code == 200
