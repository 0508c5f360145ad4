"""Pull requests in the browser: opened from the compare page, listed, their conversation,
commits and files tabs and their ``.diff`` and ``.patch``; what the compare page refuses;
the issue and pull request pages sending each other's numbers over; a private repository's
pull requests answering 404 on every route; pages that start no process."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge, wait_for
from support.spawns import counting

from floorless.collab.filters import IssueFilter
from floorless.collab.pulls import Features
from floorless.forge import Forge
from floorless.web.app import create_app

WHEN = 1_700_000_000
BASE = {"app.py": "".join(f"line {n}\n" for n in range(1, 11)), "keep.txt": "kept\n"}


def commit(
    handle: pygit2.Repository,
    files: dict[str, str],
    parents: list[str],
    message: str,
    ref: str | None = None,
) -> str:
    builder = handle.TreeBuilder()
    for name, text in sorted(files.items()):
        builder.insert(name, handle.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB)
    signature = pygit2.Signature("Ann", "ann@example.org", WHEN + len(parents), 0)
    oid = handle.create_commit(
        ref, signature, signature, message, builder.write(), [pygit2.Oid(hex=p) for p in parents]
    )
    return str(oid)


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    for name, private in (("plans", False), ("secret", True)):
        repo = forge.registry.create("ann", name, private=private)
        handle = forge.live.open(repo)
        base = commit(handle, BASE, [], "base", "refs/heads/main")
        handle.set_head("refs/heads/main")
        changed = dict(BASE, **{"app.py": BASE["app.py"].replace("line 3", "line three")})
        first = commit(handle, changed, [base], "Change line three", "refs/heads/feature")
        commit(
            handle,
            dict(changed, **{"new.txt": "n\n"}),
            [first],
            "Add <b>new</b>",
            "refs/heads/feature",
        )
        commit(handle, {"other.txt": "x\n"}, [], "unrelated", "refs/heads/orphan")
        handle.references.create("refs/heads/same", pygit2.Oid(hex=base))
        forge.moves.refs_moved(repo)
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def person(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser


def open_pull(browser: Browser, spec: str, title: str, body: str = "") -> testing.Result:
    return browser.post(f"/ann/plans/compare/{spec}", {"title": title, "body": body})


def git_output(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], check=True, capture_output=True
    ).stdout


def test_open_a_pull_request_from_the_compare_page(
    forge: Forge, client: testing.TestClient
) -> None:
    cat = person(client, "cat")  # neither owner nor collaborator: any signed-in reader
    page = cat.get("/ann/plans/compare/main...feature")
    assert page.status_code == 200, page.text[:500]
    assert "2 commits" in page.text and "Change line three" in page.text
    assert "Add &lt;b&gt;new&lt;/b&gt;" in page.text and "<b>new</b>" not in page.text
    assert 'data-path="app.py"' in page.text and 'data-path="new.txt"' in page.text
    assert "line three" in page.text and "Create pull request" in page.text
    assert 'value="feature"' in page.text  # two commits: the branch's name is the title
    single = cat.get("/ann/plans/compare/main...feature~1".replace("~1", ""))
    assert single.status_code == 200

    result = open_pull(cat, "main...feature", "Three+is+better", "Please+**merge**")
    assert result.status_code == 303, result.text[:500]
    assert result.headers["location"] == "/ann/plans/pulls/1"
    repo = forge.registry.get("ann", "plans")
    handle = forge.live.open(repo)
    feature = handle.references["refs/heads/feature"].target
    assert handle.references["refs/pull/1/head"].target == feature
    pull = forge.pulls.get("ann", "plans", 1)
    assert (pull.base_branch, pull.head_branch, pull.head_oid) == ("main", "feature", str(feature))

    page = cat.get("/ann/plans/pulls/1")
    assert page.status_code == 200
    text = re.sub(r"\s+", " ", page.text)
    assert re.search(r"cat</a> wants to merge 2 commits into <code[^>]*>main</code> from", text)
    assert "<strong>merge</strong>" in page.text and "Three is better" in page.text
    listing = cat.get("/ann/plans/pulls")
    assert "Three is better" in listing.text and 'href="/ann/plans/pulls/1"' in listing.text
    assert 'href="/ann/plans/pulls"' in cat.get("/ann/plans").text  # the header's tab
    commits = cat.get("/ann/plans/pulls/1/commits")
    assert commits.status_code == 200
    assert commits.text.index("Change line three") < commits.text.index("Add &lt;b&gt;new")
    files = cat.get("/ann/plans/pulls/1/files")
    assert files.status_code == 200 and 'data-path="app.py"' in files.text
    assert "Comment on a line of this file" in files.text  # the review engineer's form
    # the files shown split, as the commit and compare pages show them, then remembered
    split = cat.get("/ann/plans/pulls/1/files", params={"style": "split"})
    assert '<table class="diff split">' in split.text and 'data-path="app.py"' in split.text
    assert '<table class="diff split">' in cat.get("/ann/plans/pulls/1/files").text
    assert "Comment on a line of this file" in split.text
    cat.get("/ann/plans/pulls/1/files", params={"style": "unified"})

    # the .diff is git's own diff of the merge base to the head; the .patch mails each commit
    base = handle.references["refs/heads/main"].target
    expected = git_output(repo.path, "diff", "-M", str(base), str(feature))
    for url in ("/ann/plans/pulls/1.diff", "/ann/plans/compare/main...feature.diff"):
        got = cat.get(url)
        assert got.status_code == 200 and got.headers["content-type"].startswith("text/plain")
        assert got.content == expected, url
    patch = cat.get("/ann/plans/pulls/1.patch").text
    assert patch.count("From ") >= 2 and "Subject: [PATCH] Change line three" in patch
    assert patch.index("Change line three") < patch.index("Subject: [PATCH] Add <b>new</b>")

    # the same compare again: a link to the open one, no form
    again = cat.get("/ann/plans/compare/main...feature")
    assert 'href="/ann/plans/pulls/1"' in again.text and "Create pull request" not in again.text
    result = open_pull(cat, "main...feature", "Twice")
    assert result.status_code == 400 and "#1 already" in result.text
    assert forge.pulls.page("ann", "plans", IssueFilter("all")).page.counts["open"] == 1


def test_comment_close_reopen_and_edit_a_pull_request(
    forge: Forge, client: testing.TestClient
) -> None:
    cat = person(client, "cat")
    assert open_pull(cat, "main...feature", "Mine").status_code == 303
    result = cat.post("/ann/plans/pulls/1", {"action": "comment", "body": "See+%231+and+%40ann"})
    assert result.status_code == 303
    assert re.fullmatch(r"/ann/plans/pulls/1#issuecomment-\d+", result.headers["location"])
    page = cat.get("/ann/plans/pulls/1").text
    assert re.search(r'<a href="/ann/plans/pulls/1"[^>]*>#1</a>', page)
    assert re.search(r'<a href="/ann"[^>]*>@ann</a>', page)
    ben = person(client, "ben")  # not the author, no write access
    assert ben.post("/ann/plans/pulls/1", {"action": "close"}).status_code == 403
    assert cat.post("/ann/plans/pulls/1", {"action": "close"}).status_code == 303
    page = cat.get("/ann/plans/pulls/1").text
    assert "Closed" in page and "wanted to merge" in page and "Reopen pull request" in page
    assert cat.post("/ann/plans/pulls/1", {"action": "reopen"}).status_code == 303
    result = cat.post("/ann/plans/pulls/1", {"action": "edit", "title": "Better", "body": "b"})
    assert result.status_code == 303
    assert forge.pulls.get("ann", "plans", 1).title == "Better"
    closed = cat.get("/ann/plans/pulls?state=closed").text
    assert "No pull requests" in closed
    assert "Better" in cat.get("/ann/plans/pulls?state=all&q=bett&author=cat").text
    # a merged pull request is not reopened
    pull = forge.pulls.get("ann", "plans", 1)
    forge.pulls.mark_merged(pull, forge.accounts.get("ann"), pull.head_oid, "merge")
    page = cat.get("/ann/plans/pulls/1").text
    assert re.search(r"ann</a> merged 2 commits into", page) and "Reopen" not in page
    assert cat.post("/ann/plans/pulls/1", {"action": "reopen"}).status_code == 400


def test_what_the_compare_page_refuses(forge: Forge, client: testing.TestClient) -> None:
    cat = person(client, "cat")
    same = cat.get("/ann/plans/compare/main...main")
    assert same.status_code == 200 and "two different branches" in same.text
    assert "Create pull request" not in same.text
    assert open_pull(cat, "main...main", "x").status_code == 400
    nothing = cat.get("/ann/plans/compare/main...same")
    assert "already has every commit of same" in nothing.text
    assert open_pull(cat, "main...same", "x").status_code == 400
    unrelated = cat.get("/ann/plans/compare/main...orphan")
    assert unrelated.status_code == 200 and "no history in common" in unrelated.text
    result = open_pull(cat, "main...orphan", "x")
    assert result.status_code == 400 and "no history in common" in result.text
    assert cat.get("/ann/plans/compare/main...orphan.diff").status_code == 400
    assert cat.get("/ann/plans/compare/main...nothing").status_code == 404
    assert cat.get("/ann/plans/compare/nothing...feature").status_code == 404
    assert cat.get("/ann/plans/compare/nobody:feature").status_code == 404
    for bad in (
        "main...fea..ture",
        "main...%2e%2e/%2e%2e/etc",
        "main...a%00b",
        "main...x%20y",
        "..%2F..%2Fmain...feature",
        "main...%ff",
        "main...bad%3Cscript%3E:feature",
    ):
        result = cat.get(f"/ann/plans/compare/{bad}")
        assert result.status_code in (400, 404), (bad, result.status_code)
        assert "<script>" not in result.text
    assert forge.pulls.page("ann", "plans", IssueFilter("all")).page.counts == {
        "open": 0,
        "closed": 0,
    }
    # with no spec: a form choosing the two, and where it goes
    assert "Compare changes" in cat.get("/ann/plans/compare").text
    result = cat.get("/ann/plans/compare", query_string="base=main&head=feature")
    assert result.status_code == 303
    assert result.headers["location"] == "/ann/plans/compare/main...feature"
    # pull requests turned off: their list, pages and creation are not found
    assert open_pull(cat, "main...feature", "Before").status_code == 303
    forge.pulls.set_features("ann", "plans", Features(pulls=False))
    for url in ("/ann/plans/pulls", "/ann/plans/pulls/1", "/ann/plans/pulls/1/files"):
        assert cat.get(url).status_code == 404, url
    assert open_pull(cat, "main...feature", "x").status_code == 404


def test_numbers_go_to_their_own_pages(forge: Forge, client: testing.TestClient) -> None:
    cat = person(client, "cat")
    assert open_pull(cat, "main...feature", "A pull").status_code == 303
    forge.issues.create("ann", "plans", forge.accounts.get("cat"), "An issue", "")  # type: ignore[arg-type]
    result = cat.get("/ann/plans/issues/1")
    assert result.status_code == 302 and result.headers["location"] == "/ann/plans/pulls/1"
    result = cat.get("/ann/plans/pulls/2")
    assert result.status_code == 302 and result.headers["location"] == "/ann/plans/issues/2"
    for url in (
        "/ann/plans/pulls/3",
        "/ann/plans/pulls/x1",
        "/ann/plans/pulls/1x",
        "/ann/plans/pulls/99999999999",
        "/ann/plans/pulls/3/files",
        "/ann/plans/pulls/abc/commits",
        "/ann/plans/pulls/3.diff",
    ):
        assert cat.get(url).status_code == 404, url


def test_a_private_repositorys_pull_requests_are_not_found(
    forge: Forge, client: testing.TestClient
) -> None:
    ann = person(client, "ann")
    result = ann.post("/ann/secret/compare/main...feature", {"title": "Hidden", "body": ""})
    assert result.status_code == 303
    urls = [
        "/ann/secret/pulls",
        "/ann/secret/pulls/1",
        "/ann/secret/pulls/1/commits",
        "/ann/secret/pulls/1/files",
        "/ann/secret/pulls/1.diff",
        "/ann/secret/pulls/1.patch",
        "/ann/secret/compare",
        "/ann/secret/compare/main...feature",
        "/ann/secret/compare/main...feature.diff",
        "/ann/secret/compare/main...feature.patch",
    ]
    for url in urls:
        assert ann.get(url).status_code == 200, url
    cat = person(client, "cat")
    for browser in (cat, Browser(client)):
        for url in urls:
            result = browser.get(url)
            missing = browser.get(url.replace("/secret/", "/nothing/"))
            assert result.status_code == 404 == missing.status_code, url
            assert "Hidden" not in result.text
        result = browser.post("/ann/secret/compare/main...feature", {"title": "x"}, None)
        assert result.status_code in (303, 404)
        result = browser.post("/ann/secret/pulls/1", {"action": "comment", "body": "x"}, None)
        assert result.status_code in (303, 404)
    assert forge.pulls.page("ann", "secret", IssueFilter("all")).page.counts["open"] == 1


def test_pull_request_pages_spawn_nothing(forge: Forge, client: testing.TestClient) -> None:
    cat = person(client, "cat")
    assert open_pull(cat, "main...feature", "Quiet").status_code == 303
    pages = [
        "/ann/plans/pulls",
        "/ann/plans/pulls/1",
        "/ann/plans/pulls/1/commits",
        "/ann/plans/pulls/1/files",
        "/ann/plans/pulls/1.diff",
        "/ann/plans/pulls/1.patch",
        "/ann/plans/compare",
        "/ann/plans/compare/main...feature",
        "/ann/plans/compare/main...feature.diff",
    ]
    for browser in (cat, Browser(client)):
        for url in pages:
            with counting() as events:
                result = browser.get(url)
            assert result.status_code == 200 and not events, url
    with counting() as events:
        result = cat.post("/ann/plans/pulls/1", {"action": "comment", "body": "hi"})
    assert result.status_code == 303 and not events


def test_a_pull_request_from_a_fork(forge: Forge, client: testing.TestClient) -> None:
    """``user:branch`` names a fork's branch; the compare runs in the fork (its objects
    borrow the parent's), and the pull request's head is copied into the parent."""
    import time

    parent = forge.registry.get("ann", "plans")
    fork = forge.registry.create("cat", "plans")
    (Path(fork.path) / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (Path(fork.path) / "objects" / "info" / "alternates").write_text(
        str(Path(parent.path) / "objects") + "\n"
    )
    forge.db.execute(
        "INSERT INTO forks (owner, name, parent_owner, parent_name, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        ("cat", "plans", "ann", "plans", time.time()),
    )
    handle = forge.live.open(fork)
    main = str(forge.live.open(parent).references["refs/heads/main"].target)
    handle.references.create("refs/heads/main", pygit2.Oid(hex=main))
    topic = commit(handle, dict(BASE, **{"fork.txt": "from a fork\n"}), [main], "From the fork")
    handle.references.create("refs/heads/topic", pygit2.Oid(hex=topic))
    forge.moves.refs_moved(fork)
    assert topic not in forge.live.open(parent).odb  # the parent has no copy yet

    cat = person(client, "cat")
    page = cat.get("/ann/plans/compare/main...cat:topic")
    assert page.status_code == 200, page.text[:500]
    assert "From the fork" in page.text and 'data-path="fork.txt"' in page.text
    assert 'value="From the fork"' in page.text  # one commit: its subject is the title
    assert cat.get("/ann/plans/compare/main...cat/plans:topic").status_code == 200
    assert cat.get("/ann/plans/compare/main...ben:topic").status_code == 404  # no fork
    assert cat.get("/ann/plans/compare/main...cat/other:topic").status_code == 404
    assert cat.get("/ann/plans/compare/main...cat:nothing").status_code == 404
    diff = cat.get("/ann/plans/compare/main...cat:topic.diff")
    assert diff.status_code == 200 and b"+from a fork" in diff.content

    result = open_pull(cat, "main...cat:topic", "From+the+fork")
    assert result.status_code == 303, result.text[:500]
    pull = forge.pulls.get("ann", "plans", 1)
    assert (pull.head_owner, pull.head_name, pull.head_branch) == ("cat", "plans", "topic")
    parent_handle = forge.live.open(parent)
    assert str(parent_handle.references["refs/pull/1/head"].target) == topic
    assert topic in parent_handle.odb  # copied: the parent holds the head on its own
    page = cat.get("/ann/plans/pulls/1")
    assert 'from <code class="branch">cat:topic</code>' in page.text
    files = cat.get("/ann/plans/pulls/1/files")
    assert "from a fork" in files.text
    again = cat.get("/ann/plans/compare/main...cat:topic")
    assert 'href="/ann/plans/pulls/1"' in again.text and "Create pull request" not in again.text


def test_pushes_force_pushes_a_merge_and_a_deleted_head(
    forge: Forge, client: testing.TestClient
) -> None:
    cat = person(client, "cat")
    ann_account = forge.accounts.get("ann")
    assert open_pull(cat, "main...feature", "Events").status_code == 303
    # this test records the moves itself, as the follower (merging.py) would, with the
    # actors it wants shown: the follower must not race it to them
    wait_for(forge.merger.idle)
    forge.merger.stop()
    repo = forge.registry.get("ann", "plans")
    handle = forge.live.open(repo)
    pull = forge.pulls.get("ann", "plans", 1)
    old = pull.head_oid
    one = commit(handle, dict(BASE, **{"more.txt": "1\n"}), [old], "one more")
    two = commit(handle, dict(BASE, **{"more.txt": "2\n"}), [one], "two more")
    handle.references.create("refs/heads/feature", pygit2.Oid(hex=two), force=True)
    forge.moves.refs_moved(repo)
    forge.pulls.moved_head(pull, two, False, ann_account)
    page = cat.get("/ann/plans/pulls/1").text
    link = f'href="/ann/plans/compare/{old}...{two}"'
    assert f"pushed <a {link}>2 commits</a>" in page
    assert "wants to merge 4 commits" in re.sub(r"\s+", " ", page)
    shown = cat.get(f"/ann/plans/compare/{old}...{two}")
    assert shown.status_code == 200 and "two more" in shown.text and "one more" in shown.text

    pull = forge.pulls.get("ann", "plans", 1)
    main = str(handle.references["refs/heads/main"].target)
    redone = commit(handle, dict(BASE, **{"again.txt": "a\n"}), [main], "Redone")
    handle.references.create("refs/heads/feature", pygit2.Oid(hex=redone), force=True)
    forge.moves.refs_moved(repo)
    forge.pulls.moved_head(pull, redone, True, ann_account)
    forge.moves.set_pull_ref(repo, 1, redone)
    page = re.sub(r"\s+", " ", cat.get("/ann/plans/pulls/1").text)
    assert (
        f'force-pushed <code class="branch">feature</code> from <code class="sha">{two[:10]}'
        in page
    )
    assert "wants to merge 1 commit into" in page

    # merged (fast-forward), then the head branch deleted: the tabs still show it all
    pull = forge.pulls.get("ann", "plans", 1)
    forge.pulls.record_check(pull, main, redone, "mergeable", main)
    handle.references.create("refs/heads/main", pygit2.Oid(hex=redone), force=True)
    handle.references.delete("refs/heads/feature")
    forge.moves.refs_moved(repo)
    assert forge.pulls.mark_merged(pull, ann_account, redone, "fast-forward-only")
    forge.pulls.head_gone(forge.pulls.get("ann", "plans", 1), ann_account)
    page = re.sub(r"\s+", " ", cat.get("/ann/plans/pulls/1").text)
    assert "ann</a> merged 1 commit into" in page and "merged commit" in page
    assert "deleted" in page and "feature" in page
    commits = cat.get("/ann/plans/pulls/1/commits")
    assert commits.status_code == 200 and "Redone" in commits.text
    files = cat.get("/ann/plans/pulls/1/files")
    assert files.status_code == 200 and 'data-path="again.txt"' in files.text
    assert b"+a" in cat.get("/ann/plans/pulls/1.diff").content


def test_references_to_other_repositories_and_inert_html(
    forge: Forge, client: testing.TestClient
) -> None:
    ann = person(client, "ann")
    forge.registry.create("ann", "other")
    forge.issues.create("ann", "other", forge.accounts.get("ann"), "Elsewhere", "")  # type: ignore[arg-type]
    forge.issues.create("ann", "secret", forge.accounts.get("ann"), "Hidden", "")  # type: ignore[arg-type]
    repo = forge.registry.get("ann", "plans")
    handle = forge.live.open(repo)
    feature = str(handle.references["refs/heads/feature"].target)
    handle.references.create("refs/heads/<script>x", pygit2.Oid(hex=feature))
    forge.moves.refs_moved(repo)
    body = "See+ann/other%231,+ann/secret%231,+ann/nothing%231+and+<script>alert(1)</script>"
    title = "<img+src=x+onerror=alert(1)>"
    result = ann.post("/ann/plans/compare/main...%3Cscript%3Ex", {"title": title, "body": body})
    assert result.status_code == 303, result.text[:300]
    cat = person(client, "cat")
    for browser in (cat, ann):
        page = browser.get("/ann/plans/pulls/1").text
        assert re.search(r'<a href="/ann/other/issues/1"[^>]*>ann/other#1</a>', page)
        assert "<script>" not in page.replace('<script src="/-/static/app.js" defer></script>', "")
        assert "<img src" not in page and "&lt;script&gt;x" in page
    # a private repository's numbers are linked for who may read it alone
    assert '"/ann/secret/issues/1"' not in cat.get("/ann/plans/pulls/1").text
    assert re.search(r'<a href="/ann/secret/issues/1"', ann.get("/ann/plans/pulls/1").text)
    listing = cat.get("/ann/plans/pulls").text
    assert "&lt;img src=x onerror=alert(1)&gt;" in listing and "&lt;script&gt;x" in listing


def test_a_conversation_reads_the_same_statements_for_few_comments_or_many(
    forge: Forge, client: testing.TestClient
) -> None:
    from support.queries import warm_counts

    cat = person(client, "cat")
    assert open_pull(cat, "main...feature", "Talk").status_code == 303
    pull = forge.pulls.get("ann", "plans", 1)
    cat_account = forge.accounts.get("cat")
    assert cat_account is not None
    forge.issues.comment(pull.issue, cat_account, "first on #1 by @ann")
    counts = {}
    for url in ("/ann/plans/pulls/1", "/ann/plans/pulls/1/files", "/ann/plans/pulls"):
        counts[url] = warm_counts(cat, url)
    for n in range(30):
        forge.issues.comment(pull.issue, cat_account, f"comment {n} on #1 by @ann")
    for url, count in counts.items():
        assert warm_counts(cat, url) == count, url


def test_a_base_branch_gone_and_pull_requests_turned_off(
    forge: Forge, client: testing.TestClient
) -> None:
    forge.merger.stop()  # never checked: no merge base was recorded to fall back on
    cat = person(client, "cat")
    assert open_pull(cat, "same...feature", "Into same").status_code == 303
    repo = forge.registry.get("ann", "plans")
    forge.live.open(repo).references.delete("refs/heads/same")
    forge.moves.refs_moved(repo)
    page = cat.get("/ann/plans/pulls/1")
    assert page.status_code == 200 and "wants to merge commits into" in page.text
    for tab in ("commits", "files"):
        result = cat.get(f"/ann/plans/pulls/1/{tab}")
        assert result.status_code == 200 and "is gone" in result.text, tab
    assert cat.get("/ann/plans/pulls/1.diff").status_code == 400
    assert 'href="/ann/plans/pulls"' in cat.get("/ann/plans").text
    forge.pulls.set_features("ann", "plans", Features(pulls=False))
    assert 'href="/ann/plans/pulls"' not in cat.get("/ann/plans").text  # the tab is gone
    assert "Create pull request" not in cat.get("/ann/plans/compare/main...feature").text
    assert cat.get("/ann/plans/compare/main...feature").status_code == 200  # code, still


def test_a_long_patch_is_mailed_by_git(forge: Forge, client: testing.TestClient) -> None:
    """Past the commits a ``.patch`` mails in-process, git mails them: every one, in order."""
    from floorless.web.comparing import PATCH_COMMITS

    repo = forge.registry.get("ann", "plans")
    handle = forge.live.open(repo)
    tip = str(handle.references["refs/heads/main"].target)
    for n in range(PATCH_COMMITS + 1):
        tip = commit(handle, dict(BASE, **{"count.txt": f"{n}\n"}), [tip], f"Count {n}")
    handle.references.create("refs/heads/long", pygit2.Oid(hex=tip))
    forge.moves.refs_moved(repo)
    cat = person(client, "cat")
    with counting() as events:
        result = cat.get("/ann/plans/compare/main...long.patch")
    assert result.status_code == 200 and events  # git's work, past the budget
    subjects = re.findall(r"^Subject: \[PATCH [0-9]+/[0-9]+\] (.*)$", result.text, re.M)
    assert subjects == [f"Count {n}" for n in range(PATCH_COMMITS + 1)]
    with counting() as events:
        page = cat.get("/ann/plans/compare/main...long")
    assert page.status_code == 200 and not events
    assert f"{PATCH_COMMITS + 1} commits" in page.text
