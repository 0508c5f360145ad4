"""Merging on the web: the POST route (who may, a stale page's form, closed and merged pull
requests, bad input), a real ``git push`` over HTTP racing merges, and the merge box as each
state shows it."""

from __future__ import annotations

import http.cookiejar
import re
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import start_forge, wait_for
from support.gitfixtures import git, git_env, git_text
from support.mergeweb import fill, open_pull, person, post_merge, tip
from support.merging import commit, settle
from support.serving import serving

from floorless.accounts.access import Viewer
from floorless.collab.pulls import Features, Pull
from floorless.forge import Forge
from floorless.web.app import create_app
from floorless.web.context import RepoView
from floorless.web.render import Renderer
from floorless.web.views.merge import merge_box


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    secret = forge.registry.create("ann", "secret", private=True)
    forge.policy.set_collaborator(plans, forge.accounts.require("ben"), "write")
    forge.policy.set_collaborator(plans, forge.accounts.require("cat"), "read")
    forge.policy.set_collaborator(secret, forge.accounts.require("dan"), "read")
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))












def expected(forge: Forge, pull: Pull) -> dict[str, str]:
    return {"expected_base": tip(forge), "expected_head": pull.head_oid}


def test_a_writer_merges_through_the_form_and_deletes_the_branch(
    client: testing.TestClient, forge: Forge, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    pull = open_pull(forge)
    ben = person(client, "ben")
    before = tip(forge)
    result = post_merge(
        ben, "ann/plans", 1, style="squash", delete_branch="on", **expected(forge, pull)
    )
    assert result.status_code == 303, result.text[:300]
    assert result.headers["location"] == "/ann/plans/pulls/1"
    done = forge.pulls.get("ann", "plans", 1)
    assert done.merged and done.merged_by == "ben" and done.merge_style == "squash"
    path = forge.registry.get("ann", "plans").path
    assert tip(forge) == done.merged_oid and git_text(path, "rev-parse", "main^") == before
    message = git_text(path, "log", "-1", "--format=%B%an", "main")
    assert "Merge topic (#1)" in message and "Reviewed-on: http://" in message
    assert message.endswith("/ann/plans/pulls/1\nben")
    assert git_text(path, "branch", "--list", "topic") == ""  # deleted
    assert git_text(path, "rev-parse", "refs/pull/1/head") == pull.head_oid  # kept
    kinds = [e.kind for e in forge.issues.timeline(done.issue)]
    assert kinds == ["merged", "head_deleted"]
    again = post_merge(ben, "ann/plans", 1, style="merge", **expected(forge, pull))
    assert again.status_code == 409 and "merged already" in again.text


def test_who_may_merge(client: testing.TestClient, forge: Forge, tmp_path: Path) -> None:
    fill(forge, tmp_path)
    fill(forge, tmp_path, "secret")
    pull = open_pull(forge)
    open_pull(forge, "secret")
    fields = {"style": "merge", **expected(forge, pull)}
    before = tip(forge)
    cat = person(client, "cat")  # may read, not push
    assert post_merge(cat, "ann/plans", 1, **fields).status_code == 403
    anonymous = Browser(client)
    assert post_merge(anonymous, "ann/plans", 1, **fields).status_code == 303  # to sign in
    assert "/-/login" in post_merge(anonymous, "ann/plans", 1, **fields).headers["location"]
    # a private repository is not there for whoever may not read it: as a missing one
    ben = person(client, "ben")
    secret = post_merge(ben, "ann/secret", 1, **fields)
    missing = post_merge(ben, "ann/nothing", 1, **fields)
    assert secret.status_code == missing.status_code == 404
    assert "secret" not in secret.text
    dan = person(client, "dan")  # reads the secret one, may not merge
    assert post_merge(dan, "ann/secret", 1, **fields).status_code == 403
    assert tip(forge) == before and not forge.pulls.get("ann", "plans", 1).merged
    forge.pulls.set_features("ann", "plans", Features(pulls=False))
    assert post_merge(ben, "ann/plans", 1, **fields).status_code == 404


def test_bad_input_is_refused_clearly(
    client: testing.TestClient, forge: Forge, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    pull = open_pull(forge)
    ben = person(client, "ben")
    good = {"style": "merge", **expected(forge, pull)}
    before = tip(forge)
    cases = [
        ("1", {**good, "style": "octopus"}, 400, "no way to merge"),
        ("1", {**good, "expected_base": "main"}, 400, "expected_base"),
        ("1", {"style": "merge"}, 400, "expected_base"),
        ("1", {**good, "expected_head": "z" * 40}, 400, "expected_head"),
        ("99", good, 404, ""),
        ("x1", good, 404, ""),
        ("99999999999999", good, 404, ""),
    ]
    for number, fields, status, words in cases:
        result = post_merge(ben, "ann/plans", number, **fields)
        assert result.status_code == status, (number, fields, result.text[:200])
        assert words in result.text
    assert post_merge(ben, "ann/plans", 1, csrf=None, **good).status_code == 403
    assert post_merge(ben, "ann/plans", 1, csrf="forged", **good).status_code == 403
    forge.pulls.set_features(
        "ann", "plans", Features(merge_styles=("rebase",), default_merge="rebase")
    )
    result = post_merge(ben, "ann/plans", 1, **good)
    assert result.status_code == 400 and "does not allow" in result.text
    assert tip(forge) == before
    issue = forge.issues.get("ann", "plans", 1, pull=True)
    assert issue.state == "open"


def test_a_stale_form_is_refused_and_nothing_moves(
    client: testing.TestClient, forge: Forge, tmp_path: Path
) -> None:
    work = fill(forge, tmp_path)
    pull = open_pull(forge)
    shown = expected(forge, pull)
    ben = person(client, "ben")
    git(work, "checkout", "-q", "main")
    commit(work, "Main again", n="n\n")
    git(work, "push", "-q", "origin", "main")
    moved = tip(forge)
    result = post_merge(ben, "ann/plans", 1, style="merge", **shown)
    assert result.status_code == 409 and "main has moved since this page was shown" in result.text
    assert tip(forge) == moved
    git(work, "checkout", "-q", "topic")
    commit(work, "Topic again", u="u\n")
    git(work, "push", "-q", "origin", "topic")  # not seen by floorless yet: the branch decides
    shown = {"expected_base": moved, "expected_head": pull.head_oid}
    result = post_merge(ben, "ann/plans", 1, style="merge", **shown)
    assert result.status_code == 409 and "topic has moved since this page was shown" in result.text
    assert tip(forge) == moved and not forge.pulls.get("ann", "plans", 1).merged
    forge.issues.close(pull.issue, forge.accounts.require("ann"), "completed")
    forge.maintenance.check_refs()
    settle(forge)
    now = forge.pulls.get("ann", "plans", 1)
    result = post_merge(ben, "ann/plans", 1, style="merge", **expected(forge, now))
    assert result.status_code == 409 and "closed" in result.text
    assert tip(forge) == moved


def test_merges_and_a_real_push_over_http_at_once_lose_nothing(
    forge: Forge, tmp_path: Path
) -> None:
    """Two merges through a real server's form and a ``git push`` through its HTTP transport,
    all at once, into one base: every commit ends up in it, and both are recorded merged."""
    work = fill(forge, tmp_path)
    git(work, "checkout", "-q", "-b", "other", "main")
    commit(work, "Other", o="o\n")
    git(work, "push", "-q", "origin", "other")
    forge.maintenance.check_refs()
    heads = {1: open_pull(forge).head_oid, 2: open_pull(forge, head="other").head_oid}
    start = tip(forge)
    path = forge.registry.get("ann", "plans").path
    forge.stop()
    with serving(tmp_path / "repos", tmp_path / "data") as server:
        token = server.admin("token", "create", "ann", "--scope", "write")
        host = server.url.removeprefix("http://")
        remote = f"http://ann:{token}@{host}/ann/plans.git"
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirect()
        )
        token_in = csrf_of(opener.open(f"{server.url}/-/login").read().decode())
        signin = urllib.parse.urlencode(
            {"csrf": token_in, "name": "ann", "password": PASSWORD}
        ).encode()
        with pytest.raises(urllib.error.HTTPError, match="303"):  # signed in, sent on
            opener.open(f"{server.url}/-/login", signin)
        csrf = csrf_of(opener.open(f"{server.url}/-/tokens").read().decode())
        git(work, "checkout", "-q", "main")
        pushed = commit(work, "Pushed at once", p="p\n")
        results: dict[str, object] = {}
        barrier = threading.Barrier(3)

        def merge(number: int) -> None:
            fields = {"csrf": csrf, "style": "merge", "expected_base": start,
                      "expected_head": heads[number]}  # fmt: skip
            barrier.wait()
            try:
                answer = opener.open(
                    f"{server.url}/ann/plans/pulls/{number}/merge",
                    urllib.parse.urlencode(fields).encode(),
                )
                results[f"merge {number}"] = answer.status
            except urllib.error.HTTPError as exc:
                text = exc.read().decode()
                stale = exc.code == 409 and "main has moved since this page was shown" in text
                results[f"merge {number}"] = exc.code if exc.code == 303 or stale else text

        def push() -> None:
            barrier.wait()
            for _ in range(10):  # a push that lost the race to a merge is refused: pull, retry
                done = subprocess.run(
                    ["git", "-C", str(work), "push", "-q", remote, "main"],
                    capture_output=True, check=False, env=git_env(),
                )  # fmt: skip
                results["push"] = done.returncode
                if done.returncode == 0:
                    return
                subprocess.run(
                    ["git", "-C", str(work), "pull", "-q", "--no-rebase", "--no-edit", remote,
                     "main"],
                    capture_output=True, check=True, env=git_env(),
                )  # fmt: skip

        threads = [threading.Thread(target=merge, args=(n,)) for n in (1, 2)]
        threads.append(threading.Thread(target=push))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # a merge whose form the push made stale (it landed first) is refused, and moves
        # nothing; a form showing the new base then merges
        assert results["push"] == 0 and 303 in (results["merge 1"], results["merge 2"]), results
        for number in (1, 2):
            assert results[f"merge {number}"] in (303, 409), results
            if results[f"merge {number}"] == 409:
                fields = {"csrf": csrf, "style": "merge", "expected_head": heads[number],
                          "expected_base": git_text(path, "rev-parse", "main")}  # fmt: skip
                with pytest.raises(urllib.error.HTTPError, match="303"):
                    opener.open(
                        f"{server.url}/ann/plans/pulls/{number}/merge",
                        urllib.parse.urlencode(fields).encode(),
                    )
        final = git_text(path, "rev-parse", "main")
        for commit_id in (heads[1], heads[2], pushed, start):
            git(path, "merge-base", "--is-ancestor", commit_id, final)
        git(path, "fsck", "--strict", "--no-dangling")
    checker = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        for n in (1, 2):
            assert checker.pulls.get("ann", "plans", n).merged
    finally:
        checker.stop()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def render_box(forge: Forge, pull: Pull, viewer: Viewer) -> str:
    repo = forge.registry.get("ann", "plans")
    level = forge.policy.level(viewer, repo)
    view = RepoView(forge, repo, forge.live.snapshot(repo), forge.live.open(repo), level)
    context = merge_box(forge, view, pull, viewer)
    return (
        Renderer("floorless")
        .env.get_template("_merge_box.html")
        .render(pull=pull, csrf="token", **context)
    )


def test_the_merge_box_says_what_the_check_found(forge: Forge, tmp_path: Path) -> None:
    work = fill(forge, tmp_path)
    ann = Viewer(forge.accounts.require("ann"), session="s")
    cat = Viewer(forge.accounts.require("cat"), session="s")
    pull = open_pull(forge)
    html = render_box(forge, pull, ann)
    assert "no conflicts" in html and 'action="/ann/plans/pulls/1/merge"' in html
    assert f'name="expected_base" value="{tip(forge)}"' in html
    assert f'name="expected_head" value="{pull.head_oid}"' in html
    options = re.findall(r'<option value="([^"]+)"( selected)?>', html)
    assert options == [("merge", " selected"), ("rebase", ""), ("squash", "")]  # no fast-forward
    assert 'name="delete_branch"' in html
    reader = render_box(forge, pull, cat)
    assert "no conflicts" in reader and "<form" not in reader
    forge.pulls.set_features(
        "ann", "plans", Features(merge_styles=("squash", "rebase"), default_merge="rebase")
    )
    options = re.findall(r'<option value="([^"]+)"( selected)?>', render_box(forge, pull, ann))
    assert options == [("squash", ""), ("rebase", " selected")]
    # a push to the base not checked yet: "checking", and the follower is asked
    git(work, "checkout", "-q", "main")
    commit(work, "Clash", t="mine\n", **{"d__<b>": "x\n"})
    git(work, "checkout", "-q", "topic")
    commit(work, "Clash too", **{"d__<b>": "y\n"})
    git(work, "push", "-q", "origin", "main", "topic")
    forge.merger.stop()  # the follower is away: nothing is checked
    forge.maintenance.check_refs()
    repo = forge.registry.get("ann", "plans")
    forge.merger.follow_head(forge.pulls.get("ann", "plans", 1), tip(forge, "topic"))
    html = render_box(forge, forge.pulls.get("ann", "plans", 1), ann)
    assert "Checking" in html and "<form" not in html
    forge.merger.follow(repo)
    html = render_box(forge, forge.pulls.get("ann", "plans", 1), ann)
    assert "conflicts that must be resolved" in html and "<form" not in html
    assert "<li><code>d/&lt;b&gt;</code></li>" in html and "<li><code>t</code></li>" in html
    # gone, then merged by a push
    git(work, "push", "-q", "origin", ":topic")
    forge.maintenance.check_refs()
    forge.merger.follow(repo)
    html = render_box(forge, forge.pulls.get("ann", "plans", 1), ann)
    assert "head branch is gone" in html
    git(work, "checkout", "-q", "main")
    git(work, "reset", "-q", "--hard", "topic")
    git(work, "push", "-q", "-f", "origin", "main")
    forge.maintenance.check_refs()
    forge.merger.follow(repo)
    merged = forge.pulls.get("ann", "plans", 1)
    assert merged.merged
    html = render_box(forge, merged, ann)
    assert "merged this by pushing as commit" in html
    assert f'href="/ann/plans/commit/{merged.merged_oid}"' in html


def test_unrelated_shows_and_cannot_merge(
    client: testing.TestClient, forge: Forge, tmp_path: Path
) -> None:
    work = fill(forge, tmp_path)
    git(work, "checkout", "-q", "--orphan", "alone")
    git(work, "rm", "-q", "-rf", ".")
    commit(work, "Alone", z="z\n")
    git(work, "push", "-q", "origin", "alone")
    forge.maintenance.check_refs()
    pull = open_pull(forge, head="alone")
    ann = Viewer(forge.accounts.require("ann"), session="s")
    html = render_box(forge, pull, ann)
    assert "share no history" in html and "<form" not in html
    ben = person(client, "ben")
    result = post_merge(ben, "ann/plans", 1, style="merge", **expected(forge, pull))
    assert result.status_code == 409 and "no history" in result.text
    wait_for(forge.merger.idle)


def test_the_pull_request_page_shows_the_box_and_its_form_merges(
    client: testing.TestClient, forge: Forge, tmp_path: Path
) -> None:
    """The conversation page carries the merge box; its own form, as the page wrote it,
    merges; the page spawns no process before or after."""
    from support.spawns import counting

    work = fill(forge, tmp_path)
    pull = open_pull(forge)
    ben, cat = person(client, "ben"), person(client, "cat")
    with counting() as events:
        page = ben.get("/ann/plans/pulls/1")
        seen = cat.get("/ann/plans/pulls/1")
        anonymous = client.simulate_get("/ann/plans/pulls/1")
    assert page.status_code == seen.status_code == anonymous.status_code == 200
    assert events == []
    assert 'id="merge-box"' in page.text and "no conflicts" in page.text
    assert 'action="/ann/plans/pulls/1/merge"' in page.text
    assert 'action="/ann/plans/pulls/1/merge"' not in seen.text and "no conflicts" in seen.text
    assert 'action="/ann/plans/pulls/1/merge"' not in anonymous.text
    form = page.text[page.text.index('action="/ann/plans/pulls/1/merge"') :]
    fields = dict(re.findall(r'name="(expected_base|expected_head)" value="([0-9a-f]{40})"', form))
    assert fields == {"expected_base": tip(forge), "expected_head": pull.head_oid}
    # a push to the base after the page was shown: its form is stale
    git(work, "checkout", "-q", "main")
    commit(work, "Meanwhile", w="w\n")
    git(work, "push", "-q", "origin", "main")
    forge.maintenance.check_refs()
    settle(forge)
    stale = ben.post("/ann/plans/pulls/1/merge", {"style": "merge", **fields}, csrf_of(form))
    assert stale.status_code == 409
    page = ben.get("/ann/plans/pulls/1")
    form = page.text[page.text.index('action="/ann/plans/pulls/1/merge"') :]
    fields = dict(re.findall(r'name="(expected_base|expected_head)" value="([0-9a-f]{40})"', form))
    assert fields["expected_base"] == tip(forge)
    result = ben.post("/ann/plans/pulls/1/merge", {"style": "merge", **fields}, csrf_of(form))
    assert result.status_code == 303
    with counting() as events:
        page = ben.get("/ann/plans/pulls/1")
    assert events == [] and page.status_code == 200
    merged = forge.pulls.get("ann", "plans", 1)
    assert "<b>ben</b> merged this as commit" in page.text
    assert f'href="/ann/plans/commit/{merged.merged_oid}"' in page.text
    assert 'action="/ann/plans/pulls/1/merge"' not in page.text
