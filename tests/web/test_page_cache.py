"""The page cache: bounded in bytes, keyed by the canonical URL (the exact path and the query
parameters the page reads; never the Host), so that no flood of URL variants can grow it."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import falcon
import pygit2
import pytest
from falcon import testing
from support.forges import start_forge, wait_for, wait_indexed
from support.gitfixtures import MODE_FILE, git, git_text, git_text_input
from support.pagecache import serve

from floorless.forge import Forge
from floorless.web.render import Renderer

WIDE_FILES = 5000
BRANCHES = 10
NON_UTF8 = (b"bad\xffname.txt", b"bad\xfename.txt")  # alike once decoded with replacement


def _build_wide(path: Path) -> str:
    """One commit of a 5,000-entry directory (plus two files whose names differ only in bytes
    that are not UTF-8), on main and ten more branches."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--bare", "-b", "main")
    shared = git_text_input(path, b"same content\n", "hash-object", "-w", "--stdin")
    lines = [f"{MODE_FILE} blob {shared}\tfile-{n:05d}.txt\n".encode() for n in range(WIDE_FILES)]
    for n, name in enumerate(NON_UTF8):
        blob = git_text_input(path, b"content number %d\n" % n, "hash-object", "-w", "--stdin")
        lines.append(f"{MODE_FILE} blob {blob}\t".encode() + name + b"\n")
    tree = git(path, "mktree", input=b"".join(sorted(lines, key=lambda x: x.split(b"\t")[1])))
    commit = git_text(path, "commit-tree", tree.decode().strip(), "-m", "a wide directory")
    git(path, "update-ref", "refs/heads/main", commit)
    for n in range(BRANCHES):
        git(path, "update-ref", f"refs/heads/b{n}", commit)
    return commit


@pytest.fixture(scope="module")
def wide_forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("wide")
    _build_wide(root / "repos" / "alice" / "wide.git")
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    yield forge
    forge.stop()




def stored_bytes(renderer: Renderer) -> int:
    """What the page cache's entries hold, measured here rather than by the cache."""
    return sum(
        sys.getsizeof(part) for entry in renderer.pages.entries.values() for part in entry.parts
    )


def test_query_variants_of_a_page_are_one_entry(wide_forge):
    client, renderer = serve(wide_forge)
    url = "/alice/wide/src/branch/main"
    first = client.simulate_get(url)
    assert first.status_code == 200
    assert "file-00000.txt" in first.text
    for n in range(50):
        variant = client.simulate_get(url, query_string=f"v={n}")
        assert variant.status_code == 200
        assert variant.content == first.content
        assert variant.headers["etag"] == first.headers["etag"]
    assert len(renderer.pages.entries) == 1
    assert renderer.pages.hits == 50


def test_a_flood_of_variants_of_a_wide_directory_stays_under_the_bound(wide_forge):
    """Issue 10, finding 8: 20 ``?v=N`` variants of a wide directory grew the process by
    760 MB. They are one page now, and the cache never holds more than its bound."""
    client, renderer = serve(wide_forge)
    bound = wide_forge.settings.page_cache_bytes
    for n in range(20):
        page = client.simulate_get("/alice/wide/src/branch/main", query_string=f"v={n}&x={n}")
        assert page.status_code == 200
        assert len(page.content) > 500_000  # a wide page indeed
    assert len(renderer.pages.entries) == 1
    assert renderer.pages.entries.currsize <= bound
    assert stored_bytes(renderer) <= renderer.pages.entries.currsize
    assert stored_bytes(renderer) < 2 * len(page.content) + 1024  # one page's worth


def test_the_cache_never_holds_more_bytes_than_its_bound(wide_forge):
    client, renderer = serve(wide_forge)
    first = client.simulate_get("/alice/wide/src/branch/main")
    assert first.status_code == 200
    one_page = renderer.pages.entries.currsize
    bound = 3 * one_page + one_page // 2  # room for three of the wide pages
    client, renderer = serve(wide_forge, page_cache_bytes=bound)
    urls = ["/alice/wide", "/alice/wide/src/branch/main"]
    urls += [f"/alice/wide/src/branch/b{n}" for n in range(BRANCHES)]
    for url in urls:
        assert client.simulate_get(url).status_code == 200
        assert renderer.pages.entries.currsize <= bound
        assert stored_bytes(renderer) <= bound
    assert len(renderer.pages.entries) == 3  # the oldest pages made room for the newest
    again = client.simulate_get(urls[-1])  # the newest is still there
    assert again.status_code == 200
    assert renderer.pages.hits == 1


def test_a_page_larger_than_the_whole_cache_is_not_kept(wide_forge):
    client, renderer = serve(wide_forge, page_cache_bytes=100_000)
    for _ in range(2):
        page = client.simulate_get("/alice/wide/src/branch/main")
        assert page.status_code == 200
        assert "file-00000.txt" in page.text
    assert len(renderer.pages.entries) == 0
    assert renderer.pages.hits == 0


def _clone_url(page: str, label: str = "Clone URL") -> str:
    found = re.search(rf'<input readonly value="([^"]*)" aria-label="{label}">', page)
    assert found is not None
    return found.group(1)


def _ssh_url(page: str) -> str:
    return _clone_url(page, "Clone with SSH")


def _languages_counted(forge: Forge, renderer: Renderer, name: str) -> None:
    """Wait for the background count of a large tree's languages, without which its home
    page is not kept (``web/languages.py``)."""
    repo = forge.registry.get("alice", name)
    handle = forge.live.open(repo)
    tree = handle.revparse_single("HEAD").peel(pygit2.Tree).id.raw
    wait_for(lambda: renderer.languages.get(handle, repo.path, tree) is not None)


def test_hosts_share_one_entry_and_each_page_shows_its_own_address(wide_forge):
    client, renderer = serve(wide_forge)
    _languages_counted(wide_forge, renderer, "wide")
    pages = {}
    for host in ("one.example", "two.example:8080", "[::1]:3000", "one.example"):
        page = client.simulate_get("/alice/wide", headers={"Host": host})
        assert page.status_code == 200
        assert _clone_url(page.text) == f"http://{host}/alice/wide.git"
        # the SSH clone URL: the request's host name, the SSH port
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        assert _ssh_url(page.text) == f"ssh://git@{name}:2222/alice/wide.git"
        assert "floorless-public-" not in page.text and "floorless-ssh-" not in page.text
        pages[host] = page
    assert len(renderer.pages.entries) == 1
    assert renderer.pages.hits == 3
    # the rest of the page is the same: every other link is relative to the host
    one, two = pages["one.example"].text, pages["two.example:8080"].text
    moved = one.replace("http://one.example/", "http://two.example:8080/")
    assert moved.replace("git@one.example:", "git@two.example:") == two
    assert "one.example" not in two and "two.example" not in one
    # an ETag names the page with its address
    assert pages["one.example"].headers["etag"] != pages["two.example:8080"].headers["etag"]
    again = client.simulate_get(
        "/alice/wide",
        headers={"Host": "one.example", "If-None-Match": pages["one.example"].headers["etag"]},
    )
    assert again.status_code == 304
    # a Host that is no host name gets the listening address, from the same entry
    odd = client.simulate_get("/alice/wide", headers={"Host": 'x"><script>'})
    assert odd.status_code == 200
    settings = wide_forge.settings
    assert _clone_url(odd.text) == f"http://{settings.host}:{settings.port}/alice/wide.git"
    assert _ssh_url(odd.text) == f"ssh://git@{settings.host}:2222/alice/wide.git"
    assert len(renderer.pages.entries) == 1


def test_a_configured_base_url_is_the_clone_url_for_every_host(wide_forge):
    original = wide_forge.settings
    wide_forge.settings = dataclasses.replace(original, base_url="https://git.example.org/")
    try:
        client, renderer = serve(wide_forge)
        for host in ("one.example", "two.example"):
            page = client.simulate_get("/alice/wide", headers={"Host": host})
            assert _clone_url(page.text) == "https://git.example.org/alice/wide.git"
            assert _ssh_url(page.text) == "ssh://git@git.example.org:2222/alice/wide.git"
    finally:
        wide_forge.settings = original
    assert len(renderer.pages.entries) == 1


def test_the_ssh_clone_url_follows_its_settings_and_hides_without_a_port(wide_forge):
    original = wide_forge.settings
    try:
        wide_forge.settings = dataclasses.replace(
            original, ssh_domain="ssh.example.org", ssh_url_port=22, ssh_user="forge"
        )
        client, renderer = serve(wide_forge)
        _languages_counted(wide_forge, renderer, "wide")
        for host in ("one.example", "two.example"):
            page = client.simulate_get("/alice/wide", headers={"Host": host})
            assert _ssh_url(page.text) == "forge@ssh.example.org:alice/wide.git"
        assert renderer.pages.hits == 1
        wide_forge.settings = dataclasses.replace(original, ssh_port=0)
        client, renderer = serve(wide_forge)
        page = client.simulate_get("/alice/wide", headers={"Host": "one.example"})
        assert _clone_url(page.text) == "http://one.example/alice/wide.git"
        assert 'aria-label="Clone with SSH"' not in page.text
        assert "floorless-ssh-" not in page.text and "ssh://" not in page.text
    finally:
        wide_forge.settings = original


def test_the_parameters_a_page_reads_are_its_key_and_no_others(forge):
    """The commits list reads its cursor (``after``, ``skip``): each cursor is a page
    of its own; any other parameter is ignored, in the key as in the page."""
    client, renderer = serve(forge)
    url = "/alice/history/commits/branch/main"
    first = client.simulate_get(url)
    assert first.status_code == 200
    following = re.search(r'href="[^"?]*\?([^"]*after=[^"]*)"', first.text)
    assert following is not None
    query = following.group(1).replace("&amp;", "&")
    second = client.simulate_get(url, query_string=query)
    assert second.status_code == 200
    assert second.content != first.content
    assert len(renderer.pages.entries) == 2
    noisy = client.simulate_get(url, query_string=query + "&utm_source=x&page=7")
    assert noisy.content == second.content
    assert client.simulate_get(url, query_string="utm_source=x").content == first.content
    assert len(renderer.pages.entries) == 2
    assert renderer.pages.hits == 2


def _call(app, raw_path: bytes) -> bytes:
    """Call the WSGI app with exactly these path bytes (which the test client cannot send)."""
    environ = testing.create_environ()
    environ["PATH_INFO"] = raw_path.decode("latin-1")
    statuses = []
    body = b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    assert statuses[0].startswith("200"), statuses
    return body


def test_paths_that_differ_only_in_bytes_that_are_not_utf8_are_different_pages(wide_forge):
    client, renderer = serve(wide_forge)
    first, second = (_call(client.app, b"/alice/wide/src/branch/main/" + n) for n in NON_UTF8)
    assert b"content number 0" in first and b"content number 1" not in first
    assert b"content number 1" in second and b"content number 0" not in second
    assert len(renderer.pages.entries) == 2


class _Reads(dict):
    """Query parameters that note each name looked up."""

    def __init__(self, params, seen):
        super().__init__(params)
        self.seen = seen

    def __contains__(self, name):
        self.seen.add(name)
        return super().__contains__(name)

    def __getitem__(self, name):
        self.seen.add(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self.seen.add(name)
        return super().get(name, default)


def test_every_cached_page_reads_only_the_parameters_its_view_declares(
    client, fixture_root, monkeypatch
):
    """A parameter a page reads but its view does not declare would be left out of the key,
    and the cache would answer one value's page for another's."""
    from floorless.web.views import blame, commit, commits, repo, source

    sha = git_text(fixture_root / "alice" / "demo.git", "rev-parse", "main")
    pages = [
        ("/alice/demo", repo.Home),
        ("/alice/demo/src/branch/main", source.Source),
        ("/alice/demo/src/branch/main/src/app.py", source.Source),
        ("/alice/demo/blame/branch/main/src/app.py", blame.Blame),
        ("/alice/demo/commits/branch/main", commits.Commits),
        ("/alice/demo/commits/branch/main/src/app.py", commits.Commits),
        (f"/alice/demo/commit/{sha}", commit.Commit),
    ]
    seen: set[str] = set()
    original = falcon.Request.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._params = _Reads(self._params, seen)

    monkeypatch.setattr(falcon.Request, "__init__", recording)
    for url, view in pages:
        seen.clear()
        assert client.simulate_get(url, query_string="unknown=1").status_code == 200
        assert seen <= set(view.query), (url, seen - set(view.query))


def test_the_key_holds_the_exact_bytes_of_the_parameters_read_and_nothing_else(forge):
    from floorless.accounts.access import ANONYMOUS
    from floorless.web.pages import PageCache

    repo = forge.registry.get("alice", "demo")

    def key(query_string: str, path: str = "/alice/demo/commits/branch/main") -> tuple:
        environ = testing.create_environ(path=path, query_string=query_string)
        req = falcon.Request(environ)
        return PageCache.key("Commits", repo, req, ("after", "seen"), ANONYMOUS, 1)

    assert key("") == key("v=1") == key("utm_source=x&v=2&page=3")
    assert key("after=abc") == key("after=abc&v=1") == key("v=1&after=abc") == key("%61fter=abc")
    assert key("after=abc") != key("after=abd") != key("")
    assert key("after=bad%FFname") != key("after=bad%FEname")  # alike once decoded
    assert key("after=a&seen=b") != key("after=b&seen=a")
    assert key("", "/alice/demo/src/branch/main/a") != key("", "/alice/demo/src/branch/main/b")
