"""Every page answers with real content, checked against the git CLI where git has an answer."""

from __future__ import annotations

import html
import io
import re
import shutil
import tarfile
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families
from support.forges import start_forge, wait_for
from support.gitfixtures import (
    DEMO_BIG_TXT_MIN_SIZE,
    DEMO_GITLINK_COMMIT,
    DEMO_SUBMODULE_URL,
    git,
    git_text,
)
from support.pages import server_timing

from floorless.web.app import create_app

HOST = "http://falconframework.org"  # the falcon test client's default host
ATOM = "{http://www.w3.org/2005/Atom}"
TIMING_NAMES = ("git", "db", "render", "total", "spawn")




def ok(client: testing.TestClient, url: str, **kwargs) -> testing.Result:
    result = client.simulate_get(url, **kwargs)
    assert result.status_code == 200, (url, result.status_code, result.text[:500])
    assert set(TIMING_NAMES) <= set(server_timing(result)), result.headers
    return result


def section(page: str, start: str, end: str) -> str:
    """The part of ``page`` from ``start`` to the next ``end``."""
    assert start in page, start
    rest = page.split(start, 1)[1]
    return rest.split(end, 1)[0]


def linked_commits(page: str, base: str, css: str) -> list[str]:
    return re.findall(rf'<a class="{css}" href="{re.escape(base)}/commit/([0-9a-f]{{40}})"', page)


@pytest.fixture(scope="module")
def demo(fixture_root: Path) -> Path:
    return fixture_root / "alice" / "demo.git"


def rev(repo: Path, spec: str) -> str:
    return git_text(repo, "rev-parse", spec)


# ------------------------------------------------------------------------ explore & owners


def test_explore_lists_every_repository(client):
    page = ok(client, "/").text
    for name in (
        "alice/empty",
        "alice/one",
        "alice/demo",
        "alice/history",
        "alice/corrupt",
        "bob/merges",
        "carol/checkout",
        "local/solo",
    ):
        assert f'href="/{name}"' in page, name
    assert "8 repositories" in page


def test_explore_search(client):
    page = ok(client, "/", params={"q": "dem"}).text
    assert 'href="/alice/demo"' in page
    assert 'href="/alice/one"' not in page
    assert "1 repository" in page
    page = ok(client, "/", params={"q": "bob"}).text
    assert 'href="/bob/merges"' in page and 'href="/alice/demo"' not in page
    page = ok(client, "/", params={"q": "no-such-thing"}).text
    assert "No repositories" in page and "repo-name" not in page
    # LIKE wildcards in the query are taken literally
    page = ok(client, "/", params={"q": "%"}).text
    assert "No repositories" in page


def _names(page: str) -> list[str]:
    return re.findall(r'<a class="repo-name" href="/([^"]+)"', page)


def test_explore_sort_by_name_and_recent(client, forge):
    by_name = _names(ok(client, "/", params={"sort": "name"}).text)
    assert by_name == sorted(by_name)
    assert len(by_name) == 8
    repos = {r.full_name: r for r in forge.registry.all()}
    wait_for(
        lambda: all(
            r.updated_at is not None
            for r in forge.registry.all()
            if r.full_name not in ("alice/empty",)
        )
    )
    recent = _names(ok(client, "/", params={"sort": "recent"}).text)
    assert set(recent) == set(repos)
    # history's newest commit is the newest of all; the empty repository was never updated
    assert recent[0] == "alice/history"
    assert recent[-1] == "alice/empty"
    oldest = _names(ok(client, "/", params={"sort": "oldest"}).text)
    assert oldest[-1] == "alice/empty"
    assert oldest.index("alice/history") == len(oldest) - 2


def test_explore_pagination(fixture_root, tmp_path):
    root = tmp_path / "repos"
    for name in (
        "alice/one.git",
        "alice/empty.git",
        "bob/merges.git",
        "carol/checkout",
        "solo.git",
    ):
        shutil.copytree(fixture_root / name, root / name, symlinks=True)
    forge = start_forge(root, tmp_path / "data", repos_per_page=2)
    try:
        client = testing.TestClient(create_app(forge))
        seen: list[str] = []
        for page in (1, 2, 3):
            text = ok(client, "/", params={"sort": "name", "page": str(page)}).text
            names = _names(text)
            assert len(names) == (2 if page < 3 else 1)
            assert f"Page {page} of 3" in text
            assert ('rel="next"' in text) == (page < 3)
            assert ('rel="prev"' in text) == (page > 1)
            seen += names
        assert seen == sorted(seen)
        assert seen == ["alice/empty", "alice/one", "bob/merges", "carol/checkout", "local/solo"]
        # past the end: an empty page, not an error
        assert _names(ok(client, "/", params={"page": "9"}).text) == []
        # the owner page paginates too
        text = ok(client, "/alice", params={"sort": "name"}).text
        assert _names(text) == ["alice/empty", "alice/one"]
        assert "Page 1 of 1" not in text
    finally:
        forge.stop()


def test_owner_page(client):
    page = ok(client, "/alice").text
    names = _names(page)
    assert sorted(names) == [
        "alice/corrupt",
        "alice/demo",
        "alice/empty",
        "alice/history",
        "alice/one",
    ]
    assert "<h1>alice</h1>" in page
    assert _names(ok(client, "/bob").text) == ["bob/merges"]
    assert _names(ok(client, "/alice", params={"q": "his"}).text) == ["alice/history"]


# --------------------------------------------------------------------------- repository home


def test_repo_home(client, demo):
    page = ok(client, "/alice/demo").text
    readme = section(page, '<section class="readme">', "</section>")
    # the README is rendered Markdown, sanitized
    assert "<table>" in readme and "<th>Feature</th>" in readme
    assert "<strong>floorless</strong>" in readme
    assert "<script" not in readme and "alert(1)</script>" not in readme
    assert "onerror" not in readme
    assert 'type="checkbox"' in readme
    assert 'href="/alice/demo/src/branch/main/docs/guide.md"' in readme
    assert 'src="/alice/demo/raw/branch/main/images/logo.png"' in readme
    # clone URL
    assert f'value="{HOST}/alice/demo.git"' in page
    # latest commit
    head = rev(demo, "main")
    latest = section(page, '<div class="latest">', "</div>")
    assert f'href="/alice/demo/commit/{head}"' in latest
    assert "Update README" in latest
    # commit count, as git counts
    count = git_text(demo, "rev-list", "--count", "main")
    assert f"{count} commits" in latest
    # the branch and tag switcher: its button in the page, its list fetched when opened
    button = section(page, '<details class="refswitch"', "</details>")
    assert 'data-refs="/alice/demo/-/refs?for=src"' in button
    switch = ok(client, "/alice/demo/-/refs", query_string="for=src").text
    for url in (
        "src/branch/main",
        "src/branch/feature/x",
        "src/branch/release",
        "src/tag/release",
        "src/tag/v1.0",
        "src/tag/v2.0",
    ):
        assert f'href="/alice/demo/{url}"' in switch, url


def test_repo_home_last_commit_column(client, demo):
    page = ok(client, "/alice/demo").text
    rows = re.findall(r'<tr data-name="([0-9a-f]*)">.*?<td class="lastmsg">(.*?)</td>', page, re.S)
    names = [bytes.fromhex(name) for name, _ in rows]
    listed = git(demo, "ls-tree", "-z", "--name-only", "main").split(b"\0")
    assert sorted(names) == sorted(n for n in listed if n)
    for name, cell in rows:
        path = bytes.fromhex(name).decode("utf-8", "surrogateescape")
        expected = git_text(demo, "log", "-1", "--format=%H", "main", "--", path)
        assert f'href="/alice/demo/commit/{expected}"' in cell, path


def test_tree_page(client, demo):
    page = ok(client, "/alice/demo/src/branch/main/docs").text
    for name in ("feature.md", "guide.md", "renamed.txt"):
        assert f'href="/alice/demo/src/branch/main/docs/{name}"' in page
    assert "docs/old_name.txt" not in page
    # the directory's README is not there, but the crumbs and the parent link are
    assert '<nav class="crumbs"' in page
    deep = ok(client, "/alice/demo/src/branch/main/a/b/c/d").text
    assert 'href="/alice/demo/src/branch/main/a/b/c/d/e"' in deep
    assert 'href="/alice/demo/src/branch/main/a/b/c"' in deep  # the ".." row


def test_file_page_is_highlighted(client, demo):
    page = ok(client, "/alice/demo/src/branch/main/src/app.py").text
    source = git(demo, "cat-file", "-p", "main:src/app.py").decode()
    lines = source.count("\n")
    assert f'id="L{lines}"' in page and f'id="L{lines + 1}"' not in page
    assert 'id="L10"' in page and 'href="#L10"' in page
    assert re.search(r'<span class="(k|kn|kd|nf|nc)">', page)
    assert '<span class="nf">shout</span>' in page
    assert 'href="/alice/demo/raw/branch/main/src/app.py"' in page
    assert 'href="/alice/demo/blame/branch/main/src/app.py"' in page
    assert 'href="/alice/demo/commits/branch/main/src/app.py"' in page


def test_markdown_file_is_rendered_and_sanitized(client):
    page = ok(client, "/alice/demo/src/branch/main/README.md").text
    rendered = section(page, '<div class="markdown rendered">', "</div>")
    assert "<table>" in rendered and "<script" not in rendered and "onerror" not in rendered


def test_image_is_inline(client):
    page = ok(client, "/alice/demo/src/branch/main/images/logo.png").text
    assert '<img src="/alice/demo/raw/branch/main/images/logo.png"' in page


def test_binary_file_is_a_download_link(client):
    page = ok(client, "/alice/demo/src/branch/main/data/blob.bin").text
    assert 'href="/alice/demo/raw/branch/main/data/blob.bin" download' in page
    assert '<table class="code">' not in page


def test_big_file_is_truncated_with_a_raw_link(client, demo):
    page = ok(client, "/alice/demo/src/branch/main/big.txt").text
    notice = section(page, '<p class="notice">', "</p>")
    assert "only the beginning is shown" in notice
    assert 'href="/alice/demo/raw/branch/main/big.txt"' in notice
    data = git(demo, "cat-file", "-p", "main:big.txt")
    assert len(data) >= DEMO_BIG_TXT_MIN_SIZE
    first, last = data.splitlines()[0].decode(), data.splitlines()[-1].decode()
    assert first in page and last not in page


def test_symlink_page(client):
    page = ok(client, "/alice/demo/src/branch/main/link-to-readme").text
    assert "Symbolic link to" in page
    assert 'href="/alice/demo/src/branch/main/README.md"><code>README.md</code>' in page


def test_submodule_page(client):
    page = ok(client, "/alice/demo/src/branch/main/vendor/lib").text
    assert f"<code>{DEMO_GITLINK_COMMIT}</code>" in page
    assert f"<code>{DEMO_SUBMODULE_URL}</code>" in page
    listing = ok(client, "/alice/demo/src/branch/main/vendor").text
    assert f"@ {DEMO_GITLINK_COMMIT[:10]}" in listing


def test_tag_and_branch_of_the_same_name_differ(client, demo):
    tag = ok(client, "/alice/demo/src/tag/release").text
    branch = ok(client, "/alice/demo/src/branch/release").text
    assert rev(demo, "refs/tags/release^{commit}") != rev(demo, "refs/heads/release")
    # the branch has the deep tree, the tag (one commit older) does not
    assert 'href="/alice/demo/src/branch/release/a"' in branch
    assert 'href="/alice/demo/src/tag/release/a"' not in tag
    assert 'href="/alice/demo/src/tag/release/docs"' in tag
    assert "Tag: <strong>release</strong>" in tag
    assert "Branch: <strong>release</strong>" in branch
    assert f'/commit/{rev(demo, "refs/tags/release^{commit}")}"' in tag
    assert f'/commit/{rev(demo, "refs/heads/release")}"' in branch


def test_branch_with_a_slash(client, demo):
    page = ok(client, "/alice/demo/src/branch/feature/x/docs").text
    assert 'href="/alice/demo/src/branch/feature/x/docs/feature.md"' in page
    assert "Branch: <strong>feature/x</strong>" in page
    assert "renamed.txt" not in page  # the rename happened on main only
    blob = ok(client, "/alice/demo/src/branch/feature/x/docs/feature.md").text
    assert "It does X." in blob
    commits = ok(client, "/alice/demo/commits/branch/feature/x").text
    ids = linked_commits(commits, "/alice/demo", "summary")
    assert ids == git_text(demo, "log", "--format=%H", "feature/x").split()


def test_commit_addressed_tree(client, demo):
    sha = rev(demo, "v1.0")
    page = ok(client, f"/alice/demo/src/commit/{sha}").text
    assert f'href="/alice/demo/src/commit/{sha}/link-to-readme"' in page
    short = ok(client, f"/alice/demo/src/commit/{sha[:8]}/docs").text
    assert f'href="/alice/demo/src/commit/{sha}/docs/guide.md"' in short


# ------------------------------------------------------------------------------------- raw


def test_raw_exact_bytes_and_headers(client, demo):
    result = ok(client, "/alice/demo/raw/branch/main/README.md")
    assert result.content == git(demo, "cat-file", "-p", "main:README.md")
    assert result.headers["content-type"].startswith("text/plain")
    assert result.headers["x-content-type-options"] == "nosniff"
    assert result.headers["etag"].strip('"') == rev(demo, "main:README.md")
    assert "immutable" not in result.headers.get("cache-control", "")
    for path in (
        "data/blob.bin",
        "images/logo.png",
        "big.txt",
        "no_newline.txt",
        "name with spaces.txt",
        "src/app.py",
    ):
        got = ok(client, f"/alice/demo/raw/branch/main/{path}").content
        assert got == git(demo, "cat-file", "-p", f"main:{path}"), path
    png = ok(client, "/alice/demo/raw/branch/main/images/logo.png")
    assert png.headers["content-type"] == "image/png"
    bin_ = ok(client, "/alice/demo/raw/branch/main/data/blob.bin")
    assert bin_.headers["content-type"] == "application/octet-stream"


def test_raw_commit_addressed_is_immutable(client, demo):
    sha = rev(demo, "main")
    result = ok(client, f"/alice/demo/raw/commit/{sha}/README.md")
    assert "immutable" in result.headers["cache-control"]
    assert result.content == git(demo, "cat-file", "-p", "main:README.md")


def test_raw_conditional_head_and_ranges(client, demo):
    url = "/alice/demo/raw/branch/main/src/app.py"
    data = git(demo, "cat-file", "-p", "main:src/app.py")
    etag = client.simulate_get(url).headers["etag"]
    not_modified = client.simulate_get(url, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.content == b""
    other = client.simulate_get(url, headers={"If-None-Match": '"' + "0" * 40 + '"'})
    assert other.status_code == 200 and other.content == data
    assert client.simulate_get(url, headers={"If-None-Match": "*"}).status_code == 304

    head = client.simulate_head(url)
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["etag"] == etag

    part = client.simulate_get(url, headers={"Range": "bytes=0-9"})
    assert part.status_code == 206
    assert part.headers["content-range"] == f"bytes 0-9/{len(data)}"
    assert part.content == data[:10]
    tail = client.simulate_get(url, headers={"Range": "bytes=-7"})
    assert tail.status_code == 206 and tail.content == data[-7:]
    middle = client.simulate_get(url, headers={"Range": "bytes=100-"})
    assert middle.status_code == 206 and middle.content == data[100:]
    beyond = client.simulate_get(url, headers={"Range": f"bytes={len(data) + 10}-"})
    assert beyond.status_code == 416
    assert beyond.headers["content-range"] == f"bytes */{len(data)}"


def test_raw_markdown_and_html_are_never_html(client):
    result = ok(client, "/alice/demo/raw/branch/main/README.md")
    assert not result.headers["content-type"].startswith("text/html")
    assert "sandbox" in result.headers["content-security-policy"]


def test_raw_by_blob_id(client, demo):
    blob = rev(demo, "main:src/app.py")
    result = ok(client, f"/alice/demo/raw/blob/{blob}")
    assert result.content == git(demo, "cat-file", "-p", blob)
    assert "immutable" in result.headers["cache-control"]
    tree = rev(demo, "main:src")
    assert client.simulate_get(f"/alice/demo/raw/blob/{tree}").status_code == 404


# ------------------------------------------------------------------------- commits & commit


def test_commits_page_matches_git_log(client, demo):
    page = ok(client, "/alice/demo/commits/branch/main").text
    assert (
        linked_commits(page, "/alice/demo", "summary")
        == git_text(demo, "log", "--format=%H", "main").split()
    )
    path = ok(client, "/alice/demo/commits/branch/main/src/app.py").text
    assert (
        linked_commits(path, "/alice/demo", "summary")
        == git_text(demo, "log", "--format=%H", "main", "--", "src/app.py").split()
    )


def test_commits_pagination_with_cursor(client, fixture_root):
    history = fixture_root / "alice" / "history.git"
    expected = git_text(history, "log", "--format=%H", "-n", "100", "main").split()
    first = ok(client, "/alice/history/commits/branch/main").text
    ids = linked_commits(first, "/alice/history", "summary")
    assert ids == expected[:50]
    cursor = re.search(r'rel="next" href="\?(after=[^"]+)"', first)
    assert cursor is not None
    query = html.unescape(cursor[1])
    second = ok(client, "/alice/history/commits/branch/main", query_string=query).text
    assert linked_commits(second, "/alice/history", "summary") == expected[50:100]
    assert "Newest" in second


def test_commit_page(client, demo):
    rename = git_text(demo, "log", "--format=%H", "-1", "--grep=Rename", "main")
    page = ok(client, f"/alice/demo/commit/{rename}").text
    assert "old_name.txt → docs/renamed.txt" in page
    assert "1 file changed" in page
    assert "Renamed without changes." in page

    improve = git_text(demo, "log", "--format=%H", "-1", "--grep=Improve app.py", "main")
    page = ok(client, f"/alice/demo/commit/{improve}").text
    numstat = git_text(demo, "show", "--numstat", "--format=", improve).split()
    adds, dels = int(numstat[0]), int(numstat[1])
    assert f"+{adds}" in page and f"\u2212{dels}" in page  # a minus sign
    assert '<span class="status modified">modified</span>' in page
    added = re.findall(r'<tr class="add">.*?<pre><span class="mark">\+</span>(.*?)</pre>', page)
    assert len(added) == adds
    plain = [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in added]
    assert "def shout(text: str) -> str:" in plain
    assert '<span class="k">def</span>' in page  # the diff is syntax-highlighted
    parent = rev(demo, f"{improve}^")
    assert f'href="/alice/demo/commit/{parent}"' in page
    again = client.simulate_get(f"/alice/demo/commit/{improve}")
    assert "immutable" not in again.headers["cache-control"]  # the page shows refs, which move
    cached = client.simulate_get(
        f"/alice/demo/commit/{improve}", headers={"If-None-Match": again.headers["etag"]}
    )
    assert cached.status_code == 304
    assert cached.content == b""


def test_commit_diff_and_patch(client, demo):
    improve = git_text(demo, "log", "--format=%H", "-1", "--grep=Improve app.py", "main")
    diff = ok(client, f"/alice/demo/commit/{improve}.diff")
    assert diff.headers["content-type"].startswith("text/plain")
    text = diff.text
    assert text.startswith("diff --git a/src/app.py b/src/app.py\n")
    assert "+def shout(text: str) -> str:\n" in text
    git_diff = git(demo, "diff", f"{improve}^", improve).decode()
    plus = [ln for ln in git_diff.splitlines() if ln.startswith(("+", "-"))]
    assert [ln for ln in text.splitlines() if ln.startswith(("+", "-"))] == plus

    patch = ok(client, f"/alice/demo/commit/{improve}.patch").text
    assert patch.startswith(f"From {improve} Mon Sep 17 00:00:00 2001\n")
    assert "Subject: [PATCH] Improve app.py" in patch
    assert "From: Ada Author <ada@example.org>" in patch
    assert "+def shout(text: str) -> str:\n" in patch


def test_blame_groups_lines_by_commit(client, demo):
    page = ok(client, "/alice/demo/blame/branch/main/src/app.py").text
    porcelain = git(demo, "blame", "--porcelain", "main", "--", "src/app.py").decode()
    per_line = [
        ln.split()[0] for ln in porcelain.splitlines() if re.match(r"[0-9a-f]{40} \d+ \d+", ln)
    ]
    runs = [c for i, c in enumerate(per_line) if i == 0 or per_line[i - 1] != c]
    shown = re.findall(
        r'<td class="blame-commit a\d"(?: rowspan="\d+")?><a class="sha" '
        r'href="/alice/demo/commit/([0-9a-f]{40})"',
        page,
    )
    assert shown == runs
    assert len(set(runs)) == 2
    assert page.count('<tr id="L') == len(per_line)


# ----------------------------------------------------------------------------- refs & tags


def test_branches_and_tags(client, demo):
    branches = ok(client, "/alice/demo/branches").text
    for name in ("main", "feature/x", "release"):
        assert f'href="/alice/demo/src/branch/{name}"' in branches
    assert re.search(r'branch/main">main</a> <span class="badge">default</span>', branches)
    tags = ok(client, "/alice/demo/tags").text
    for name in ("release", "v1.0", "v2.0"):
        assert f'href="/alice/demo/src/tag/{name}"' in tags
        assert f'href="/alice/demo/archive/{name}.tar.gz"' in tags
    assert tags.count('<span class="badge">annotated</span>') == 2  # release and v2.0
    assert f'/commit/{rev(demo, "v2.0^{commit}")}"' in tags


# ---------------------------------------------------------------------------------- archive


def test_archive_tar_gz(client, demo):
    result = ok(client, "/alice/demo/archive/v2.0.tar.gz")
    assert result.headers["content-type"] == "application/gzip"
    assert "demo-v2.0.tar.gz" in result.headers["content-disposition"]
    with tarfile.open(fileobj=io.BytesIO(result.content), mode="r:gz") as tar:
        member = tar.extractfile("demo-v2.0/README.md")
        assert member is not None
        assert member.read() == git(demo, "cat-file", "-p", "v2.0:README.md")
        names = tar.getnames()
    assert "demo-v2.0/a/b/c/d/e/f/g/h/deep.txt" in names


def test_archive_zip(client, demo):
    result = ok(client, "/alice/demo/archive/feature/x.zip")
    assert result.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(result.content)) as archive:
        assert archive.testzip() is None
        data = archive.read("demo-feature-x/docs/feature.md")
    assert data == git(demo, "cat-file", "-p", "feature/x:docs/feature.md")
    sha = rev(demo, "v1.0")
    pinned = ok(client, f"/alice/demo/archive/{sha}.zip")
    assert "immutable" in pinned.headers["cache-control"]
    with zipfile.ZipFile(io.BytesIO(pinned.content)) as archive:
        assert f"demo-{sha}/link-to-readme" in archive.namelist()
    by_branch = ok(client, "/alice/demo/archive/main.zip")
    assert "immutable" not in by_branch.headers.get("cache-control", "")


# ------------------------------------------------------------------------- feeds & go-get


def test_atom_feed(client, demo):
    result = ok(client, "/alice/demo/atom/branch/main")
    assert result.headers["content-type"].startswith("application/atom+xml")
    root = ElementTree.fromstring(result.content)
    entries = root.findall(f"{ATOM}entry")
    expected = git_text(demo, "log", "--format=%H", "-n", "20", "main").split()
    ids = [e.findtext(f"{ATOM}id").rsplit("/", 1)[-1] for e in entries]
    assert ids == expected
    assert entries[0].findtext(f"{ATOM}title") == "Update README"
    assert entries[0].find(f"{ATOM}author").findtext(f"{ATOM}name") == "Ada Author"
    feature = ElementTree.fromstring(ok(client, "/alice/demo/atom/branch/feature/x").content)
    assert "feature/x" in feature.findtext(f"{ATOM}title")


def test_rss_feed(client, demo):
    result = ok(client, "/alice/demo/rss/branch/main")
    root = ElementTree.fromstring(result.content)
    items = root.findall("channel/item")
    assert len(items) == int(git_text(demo, "rev-list", "--count", "main"))
    assert items[0].findtext("title") == "Update README"


def test_go_get(client):
    page = ok(client, "/alice/demo", params={"go-get": "1"}).text
    assert (
        '<meta name="go-import" content="falconframework.org/alice/demo git '
        f'{HOST}/alice/demo.git">'
    ) in page


# ---------------------------------------------------------------------------------- metrics


def test_metrics(client):
    ok(client, "/alice/demo")
    ok(client, "/alice/demo/archive/v1.0.tar.gz")
    result = ok(client, "/-/metrics")
    assert result.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(result.text)}
    latency = families["floorless_request_seconds"]
    assert latency.type == "histogram"
    routes = {s.labels["route"] for s in latency.samples if s.name.endswith("_count")}
    assert {"/{owner}/{repo}", "/{owner}/{repo}/archive/{tail:path}"} <= routes
    counts = {s.labels["route"]: s.value for s in latency.samples if s.name.endswith("_count")}
    assert counts["/{owner}/{repo}"] >= 1
    spawns = {
        s.labels["route"]: s.value
        for s in families["floorless_spawned_processes"].samples
        if s.name.endswith("_total")
    }
    assert spawns["/{owner}/{repo}/archive/{tail:path}"] >= 1
    assert "/{owner}/{repo}" not in spawns  # the home page never spawns
    caches = {
        (s.labels["cache"], s.labels["result"]) for s in families["floorless_cache_lookups"].samples
    }
    assert ("readme", "hit") in caches or ("readme", "miss") in caches
    listed = {name for name, _ in caches}
    assert {"pages", "answers", "history-walks", "object-headers", "api-trees"} <= listed
    assert "floorless_index_lag_seconds" in families
    assert families["floorless_index_lag_seconds"].samples[0].value >= 0


# ------------------------------------------------------------------------ special repositories


def test_empty_repository(client):
    page = ok(client, "/alice/empty").text
    assert "This repository is empty" in page
    assert f"git remote add origin {HOST}/alice/empty.git" in page
    assert "git push -u origin main" in page


def test_non_bare_checkout(client, fixture_root):
    checkout = fixture_root / "carol" / "checkout"
    page = ok(client, "/carol/checkout").text
    assert "A working copy with notes." in page
    assert 'href="/carol/checkout/src/branch/main/notes.txt"' in page
    assert "2 commits" in page
    raw = ok(client, "/carol/checkout/raw/branch/main/notes.txt")
    assert raw.content == git(checkout, "show", "main:notes.txt")
    commits = ok(client, "/carol/checkout/commits/branch/main").text
    assert (
        linked_commits(commits, "/carol/checkout", "summary")
        == git_text(checkout, "log", "--format=%H", "main").split()
    )


def test_repository_directly_in_root(client):
    page = ok(client, "/local/solo").text
    assert "No owner." in page
    assert ok(client, "/local/solo/raw/branch/main/README.md").content == b"# Solo\n\nNo owner.\n"
    assert 'href="/local/solo"' in ok(client, "/local").text


def test_dot_git_suffix_names_the_same_repository(client):
    assert "Update README" in ok(client, "/alice/demo.git").text


# ------------------------------------------------------------------------------ server timing

EVERY_PAGE = [
    "/",
    "/alice",
    "/alice/demo",
    "/alice/demo/src/branch/main/src",
    "/alice/demo/src/branch/main/src/app.py",
    "/alice/demo/raw/branch/main/README.md",
    "/alice/demo/commits/branch/main",
    "/alice/demo/branches",
    "/alice/demo/tags",
    "/alice/demo/atom/branch/main",
    "/alice/demo/blame/branch/main/README.md",
    "/alice/demo/archive/main.tar.gz",
    "/-/metrics",
    "/alice/nope",
    "/alice/demo/raw/branch/main/nope",
    "/alice/demo/no-such-page",
    "/-/static/style.css",
]


@pytest.mark.parametrize("url", EVERY_PAGE)
def test_every_response_has_server_timing(client, url):
    result = client.simulate_get(url)
    timing = server_timing(result)
    assert set(TIMING_NAMES) <= set(timing), result.headers.get("server-timing")
    assert timing["total"] >= max(timing["git"], timing["db"], timing["render"])
    assert timing["spawn"] == int(timing["spawn"]) >= 0


# ------------------------------------------------------------------------- older link shapes


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("/alice/demo/src/main/src/app.py", "/alice/demo/src/branch/main/src/app.py"),
        ("/alice/demo/src/feature/x/docs", "/alice/demo/src/branch/feature/x/docs"),
        ("/alice/demo/raw/v1.0/README.md", "/alice/demo/raw/tag/v1.0/README.md"),
        ("/alice/demo/commits/main", "/alice/demo/commits/branch/main"),
        ("/alice/demo/blame/main/src/app.py", "/alice/demo/blame/branch/main/src/app.py"),
        ("/alice/demo/src", "/alice/demo/src/branch/main"),
        ("/alice/demo/commits", "/alice/demo/commits/branch/main"),
    ],
)
def test_links_without_a_ref_kind_redirect(client, url, location):
    result = client.simulate_get(url)
    assert result.status_code == 302
    assert result.headers["location"].endswith(location)
    assert client.simulate_get(location).status_code == 200


def test_link_without_kind_to_a_commit_id(client, demo):
    sha = rev(demo, "v2.0^{commit}")
    result = client.simulate_get(f"/alice/demo/src/{sha[:12]}/docs")
    assert result.status_code == 302
    assert result.headers["location"].endswith(f"/alice/demo/src/commit/{sha}/docs")


def test_unknown_ref_without_kind_is_404(client):
    assert client.simulate_get("/alice/demo/src/no-such-ref/x").status_code == 404
    assert client.simulate_get("/alice/empty/src").status_code == 404


def test_large_diffs_are_truncated_per_file_and_in_total(fixture_root, tmp_path, demo):
    forge = start_forge(
        fixture_root,
        tmp_path / "data",
        max_diff_files=1,
        max_diff_lines=10,
        max_diff_total_lines=25,
    )
    try:
        small = testing.TestClient(create_app(forge))
        widest = git_text(demo, "rev-list", "--max-parents=0", "main")
        names = git_text(demo, "show", "--name-only", "--format=", widest).split("\n")
        assert len(names) > 1
        first = git_text(demo, "show", "--format=", "--numstat", widest).split("\n")[0]
        assert int(first.split()[0]) > 10  # the shown file is longer than the limit
        page = small.simulate_get(f"/alice/demo/commit/{widest}").text
        assert "This diff is large; parts of it are not shown." in page
        assert page.count('class="load-diff"') == len(names) - 1  # each loads on its own
        assert "This file's diff is truncated." in page
        rows = re.findall(r'<tr class="(?:add|del|ctx)">', page)
        assert len(rows) == 10
        full = small.simulate_get(f"/alice/demo/commit/{widest}.diff").text
        for name in names:  # the .diff variant is never truncated
            assert f"+++ b/{name}" in full or f"--- a/{name}" in full
    finally:
        forge.stop()


def test_tags_only_and_detached_head_repositories_have_a_home(repos_copy, tmp_path):
    one = repos_copy / "alice" / "one.git"
    sha = git_text(one, "rev-parse", "main")
    shutil.copytree(one, repos_copy / "alice" / "tagsonly.git")
    tagsonly = repos_copy / "alice" / "tagsonly.git"
    git(tagsonly, "tag", "v9", sha)
    git(tagsonly, "update-ref", "-d", "refs/heads/main")
    shutil.copytree(one, repos_copy / "alice" / "detached.git")
    detached = repos_copy / "alice" / "detached.git"
    git(detached, "update-ref", "-d", "refs/heads/main")
    git(detached, "update-ref", "--no-deref", "HEAD", sha)
    forge = start_forge(repos_copy, tmp_path / "data")
    try:
        local = testing.TestClient(create_app(forge))
        home = local.simulate_get("/alice/tagsonly")
        assert home.status_code == 200
        assert "README.md" in home.text and "Tag: <strong>v9</strong>" in home.text
        assert (
            local.simulate_get("/alice/tagsonly/src")
            .headers["location"]
            .endswith("/alice/tagsonly/src/tag/v9")
        )
        home = local.simulate_get("/alice/detached")
        assert home.status_code == 200
        assert "README.md" in home.text and f"Commit: <strong>{sha[:10]}</strong>" in home.text
        commits = local.simulate_get("/alice/detached/commits")
        assert commits.headers["location"].endswith(f"/alice/detached/commits/commit/{sha}")
        assert sha in local.simulate_get(f"/alice/detached/commits/commit/{sha}").text
    finally:
        forge.stop()
