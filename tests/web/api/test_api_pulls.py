"""Pull requests through the API, driven by pyforgejo (whose models validate every answer)
over an in-process WSGI transport, against branches pushed with git: open, list, read and
edit one; its commits, files, ``.diff`` and ``.patch`` against what git and the web answer;
merging in each way floorless has, checked with ``git log``; Forgejo's refusals (409, 422,
405); a private repository a missing one to others; no process started by a read."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyforgejo import PyforgejoApi
from pyforgejo.core.api_error import ApiError
from pyforgejo.types import CreatePullReviewComment
from support.accounts import PASSWORD
from support.api import BASE, api, error_of, token_for
from support.forges import start_forge, wait_for
from support.gitfixtures import _run, git, git_env, git_text
from support.merging import commit, push, settle, tip
from support.serving import serving
from support.spawns import counting

from floorless.collab.filters import IssueFilter
from floorless.collab.pulls import Features
from floorless.forge import Forge
from floorless.web.app import create_app

PULLS = "/api/v1/repos/ann/plans/pulls"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    forge.registry.create("ann", "plans")
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


@pytest.fixture
def work(forge: Forge, tmp_path: Path) -> Path:
    """A clone of ann/plans: ``main``, and ``topic`` two commits ahead of where ``main`` was
    before it moved on (no conflict), both pushed with git."""
    path = tmp_path / "work"
    _run(["init", "-q", "-b", "main", str(path)], cwd=tmp_path)
    git(path, "remote", "add", "origin", str(forge.registry.get("ann", "plans").path))
    lines = "".join(f"line {n}\n" for n in range(1, 21))
    commit(path, "Start", a=lines, b="b\n", c="c\n")
    git(path, "checkout", "-q", "-b", "topic")
    commit(path, "Topic one\n\nWhy one.", a=lines.replace("line 2\n", "line two\n"), d="d\n")
    commit(path, "Topic two", b="b, better\n", c=None)  # type: ignore[arg-type]
    git(path, "checkout", "-q", "main")
    commit(path, "Main moves", a=lines.replace("line 19\n", "line nineteen\n"), e="e\n")
    push(forge, path, "main", "topic")
    return path


def ben_account(forge: Forge):
    return forge.accounts.require("ben")


def bare(forge: Forge) -> Path:
    return forge.registry.get("ann", "plans").path


def branch_from(work: Path, forge: Forge, name: str, start: str, **files: str) -> str:
    """A new branch ``name`` from ``start`` with one commit of ``files``, pushed."""
    git(work, "checkout", "-q", "-b", name, start)
    made = commit(work, f"Change on {name}", **files)
    git(work, "checkout", "-q", "main")
    push(forge, work, name)
    return made


def opened(http: httpx.Client, token: str, head: str = "topic", title: str = "Topic") -> int:
    made = api(http, token).repository.repo_create_pull_request(
        "ann", "plans", head=head, base="main", title=title, body="Why: **because**."
    )
    assert made.number is not None
    return made.number


def test_open_list_read_and_edit_a_pull_request(
    forge: Forge, http: httpx.Client, work: Path
) -> None:
    token = token_for(http, "ann")
    client = api(http, token).repository
    made = client.repo_create_pull_request(
        "ann", "plans", head="topic", base="main", title="Topic", body="Why: **because**."
    )
    assert made.number == 1 and made.state == "open" and made.title == "Topic"
    assert made.head and made.head.ref == "topic" and made.head.sha == tip(forge, "topic")
    assert made.base and made.base.ref == "main" and made.base.sha == tip(forge, "main")
    assert made.base.repo and made.base.repo.full_name == "ann/plans"
    assert made.user and made.user.login == "ann"
    assert made.html_url == "http://forge.test/ann/plans/pulls/1"
    assert made.diff_url == "http://forge.test/ann/plans/pulls/1.diff"
    merge_base = git_text(bare(forge), "merge-base", "main", "topic")
    assert made.merge_base == merge_base
    numstat = git_text(bare(forge), "diff", "--numstat", merge_base, "topic").splitlines()
    assert made.changed_files == len(numstat) == 4
    assert made.additions == sum(int(line.split()[0]) for line in numstat)
    assert made.deletions == sum(int(line.split()[1]) for line in numstat)
    assert forge.pulls.get("ann", "plans", 1).head_oid == tip(forge, "topic")
    assert git_text(bare(forge), "rev-parse", "refs/pull/1/head") == tip(forge, "topic")
    settle(forge)
    got = client.repo_get_pull_request("ann", "plans", 1)
    assert got.mergeable is True and got.merged is False and got.merge_commit_sha is None

    # a second one of the same head into the same base: 409, as Forgejo
    again = http.post(
        PULLS,
        headers={"Authorization": f"token {token}"},
        json={"head": "topic", "base": "main", "title": "Again"},
    )
    assert again.status_code == 409 and "#1" in error_of(again)
    # a branch into itself, a branch that is not there, unrelated histories: 422
    git(work, "checkout", "-q", "--orphan", "alone")
    commit(work, "Alone", z="z\n")
    git(work, "checkout", "-q", "main")
    push(forge, work, "alone")
    for head in ("main", "nothing-here", "alone", "no:such:thing", "../x"):
        refused = http.post(
            PULLS,
            headers={"Authorization": f"token {token}"},
            json={"head": head, "base": "main", "title": "No"},
        )
        assert refused.status_code == 422, (head, refused.text)
        error_of(refused)
    assert (
        forge.pulls.listing("ann", "plans", IssueFilter("all", pull=True))[1] == 1
    )  # nothing else was written

    branch_from(work, forge, "second", "main", f="f\n")
    opened(http, token, "second", "Second")
    listed = http.get(PULLS, params={"limit": 1})
    assert listed.status_code == 200 and listed.headers["x-total-count"] == "2"
    assert 'rel="next"' in listed.headers["link"]
    assert [p.number for p in client.repo_list_pull_requests("ann", "plans")] == [2, 1]
    assert [p.number for p in client.repo_list_pull_requests("ann", "plans", sort="oldest")] == [
        1,
        2,
    ]
    assert client.repo_list_pull_requests("ann", "plans", poster="ben") == []

    edited = client.repo_edit_pull_request(
        "ann", "plans", 1, title="Topic, renamed", body="Better words."
    )
    assert edited.title == "Topic, renamed" and edited.body == "Better words."
    closed = client.repo_edit_pull_request("ann", "plans", 1, state="closed")
    assert closed.state == "closed" and closed.closed_at is not None and not closed.mergeable
    assert [p.number for p in client.repo_list_pull_requests("ann", "plans", state="closed")] == [1]
    assert [p.number for p in client.repo_list_pull_requests("ann", "plans")] == [2]
    reopened = client.repo_edit_pull_request("ann", "plans", 1, state="open")
    assert reopened.state == "open"
    kinds = [e.kind for e in forge.issues.timeline(forge.pulls.get("ann", "plans", 1).issue)]
    assert {"title", "closed", "reopened"} <= set(kinds)

    # labels and assignees as the issue's JSON shows them
    issue = forge.pulls.get("ann", "plans", 1).issue
    label = forge.triage.create_label("ann", "plans", "bug", "#ee0701")
    forge.triage.set_label(issue, forge.accounts.require("ann"), label.id, True)
    forge.triage.set_assignee(
        issue, forge.accounts.require("ann"), forge.accounts.require("ann"), True
    )
    shown = client.repo_get_pull_request("ann", "plans", 1)
    assert [(x.name, x.color) for x in shown.labels or []] == [("bug", "ee0701")]
    assert shown.assignee and shown.assignee.login == "ann"
    assert [
        p.number for p in client.repo_list_pull_requests("ann", "plans", labels=[label.id])
    ] == [1]
    # the OpenAPI description's PullRequest is what is answered, field for field
    document = http.get("/swagger.v1.json").json()
    answer = http.get(f"{PULLS}/1").json()
    assert set(document["definitions"]["PullRequest"]["properties"]) == set(answer)
    assert set(document["definitions"]["PRBranchInfo"]["properties"]) == set(answer["head"])

    by_branches = client.repo_get_pull_request_by_base_head("ann", "plans", "main", "topic")
    assert by_branches.number == 1
    with pytest.raises(ApiError) as missing:
        client.repo_get_pull_request("ann", "plans", 99)
    assert missing.value.status_code == 404


def test_commits_files_diff_and_patch_as_git_and_the_web_have_them(
    forge: Forge, http: httpx.Client, work: Path
) -> None:
    token = token_for(http, "ann")
    number = opened(http, token)
    client = api(http).repository
    settle(forge)
    merge_base = git_text(bare(forge), "merge-base", "main", "topic")
    expected = git_text(bare(forge), "rev-list", "--reverse", f"{merge_base}..topic").split()
    with counting() as events:
        commits = client.repo_get_pull_request_commits("ann", "plans", number)
        files = client.repo_get_pull_request_files("ann", "plans", number)
        diff = http.get(f"{PULLS}/{number}.diff")
        patch = http.get(f"{PULLS}/{number}.patch")
        one = http.get(f"{PULLS}/{number}")
        listed = http.get(PULLS)
    assert events == []  # no process for any read
    assert [c.sha for c in commits] == expected
    assert commits[0].commit and commits[0].commit.message == "Topic one\n\nWhy one.\n"
    status = git_text(bare(forge), "diff", "--name-status", merge_base, "topic").splitlines()
    names = {"A": "added", "M": "changed", "D": "deleted"}  # Forgejo says "changed"
    assert {f.filename: f.status for f in files} == {
        line.split("\t")[1]: names[line[0]] for line in status
    }
    numstat = git_text(bare(forge), "diff", "--numstat", merge_base, "topic").splitlines()
    assert {f.filename: (f.additions, f.deletions) for f in files} == {
        line.split("\t")[2]: (int(line.split("\t")[0]), int(line.split("\t")[1]))
        for line in numstat
    }
    assert diff.status_code == 200 and diff.headers["content-type"].startswith("text/plain")
    assert diff.content == http.get(f"/ann/plans/pulls/{number}.diff").content
    assert diff.content.startswith(b"diff --git a/a b/a")
    assert patch.status_code == 200
    assert patch.content == http.get(f"/ann/plans/pulls/{number}.patch").content
    assert patch.content.count(b"\nSubject: [PATCH") == 2
    assert one.status_code == 200 and listed.status_code == 200
    paged = http.get(f"{PULLS}/{number}/commits", params={"limit": 1, "page": 2})
    assert [c["sha"] for c in paged.json()] == expected[1:2]
    assert paged.headers["x-total-count"] == "2"
    assert http.get(f"{PULLS}/{number}.tar").status_code == 404
    assert http.get(f"{PULLS}/7/files").status_code == 404


def _merged(forge: Forge, http: httpx.Client, token: str, number: int, do: str, **more: object):
    return http.post(
        f"{PULLS}/{number}/merge",
        headers={"Authorization": f"token {token}"},
        json={"Do": do, **more},
    )


@pytest.mark.parametrize("style", ["merge", "rebase", "squash", "fast-forward-only"])
def test_each_way_of_merging_moves_the_base_as_git_sees_it(
    forge: Forge, http: httpx.Client, work: Path, style: str
) -> None:
    token = token_for(http, "ann")
    start = "main" if style == "fast-forward-only" else "main~1"
    head = branch_from(work, forge, "change", start, g="g\n")
    number = opened(http, token, "change", "Change")
    settle(forge)
    base = tip(forge, "main")
    client = api(http, token).repository
    with pytest.raises(ApiError) as not_yet:
        client.repo_pull_request_is_merged("ann", "plans", number)
    assert not_yet.value.status_code == 404
    client.repo_merge_pull_request(
        "ann",
        "plans",
        number,
        do=style,
        merge_title_field="Take the change",
        merge_message_field="All of it.",
        head_commit_id=head,
    )
    client.repo_pull_request_is_merged("ann", "plans", number)  # 204
    git(work, "fetch", "-q", "origin")
    now = git_text(work, "rev-parse", "origin/main")
    parents = git_text(work, "log", "-1", "--format=%P", now).split()
    message = git_text(work, "log", "-1", "--format=%B", now)
    if style == "merge":
        assert parents == [base, head] and message == "Take the change\n\nAll of it."
    elif style == "squash":
        assert parents == [base] and message == "Take the change\n\nAll of it."
        assert git_text(work, "show", "-s", "--format=%T", now) != git_text(
            work, "show", "-s", "--format=%T", base
        )
    elif style == "rebase":
        assert parents == [base] and message == "Change on change"
    else:
        assert now == head
    assert git_text(work, "show", f"{now}:g") == "g"
    got = client.repo_get_pull_request("ann", "plans", number)
    assert got.merged and got.merge_commit_sha == now and got.state == "closed"
    assert got.merged_by and got.merged_by.login == "ann" and got.merged_at is not None
    twice = _merged(forge, http, token, number, style)
    assert twice.status_code == 405 and "merged" in error_of(twice)
    assert tip(forge, "main") == now


def test_merge_refusals_write_nothing(forge: Forge, http: httpx.Client, work: Path) -> None:
    token = token_for(http, "ann")
    number = opened(http, token)
    settle(forge)
    base = tip(forge, "main")

    stale = _merged(forge, http, token, number, "merge", head_commit_id=tip(forge, "main"))
    assert stale.status_code == 409, stale.text
    error_of(stale)
    # the head moves after the caller looked: their head_commit_id is stale
    looked = tip(forge, "topic")
    git(work, "checkout", "-q", "topic")
    commit(work, "Topic three", h="h\n")
    git(work, "checkout", "-q", "main")
    push(forge, work, "topic")
    moved = _merged(forge, http, token, number, "merge", head_commit_id=looked)
    assert moved.status_code == 409
    assert tip(forge, "main") == base and not forge.pulls.get("ann", "plans", number).merged

    # the base moved too far for a fast-forward: 405, as Forgejo refuses a way it cannot take
    ff = _merged(forge, http, token, number, "fast-forward-only")
    assert ff.status_code == 405, ff.text
    # a way the repository does not allow: 405; one Forgejo does not know: 422
    forge.pulls.set_features("ann", "plans", Features(merge_styles=("merge",)))
    assert _merged(forge, http, token, number, "squash").status_code == 405
    assert _merged(forge, http, token, number, "rebase-merge").status_code == 405
    assert _merged(forge, http, token, number, "octopus").status_code == 422
    assert _merged(forge, http, token, number, 7).status_code == 422
    # a conflict: 405, naming the file
    branch_from(work, forge, "clash", "main~1", a="other\n")
    clash = opened(http, token, "clash", "Clash")
    settle(forge)
    conflicted = _merged(forge, http, token, clash, "merge")
    assert conflicted.status_code == 405
    assert "Conflicting files: a" in error_of(conflicted)
    # closed: 405
    api(http, token).repository.repo_edit_pull_request("ann", "plans", clash, state="closed")
    assert _merged(forge, http, token, clash, "merge").status_code == 405
    assert tip(forge, "main") == base
    assert forge.pulls.listing("ann", "plans", IssueFilter("all", pull=True))[1] == 2


def test_who_may_do_what(forge: Forge, http: httpx.Client, work: Path) -> None:
    token = token_for(http, "ann")
    number = opened(http, token)
    ben = token_for(http, "ben")
    reader = token_for(http, "ann", ["read:repository"])
    # a read token reads, and may not write
    assert http.get(PULLS, headers={"Authorization": f"token {reader}"}).status_code == 200
    refused = http.post(
        PULLS,
        headers={"Authorization": f"token {reader}"},
        json={"head": "topic", "base": "main", "title": "x"},
    )
    assert refused.status_code == 403
    assert _merged(forge, http, reader, number, "merge").status_code == 403
    # ben may read a public repository, not merge or edit another's pull request
    assert _merged(forge, http, ben, number, "merge").status_code == 403
    edit = http.patch(
        f"{PULLS}/{number}", headers={"Authorization": f"token {ben}"}, json={"title": "Mine"}
    )
    assert edit.status_code == 403
    anonymous = http.post(f"{PULLS}/{number}/merge", json={"Do": "merge"})
    assert anonymous.status_code == 401
    # private: a missing repository to ben and to anonymous callers, everywhere
    made_private = http.patch(
        "/api/v1/repos/ann/plans",
        headers={"Authorization": f"token {token}"},
        json={"private": True},
    )
    assert made_private.status_code == 200
    for path in (
        PULLS,
        f"{PULLS}/{number}",
        f"{PULLS}/{number}.diff",
        f"{PULLS}/{number}/commits",
        f"{PULLS}/{number}/files",
        f"{PULLS}/{number}/merge",
        f"{PULLS}/main/topic",
    ):
        for headers in ({"Authorization": f"token {ben}"}, {}):
            answer = http.get(path, headers=headers)
            assert answer.status_code == 404, (path, answer.status_code)
            assert error_of(answer) == error_of(
                http.get(path.replace("/plans/", "/nothing/").replace("/plans", "/nothing"))
            ), path
    assert _merged(forge, http, ben, number, "merge").status_code == 404
    assert tip(forge, "main") != tip(forge, "topic")
    assert http.get(PULLS, headers={"Authorization": f"token {token}"}).status_code == 200


def test_bad_input_is_a_clear_4xx(forge: Forge, http: httpx.Client, work: Path) -> None:
    token = token_for(http, "ann")
    number = opened(http, token)
    auth = {"Authorization": f"token {token}"}
    cases = [
        ("post", PULLS, b"{not json", 422),
        ("post", PULLS, b"[1, 2]", 422),
        ("post", PULLS, b'{"head": 1, "base": "main", "title": "x"}', 422),
        ("post", PULLS, b'{"head": "topic", "base": "main"}', 422),
        ("post", PULLS, b'{"head": "topic", "base": "main", "title": ""}', 422),
        ("post", PULLS, b'{"head": "topic\\u0000", "base": "main", "title": "x"}', 422),
        (
            "post",
            PULLS,
            b'{"head": "topic", "base": "main", "title": "x", "body": "' + b"a" * (2 << 20) + b'"}',
            413,
        ),
        ("patch", f"{PULLS}/{number}", b'{"state": "merged"}', 422),
        ("patch", f"{PULLS}/{number}", b'{"title": ["x"]}', 422),
        ("post", f"{PULLS}/{number}/merge", b"{}", 422),
        ("post", f"{PULLS}/{number}/merge", b"nope", 422),
        ("get", f"{PULLS}/abc", b"", 404),
        ("get", f"{PULLS}/99999999999", b"", 404),
        ("get", f"{PULLS}?state=everything", b"", 422),
        ("get", f"{PULLS}?milestone=x", b"", 422),
        ("get", f"{PULLS}?labels=x", b"", 422),
    ]
    for method, path, body, status in cases:
        answer = http.request(
            method.upper(),
            path,
            content=body,
            headers={**auth, "Content-Type": "application/json"},
        )
        assert answer.status_code == status, (method, path, body[:60], answer.text[:200])
        error_of(answer)
    html = http.post(
        PULLS,
        headers=auth,
        json={"head": "topic", "base": "main", "title": "<script>x</script>"},
    )
    assert html.status_code == 409  # already open; nothing else written
    assert forge.pulls.listing("ann", "plans", IssueFilter("all", pull=True))[1] == 1
    pull = forge.pulls.get("ann", "plans", number)
    assert pull.title == "Topic" and not pull.merged and pull.issue.state == "open"


def test_review_with_a_line_comment_then_approve(
    forge: Forge, http: httpx.Client, work: Path
) -> None:
    token = token_for(http, "ann")
    number = opened(http, token)
    ben_token = token_for(http, "ben")
    ben = api(http, ben_token).repository
    head = tip(forge, "topic")
    # a pending review with a line comment on the head's file "a", line 2
    pending = ben.repo_create_pull_review(
        "ann",
        "plans",
        number,
        event="PENDING",
        comments=[CreatePullReviewComment(path="a", body="Why *two*?", new_position=2)],
    )
    assert pending.state == "PENDING" and pending.comments_count == 1
    assert pending.user and pending.user.login == "ben" and pending.commit_id == head
    # another's pending review is no review to ann, nor is it in her list
    mine = api(http, token).repository
    assert mine.repo_list_pull_reviews("ann", "plans", number) == []
    with pytest.raises(ApiError) as hidden:
        mine.repo_get_pull_review("ann", "plans", number, pending.id or 0)
    assert hidden.value.status_code == 404
    comments = ben.repo_get_pull_review_comments("ann", "plans", number, pending.id or 0)
    assert len(comments) == 1
    assert comments[0].path == "a" and comments[0].position == 2
    assert comments[0].original_position == 0 and comments[0].commit_id == head
    assert comments[0].diff_hunk == "+line two"
    assert comments[0].user and comments[0].user.login == "ben"
    # submitted as an approval: one review event on the timeline
    approved = ben.repo_submit_pull_review(
        "ann", "plans", number, pending.id or 0, event="APPROVED", body="Fine by me."
    )
    assert approved.state == "APPROVED" and approved.body == "Fine by me."
    assert approved.official and approved.submitted_at is not None and not approved.stale
    listed = mine.repo_list_pull_reviews("ann", "plans", number)
    assert [(r.id, r.state) for r in listed] == [(pending.id, "APPROVED")]
    events = forge.issues.timeline(forge.pulls.get("ann", "plans", number).issue)
    assert [(e.kind, e.body) for e in events if e.kind == "review"] == [("review", "approve")]
    got = mine.repo_get_pull_request("ann", "plans", number)
    assert got.review_comments == 1
    # the author may only comment: an approval of her own is Forgejo's 422
    own = http.post(
        f"{PULLS}/{number}/reviews",
        headers={"Authorization": f"token {token}"},
        json={"event": "APPROVED", "body": "Mine is good"},
    )
    assert own.status_code == 422, own.text
    said = mine.repo_create_pull_review(
        "ann", "plans", number, event="COMMENT", body="Thanks.", commit_id=head
    )
    assert said.state == "COMMENT" and not said.official
    # a line the file has not, a file the pull request does not change, a stale commit: 422,
    # and nothing of the request is kept
    for bad in (
        {"event": "COMMENT", "comments": [{"path": "a", "body": "x", "new_position": 999}]},
        {"event": "COMMENT", "comments": [{"path": "zzz", "body": "x", "new_position": 1}]},
        {
            "event": "COMMENT",
            "comments": [
                {"path": "a", "body": "fine", "new_position": 1},
                {"path": "a", "body": "x", "new_position": 0},
            ],
        },
        {"event": "COMMENT", "body": "x", "commit_id": tip(forge, "main")},
        {"event": "MAYBE", "body": "x"},
        {"event": "COMMENT", "comments": "x"},
        {"event": "COMMENT", "comments": [{"path": "a", "body": "x", "new_position": True}]},
    ):
        refused = http.post(
            f"{PULLS}/{number}/reviews", headers={"Authorization": f"token {ben_token}"}, json=bad
        )
        assert refused.status_code == 422, (bad, refused.text)
        error_of(refused)
    found = forge.reviews.of_pull(forge.pulls.get("ann", "plans", number), ben_account(forge))
    assert len(found.comments) == 1 and found.pending(ben_account(forge).id) is None
    # a pending review deleted; a submitted one stays
    again = ben.repo_create_pull_review(
        "ann",
        "plans",
        number,
        comments=[CreatePullReviewComment(path="d", body="New file?", new_position=1)],
    )
    assert again.state == "PENDING"
    ben.repo_delete_pull_review("ann", "plans", number, again.id or 0)
    with pytest.raises(ApiError) as gone:
        ben.repo_get_pull_review("ann", "plans", number, again.id or 0)
    assert gone.value.status_code == 404
    kept = http.delete(
        f"{PULLS}/{number}/reviews/{approved.id}", headers={"Authorization": f"token {ben_token}"}
    )
    assert kept.status_code == 422
    # reads start no process; a reader with a read token may not review
    with counting() as spawned:
        assert http.get(f"{PULLS}/{number}/reviews").status_code == 200
        assert http.get(f"{PULLS}/{number}/reviews/{approved.id}/comments").status_code == 200
    assert spawned == []
    reader = token_for(http, "ben", ["read:repository"])
    assert (
        http.post(
            f"{PULLS}/{number}/reviews",
            headers={"Authorization": f"token {reader}"},
            json={"event": "COMMENT", "body": "x"},
        ).status_code
        == 403
    )
    document = http.get("/swagger.v1.json").json()
    answer = http.get(f"{PULLS}/{number}/reviews/{approved.id}").json()
    assert set(document["definitions"]["PullReview"]["properties"]) == set(answer)
    one = http.get(f"{PULLS}/{number}/reviews/{approved.id}/comments").json()[0]
    assert set(document["definitions"]["PullReviewComment"]["properties"]) == set(one)


@pytest.mark.network
def test_push_open_post_a_status_list_and_merge_against_a_real_server(tmp_path: Path) -> None:
    """The flow the issue names, against ``floorless serve``: push a branch with git over
    HTTP, open a pull request through the API, post a commit status (a required check of
    the base branch: the merge waits for it, 405, until it succeeds), list it, merge through
    the API, and fetch the merge with git."""
    with serving(tmp_path / "repos", tmp_path / "data") as server:
        server.admin(
            "user",
            "create",
            "ann",
            "--email",
            "ann@example.org",
            "--password-stdin",
            stdin=PASSWORD + "\n",
        )
        token = server.admin("token", "create", "ann", "--scope", "write")
        server.admin("repo", "create", "ann/plans")
        url = server.url.replace("http://", f"http://ann:{token}@") + "/ann/plans.git"
        clone = tmp_path / "clone"
        _run(["init", "-q", "-b", "main", str(clone)], cwd=tmp_path)
        git(clone, "remote", "add", "origin", url)
        commit(clone, "Start", a="a\n")
        git(clone, "push", "-q", "origin", "main")
        git(clone, "checkout", "-q", "-b", "topic")
        head = commit(clone, "Topic", b="b\n")
        git(clone, "push", "-q", "origin", "topic")
        with httpx.Client(base_url=server.url, timeout=60) as http_:
            client = PyforgejoApi(
                base_url=server.url + "/api/v1", api_key=token, httpx_client=http_
            ).repository
            made = client.repo_create_pull_request(
                "ann", "plans", head="topic", base="main", title="Topic"
            )
            assert made.number == 1 and made.head and made.head.sha == head
            listed = client.repo_list_pull_requests("ann", "plans", state="open")
            assert [p.number for p in listed] == [1]
            wait_for(lambda: client.repo_get_pull_request("ann", "plans", 1).mergeable)
            client.repo_create_branch_protection(
                "ann", "plans", rule_name="main", enable_status_check=True,
                status_check_contexts=["ci/build"],
            )  # fmt: skip
            client.repo_create_status("ann", "plans", head, state="pending", context="ci/build")
            with pytest.raises(ApiError) as waits:
                client.repo_merge_pull_request("ann", "plans", 1, do="merge")
            assert waits.value.status_code == 405 and "ci/build (pending)" in str(waits.value.body)
            client.repo_create_status(
                "ann", "plans", head, state="success", context="ci/build",
                target_url="https://ci.example/1", description="built",
            )  # fmt: skip
            listed_statuses = client.repo_list_statuses("ann", "plans", head)
            assert [(x.context, x.status) for x in listed_statuses] == [
                ("ci/build", "success"), ("ci/build", "pending")
            ]  # fmt: skip
            combined = client.repo_get_combined_status_by_ref("ann", "plans", "topic")
            assert combined.state == "success" and combined.sha == head
            client.repo_merge_pull_request("ann", "plans", 1, do="merge", head_commit_id=head)
            assert client.repo_get_pull_request("ann", "plans", 1).merged
        subprocess.run(["git", "fetch", "-q", "origin"], cwd=clone, check=True, env=git_env())
        assert git_text(clone, "log", "-1", "--format=%P", "origin/main").split()[1] == head
        assert git_text(clone, "log", "-1", "--format=%s", "origin/main") == (
            "Merge pull request 'Topic' (#1) from topic into main"
        )


def test_labels_milestone_and_assignees_when_opening_and_editing(
    forge: Forge, http: httpx.Client, work: Path
) -> None:
    token = token_for(http, "ann")
    auth = {"Authorization": f"token {token}"}
    bug = forge.triage.create_label("ann", "plans", "bug", "#ee0701")
    docs = forge.triage.create_label("ann", "plans", "docs", "#0000ee")
    due = forge.triage.save_milestone("ann", "plans", None, "v1", "", "")
    # an unknown label, milestone or assignee: 422, and no pull request is opened
    for wrong in ({"labels": [999]}, {"milestone": 999}, {"assignees": ["nobody"]}):
        refused = http.post(
            PULLS, headers=auth, json={"head": "topic", "base": "main", "title": "T", **wrong}
        )
        assert refused.status_code == 422, (wrong, refused.text)
    assert forge.pulls.listing("ann", "plans", IssueFilter("all", pull=True))[1] == 0
    client = api(http, token).repository
    made = client.repo_create_pull_request(
        "ann",
        "plans",
        head="topic",
        base="main",
        title="Topic",
        labels=[bug.id],
        milestone=due,
        assignees=["ann"],
    )
    assert [label.name for label in made.labels or []] == ["bug"]
    assert made.milestone and made.milestone.title == "v1"
    assert [a.login for a in made.assignees or []] == ["ann"]
    assert [p.number for p in client.repo_list_pull_requests("ann", "plans", milestone=due)] == [1]
    edited = client.repo_edit_pull_request("ann", "plans", 1, labels=[docs.id], milestone=0)
    assert [label.name for label in edited.labels or []] == ["docs"]  # replaced, as Forgejo
    assert edited.milestone is None and [a.login for a in edited.assignees or []] == ["ann"]
    kinds = [e.kind for e in forge.issues.timeline(forge.pulls.get("ann", "plans", 1).issue)]
    assert kinds.count("label") == 3
    # from one who may not label, they are ignored (as Forgejo ignores them)
    ben = token_for(http, "ben")
    branch_from(work, forge, "bens", "main", b="ben's\n")
    theirs = api(http, ben).repository.repo_create_pull_request(
        "ann", "plans", head="bens", base="main", title="Ben's", labels=[bug.id]
    )
    assert theirs.labels == [] and theirs.user and theirs.user.login == "ben"


def test_the_base_branch_changed_by_an_edit(forge: Forge, http: httpx.Client, work: Path) -> None:
    token = token_for(http, "ann")
    auth = {"Authorization": f"token {token}"}
    number = opened(http, token)
    git(work, "branch", "next", "main~1")
    push(forge, work, "next")
    client = api(http, token).repository
    for base, status in (("nothing", 404), ("topic", 422), ("../x", 422)):
        refused = http.patch(f"{PULLS}/{number}", headers=auth, json={"base": base, "title": "X"})
        assert refused.status_code == status, (base, refused.text)
    assert forge.pulls.get("ann", "plans", number).title == "Topic"  # nothing written
    before = http.get(f"/ann/plans/pulls/{number}")  # kept by the page cache, if it may
    assert before.status_code == 200 and "changed the base branch" not in before.text
    told: list[str] = []  # what webhooks hear of it: Forgejo's pull_request "edited"
    forge.issues.on_change.append(lambda change: told.append(change.action))
    moved = client.repo_edit_pull_request("ann", "plans", number, base="next")
    assert told == ["edited"]
    assert moved.base and moved.base.ref == "next" and moved.base.sha == tip(forge, "next")
    settle(forge)
    checked = client.repo_get_pull_request("ann", "plans", number)
    assert checked.mergeable is True
    assert checked.merge_base == git_text(bare(forge), "merge-base", "next", "topic")
    entries = forge.issues.timeline(forge.pulls.get("ann", "plans", number).issue)
    assert [(e.old_value, e.body) for e in entries if e.kind == "base_changed"] == [
        ("main", "next")
    ]
    page = http.get(f"/ann/plans/pulls/{number}")
    assert "changed the base branch from" in page.text
    timeline = http.get(f"/api/v1/repos/ann/plans/issues/{number}/timeline").json()
    changed = [t for t in timeline if t["type"] == "change_target_branch"]
    assert [(t["old_ref"], t["new_ref"]) for t in changed] == [("main", "next")]
    # another of the same head into main, then back to main: 409
    second = opened(http, token, "topic", "Again into main")
    back = http.patch(f"{PULLS}/{number}", headers=auth, json={"base": "main"})
    assert back.status_code == 409
    client.repo_merge_pull_request("ann", "plans", number, do="merge")
    assert git_text(bare(forge), "rev-parse", "next^2") == tip(forge, "topic")
    merged = http.patch(f"{PULLS}/{number}", headers=auth, json={"base": "main"})
    assert merged.status_code == 409
    assert forge.pulls.get("ann", "plans", second).base_branch == "main"


def test_a_pull_request_from_a_fork(forge: Forge, http: httpx.Client, work: Path) -> None:
    parent = forge.registry.get("ann", "plans")
    fork = forge.lifecycle.fork(parent, "ben", "plans")
    forge.moves.refs_moved(fork)
    git(work, "remote", "add", "fork", str(fork.path))
    git(work, "checkout", "-q", "-b", "idea", "main")
    idea = commit(work, "Ben's idea", i="idea\n")
    git(work, "checkout", "-q", "main")
    git(work, "push", "-q", "fork", "idea")
    forge.maintenance.check_refs()
    settle(forge)
    ben = token_for(http, "ben")
    made = api(http, ben).repository.repo_create_pull_request(
        "ann", "plans", head="ben:idea", base="main", title="An idea"
    )
    assert made.head and made.head.label == "ben:idea" and made.head.ref == "idea"
    assert made.head.sha == idea and made.head.repo and made.head.repo.full_name == "ben/plans"
    assert made.base and made.base.repo and made.base.repo.full_name == "ann/plans"
    # its head is kept in the base repository, whatever happens to the fork
    assert git_text(bare(forge), "rev-parse", f"refs/pull/{made.number}/head") == idea
    files = api(http).repository.repo_get_pull_request_files("ann", "plans", made.number or 0)
    assert [(f.filename, f.status) for f in files] == [("i", "added")]
    # a fork that is not there, or a branch the fork has not: 422
    for head in ("cat:idea", "ben:nothing"):
        refused = http.post(
            PULLS,
            headers={"Authorization": f"token {ben}"},
            json={"head": head, "base": "main", "title": "No"},
        )
        assert refused.status_code == 422, (head, refused.text)
    settle(forge)
    api(http, token_for(http, "ann")).repository.repo_merge_pull_request(
        "ann", "plans", made.number or 0, do="squash"
    )
    assert git_text(bare(forge), "show", "main:i") == "idea"


def test_a_page_of_pull_requests_costs_the_same_statements_whatever_its_length(
    forge: Forge, http: httpx.Client, work: Path
) -> None:
    token = token_for(http, "ann")
    bug = forge.triage.create_label("ann", "plans", "bug", "#ee0701")
    for n in range(12):
        branch_from(work, forge, f"b{n}", "main", **{f"f{n}": f"{n}\n"})
        number = opened(http, token, f"b{n}", f"Change {n}")
        issue = forge.pulls.get("ann", "plans", number).issue
        forge.triage.set_label(issue, forge.accounts.require("ann"), bug.id, True)
    settle(forge)
    headers = {"Authorization": f"token {token}"}

    def statements(limit: int) -> int:
        counts = set()
        for _ in range(3):
            answer = http.get(PULLS, params={"limit": limit}, headers=headers)
            assert len(answer.json()) == limit
            timing = dict(
                (part.split(";")[0].strip(), part)
                for part in answer.headers["server-timing"].split(",")
            )
            counts.add(int(timing["query"].rsplit("dur=", 1)[1]))
        return min(counts)

    assert statements(2) == statements(12)
