"""The file finder: ``/-/paths/{tree}`` lists a tree's paths as JSON (git's own listing is the
oracle), fetched once per tree, cached and ETagged, with no process; ``/find/{kind}/{ref}`` is
the finder as a page without script, ranked as the script ranks; every page of a ref links to
it and carries what the keyboard shortcuts need."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pygit2
import pytest
from falcon import testing
from support.gitfixtures import DEMO_INVALID_UTF8_PATH, git_text
from support.spawns import counting

from floorless.git.paths import tree_paths
from floorless.web.views.finder import rank

DEMO = "/alice/demo"


def _git_paths(repo: Path, rev: str) -> list[bytes]:
    listing = git_text(repo, "ls-tree", "-r", "-z", "--name-only", rev)
    return sorted(p.encode("utf-8", "surrogateescape") for p in listing.split("\0") if p)


def _tree(repo: Path, rev: str) -> str:
    return git_text(repo, "rev-parse", f"{rev}^{{tree}}")


def test_paths_are_gits_listing(client: testing.TestClient, fixture_root: Path) -> None:
    repo = fixture_root / "alice" / "demo.git"
    tree = _tree(repo, "main")
    with counting() as spawned:
        result = client.simulate_get(f"{DEMO}/-/paths/{tree}")
    assert spawned == []
    assert result.status_code == 200
    assert result.headers["content-type"].startswith("application/json")
    body = json.loads(result.text)
    assert body["tree"] == tree and body["truncated"] is False
    listed = [unquote_to_bytes(p) for p in body["paths"]]
    assert listed == _git_paths(repo, "main")
    assert DEMO_INVALID_UTF8_PATH in listed  # exact bytes, though not UTF-8
    assert result.headers["etag"].strip('"') == tree
    assert "immutable" in result.headers["cache-control"]
    again = client.simulate_get(
        f"{DEMO}/-/paths/{tree}", headers={"If-None-Match": result.headers["etag"]}
    )
    assert again.status_code == 304 and again.content == b""


def test_a_page_of_a_ref_links_the_finder(client: testing.TestClient, fixture_root: Path) -> None:
    """Every page of a ref carries "Go to file" (the finder's page without script) and what
    the shortcuts need: the list's URL by tree id, the permanent link, blame and history."""
    repo = fixture_root / "alice" / "demo.git"
    main = git_text(repo, "rev-parse", "main")
    tree = _tree(repo, "main")
    for url in (
        f"{DEMO}/src/branch/main",
        f"{DEMO}/src/branch/main/README.md",
        f"{DEMO}/blame/branch/main/README.md",  # a blame may spawn git on a cache miss
        f"{DEMO}/commits/branch/main/README.md",
    ):
        with counting() as spawned:
            page = client.simulate_get(url)
        assert page.status_code == 200, url
        assert spawned == [] or "/blame/" in url, url
        link = re.search(r'<a class="go-file"[^>]*>', page.text)
        assert link, url
        tag = link.group(0)
        assert 'href="/alice/demo/find/branch/main"' in tag
        assert f'data-paths="/alice/demo/-/paths/{tree}"' in tag
        assert 'data-src="/alice/demo/src/branch/main"' in tag
        page_kind = url.split("/")[3]
        assert f'data-permalink="/alice/demo/{page_kind}/commit/{main}' in tag
    blob = client.simulate_get(f"{DEMO}/src/branch/main/README.md").text
    assert 'data-blame="/alice/demo/blame/branch/main/README.md"' in blob
    assert f'data-raw="/alice/demo/raw/commit/{main}/README.md"' in blob
    assert 'data-history="/alice/demo/commits/branch/main/README.md"' in blob
    directory = client.simulate_get(f"{DEMO}/src/branch/main").text
    assert "data-blame=" not in directory  # no blame of a directory


def test_dates_carry_the_exact_date(client: testing.TestClient) -> None:
    for url in (f"{DEMO}/src/branch/main", f"{DEMO}/commits/branch/main", f"{DEMO}/tags", "/"):
        page = client.simulate_get(url).text
        times = re.findall(r'<time datetime="[^"]+"[^>]*>', page)
        assert times, url
        for tag in times:
            assert re.search(r'title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}"', tag), (url, tag)


def test_the_finder_page_ranks_as_the_script(
    client: testing.TestClient, fixture_root: Path
) -> None:
    """Without script: all paths (bounded), or those matching ?q=, best first."""
    repo = fixture_root / "alice" / "demo.git"
    every = _git_paths(repo, "main")
    with counting() as spawned:
        page = client.simulate_get(f"{DEMO}/find/branch/main")
    assert spawned == []
    assert page.status_code == 200
    assert f"{len(every)} paths" in page.text
    hrefs = re.findall(r'<li><a href="([^"]*)">', page.text)
    assert [
        unquote_to_bytes(h.removeprefix("/alice/demo/src/branch/main/")) for h in hrefs
    ] == every
    assert 'role="search"' in page.text and 'name="q"' in page.text
    readme = client.simulate_get(f"{DEMO}/find/branch/main", query_string="q=readme")
    found = re.findall(r'<li><a href="/alice/demo/src/branch/main/([^"]*)">', readme.text)
    assert found and found[0] == "README.md"
    assert all("readme" in unquote_to_bytes(f).decode("utf-8", "replace").lower() for f in found)
    nothing = client.simulate_get(f"{DEMO}/find/branch/main", query_string="q=zzzzqqq")
    assert "No path matches." in nothing.text
    assert client.simulate_get(f"{DEMO}/find/branch/main/docs").status_code == 404
    assert client.simulate_get(f"{DEMO}/find/branch/nope").status_code == 404


@pytest.mark.parametrize(
    ("paths", "q", "expected"),
    [
        # the file's name starting with the query first, then holding it, then its letters
        (
            ["src/app.py", "app/main.py", "docs/apple.md", "lib/a_p_p.txt"],
            "app",
            ["src/app.py", "docs/apple.md", "lib/a_p_p.txt", "app/main.py"],
        ),
        # whole in the path before scattered across it; fewer runs before more
        (
            ["x/core/engine.py", "c/o/r/e.py", "co/re/x.py"],
            "core",
            ["x/core/engine.py", "co/re/x.py", "c/o/r/e.py"],
        ),
        # case and spaces ignored, shorter first among equals, then by name
        (
            ["b/Makefile", "a/Makefile", "Makefile"],
            "make FILE",
            ["Makefile", "a/Makefile", "b/Makefile"],
        ),
        (["src/app.py"], "zz", []),
    ],
)
def test_rank(paths: list[str], q: str, expected: list[str]) -> None:
    assert rank(((p.encode(), p) for p in paths), q) == [e.encode() for e in expected]


def test_bad_tree_ids(client: testing.TestClient, fixture_root: Path) -> None:
    """Not an id, an id of no object, a blob's id, a tree no ref reaches: 404 each."""
    repo = fixture_root / "alice" / "demo.git"
    blob = git_text(repo, "rev-parse", "main:README.md")
    for tree in ("nothex", "0" * 40, "ab" * 20, blob, "%00" + "a" * 37):
        assert client.simulate_get(f"{DEMO}/-/paths/{tree}").status_code == 404, tree
    assert client.simulate_get("/alice/nothing/-/paths/" + "a" * 40).status_code == 404


def test_the_list_is_compressed_and_revalidated(tmp_path: Path) -> None:
    """A tree of 300 files: the list goes gzipped (kept so, by its ETag), and a browser holding
    the gzipped answer gets 304 for its ETag."""
    from support.forges import start_forge, wait_indexed

    from bench.finder import build
    from floorless.web.app import create_app

    build(tmp_path / "repos" / "alice" / "wide.git", 300, 1)
    local = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        wait_indexed(local)
        client = testing.TestClient(create_app(local))
        tree = _tree(tmp_path / "repos" / "alice" / "wide.git", "main")
        url = f"/alice/wide/-/paths/{tree}"
        plain = client.simulate_get(url)
        assert len(json.loads(plain.text)["paths"]) == 300
        with counting() as spawned:
            zipped = client.simulate_get(url, headers={"Accept-Encoding": "gzip"})
        assert spawned == []
        assert zipped.headers["content-encoding"] == "gzip"
        assert gzip.decompress(zipped.content) == plain.content
        assert len(zipped.content) < len(plain.content) / 3
        held = {"Accept-Encoding": "gzip", "If-None-Match": zipped.headers["etag"]}
        assert client.simulate_get(url, headers=held).status_code == 304
    finally:
        local.stop()


def test_a_huge_tree_is_listed_up_to_the_limit(fixture_root: Path) -> None:
    """The walk stops past the limit, and says that it did."""
    repo = fixture_root / "alice" / "demo.git"
    handle = pygit2.Repository(str(repo))
    tree = handle.revparse_single("main").peel(pygit2.Tree)
    every = _git_paths(repo, "main")
    assert tree_paths(handle, tree, len(every)) == (every, False)
    some, truncated = tree_paths(handle, tree, 3)
    assert truncated and len(some) == 3 and set(some) <= set(every)


@pytest.mark.parametrize(
    ("url", "query"),
    [
        (f"{DEMO}/find/branch/main", "q=%FF%FE"),  # not UTF-8
        (f"{DEMO}/find/branch/main", "q=a%00b"),  # NUL
        (f"{DEMO}/find/branch/main", "q=" + "ab" * 50_000),  # huge
        (f"{DEMO}/find/branch/main", "q=../../etc"),
        (f"{DEMO}/find/branch/..%2F..", ""),
        (f"{DEMO}/find/commit/zzzz", ""),
        (f"{DEMO}/-/paths/..", ""),
        (f"{DEMO}/-/paths/%00", ""),
        (f"{DEMO}/-/paths/" + "a" * 4000, ""),
    ],
)
def test_bad_input_is_a_clear_4xx(client: testing.TestClient, url: str, query: str) -> None:
    result = client.simulate_get(url, query_string=query)
    assert result.status_code in (200, 400, 404), (url, result.status_code)
    if result.status_code == 200:
        assert "find-results" in result.text


def test_t_works_on_the_repositorys_other_pages(
    client: testing.TestClient, fixture_root: Path
) -> None:
    """Pages of no ref (issues, branches, a commit) carry a hidden finder link over the home
    page's ref, for ``t``; pages of a ref carry theirs alone."""
    tree = _tree(fixture_root / "alice" / "demo.git", "main")
    for url in (f"{DEMO}/issues", f"{DEMO}/branches", f"{DEMO}/tags"):
        page = client.simulate_get(url)
        assert page.status_code == 200, url
        links = re.findall(r'<a class="go-file"[^>]*>', page.text)
        assert len(links) == 1, url
        assert " hidden " in links[0] and f'data-paths="/alice/demo/-/paths/{tree}"' in links[0]
        assert 'data-src="/alice/demo/src/branch/main"' in links[0]
    file_page = client.simulate_get(f"{DEMO}/src/branch/main/README.md").text
    assert len(re.findall(r'<a class="go-file"', file_page)) == 1
