"""Issues as people use them in the browser: open, comment, close with a reason, reopen,
edit; numbers under concurrent creators; the list's tabs, search, author filter and cursor
pages; who may do what on public and private repositories; Markdown made inert and its
references linked; a rename keeps a repository's issues and a deletion removes them."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import start_forge
from support.issues import open_issue, person

from floorless.collab.issues import BODY_MAX, PER_PAGE, TITLE_MAX
from floorless.forge import Forge
from floorless.web.app import create_app


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    public = forge.registry.create("ann", "plans")
    forge.registry.create("ann", "secret", private=True)
    ben = forge.accounts.get("ben")
    dan = forge.accounts.get("dan")
    assert ben is not None and dan is not None
    forge.policy.set_collaborator(public, ben, "write")
    forge.policy.set_collaborator(forge.registry.get("ann", "secret"), dan, "read")
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))






def act(browser: Browser, repo: str, number: int, **fields: str) -> testing.Result:
    return browser.post(f"/{repo}/issues/{number}", fields)


def test_the_whole_flow(client: testing.TestClient, forge: Forge) -> None:
    cat = person(client, "cat")  # neither owner nor collaborator: any signed-in person
    assert cat.get("/ann/plans").status_code == 200
    assert 'href="/ann/plans/issues"' in cat.get("/ann/plans").text
    number = open_issue(cat, "ann/plans", "It crashes", "Run **this** and see.")
    assert number == 1
    page = cat.get("/ann/plans/issues/1")
    assert page.status_code == 200
    assert "It crashes" in page.text and "<strong>this</strong>" in page.text

    ann = person(client, "ann")
    result = act(ann, "ann/plans", 1, action="comment", body="Seen it *too*")
    assert result.status_code == 303
    assert re.fullmatch(r"/ann/plans/issues/1#issuecomment-\d+", result.headers["location"])
    assert act(ann, "ann/plans", 1, action="close", reason="not_planned").status_code == 303
    page = ann.get("/ann/plans/issues/1")
    assert "Closed as not planned" in page.text and "closed this as not planned" in page.text
    assert "Reopen issue" in page.text and "<em>too</em>" in page.text

    # a closed issue takes comments, as on Forgejo; its author reopens it
    assert act(cat, "ann/plans", 1, action="comment", body="Still here").status_code == 303
    assert act(cat, "ann/plans", 1, action="reopen").status_code == 303
    assert act(cat, "ann/plans", 1, action="close", reason="completed").status_code == 303
    assert act(cat, "ann/plans", 1, action="reopen").status_code == 303
    result = act(cat, "ann/plans", 1, action="edit", title="It crashes on start", body="New")
    assert result.status_code == 303
    issue = forge.issues.get("ann", "plans", 1)
    assert (issue.title, issue.body, issue.state, issue.comments) == (
        "It crashes on start",
        "New",
        "open",
        2,
    )
    kinds = [e.kind for e in forge.issues.timeline(issue)]
    assert kinds == ["comment", "closed", "comment", "reopened", "closed", "reopened", "title"]
    assert [e.seq for e in forge.issues.timeline(issue)] == list(range(1, 8))
    page = cat.get("/ann/plans/issues/1")
    assert "changed the title from <del>It crashes</del> to <ins>It crashes on start</ins>" in (
        page.text
    )
    # closing what is closed already (a second tab) records nothing more
    before = len(forge.issues.timeline(issue))
    forge.issues.reopen(issue, forge.accounts.require("ann"))
    forge.issues.reopen(issue, forge.accounts.require("ann"))
    assert len(forge.issues.timeline(issue)) == before


def test_numbers_are_distinct_and_consecutive_under_concurrent_creators(forge: Forge) -> None:
    people = [forge.accounts.require(name) for name in ("ann", "ben", "cat", "dan")]
    numbers: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def create(index: int) -> None:
        try:
            start.wait()
            for round_ in range(5):
                issue = forge.issues.create(
                    "ann", "plans", people[index % 4], f"issue {index}.{round_}", ""
                )
                numbers.append(issue.number)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(numbers) == list(range(1, 41))
    # another repository has a sequence of its own
    assert forge.issues.create("ann", "secret", people[0], "first", "").number == 1


def test_lists_tabs_search_author_and_pages(client: testing.TestClient, forge: Forge) -> None:
    ann, ben = forge.accounts.require("ann"), forge.accounts.require("ben")
    total = PER_PAGE * 2 + 3
    for n in range(1, total + 1):
        issue = forge.issues.create("ann", "plans", ann if n % 2 else ben, f"Bug {n} 100%_", "")
        if n % 5 == 0:
            forge.issues.close(issue, ann, "completed")
    closed = total // 5
    browser = Browser(client)
    page = browser.get("/ann/plans/issues")
    assert f'Open <span class="count">{total - closed}</span>' in page.text
    assert f'Closed <span class="count">{closed}</span>' in page.text
    assert f'All <span class="count">{total}</span>' in page.text

    def numbers(text: str) -> list[int]:
        return [int(n) for n in re.findall(r'href="/ann/plans/issues/(\d+)"', text)]

    # every open issue, newest first, once, following the "Older" cursor
    seen: list[int] = []
    url = "/ann/plans/issues"
    pages = 0
    while url:
        path, _, query = url.partition("?")
        page = browser.get(path, query_string=query or None)
        assert page.status_code == 200
        shown = numbers(page.text)
        assert len(shown) <= PER_PAGE
        seen += shown
        pages += 1
        older = re.search(r'rel="next" href="([^"]+)"', page.text)
        url = older.group(1).replace("&amp;", "&") if older else ""
    assert seen == [n for n in range(total, 0, -1) if n % 5]
    assert pages == -(-(total - closed) // PER_PAGE) == 2
    # and back: "Newer" from the last page gives the first again
    newer = re.search(r'rel="prev" href="([^"]+)"', page.text)
    assert newer
    path, _, query = newer.group(1).replace("&amp;", "&").partition("?")
    assert numbers(browser.get(path, query_string=query).text) == seen[:PER_PAGE]

    closed_page = browser.get("/ann/plans/issues", query_string="state=closed")
    assert numbers(closed_page.text) == [n for n in range(total, 0, -1) if n % 5 == 0]
    found = browser.get("/ann/plans/issues", query_string="state=all&q=bug+1")
    assert set(numbers(found.text)) == {n for n in range(1, total + 1) if str(n).startswith("1")}
    literal = browser.get("/ann/plans/issues", query_string="state=all&q=0%25_")
    assert f'All <span class="count">{total}</span>' in literal.text  # % and _ match literally
    literal = browser.get("/ann/plans/issues", query_string="state=all&q=1%25")
    assert 'All <span class="count">0</span>' in literal.text
    assert numbers(browser.get("/ann/plans/issues", query_string="q=nothing").text) == []
    by_ben = browser.get("/ann/plans/issues", query_string="state=all&author=BEN")
    assert set(numbers(by_ben.text)) <= {n for n in range(1, total + 1) if n % 2 == 0}
    assert len(numbers(by_ben.text)) == PER_PAGE
    assert f'All <span class="count">{total // 2}</span>' in by_ben.text
    for bad in ("state=maybe", "before=x", "after=-1", "before=99999999999"):
        assert browser.get("/ann/plans/issues", query_string=bad).status_code == 400, bad


def test_access_public_and_private(client: testing.TestClient, forge: Forge) -> None:
    anyone = Browser(client)
    cat, ben, dan, ann = (person(client, n) for n in ("cat", "ben", "dan", "ann"))
    number = open_issue(cat, "ann/plans", "From cat")
    other = open_issue(ann, "ann/plans", "From ann")
    # anonymous: reads, is sent to sign in to take part
    assert anyone.get(f"/ann/plans/issues/{number}").status_code == 200
    assert "Sign in</a> to join" in anyone.get(f"/ann/plans/issues/{number}").text
    new = anyone.get("/ann/plans/issues/new")
    assert new.status_code == 303 and new.headers["location"].startswith("/-/login")
    result = anyone.post(f"/ann/plans/issues/{number}", {"action": "comment", "body": "x"}, None)
    assert result.status_code == 303 and result.headers["location"].startswith("/-/login")
    # cat (the author) may change her own issue, not ann's; ben (a writer) may change both
    assert "Close issue" not in cat.get(f"/ann/plans/issues/{other}").text
    assert act(cat, "ann/plans", other, action="close", reason="completed").status_code == 403
    assert act(cat, "ann/plans", other, action="edit", title="Mine").status_code == 403
    assert act(cat, "ann/plans", other, action="comment", body="ok").status_code == 303
    assert act(ben, "ann/plans", other, action="close", reason="completed").status_code == 303
    assert act(ben, "ann/plans", number, action="edit", title="Tidied").status_code == 303
    assert forge.issues.get("ann", "plans", other).state == "closed"
    assert forge.issues.get("ann", "plans", number).title == "Tidied"

    # private: the same 404 as an unknown repository, on every route, to whoever cannot read
    secret = open_issue(ann, "ann/secret", "Hidden plans")
    routes = ("/ann/secret/issues", "/ann/secret/issues/new", f"/ann/secret/issues/{secret}")
    for browser in (anyone, cat, ben):
        for url in (*routes, "/ann/secret/issues/99", "/ann/secret/issues/x"):
            result = browser.get(url)
            assert result.status_code == 404 and "Hidden plans" not in result.text, url
        for url in routes[1:]:
            result = browser.post(url, {"action": "comment", "title": "t", "body": "b"}, "x")
            assert result.status_code == 404, url
        assert browser.get("/ann/nothing/issues").status_code == 404
    # a reader of a private repository opens and comments, but closes only her own
    assert "Hidden plans" in dan.get(f"/ann/secret/issues/{secret}").text
    assert act(dan, "ann/secret", secret, action="comment", body="read it").status_code == 303
    assert act(dan, "ann/secret", secret, action="reopen").status_code == 403
    mine = open_issue(dan, "ann/secret", "Dan's")
    assert act(dan, "ann/secret", mine, action="close", reason="completed").status_code == 303


def test_bad_input_is_refused_clearly(client: testing.TestClient, forge: Forge) -> None:
    cat = person(client, "cat")
    number = open_issue(cat, "ann/plans", "Fine")
    for title, message in (
        ("", "an issue needs a title"),
        ("   ", "an issue needs a title"),
        ("x" * (TITLE_MAX + 1), f"at most {TITLE_MAX} characters"),
    ):
        result = cat.post("/ann/plans/issues/new", {"title": title, "body": "kept"})
        assert result.status_code == 400 and message in result.text
        assert "kept" in result.text  # what was typed is still there
    result = cat.post("/ann/plans/issues/new", {"title": "t", "body": "y" * (BODY_MAX + 1)})
    assert result.status_code in (400, 413)
    result = act(cat, "ann/plans", number, action="comment", body="z" * (BODY_MAX + 1))
    assert result.status_code in (400, 413)
    assert act(cat, "ann/plans", number, action="comment", body="  ").status_code == 400
    assert act(cat, "ann/plans", number, action="close", reason="whatever").status_code == 400
    assert act(cat, "ann/plans", number, action="edit", title="").status_code == 400
    assert act(cat, "ann/plans", number, action="dance").status_code == 400
    assert act(cat, "ann/plans", number, action="comment", body="a\x00b").status_code == 400
    # no CSRF token, or a wrong one: refused, nothing written
    for csrf in (None, "forged"):
        result = cat.post(f"/ann/plans/issues/{number}", {"action": "comment", "body": "x"}, csrf)
        assert result.status_code == 403
        result = cat.post("/ann/plans/issues/new", {"title": "Sneaky"}, csrf)
        assert result.status_code == 403
    issue = forge.issues.get("ann", "plans", number)
    assert issue.comments == 0 and issue.title == "Fine"
    assert forge.issues.page("ann", "plans").counts == {"open": 1, "closed": 0}
    for url in (
        "/ann/plans/issues/99",
        "/ann/plans/issues/abc",
        "/ann/plans/issues/-1",
        "/ann/plans/issues/1.5",
        "/ann/plans/issues/" + "9" * 30,
    ):
        assert cat.get(url).status_code == 404, url
        assert act(cat, "ann/plans", 99, action="comment", body="x").status_code == 404


def test_markdown_is_inert_and_references_are_linked(
    client: testing.TestClient, forge: Forge
) -> None:
    repo = forge.registry.get("ann", "plans")
    handle = pygit2.Repository(str(repo.path))
    signature = pygit2.Signature("Ann", "ann@example.org", 1_700_000_000, 0)
    tree = handle.TreeBuilder().write()
    commit = str(handle.create_commit("refs/heads/main", signature, signature, "c", tree, []))
    forge.moves.refs_moved(repo)
    cat = person(client, "cat")
    first = open_issue(cat, "ann/plans", "<script>alert('t')</script>")
    body = (
        f"See #{first}, #77, @ben, @nobody, {commit[:10]}, {commit}, abcdef12345 and"
        " `#1` <script>alert(1)</script> <img src=x onerror=alert(2)>"
        ' [click](javascript:alert(3)) <a href="javascript:alert(4)">a</a>'
    )
    second = open_issue(cat, "ann/plans", "Refs", body)
    act(cat, "ann/plans", second, action="comment", body="@ann\n\n<iframe src=//evil></iframe>")
    page = cat.get(f"/ann/plans/issues/{second}").text
    main = page[page.index("<main>") : page.index("</main>")]
    main = re.sub(r"<textarea[^>]*>[^<]*</textarea>", "", main)  # the text, escaped, to edit
    assert f'<a href="/ann/plans/issues/{first}" rel="noopener noreferrer">#{first}</a>' in page
    assert "#77</a>" not in page and "@nobody</a>" not in page
    assert '<a href="/ben" rel="noopener noreferrer">@ben</a>' in page
    assert '<a href="/ann" rel="noopener noreferrer">@ann</a>' in page
    assert f'href="/ann/plans/commit/{commit}" rel="noopener noreferrer">{commit[:10]}</a>' in page
    assert f">{commit}</a>" in page and "abcdef12345</a>" not in page
    assert "<code>#1</code>" in page
    for dangerous in ("<script", "onerror", "javascript:", "<iframe"):
        assert dangerous not in main.lower(), dangerous
    title_page = cat.get(f"/ann/plans/issues/{first}").text
    assert "&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt;" in title_page
    listing = cat.get("/ann/plans/issues").text
    assert "<script>alert" not in listing


def test_a_rename_keeps_issues_and_a_deletion_removes_them(
    client: testing.TestClient, forge: Forge
) -> None:
    ann = person(client, "ann")
    number = open_issue(ann, "ann/plans", "Survives")
    act(ann, "ann/plans", number, action="comment", body="a comment")
    act(ann, "ann/plans", number, action="close", reason="completed")
    result = ann.post("/ann/plans/settings", {"action": "rename", "name": "roadmap"})
    assert result.status_code == 303
    assert ann.get(f"/ann/plans/issues/{number}").status_code == 404
    page = ann.get(f"/ann/roadmap/issues/{number}")
    assert page.status_code == 200 and "Survives" in page.text and "a comment" in page.text
    assert [e.kind for e in forge.issues.timeline(forge.issues.get("ann", "roadmap", 1))] == [
        "comment",
        "closed",
    ]
    # a new repository under the old name starts its own issues at 1
    forge.registry.create("ann", "plans")
    assert open_issue(ann, "ann/plans", "Fresh") == 1
    result = ann.post("/ann/roadmap/settings", {"action": "delete", "confirm": "ann/roadmap"})
    assert result.status_code == 303
    for table in ("issues", "issue_comments", "issue_events"):
        rows = forge.db.query(f"SELECT COUNT(*) AS n FROM {table}")
        assert rows[0]["n"] == (1 if table == "issues" else 0), table
    forge.registry.create("ann", "roadmap")
    assert ann.get(f"/ann/roadmap/issues/{number}").status_code == 404


def test_csrf_token_is_on_every_issue_form(client: testing.TestClient) -> None:
    cat = person(client, "cat")
    number = open_issue(cat, "ann/plans", "Forms")
    page = cat.get(f"/ann/plans/issues/{number}").text
    assert page.count('name="csrf"') >= 4  # sign out, comment, close, edit
    assert csrf_of(cat.get("/ann/plans/issues/new").text)
