"""Reviews of pull requests: line comments validated against the diff shown (added, context
and deleted lines, ranges; a line that is not there refused), verdicts and who may give them,
comments followed to a new head or outdated when their lines change, and the commits new
since a person last looked, walked in the background."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import support.reviews
from falcon import testing
from markupsafe import Markup
from support.accounts import Browser, csrf_of
from support.forges import wait_for
from support.reviews import BASE, HEAD, Setup, account, commit, person

from floorless.collab.reviews import COUNTING, Anchors
from floorless.core.errors import BadRequest
from floorless.forge import Forge
from floorless.web.app import create_app

# the shared fixtures this module's tests ask for
forge = support.reviews.forge
setup = support.reviews.setup


def test_comments_on_added_context_and_deleted_lines_and_ranges(setup: Setup) -> None:
    added = setup.comment("cat", "app.py", "new", 6)  # "added"
    context = setup.comment("cat", "app.py", "new", 1)  # unchanged, shown as context
    deleted = setup.comment("cat", "app.py", "old", 8)  # "line 8", deleted
    ranged = setup.comment("cat", "app.py", "new", 4, start=2)
    gone = setup.comment("cat", "gone.txt", "old", 1)
    assert (added.line_text, context.line_text, deleted.line_text) == ("added", "line 1", "line 8")
    assert ranged.line_text == "line 2\nLINE 3\nline 4" and ranged.start_line == 2
    assert gone.commit_oid == deleted.commit_oid == setup.base  # the merge base's side
    assert added.commit_oid == setup.head and added.pending
    shown = setup.forge.reviews.of_pull(setup.current(), account(setup.forge, "cat"))
    assert len(shown.reviews) == 1 and shown.pending(account(setup.forge, "cat").id)
    anchored = shown.anchored(setup.anchors())
    assert set(anchored) == {
        ("app.py", "new", 6),
        ("app.py", "new", 1),
        ("app.py", "old", 8),
        ("app.py", "new", 4),
        ("gone.txt", "old", 1),
    }
    # a pending review is its author's alone
    assert setup.forge.reviews.of_pull(setup.current(), account(setup.forge, "ann")).comments == []
    assert setup.forge.reviews.of_pull(setup.current(), None).reviews == {}


@pytest.mark.parametrize(
    ("path", "side", "line", "start", "message"),
    [
        ("app.py", "new", 11, None, "no line 11 in app.py"),
        ("app.py", "old", 11, None, "no line 11 in app.py"),
        ("app.py", "new", 0, None, "no line 0 in app.py"),
        ("app.py", "new", 4, 5, "a range runs downwards"),
        ("keep.txt", "new", 1, None, "keep.txt is not changed"),
        ("new.txt", "old", 1, None, "new.txt is not changed on the old side"),
        ("gone.txt", "new", 1, None, "gone.txt is not changed on the new side"),
        ("nothing.txt", "new", 1, None, "nothing.txt is not changed"),
        ("app.py", "middle", 1, None, "side is old or new"),
        ("", "new", 1, None, "name a file"),
        ("a" * 5000, "new", 1, None, "name a file"),
    ],
)
def test_a_line_that_is_not_in_the_diff_is_refused(
    setup: Setup, path: str, side: str, line: int, start: int | None, message: str
) -> None:
    with pytest.raises(BadRequest, match=message):
        setup.comment("cat", path, side, line, start)
    assert setup.forge.db.query("SELECT * FROM review_comments") == []


def test_pending_comments_are_edited_and_deleted_by_their_author_alone(setup: Setup) -> None:
    reviews, pull = setup.forge.reviews, setup.current()
    first = setup.comment("cat", "app.py", "new", 6)
    second = setup.comment("cat", "app.py", "new", 7)
    assert first.review_id == second.review_id  # one pending review gathers them
    with pytest.raises(Exception, match="no pending comment"):
        reviews.edit_comment(pull, account(setup.forge, "ben"), first.id, "mine now")
    reviews.edit_comment(pull, account(setup.forge, "cat"), first.id, "Better")
    reviews.delete_comment(pull, account(setup.forge, "cat"), second.id)
    shown = reviews.of_pull(pull, account(setup.forge, "cat"))
    assert [(c.id, c.body) for c in shown.comments] == [(first.id, "Better")]
    reviews.submit(pull, account(setup.forge, "cat"), "comment", "")
    with pytest.raises(Exception, match="no pending comment"):  # submitted: no longer editable
        reviews.edit_comment(pull, account(setup.forge, "cat"), first.id, "Later")


def test_submitting_records_the_verdict_on_the_timeline_once(setup: Setup) -> None:
    reviews, forge = setup.forge.reviews, setup.forge
    setup.comment("cat", "app.py", "new", 6)
    review = reviews.submit(setup.current(), account(forge, "cat"), "request_changes", "Fix it")
    assert (review.state, review.body, review.commit_oid) == (
        "request_changes",
        "Fix it",
        setup.head,
    )
    approval = reviews.submit(setup.current(), account(forge, "ann"), "approve", "")
    events = [(e.kind, e.old_value, e.body) for e in forge.issues.timeline(setup.current().issue)]
    assert events == [
        ("review", str(review.id), "request_changes"),
        ("review", str(approval.id), "approve"),
    ]
    shown = reviews.of_pull(setup.current(), None)
    assert [c.pending for c in shown.comments] == [False]  # seen by everyone now
    assert shown.verdicts() == {"cat": "request_changes", "ann": "approve"}
    reviews.submit(setup.current(), account(forge, "cat"), "comment", "Still")  # stands
    reviews.submit(setup.current(), account(forge, "ann"), "request_changes", "On second look")
    assert reviews.of_pull(setup.current(), None).verdicts() == {
        "cat": "request_changes",
        "ann": "request_changes",
    }
    with pytest.raises(BadRequest, match="needs a comment"):
        reviews.submit(setup.current(), account(forge, "cat"), "comment", "  ")
    with pytest.raises(BadRequest, match="an approval"):
        reviews.submit(setup.current(), account(forge, "cat"), "merge", "")
    # the reviewer saw the head they reviewed
    assert reviews.last_seen(setup.current(), account(forge, "cat")) == setup.head


def comments_by_body(setup: Setup) -> dict[str, tuple[int, int, str, bool]]:
    shown = setup.forge.reviews.of_pull(setup.current(), account(setup.forge, "cat"))
    return {c.body: (c.start_line, c.line, c.commit_oid, c.outdated) for c in shown.comments}


def test_a_head_that_leaves_the_lines_alone_moves_the_comments_to_them(setup: Setup) -> None:
    setup.comment("cat", "app.py", "new", 6, body="added")
    setup.comment("cat", "app.py", "new", 4, start=2, body="range")
    setup.comment("cat", "app.py", "old", 8, body="deleted")
    files = dict(HEAD, **{"app.py": "# header\n" + HEAD["app.py"] + "tail\n"})
    new = setup.push(files, "a header and a tail")
    assert comments_by_body(setup) == {
        "added": (7, 7, new, False),
        "range": (3, 5, new, False),
        "deleted": (8, 8, setup.base, False),  # the merge base did not move
    }
    anchored = setup.forge.reviews.of_pull(setup.current(), None).anchored(setup.anchors())
    assert anchored == {}  # (pending: the author's alone)
    mine = setup.forge.reviews.of_pull(setup.current(), account(setup.forge, "cat"))
    assert set(mine.anchored(setup.anchors())) == {
        ("app.py", "new", 7),
        ("app.py", "new", 5),
        ("app.py", "old", 8),
    }


def test_a_head_that_changes_a_commented_line_outdates_its_comment(setup: Setup) -> None:
    setup.comment("cat", "app.py", "new", 6, body="added")
    setup.comment("cat", "app.py", "new", 4, start=2, body="range")
    setup.comment("cat", "app.py", "new", 10, body="last")
    setup.comment("cat", "new.txt", "new", 1, body="file")
    setup.forge.reviews.submit(setup.current(), account(setup.forge, "cat"), "comment", "")
    files = dict(HEAD, **{"app.py": HEAD["app.py"].replace("LINE 3", "line three")})
    del files["new.txt"]  # the file is gone: its comment is outdated
    files["app.py"] = files["app.py"].replace("added", "added twice")
    new = setup.push(files, "changes")
    assert comments_by_body(setup) == {
        "added": (6, 6, setup.head, True),
        "range": (2, 4, setup.head, True),  # its middle line changed
        "last": (10, 10, new, False),
        "file": (1, 1, setup.head, True),
    }
    shown = setup.forge.reviews.of_pull(setup.current(), None)
    assert set(shown.anchored(setup.anchors())) == {("app.py", "new", 10)}
    outdated = [c for c in shown.comments if c.outdated]
    assert {c.body: c.numbered_lines for c in outdated}["range"] == [
        (2, "line 2"),
        (3, "LINE 3"),
        (4, "line 4"),
    ]
    # lines inserted inside a commented range change it too
    setup.comment("cat", "app.py", "new", 9, start=7, body="inside")
    files["app.py"] = files["app.py"].replace("line 7\n", "line 7\nsqueezed\n")
    setup.push(files, "squeeze")
    assert comments_by_body(setup)["inside"][3] is True


def test_commits_new_since_the_last_look_are_exactly_the_new_ones(setup: Setup) -> None:
    forge, reviews = setup.forge, setup.forge.reviews
    cat = account(forge, "cat")
    assert reviews.new_since(setup.handle, setup.current(), setup.anchors(), None) is None
    reviews.saw(setup.current(), cat, setup.head)
    seen = reviews.last_seen(setup.current(), cat)
    assert seen == setup.head
    assert reviews.new_since(setup.handle, setup.current(), setup.anchors(), seen) is None
    files = dict(HEAD)
    files["one.txt"] = "1\n"
    first = setup.push(files, "one")
    files["two.txt"] = "2\n"
    second = setup.push(files, "two")
    found = reviews.new_since(setup.handle, setup.current(), setup.anchors(), seen)
    if found is COUNTING:  # asked before the head moved's work got there: walked soon
        wait_for(reviews.idle)
        found = reviews.new_since(setup.handle, setup.current(), setup.anchors(), seen)
    assert found is not None and found is not COUNTING
    assert found.commits == [(second, "two"), (first, "one")] and not found.forced
    reviews.saw(setup.current(), cat, second)
    assert reviews.new_since(setup.handle, setup.current(), setup.anchors(), second) is None


# -- over HTTP ----------------------------------------------------------------------------------




def post(browser: Browser, url: str, **fields: str) -> testing.Result:
    page = browser.get("/ann/plans/issues/new")  # signed out: to the sign-in page
    token = csrf_of(page.text) if page.status_code == 200 else "none"
    return browser.post(url, fields, token)


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def test_line_comments_and_reviews_over_http(setup: Setup, client: testing.TestClient) -> None:
    cat = person(client, "cat")  # neither owner nor collaborator: any signed-in reader
    comments = "/ann/plans/pulls/1/files/reviews/comments"
    result = post(cat, comments, path="app.py", side="new", line="6", body="Why *this*?")
    assert result.status_code == 303
    found = re.fullmatch(r"/ann/plans/pulls/1/files#discussion_r(\d+)", result.headers["location"])
    assert found
    first = int(found.group(1))
    result = post(cat, comments, path="app.py", side="old", start_line="7", line="8", body="x")
    assert result.status_code == 303
    for fields, message in [
        ({"path": "app.py", "side": "new", "line": "99"}, "no line 99 in app.py"),
        ({"path": "app.py", "side": "old", "line": "11"}, "no line 11 in app.py"),
        ({"path": "app.py", "side": "new", "line": "abc"}, "line is a line number"),
        ({"path": "keep.txt", "side": "new", "line": "1"}, "keep.txt is not changed"),
        ({"path": "app.py", "side": "up", "line": "1"}, "side is old or new"),
        ({"path": "app.py", "side": "new", "line": "1", "body": " "}, "needs some text"),
    ]:
        result = post(cat, comments, **{"body": "b", **fields})
        assert result.status_code == 400 and message in result.text, (fields, result.text[:300])
    edit = f"{comments}/{first}"
    assert post(cat, edit, action="edit", body="Better").status_code == 303
    ben = person(client, "ben")
    assert post(ben, edit, action="edit", body="Mine").status_code == 404
    assert post(cat, edit, action="shout").status_code == 400
    assert post(cat, f"{comments}/x1", action="delete").status_code == 404

    submit = "/ann/plans/pulls/1/files/reviews/submit"
    result = post(cat, submit, verdict="approve", body="Good **work**")
    assert result.status_code == 303
    assert re.fullmatch(r"/ann/plans/pulls/1#pullrequestreview-\d+", result.headers["location"])
    # the author may comment on their own pull request but not judge it
    result = post(ben, submit, verdict="approve", body="")
    assert result.status_code == 403 and "may only comment" in result.text
    assert post(ben, submit, verdict="request_changes", body="x").status_code == 403
    assert post(ben, submit, verdict="comment", body="Thanks").status_code == 303
    assert post(ben, submit, verdict="merge", body="x").status_code == 400
    shown = setup.forge.reviews.of_pull(setup.current(), None)
    assert shown.verdicts() == {"cat": "approve"}
    assert [c.body for c in shown.comments] == ["Better", "x"]
    # signed out: to the sign-in page, nothing recorded
    anonymous = Browser(client)
    result = anonymous.post(submit, {"verdict": "approve"}, None)
    assert result.status_code in (303, 403)
    assert len(setup.forge.reviews.of_pull(setup.current(), None).reviews) == 2


def test_a_private_repositorys_review_routes_are_not_found(
    forge: Forge, client: testing.TestClient
) -> None:
    secret = forge.registry.get("ann", "secret")
    handle = forge.live.open(secret)
    base = commit(handle, BASE, [], "base", "refs/heads/main")
    head = commit(handle, HEAD, [base], "change", "refs/heads/feature")
    forge.moves.refs_moved(secret)
    ann = account(forge, "ann")
    forge.pulls.create(
        "ann", "secret", ann, "Hidden", "", "main", ("ann", "secret", "feature"), head
    )
    cat = person(client, "cat")
    prefix = "/ann/secret/pulls/1/files/reviews"
    for url in (f"{prefix}/comments", f"{prefix}/comments/1", f"{prefix}/submit"):
        for browser in (cat, Browser(client)):
            result = post(
                browser,
                url,
                path="app.py",
                side="new",
                line="6",
                body="x",
                verdict="comment",
                action="delete",
            )
            assert result.status_code == 404, (url, result.status_code)
            # the same as a repository that does not exist
            missing = post(browser, url.replace("secret", "nothing"), verdict="comment")
            assert missing.status_code == 404
    assert forge.db.query("SELECT * FROM reviews") == []


def test_the_timeline_shows_reviews_with_their_comments_outdated_ones_folded(
    setup: Setup,
) -> None:
    from markupsafe import Markup, escape

    from floorless.web.render import Renderer

    forge = setup.forge
    setup.comment("cat", "app.py", "new", 6, body="on <added>")
    setup.comment("cat", "app.py", "new", 10, body="on the last")
    forge.reviews.submit(setup.current(), account(forge, "cat"), "request_changes", "Not *yet*")
    files = dict(HEAD, **{"app.py": HEAD["app.py"].replace("added", "added twice")})
    setup.push(files, "changes")
    pull = setup.current()
    shown = forge.reviews.of_pull(pull, None)
    timeline = forge.issues.timeline(pull.issue)
    html = (
        Renderer("floorless")
        .env.get_template("_timeline.html")
        .render(
            timeline=[(entry, None) for entry in timeline],
            gap=None,
            reasons={},
            reviews=shown,
            review_html={
                r.id: Markup(f"<em>{escape(r.body)}</em>") for r in shown.reviews.values()
            },
            comment_html={c.id: escape(c.body) for c in shown.comments},
            repo=setup.repo,
            pull=pull,
        )
    )
    (review,) = shown.reviews.values()
    assert f'id="pullrequestreview-{review.id}"' in html
    assert "requested changes" in html and "<em>Not *yet*</em>" in html
    outdated, current = shown.comments
    assert outdated.outdated and not current.outdated
    assert re.search(
        rf'<details class="review-thread outdated" id="discussion_r{outdated.id}">\s*'
        r"<summary><b>app.py</b> line 6 \(new\) <span class=\"label\">outdated</span>",
        html,
    )
    assert "on &lt;added&gt;" in html and "<pre>added</pre>" in html
    assert f'href="/ann/plans/pulls/1/files#discussion_r{current.id}"' in html
    assert "pushed" in html  # the other events as before


@pytest.mark.parametrize("split", [False, True], ids=["unified", "split"])
def test_comments_go_under_the_rows_of_their_lines(setup: Setup, split: bool) -> None:
    from floorless.git import diff as gitdiff
    from floorless.web.diffrows import _split_rows, _unified_rows
    from floorless.web.views.reviews import rows_with_comments

    lines = [
        gitdiff.Line(" ", 4, 4, "line 4"),
        gitdiff.Line("-", 5, None, "line 5"),
        gitdiff.Line("+", None, 5, "line five"),
    ]
    make = _split_rows if split else _unified_rows
    rows = Markup("".join(make(lines, [line.text for line in lines])))
    on_new = setup.comment("cat", "app.py", "new", 5)
    on_old = setup.comment("cat", "app.py", "old", 5)
    elsewhere = setup.comment("cat", "app.py", "new", 9)
    anchored = {("app.py", "new", 5): [on_new], ("app.py", "old", 5): [on_old]}
    anchored["app.py", "new", 9] = [elsewhere]
    anchored["other.py", "new", 4] = [elsewhere]
    out, rest = rows_with_comments(
        rows, "app.py", anchored, lambda cs: "".join(f"<tr id=c{c.id}></tr>" for c in cs)
    )
    parts = str(out).split("</tr>")
    assert parts[2].startswith(f"<tr id=c{on_old.id}>")  # after the deleted line 5
    # after the added line 5: its own row, or (split) the row it shares with line 5 removed
    assert parts[3 if split else 4].startswith(f"<tr id=c{on_new.id}>")
    assert rest == [elsewhere]  # on a line the rows do not show
    assert rows_with_comments(rows, "keep.txt", anchored, str) == (rows, [])


def test_reading_reviews_takes_the_same_statements_for_one_comment_or_many(setup: Setup) -> None:
    from floorless.core import timing

    forge = setup.forge
    cat = account(forge, "cat")

    def statements() -> int:
        timer = timing.start_request()
        try:
            pull = setup.current()
            anchors = forge.reviews.anchors(setup.handle, pull, setup.base)
            shown = forge.reviews.of_pull(pull, cat)
            shown.anchored(anchors), shown.verdicts(), shown.behind(anchors)
            for review in shown.reviews.values():
                shown.threads(review.id)
            seen = forge.reviews.last_seen(pull, cat)
            forge.reviews.new_since(setup.handle, pull, anchors, seen)
            return timer.queries
        finally:
            timing.end_request()

    setup.comment("cat", "app.py", "new", 6)
    forge.reviews.submit(setup.current(), cat, "comment", "one")
    one = statements()
    for round_ in range(6):
        for line in (1, 2, 6, 7, 9):
            setup.comment("ann", "app.py", "new", line, body=f"{round_} {line}")
        forge.reviews.submit(setup.current(), account(forge, "ann"), "comment", "more")
    assert len(forge.reviews.of_pull(setup.current(), cat).comments) == 31
    assert statements() == one == 4  # the pull request, reviews, comments, last look


def test_a_real_push_outdates_comments_on_changed_lines_only(setup: Setup, tmp_path: Path) -> None:
    """git's own client pushes to the head branch; the ref check sees it, the follower moves
    the pull request, and the comments follow."""
    from support.gitfixtures import git

    forge = setup.forge
    setup.comment("cat", "app.py", "new", 6, body="added")
    setup.comment("cat", "app.py", "new", 1, body="first")
    forge.reviews.submit(setup.current(), account(forge, "cat"), "comment", "")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", "-b", "feature", str(setup.repo.path), str(work))

    def push(text: str, message: str) -> str:
        (work / "app.py").write_text(text)
        git(work, "commit", "-q", "-am", message)
        git(work, "push", "-q", "origin", "feature")
        new = git(work, "rev-parse", "HEAD").decode().strip()
        forge.maintenance.check_refs()
        wait_for(lambda: setup.current().head_oid == new and forge.merger.idle())
        wait_for(forge.reviews.idle)
        return new

    first = push(HEAD["app.py"] + "more\n", "a line at the end")
    assert comments_by_body(setup) == {
        "added": (6, 6, first, False),
        "first": (1, 1, first, False),
    }
    second = push(HEAD["app.py"].replace("added", "added again") + "more\n", "change it")
    assert comments_by_body(setup) == {
        "added": (6, 6, first, True),
        "first": (1, 1, second, False),
    }


def test_review_routes_are_not_found_when_pull_requests_are_off(
    setup: Setup, client: testing.TestClient
) -> None:
    from floorless.collab.pulls import Features

    setup.forge.pulls.set_features("ann", "plans", Features(pulls=False))
    cat = person(client, "cat")
    result = post(cat, "/ann/plans/pulls/1/files/reviews/submit", verdict="comment", body="x")
    assert result.status_code == 404
    assert setup.forge.db.query("SELECT * FROM reviews") == []


def test_old_side_comments_follow_a_merge_base_that_moved(setup: Setup) -> None:
    """The head merges the base branch, which changed line 1: the merge base moves, a comment
    on the old side's line 8 follows it, and the ones on line 1 (either side) are outdated."""
    forge = setup.forge
    setup.comment("cat", "app.py", "old", 8, body="old 8")
    setup.comment("cat", "app.py", "old", 1, body="old 1")
    setup.comment("cat", "app.py", "new", 1, body="new 1")
    base_files = dict(BASE, **{"app.py": BASE["app.py"].replace("line 1\n", "LINE 1\n")})
    main = commit(setup.handle, base_files, [setup.base], "base moves", "refs/heads/main")
    merged_files = dict(HEAD, **{"app.py": HEAD["app.py"].replace("line 1\n", "LINE 1\n")})
    pull = setup.current()
    head = commit(
        setup.handle, merged_files, [pull.head_oid, main], "merge main", "refs/heads/feature"
    )
    forge.moves.refs_moved(setup.repo)
    wait_for(lambda: setup.current().head_oid == head and forge.merger.idle())
    wait_for(forge.reviews.idle)
    assert setup.forge.reviews.anchors(setup.handle, setup.current(), main) == Anchors(main, head)
    assert comments_by_body(setup) == {
        "old 8": (8, 8, main, False),
        "old 1": (1, 1, setup.base, True),
        "new 1": (1, 1, setup.head, True),
    }


def test_the_pages_show_reviews_with_no_process_and_fixed_statements(
    setup: Setup, client: testing.TestClient
) -> None:
    from support.queries import statements
    from support.spawns import counting

    forge = setup.forge
    cat, ann = account(forge, "cat"), account(forge, "ann")
    browser = person(client, "cat")

    def look(tab: str = "") -> tuple[str, int, int]:
        with counting() as events:
            result = browser.get("/ann/plans/pulls/1" + (f"/{tab}" if tab else ""))
        assert result.status_code == 200, result.text[:500]
        return result.text, len(events), statements(result)

    setup.comment("cat", "app.py", "new", 6, body="on *added*")
    forge.reviews.submit(setup.current(), cat, "request_changes", "Needs **work**")
    look()  # warm: what the database layer remembers (PostgreSQL) is read once
    _, _, kept = look()  # from the page cache: nothing was written since
    # any write to the conversation moves the repository's activity version: rendered again
    forge.db.execute("UPDATE issues SET title = title WHERE owner = 'ann' AND name = 'plans'")
    text, spawns, few = look()
    assert kept < few
    assert spawns == 0 and "<strong>work</strong>" in text and "<em>added</em>" in text
    assert "Changes requested by" in text and ">cat</a>" in text
    files, spawns, _ = look("files")
    assert spawns == 0 and 'name="verdict" value="approve"' in files  # cat may judge
    assert "Comment on a line of this file" in files
    # the first look at the files recorded the head seen; nothing is new
    assert forge.reviews.last_seen(setup.current(), cat) == setup.head
    for round_ in range(5):
        for line in (1, 2, 7, 9):
            setup.comment("ann", "app.py", "new", line, body=f"{round_}:{line}")
        forge.reviews.submit(setup.current(), ann, "approve", f"round {round_}")
    text, spawns, many = look()
    assert spawns == 0 and many == few and text.count('class="review-thread"') == 21
    assert "Approved by <a" in text
    # the head moves: the files tab lists exactly the new commits once counted
    files = dict(HEAD, **{"one.txt": "1\n"})
    first = setup.push(files, "one")
    files["two.txt"] = "2\n"
    second = setup.push(files, "two")
    text, _, _ = look()
    if "Counting the commits" in text:
        wait_for(forge.reviews.idle)
        text, _, _ = look()
    assert "2 new commits since your last visit" in text
    assert text.index(second[:10]) < text.index(first[:10])
    look("files")  # seen now
    text, _, _ = look()
    assert "new commit" not in text
    # a pending comment of ann's is hers alone; on the files tab, under its line or apart
    setup.comment("ann", "app.py", "new", 3, body="pending, of ann's")
    assert "pending, of ann" not in look("files")[0]


def test_the_files_tab_anchors_comments_under_their_lines_until_outdated(
    setup: Setup, client: testing.TestClient
) -> None:
    forge = setup.forge
    added = setup.comment("cat", "app.py", "new", 6, body="on added")
    deleted = setup.comment("cat", "app.py", "old", 8, body="on deleted")
    forge.reviews.submit(setup.current(), account(forge, "cat"), "comment", "")
    anonymous = Browser(client)
    files = anonymous.get("/ann/plans/pulls/1/files").text
    flat = re.sub(r"\s+", " ", files)
    assert re.search(
        rf'<td class="ln">6</td><td class="code">(?:(?!</tr>).)*added(?:(?!</tr>).)*</tr>'
        rf'<tr class="review-comment" id="discussion_r{added.id}">',
        flat,
    )
    assert re.search(
        rf'<td class="ln">8</td><td class="ln"></td>(?:(?!</tr>).)*</tr>'
        rf'<tr class="review-comment" id="discussion_r{deleted.id}">',
        flat,
    )
    assert "Comment on a line of this file" not in files  # signed out: no form
    files = dict(HEAD, **{"app.py": HEAD["app.py"].replace("added", "added again")})
    setup.push(files, "change the added line")
    page = anonymous.get("/ann/plans/pulls/1/files").text
    assert f"discussion_r{added.id}" not in page and f'id="discussion_r{deleted.id}"' in page
    conversation = anonymous.get("/ann/plans/pulls/1").text
    assert f'<details class="review-thread outdated" id="discussion_r{added.id}">' in conversation
    assert f'<div class="review-thread" id="discussion_r{deleted.id}">' in conversation
