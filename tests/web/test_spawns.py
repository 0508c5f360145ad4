"""No git process on a browse page: every process started while a page is answered is counted
by an audit hook of the test's own (independent of floorless's counter), and must be zero for
browse pages; blame spawns once on a cache miss, an archive once."""

from __future__ import annotations

from pathlib import Path

import pytest
from falcon import testing
from support.gitfixtures import git_text
from support.spawns import counting, get, spawn_timing


@pytest.fixture(scope="module")
def demo(fixture_root: Path) -> Path:
    return fixture_root / "alice" / "demo.git"


def test_the_hook_counts_a_spawn():
    """The counter is live: a subprocess on this thread is seen (so zero means zero)."""
    import subprocess

    with counting() as events:
        subprocess.run(["true"], check=True)
    assert len(events) == 1 and events[0][0] == "subprocess.Popen"


def _browse_pages(demo: Path) -> list[str]:
    main = git_text(demo, "rev-parse", "main")
    improve = git_text(demo, "log", "-1", "--format=%H", "--grep=Improve app.py", "main")
    blob = git_text(demo, "rev-parse", "main:src/app.py")
    return [
        "/",
        "/?q=demo&sort=name",
        "/alice",
        "/alice/demo",
        "/alice/demo.git",
        "/alice/empty",
        "/carol/checkout",
        "/local/solo",
        "/alice/demo/src/branch/main",
        "/alice/demo/src/branch/main/docs",
        "/alice/demo/src/branch/feature/x/docs",
        "/alice/demo/src/tag/release",
        f"/alice/demo/src/commit/{main}/src",
        "/alice/demo/src/branch/main/src/app.py",
        "/alice/demo/src/branch/main/README.md",
        "/alice/demo/src/branch/main/images/logo.png",
        "/alice/demo/src/branch/main/data/blob.bin",
        "/alice/demo/src/branch/main/big.txt",
        "/alice/demo/src/branch/main/link-to-readme",
        "/alice/demo/src/branch/main/vendor/lib",
        "/alice/demo/raw/branch/main/README.md",
        f"/alice/demo/raw/commit/{main}/big.txt",
        f"/alice/demo/raw/blob/{blob}",
        "/alice/demo/commits/branch/main",
        "/alice/demo/commits/branch/main/src/app.py",
        "/alice/demo/commits/tag/v1.0/docs",
        "/alice/history/commits/branch/main",
        "/alice/history/commits/branch/main/rare.txt",
        f"/alice/demo/commit/{improve}",
        f"/alice/demo/commit/{improve}.diff",
        f"/alice/demo/commit/{improve}.patch",
        "/alice/demo/branches",
        "/alice/demo/tags",
        "/alice/demo/atom/branch/main",
        "/alice/demo/rss/branch/main",
        "/alice/demo?go-get=1",
        f"/alice/demo/-/last/{main}",
        f"/alice/demo/-/last/{main}/docs",
        "/-/metrics",
        "/-/static/style.css",
    ]


def test_browse_pages_spawn_nothing(client, demo):
    pages = _browse_pages(demo)
    for url in pages:  # a cold request, then a warm one
        for _ in range(2):
            path, _, query = url.partition("?")
            result, spawns = get(client, path, query_string=query or None)
            assert spawns == 0, url
            assert spawn_timing(result) == 0, url


def test_raw_variants_spawn_nothing(client, demo):
    url = "/alice/demo/raw/branch/main/src/app.py"
    etag = client.simulate_get(url).headers["etag"]
    for headers in ({"If-None-Match": etag}, {"Range": "bytes=0-9"}, {"Range": "bytes=-3"}):
        result, spawns = get(client, url, headers=headers)
        assert spawns == 0 == spawn_timing(result), headers
    with counting() as events:
        head = client.simulate_head(url)
    assert head.status_code == 200 and not events


def test_blame_spawns_once_then_never(client, forge, demo):
    # a commit and path no other test blames, so the first request is a cache miss
    commit = git_text(demo, "log", "-1", "--format=%H", "--grep=Add awkward file names", "main")
    repo = forge.registry.get("alice", "demo")
    key = bytes.fromhex(commit) + b"\0" + b"no_newline.txt"
    assert forge.answers.cache.get(repo.id, "blame", key) is None
    url = f"/alice/demo/blame/commit/{commit}/no_newline.txt"
    first, spawns = get(client, url)
    assert spawns == 1
    assert spawn_timing(first) == 1
    assert "this line has no trailing newline" in first.text
    second, spawns = get(client, url)
    assert spawns == 0
    assert spawn_timing(second) == 0
    assert second.text.count('<tr id="L') == first.text.count('<tr id="L') == 1
    # the same file through a branch that points at a later commit is another answer
    third, spawns = get(client, "/alice/demo/blame/tag/v1.0/no_newline.txt")
    assert spawns in (0, 1)  # 0 when some other test blamed it first
    assert spawn_timing(third) == spawns


def test_archive_spawns_exactly_once(client, demo):
    for url in ("/alice/demo/archive/v1.0.tar.gz", "/alice/demo/archive/main.zip"):
        result, spawns = get(client, url)
        assert spawns == 1, url
        assert spawn_timing(result) == 1, url
        assert result.content  # the whole stream was read inside the counting window


def test_error_pages_spawn_nothing(client):
    for url in (
        "/nobody",
        "/alice/nope",
        "/alice/demo/src/branch/nope",
        "/alice/demo/raw/branch/main/nope",
        "/alice/corrupt",
        "/alice/demo/blame/branch/main/nope.txt",
        "/alice/demo/archive/nope.zip",
    ):
        with counting() as events:
            result = client.simulate_get(url)
        assert result.status_code >= 400, url
        assert not events, url
        assert spawn_timing(result) == 0, url


def test_git_over_http_spawns_once_per_post_and_never_for_the_v2_advertisement(client):
    v2 = {"Git-Protocol": "version=2"}
    url = "/alice/demo.git/info/refs"
    for _ in range(2):
        result, spawned = get(client, url, query_string="service=git-upload-pack", headers=v2)
        assert spawned == 0 == spawn_timing(result)
        assert result.content.startswith(b"000eversion 2\n")
    result, spawned = get(client, url, query_string="service=git-upload-pack")
    assert spawned == 1 == spawn_timing(result)  # v0 lists the refs: git does that
    assert result.content.startswith(b"001e# service=git-upload-pack\n0000")
    body = b"0014command=ls-refs\n0000"
    with counting() as events:
        result = client.simulate_post(
            "/alice/demo.git/git-upload-pack",
            body=body,
            headers={**v2, "Content-Type": "application/x-git-upload-pack-request"},
        )
    assert result.status_code == 200 and b"refs/heads/main" in result.content
    assert len(events) == 1 == spawn_timing(result)


def test_issue_pages_spawn_nothing(tmp_path):
    """The issue list, an issue with references to look up, the new-issue form, and posting
    a comment: no process, signed in or not."""
    import pygit2
    from support.accounts import PASSWORD, Browser, csrf_of
    from support.forges import start_forge

    from floorless.web.app import create_app

    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
        repo = forge.registry.create("ann", "plans")
        handle = pygit2.Repository(str(repo.path))
        signature = pygit2.Signature("Ann", "ann@example.org", 1_700_000_000, 0)
        tree = handle.TreeBuilder().write()
        commit = handle.create_commit("refs/heads/main", signature, signature, "c", tree, [])
        first = forge.issues.create("ann", "plans", ann, "First", "")
        issue = forge.issues.create("ann", "plans", ann, "Refs", f"#{first.number} @ann {commit}")
        forge.issues.comment(issue, ann, "See #1 and `code`")
        client = testing.TestClient(create_app(forge))
        pages = [
            "/ann/plans/issues",
            "/ann/plans/issues?state=all&q=re&author=ann",
            f"/ann/plans/issues/{issue.number}",
        ]
        for url in pages:
            for _ in range(2):
                path, _, query = url.partition("?")
                result, spawns = get(client, path, query_string=query or None)
                assert spawns == 0 == spawn_timing(result), url
        browser = Browser(client)
        browser.sign_in("ann")
        for url in (*pages, "/ann/plans/issues/new"):
            with counting() as events:
                result = browser.get(url)
            assert result.status_code == 200 and not events, url
        page = browser.get(f"/ann/plans/issues/{issue.number}")
        with counting() as events:
            result = browser.post(
                f"/ann/plans/issues/{issue.number}",
                {"action": "comment", "body": "#1"},
                csrf_of(page.text),
            )
        assert result.status_code == 303 and not events
    finally:
        forge.stop()
