"""Commit statuses and required checks: the API in Forgejo's shapes (driven by pyforgejo, whose
models validate every answer), the marks pages show beside commits (through the page cache,
in a bounded number of statements, with no process), and branch protection holding a merge
until its required contexts succeed, on the web and in ``merging.py``."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import support.statuses
from falcon import testing
from pyforgejo.core.api_error import ApiError
from pyforgejo.types import BranchProtection, CombinedStatus, CommitStatus
from support.accounts import csrf_of
from support.api import BASE, api, error_of, token_for
from support.forges import wait_indexed
from support.gitfixtures import git, git_text
from support.mergeweb import fill, open_pull, person, post_merge, tip
from support.merging import commit
from support.queries import statements
from support.spawns import counting

from floorless.collab.protections import DisallowedToMerge, _compile
from floorless.forge import Forge
from floorless.web.app import create_app

# the shared fixtures this module's tests ask for
client = support.statuses.client
forge = support.statuses.forge
http = support.statuses.http

API = "/api/v1/repos"
CI = "https://ci.example.org/build/1"








def rows(forge: Forge) -> int:
    found = forge.db.one("SELECT COUNT(*) AS n FROM commit_statuses")
    assert found is not None
    return int(found["n"])


def test_post_list_and_combine_in_forgejo_shapes(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    repo = forge.registry.get("ann", "plans")
    git(repo.path, "tag", "v1", "main")
    forge.moves.refs_moved(repo)
    sha = tip(forge)
    ben = api(http, token_for(http, "ben")).repository
    made = ben.repo_create_status(
        "ann", "plans", sha, state="success", context="ci/build", target_url=CI,
        description="Built",
    )  # fmt: skip
    assert isinstance(made, CommitStatus)
    assert (made.status, made.context, made.target_url, made.description) == (
        "success", "ci/build", CI, "Built",
    )  # fmt: skip
    assert made.creator is not None and made.creator.login == "ben"
    assert made.url == f"{BASE}{API}/ann/plans/statuses/{sha}"
    ben.repo_create_status("ann", "plans", sha, state="pending", context="ci/lint")
    # by a short id: the full one is kept
    ben.repo_create_status("ann", "plans", sha[:10], state="failure", context="ci/build")

    listed = ben.repo_list_statuses("ann", "plans", sha)
    assert [(s.context, s.status) for s in listed] == [
        ("ci/build", "failure"),
        ("ci/lint", "pending"),
        ("ci/build", "success"),
    ]  # fmt: skip  newest first, as Forgejo
    oldest = ben.repo_list_statuses("ann", "plans", sha, sort="oldest")
    assert [s.status for s in oldest] == ["success", "pending", "failure"]
    assert [s.status for s in ben.repo_list_statuses("ann", "plans", sha, state="pending")] == [
        "pending"
    ]
    by_ref = ben.repo_list_statuses_by_ref("ann", "plans", "main")
    assert [s.id for s in by_ref] == [s.id for s in listed]
    answer = http.get(f"{API}/ann/plans/statuses/{sha}", params={"limit": 1, "page": 2})
    assert answer.headers["x-total-count"] == "3" and 'rel="next"' in answer.headers["link"]
    assert [s["status"] for s in answer.json()] == ["pending"]

    for ref in ("main", "v1", sha, sha[:8]):
        combined = ben.repo_get_combined_status_by_ref("ann", "plans", ref)
        assert isinstance(combined, CombinedStatus)
        # the latest of each context; the worst of them
        assert (combined.state, combined.sha, combined.total_count) == ("failure", sha, 2), ref
        assert sorted((s.context, s.status) for s in combined.statuses or []) == [
            ("ci/build", "failure"), ("ci/lint", "pending"),
        ]  # fmt: skip
        assert combined.repository is not None and combined.repository.full_name == "ann/plans"
    # a commit with no status: Forgejo's empty CombinedStatus
    other = tip(forge, "topic")
    empty = ben.repo_get_combined_status_by_ref("ann", "plans", other)
    assert (empty.state, empty.total_count, empty.statuses) == ("", 0, None)
    assert ben.repo_list_statuses("ann", "plans", other) == []
    # a branch with a slash in its name
    git(repo.path, "branch", "release/1", "main")
    forge.moves.refs_moved(repo)
    answer = http.get(f"{API}/ann/plans/commits/release/1/status")
    assert answer.status_code == 200 and answer.json()["state"] == "failure"
    assert len(http.get(f"{API}/ann/plans/commits/release/1/statuses").json()) == 3
    assert http.get(f"{API}/ann/plans/commits/nothing/status").status_code == 404


def test_who_may_post_and_what_is_refused(forge: Forge, http: httpx.Client, tmp_path: Path) -> None:
    fill(forge, tmp_path)
    fill(forge, tmp_path, "secret")
    sha = tip(forge)
    secret_sha = tip(forge, name="secret")
    url = f"{API}/ann/plans/statuses/{sha}"
    body = {"state": "success", "context": "ci"}

    def post(token: str, where: str = url, data: object = body) -> httpx.Response:
        headers = {"Authorization": f"token {token}"} if token else {}
        return http.post(where, json=data, headers=headers)

    assert post("").status_code == 401
    reader = token_for(http, "cat")
    assert post(reader).status_code == 403  # may read, not push
    read_only = token_for(http, "ann", ["read:repository"])
    assert post(read_only).status_code == 403
    dan = token_for(http, "dan")
    ben = token_for(http, "ben")
    # a private repository: as missing, to whoever may not read it, reading or writing
    secret = f"{API}/ann/secret/statuses/{secret_sha}"
    missing = f"{API}/ann/nothing/statuses/{secret_sha}"
    for where in (secret, missing):
        assert post(ben, where).status_code == 404
        answer = http.get(where, headers={"Authorization": f"token {ben}"})
        assert answer.status_code == 404 and error_of(answer)
        assert http.get(where.replace("statuses/", "commits/") + "/status").status_code == 404
    assert post(dan, secret).status_code == 403  # dan may read it: a reader is refused
    assert http.get(secret, headers={"Authorization": f"token {dan}"}).status_code == 200

    ann = token_for(http, "ann")
    for data, status in [
        ({"state": "fine"}, 422),
        ({"context": "ci"}, 422),
        ({"state": 1}, 422),
        ({"state": "success", "target_url": "javascript:alert(1)"}, 422),
        ({"state": "success", "target_url": "ftp://example.org/x"}, 422),
        ({"state": "success", "target_url": "https://example.org/\nx"}, 422),
        ({"state": "success", "context": ["ci"]}, 422),
        ({"state": "success", "context": "x" * 300}, 422),
        ("not an object", 422),
    ]:
        answer = post(ann, url, data)
        assert answer.status_code == status, (data, answer.text)
        assert error_of(answer)
    answer = http.post(url, content=b"{not json", headers={"Authorization": f"token {ann}"})
    assert answer.status_code == 422
    unknown = f"{API}/ann/plans/statuses/{'0' * 40}"
    assert post(ann, unknown).status_code == 404  # no such commit here
    assert post(ann, f"{API}/ann/plans/statuses/nothing").status_code == 404
    answer = http.get(url, params={"state": "fine"})
    assert answer.status_code == 422
    assert rows(forge) == 0  # nothing written on any refusal
    # HTML in a description is kept as text, and shown inert
    made = post(ann, url, {"state": "error", "context": "<b>x</b>", "description": "<script>"})
    assert made.status_code == 201 and made.json()["description"] == "<script>"
    wait_indexed(forge)
    page = testing.TestClient(create_app(forge)).simulate_get("/ann/plans/commits/branch/main")
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text


def test_marks_on_the_commits_list_and_commit_page_through_the_cache(
    forge: Forge, http: httpx.Client, client: testing.TestClient, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    wait_indexed(forge)
    sha = tip(forge)
    ben = api(http, token_for(http, "ben")).repository
    cat = person(client, "cat")
    urls = ("/ann/plans/commits/branch/main", f"/ann/plans/commit/{sha}")
    for url in urls:
        for _ in range(2):  # rendered, then served from the cache
            page = cat.get(url)
            assert page.status_code == 200 and "status-mark" not in page.text
    ben.repo_create_status("ann", "plans", sha, state="success", context="ci/build", target_url=CI)
    for url in urls:
        with counting() as events:
            page = cat.get(url)
            again = cat.get(url)
        assert events == []
        assert page.text == again.text
        assert f'<a class="status-mark status-success" href="{CI}"' in page.text, url
        assert 'aria-label="All checks succeeded: 1 status"' in page.text
        assert 'title="ci/build: success"' in page.text
    # a second context, failing: the mark says so, and lists both
    ben.repo_create_status(
        "ann", "plans", sha, state="failure", context="ci/test", description="2 failed"
    )
    for url in urls:
        page = cat.get(url)
        assert '<details class="status-mark status-failure">' in page.text, url
        assert 'aria-label="Some checks failed: 2 statuses"' in page.text
        assert "ci/test: failure — 2 failed" in page.text
    # only the commit that has statuses is marked in the list
    listing = cat.get(urls[0]).text
    assert listing.count('<details class="status-mark') == 1


def test_the_commits_page_reads_statuses_in_one_statement(
    forge: Forge, http: httpx.Client, client: testing.TestClient, tmp_path: Path
) -> None:
    """A page of 2 commits and one of 29, each with statuses: the same statements."""
    work = fill(forge, tmp_path)
    wait_indexed(forge)
    token = token_for(http, "ben")
    ben = api(http, token).repository
    cat = person(client, "cat")

    def mark_all() -> None:
        shas = git_text(work, "rev-list", "main").split()
        for sha in shas:
            for context in ("a", "b"):
                ben.repo_create_status("ann", "plans", sha, state="success", context=context)

    url = "/ann/plans/commits/branch/main"
    for _ in range(2):  # what every page reads, remembered (PostgreSQL)
        cat.get(url)
    mark_all()
    first = cat.get(url)  # rendered again: its statuses changed
    assert first.text.count('<details class="status-mark status-success"') == 2
    few = statements(first)
    for n in range(27):
        commit(work, f"More {n}", **{f"f{n}": "x\n"})
    git(work, "push", "-q", "origin", "main")
    forge.maintenance.check_refs()
    wait_indexed(forge)
    for _ in range(2):
        cat.get(url)
    mark_all()
    page = cat.get(url)
    assert page.text.count('<details class="status-mark status-success"') == 29
    assert statements(page) == few


def test_a_repository_without_statuses_is_asked_for_none(
    forge: Forge, http: httpx.Client, client: testing.TestClient, tmp_path: Path
) -> None:
    """A commit page of a repository no CI reports to makes one statement fewer than one
    whose repository has a status: whether it has any is remembered, and asked again once
    one is posted."""
    work = fill(forge, tmp_path)
    wait_indexed(forge)
    start, main, topic = (git_text(work, "rev-parse", ref) for ref in ("main~1", "main", "topic"))
    cat = person(client, "cat")
    for _ in range(2):  # what every page reads, remembered
        assert cat.get(f"/ann/plans/commit/{start}").status_code == 200
    bare = cat.get(f"/ann/plans/commit/{main}")
    assert bare.status_code == 200 and "status-mark" not in bare.text
    api(http, token_for(http, "ben")).repository.repo_create_status(
        "ann", "plans", topic, state="failure", context="ci"
    )
    marked = cat.get(f"/ann/plans/commit/{topic}")
    assert 'class="status-mark status-failure"' in marked.text
    assert statements(marked) == statements(bare) + 2  # whether it has any, and which
    again = cat.get(f"/ann/plans/commit/{main}?style=split")  # not kept: rendered again
    assert statements(again) == statements(bare) + 1


def test_required_checks_hold_a_merge_until_they_succeed(
    forge: Forge, http: httpx.Client, client: testing.TestClient, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    pull = open_pull(forge)
    ann = api(http, token_for(http, "ann")).repository
    ci = api(http, token_for(http, "ben")).repository
    rule = ann.repo_create_branch_protection(
        "ann", "plans", rule_name="main", enable_status_check=True,
        status_check_contexts=["ci/*", "lint"],
    )  # fmt: skip
    assert isinstance(rule, BranchProtection) and rule.status_check_contexts == ["ci/*", "lint"]
    ben = person(client, "ben")
    page = ben.get("/ann/plans/pulls/1")
    assert "Merging waits for the required checks" in page.text
    assert 'action="/ann/plans/pulls/1/merge"' not in page.text  # no form while they fail
    assert "expected: no status yet" in page.text
    refused = post_merge(ben, "ann/plans", 1, style="merge", expected_base=tip(forge),
                         expected_head=pull.head_oid)  # fmt: skip
    assert refused.status_code == 405 and "ci/* (pending)" in refused.text

    head = pull.head_oid
    ci.repo_create_status("ann", "plans", head, state="success", context="ci/build")
    ci.repo_create_status("ann", "plans", head, state="warning", context="lint")
    # warning is no success, as Forgejo has it; nor may a writer force the merge
    refused = post_merge(ben, "ann/plans", 1, style="merge", force="on",
                         expected_base=tip(forge), expected_head=head)  # fmt: skip
    assert refused.status_code == 405 and "lint (warning)" in refused.text
    assert "ci/*" not in refused.text.split("successful")[1]  # only what fails is named
    with pytest.raises(DisallowedToMerge):
        forge.merger.merge(
            forge.registry.get("ann", "plans"), pull, forge.accounts.require("ben"), "merge"
        )
    ci.repo_create_status("ann", "plans", head, state="failure", context="ci/test")
    ci.repo_create_status("ann", "plans", head, state="success", context="lint")
    with counting() as events:
        page = ben.get("/ann/plans/pulls/1")
        listed = ben.get("/ann/plans/pulls")
    assert "Merging waits" in page.text and "ci/test" in page.text
    assert '<details class="status-mark status-failure">' in page.text  # the head's mark
    assert events == [] and '<details class="status-mark status-failure">' in listed.text
    ci.repo_create_status("ann", "plans", head, state="success", context="ci/test")
    page = ben.get("/ann/plans/pulls/1")
    assert "required checks of" in page.text and "succeeded" in page.text
    form = page.text[page.text.index('action="/ann/plans/pulls/1/merge"') :]
    fields = dict(re.findall(r'name="(expected_base|expected_head)" value="([0-9a-f]{40})"', form))
    done = ben.post("/ann/plans/pulls/1/merge", {"style": "merge", **fields}, csrf_of(form))
    assert done.status_code == 303, done.text[:300]
    assert forge.pulls.get("ann", "plans", 1).merged


def test_an_administrator_may_force_unless_the_rule_applies_to_them(
    forge: Forge, http: httpx.Client, client: testing.TestClient, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    pull = open_pull(forge)
    ann_api = api(http, token_for(http, "ann")).repository
    ann_api.repo_create_branch_protection(
        "ann", "plans", rule_name="ma*", enable_status_check=True, apply_to_admins=True
    )
    ann = person(client, "ann")
    page = ann.get("/ann/plans/pulls/1")
    assert "every status" in page.text and 'name="force"' not in page.text
    fields = {"expected_base": tip(forge), "expected_head": pull.head_oid}
    refused = post_merge(ann, "ann/plans", 1, style="merge", force="on", **fields)
    assert refused.status_code == 405
    ann_api.repo_edit_branch_protection("ann", "plans", "ma*", apply_to_admins=False)
    page = ann.get("/ann/plans/pulls/1")
    assert 'name="force"' in page.text  # the form, with the box to say so
    refused = post_merge(ann, "ann/plans", 1, style="merge", **fields)
    assert refused.status_code == 405  # not without asking
    forced = post_merge(ann, "ann/plans", 1, style="merge", force="on", **fields)
    assert forced.status_code == 303
    assert forge.pulls.get("ann", "plans", 1).merged


def test_the_api_merge_waits_for_the_required_checks_too(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    pull = open_pull(forge)
    owner = api(http, token_for(http, "ann")).repository
    writer = api(http, token_for(http, "ben")).repository
    owner.repo_create_branch_protection(
        "ann", "plans", rule_name="main", enable_status_check=True,
        status_check_contexts=["ci/build"],
    )  # fmt: skip
    before = tip(forge)
    for client, force in ((writer, False), (writer, True)):
        with pytest.raises(ApiError) as refused:
            client.repo_merge_pull_request("ann", "plans", 1, do="merge", force_merge=force)
        assert refused.value.status_code == 405
        assert "ci/build (pending)" in str(refused.value.body)
    assert tip(forge) == before and not forge.pulls.get("ann", "plans", 1).merged
    writer.repo_create_status("ann", "plans", pull.head_oid, state="success", context="ci/build")
    writer.repo_merge_pull_request("ann", "plans", 1, do="merge")
    assert forge.pulls.get("ann", "plans", 1).merged and tip(forge) != before


def test_branch_protections_through_the_api(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    ann = api(http, token_for(http, "ann")).repository
    made = ann.repo_create_branch_protection(
        "ann", "plans", branch_name="release/*", enable_status_check=True,
        status_check_contexts=["ci/build", " ", "ci/build"],
    )  # fmt: skip
    assert (made.rule_name, made.branch_name, made.status_check_contexts) == (
        "release/*", "release/*", ["ci/build"],
    )  # fmt: skip
    with pytest.raises(ApiError) as exists:
        ann.repo_create_branch_protection("ann", "plans", rule_name="release/*")
    assert exists.value.status_code == 403
    assert [r.rule_name for r in ann.repo_list_branch_protection("ann", "plans")] == ["release/*"]
    got = ann.repo_get_branch_protection("ann", "plans", "release/*")
    assert got.enable_status_check is True and got.apply_to_admins is False
    edited = ann.repo_edit_branch_protection(
        "ann", "plans", "release/*", status_check_contexts=["ci/{build,test}"]
    )
    assert edited.status_check_contexts == ["ci/{build,test}"] and edited.enable_status_check
    repo = forge.registry.get("ann", "plans")
    rule = forge.protections.for_branch(repo, "release/1")
    assert rule is not None and forge.protections.for_branch(repo, "release/1/x") is None
    assert forge.protections.for_branch(repo, "main") is None
    fill(forge, tmp_path)
    git(repo.path, "branch", "release/1", "main")
    forge.moves.refs_moved(repo)
    branch = ann.repo_get_branch("ann", "plans", "release/1")
    assert (branch.protected, branch.effective_branch_protection_name) == (True, "release/*")
    assert branch.enable_status_check and branch.status_check_contexts == ["ci/{build,test}"]
    assert ann.repo_get_branch("ann", "plans", "main").protected is False

    headers = {"Authorization": f"token {token_for(http, 'ben')}"}  # may push, not administer
    assert http.get(f"{API}/ann/plans/branch_protections", headers=headers).status_code == 403
    answer = http.post(
        f"{API}/ann/plans/branch_protections", headers=headers, json={"rule_name": "x"}
    )
    assert answer.status_code == 403
    assert http.get(f"{API}/ann/plans/branch_protections").status_code == 401
    dan = {"Authorization": f"token {token_for(http, 'dan')}"}
    assert http.get(f"{API}/ann/secret/branch_protections", headers=dan).status_code == 403
    assert http.get(f"{API}/ann/secret/branch_protections", headers=headers).status_code == 404
    own = {"Authorization": f"token {token_for(http, 'ann')}"}
    for data in ({"rule_name": ""}, {"rule_name": "a b"}, {"rule_name": "[x"},
                 {"rule_name": "x", "status_check_contexts": "ci"},
                 {"rule_name": "x", "enable_status_check": "yes"}):  # fmt: skip
        answer = http.post(f"{API}/ann/plans/branch_protections", headers=own, json=data)
        assert answer.status_code == 422, (data, answer.text)
    assert http.get(f"{API}/ann/plans/branch_protections/nothing", headers=own).status_code == 404
    ann.repo_delete_branch_protection("ann", "plans", "release/*")
    assert ann.repo_list_branch_protection("ann", "plans") == []


def test_the_settings_page_sets_the_required_checks(
    forge: Forge, client: testing.TestClient
) -> None:
    ann, ben = person(client, "ann"), person(client, "ben")
    page = ann.get("/ann/plans/settings")
    assert 'id="protection"' in page.text
    made = ann.post(
        "/ann/plans/settings",
        {"action": "protect", "rule": "main", "enable_status_check": "on",
         "contexts": "ci/build\r\nci/test\r\n"},
        csrf_of(page.text),
    )  # fmt: skip
    assert made.status_code == 303, made.text[:300]
    repo = forge.registry.get("ann", "plans")
    rule = forge.protections.get(repo, "main")
    assert rule.enable_status_check and rule.status_check_contexts == ("ci/build", "ci/test")
    page = ann.get("/ann/plans/settings")
    assert "ci/build\nci/test</textarea>" in page.text
    changed = ann.post(
        "/ann/plans/settings", {"action": "protect", "rule": "main", "contexts": "lint"},
        csrf_of(page.text),
    )  # fmt: skip
    assert changed.status_code == 303
    rule = forge.protections.get(repo, "main")
    assert not rule.enable_status_check and rule.status_check_contexts == ("lint",)
    # without the form's token, or by one who may not administer it: nothing changes
    assert (
        ann.post("/ann/plans/settings", {"action": "unprotect", "rule": "main"}, None).status_code
        == 403
    )
    assert ben.get("/ann/plans/settings").status_code == 403
    refused = ben.post("/ann/plans/settings", {"action": "unprotect", "rule": "main"})
    assert refused.status_code == 403
    bad = ann.post("/ann/plans/settings", {"action": "protect", "rule": "[x"}, csrf_of(page.text))
    assert bad.status_code == 400 and "not a glob" in bad.text
    assert forge.protections.get(repo, "main").status_check_contexts == ("lint",)
    gone = ann.post(
        "/ann/plans/settings", {"action": "unprotect", "rule": "main"}, csrf_of(page.text)
    )
    assert gone.status_code == 303 and forge.protections.rules(repo) == []


@pytest.mark.parametrize(
    ("pattern", "separator", "yes", "no"),
    [
        ("ci/*", "", ["ci/build", "ci/a/b", "ci/"], ["ci", "lint", "xci/a"]),
        ("release/*", "/", ["release/1"], ["release/1/2", "release"]),
        ("release/**", "/", ["release/1/2"], ["other/1"]),
        ("v?", "", ["v1"], ["v10"]),
        ("ci/{build,test}", "", ["ci/build", "ci/test"], ["ci/lint"]),
        ("[!a]x", "", ["bx"], ["ax"]),
        ("a\\*", "", ["a*"], ["ab"]),
        ("a.b", "", ["a.b"], ["axb"]),
    ],
)
def test_globs_as_forgejo_reads_them(
    pattern: str, separator: str, yes: list[str], no: list[str]
) -> None:
    expr = _compile(pattern, separator)
    assert all(expr.fullmatch(name) for name in yes)
    assert not any(expr.fullmatch(name) for name in no)
    for bad in ("[x", "{a,b", "a\\"):
        with pytest.raises(ValueError):
            _compile(bad, "")


def test_statuses_follow_a_rename_and_leave_with_the_repository(
    forge: Forge, http: httpx.Client, tmp_path: Path
) -> None:
    fill(forge, tmp_path)
    sha = tip(forge)
    ann = api(http, token_for(http, "ann")).repository
    ann.repo_create_status("ann", "plans", sha, state="success", context="ci")
    ann.repo_create_branch_protection("ann", "plans", rule_name="main", enable_status_check=True)
    forge.lifecycle.rename(forge.registry.get("ann", "plans"), "ideas")
    assert ann.repo_get_combined_status_by_ref("ann", "ideas", sha).state == "success"
    assert [r.rule_name for r in ann.repo_list_branch_protection("ann", "ideas")] == ["main"]
    forge.lifecycle.delete(forge.registry.get("ann", "ideas"))
    assert rows(forge) == 0
    assert forge.db.query("SELECT * FROM branch_protections") == []
