"""References to issues: mentions in descriptions, comments and commits recorded once on the
timeline of the issue named; "fixes #N" closing the issue when its commit reaches the default
branch (git's own client pushing) and when a pull request saying it is merged; a private
repository's text never showing on a public issue; each branch read from where it was last
read, so a push reads only what it brought."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import PASSWORD
from support.forges import start_forge, wait_for
from support.gitfixtures import git, git_text
from support.issues import person

from floorless.collab.references import Ref, closings, mentions
from floorless.forge import Forge
from floorless.web.app import create_app


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    forge.registry.create("ann", "secret", private=True)
    forge.registry.create("cat", "fork")
    ben = forge.accounts.require("ben")
    forge.policy.set_collaborator(plans, ben, "write")
    yield forge
    forge.stop()


def account(forge: Forge, name: str):  # type: ignore[no-untyped-def]
    return forge.accounts.require(name)


def refs_of(forge: Forge, repo: str, number: int) -> list[tuple[str, str, str, str]]:
    owner, name = repo.split("/")
    kind = forge.issues.kind_of(owner, name, number)
    assert kind is not None
    issue = forge.issues.get(owner, name, number, pull=kind)
    return [
        (e.kind, e.who, e.old_value, e.body)
        for e in forge.issues.timeline(issue)
        if e.kind in ("ref", "closed")
    ]


def test_the_words_as_github_reads_them() -> None:
    text = "Fixes #1, closes ann/plans#2 and RESOLVED: #3; fixing #4; prefix#5 (#6) #7x #0 &#8"
    assert closings(text) == [Ref("", "", 1), Ref("ann", "plans", 2), Ref("", "", 3)]
    assert mentions(text) == [
        Ref("", "", 1),
        Ref("ann", "plans", 2),
        Ref("", "", 3),
        Ref("", "", 4),
        Ref("", "", 6),
    ]
    assert closings("fixed #12 and close #13") == [Ref("", "", 12), Ref("", "", 13)]


def test_mentions_in_text_are_recorded_once(forge: Forge) -> None:
    ann, ben = account(forge, "ann"), account(forge, "ben")
    first = forge.issues.create("ann", "plans", ann, "First", "")
    second = forge.issues.create("ann", "plans", ben, "Second", "See #1, and #1 again, #2, #99")
    assert refs_of(forge, "ann/plans", 1) == [("ref", "ben", "issue", "ann/plans#2")]
    assert refs_of(forge, "ann/plans", 2) == []  # itself: no
    forge.issues.comment(second, ann, "as #1 said")  # the same source: not again
    forge.issues.comment(first, ann, "back to #2")
    assert refs_of(forge, "ann/plans", 1) == [("ref", "ben", "issue", "ann/plans#2")]
    assert refs_of(forge, "ann/plans", 2) == [("ref", "ann", "issue", "ann/plans#1")]
    third = forge.issues.create("ann", "plans", ann, "Third", "")
    forge.issues.edit(third, ann, "Third", "now about #1")
    assert len(refs_of(forge, "ann/plans", 1)) == 2

    client = testing.TestClient(create_app(forge))
    page = person(client, "cat").get("/ann/plans/issues/1").text
    assert 'mentioned this in issue <a href="/ann/plans/issues/2">#2</a>' in page


def test_mentions_across_repositories_respect_what_readers_may_see(forge: Forge) -> None:
    ann, cat = account(forge, "ann"), account(forge, "cat")
    public = forge.issues.create("ann", "plans", ann, "Public", "")
    hidden = forge.issues.create("ann", "secret", ann, "Hidden", "")
    # from a private repository to a public one: never recorded
    forge.issues.create("ann", "secret", ann, "Quiet", "about ann/plans#1")
    assert refs_of(forge, "ann/plans", public.number) == []
    # from a public repository, by someone who may read the one named: recorded
    forge.issues.create("cat", "fork", cat, "Upstream", "see ann/plans#1 and ann/secret#1")
    assert refs_of(forge, "ann/plans", 1) == [("ref", "cat", "issue", "cat/fork#1")]
    assert refs_of(forge, "ann/secret", hidden.number) == []  # cat may not read it
    forge.issues.create("ann", "plans", ann, "Owner", "see ann/secret#1 and nobody/none#1")
    assert refs_of(forge, "ann/secret", 1) == [("ref", "ann", "issue", "ann/plans#2")]
    client = testing.TestClient(create_app(forge))
    page = person(client, "cat").get("/ann/plans/issues/1").text
    assert 'href="/cat/fork/issues/1">cat/fork#1</a>' in page


def push(forge: Forge, work: Path, branch: str = "main") -> str:
    git(work, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    forge.maintenance.check_refs()
    wait_for(forge.references.idle)
    return git_text(work, "rev-parse", "HEAD")


def commit(work: Path, message: str, email: str = "ben@example.org") -> str:
    (work / "file.txt").write_text(message)
    git(work, "add", "file.txt")
    git(work, "commit", "-q", "-m", message, f"--author=Someone <{email}>")
    return git_text(work, "rev-parse", "HEAD")


def test_a_pushed_commit_closes_on_the_default_branch_and_mentions_on_any(
    forge: Forge, tmp_path: Path
) -> None:
    ann = account(forge, "ann")
    for title in ("One", "Two", "Three", "Four"):
        forge.issues.create("ann", "plans", ann, title, "")
    repo = forge.registry.get("ann", "plans")
    forge.live.snapshot(repo)  # its refs in memory: the ref check looks at them
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo.path), str(work))
    git(work, "checkout", "-q", "-b", "main")
    first = commit(work, "Start, about #1")
    push(forge, work)
    assert refs_of(forge, "ann/plans", 1) == [("ref", "ben", "commit", f"ann/plans@{first}")]

    # on another branch a fix only mentions; reaching the default branch, it closes
    git(work, "checkout", "-q", "-b", "topic")
    fix = commit(work, "Fixes #2 and mentions #3", email="nobody@example.org")
    push(forge, work, "topic")
    assert forge.issues.get("ann", "plans", 2).state == "open"
    assert refs_of(forge, "ann/plans", 3) == [("ref", "", "commit", f"ann/plans@{fix}")]
    push(forge, work, "main")  # fast-forward: the same commit reaches main
    two = forge.issues.get("ann", "plans", 2)
    assert two.state == "closed" and two.close_reason == "completed"
    assert refs_of(forge, "ann/plans", 2) == [
        ("ref", "", "commit", f"ann/plans@{fix}"),
        ("closed", "", f"commit:ann/plans@{fix}", "completed"),
    ]
    assert len(refs_of(forge, "ann/plans", 3)) == 1  # not twice for the second branch

    # reopened, the same commit read again (a branch made from it) does not close it again
    forge.issues.reopen(two, ann)
    push(forge, work, "again")
    assert forge.issues.get("ann", "plans", 2).state == "open"

    # a push reads only what it brought: the marks moved with the tips
    commit(work, "closes #4")
    read = forge.references.read_commits("ann", "plans")
    assert read == 0  # nothing new since the last push
    push(forge, work)
    assert forge.issues.get("ann", "plans", 4).state == "closed"
    client = testing.TestClient(create_app(forge))
    page = person(client, "cat").get("/ann/plans/issues/2").text
    assert f'closed this as completed in commit <a href="/ann/plans/commit/{fix}">' in page
    assert "A commit&#39;s author" in page or "A commit's author" in page


def test_a_merged_pull_request_closes_what_its_description_names(
    forge: Forge, tmp_path: Path
) -> None:
    ann, ben = account(forge, "ann"), account(forge, "ben")
    issue = forge.issues.create("ann", "plans", ann, "Broken", "")
    other = forge.issues.create("ann", "secret", ann, "Elsewhere", "")
    repo = forge.registry.get("ann", "plans")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo.path), str(work))
    git(work, "checkout", "-q", "-b", "main")
    commit(work, "base")
    push(forge, work)
    git(work, "checkout", "-q", "-b", "fix")
    head = commit(work, "the fix")
    push(forge, work, "fix")
    pull = forge.pulls.create(
        "ann", "plans", ben, "Fix it", "This resolves #1 and ann/secret#1",
        "main", ("ann", "plans", "fix"), head,
    )  # fmt: skip
    assert refs_of(forge, "ann/plans", 1) == [("ref", "ben", "pull", "ann/plans#2")]
    assert forge.pulls.mark_merged(pull, ben, head, "merge")
    closed = forge.issues.get("ann", "plans", issue.number)
    assert closed.state == "closed"
    assert refs_of(forge, "ann/plans", 1)[-1] == ("closed", "ben", "pull:ann/plans#2", "completed")
    assert forge.issues.get("ann", "secret", other.number).state == "open"  # ben may not push


def timeline_refs(client: testing.TestClient, repo: str, number: int, headers=None) -> list:
    answer = client.simulate_get(
        f"/api/v1/repos/{repo}/issues/{number}/timeline", headers=headers or {}
    )
    assert answer.status_code == 200, answer.text
    return [
        (e["type"], e["body"], e["ref_commit_sha"])
        for e in answer.json
        if e["type"] in ("issue_ref", "pull_ref", "commit_ref", "close")
    ]


def token(forge: Forge, name: str) -> dict[str, str]:
    made = forge.accounts.create_token(account(forge, name), "read", f"t-{name}")[0]
    return {"Authorization": f"token {made}"}


def test_a_mention_from_a_repository_gone_private_shows_only_to_its_readers(
    forge: Forge, tmp_path: Path
) -> None:
    """Recorded while its repository was public, a mention keeps naming it: on the page and
    in the API it is shown only to those who may read that repository now (and a closing by
    its pull request, without naming it); the page kept for a reader before is not served."""
    ann, cat = account(forge, "ann"), account(forge, "cat")
    forge.issues.create("ann", "plans", ann, "Public", "")
    forge.issues.create("cat", "fork", cat, "Upstream", "see ann/plans#1")
    fork = forge.registry.get("cat", "fork")
    forge.live.snapshot(fork)
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(fork.path), str(work))
    git(work, "checkout", "-q", "-b", "main")
    sha = commit(work, "Works around ann/plans#1", email="cat@example.org")
    push(forge, work)
    # ann's own repository, public, whose merged pull request closes ann/plans#1
    tools = forge.registry.create("ann", "tools")
    forge.live.snapshot(tools)
    tooling = tmp_path / "tools"
    git(tmp_path, "clone", "-q", str(tools.path), str(tooling))
    git(tooling, "checkout", "-q", "-b", "main")
    commit(tooling, "base", email="ann@example.org")
    push(forge, tooling)
    git(tooling, "checkout", "-q", "-b", "fix")
    head = commit(tooling, "the fix", email="ann@example.org")
    push(forge, tooling, "fix")
    pull = forge.pulls.create(
        "ann", "tools", ann, "Fix", "Fixes ann/plans#1", "main", ("ann", "tools", "fix"), head
    )
    assert forge.pulls.mark_merged(pull, ann, head, "merge")
    recorded = [
        ("ref", "cat", "issue", "cat/fork#1"),
        ("ref", "cat", "commit", f"cat/fork@{sha}"),
        ("ref", "ann", "pull", f"ann/tools#{pull.number}"),
        ("closed", "ann", f"pull:ann/tools#{pull.number}", "completed"),
    ]
    assert refs_of(forge, "ann/plans", 1) == recorded

    client = testing.TestClient(create_app(forge))
    ben, owner = person(client, "ben"), person(client, "cat")
    everyone = [
        ("issue_ref", "cat/fork#1", ""),
        ("commit_ref", f"cat/fork@{sha}", sha),
        ("pull_ref", f"ann/tools#{pull.number}", ""),
        ("close", "", ""),
    ]
    assert timeline_refs(client, "ann/plans", 1) == everyone
    links = ('href="/cat/fork/issues/1"', f'href="/cat/fork/commit/{sha}"', "of cat/fork")
    closing = f'in <a href="/ann/tools/pulls/{pull.number}">ann/tools#{pull.number}</a>'
    for reader in (client, ben, owner):
        get = reader.simulate_get if reader is client else reader.get
        page = get("/ann/plans/issues/1").text  # kept for each of them, if it may be
        assert all(link in page for link in links) and closing in page

    forge.lifecycle.set_private(fork, True)
    forge.lifecycle.set_private(forge.registry.get("ann", "tools"), True)
    for page in (
        client.simulate_get("/ann/plans/issues/1").text,
        ben.get("/ann/plans/issues/1").text,
    ):
        assert "cat/fork" not in page and "ann/tools" not in page
        assert "closed this as completed" in page
    assert timeline_refs(client, "ann/plans", 1) == [("close", "", "")]
    assert timeline_refs(client, "ann/plans", 1, token(forge, "ben")) == [("close", "", "")]
    # who may read cat/fork sees its mentions still, and only those
    page = owner.get("/ann/plans/issues/1").text
    assert all(link in page for link in links) and "ann/tools" not in page
    cats = timeline_refs(client, "ann/plans", 1, token(forge, "cat"))
    assert cats == [*everyone[:2], ("close", "", "")]
    # and who may read ann/tools, its pull request's
    assert timeline_refs(client, "ann/plans", 1, token(forge, "ann")) == everyone[2:]
    # a repository deleted since is nobody's to read
    forge.lifecycle.set_private(fork, False)
    assert ("issue_ref", "cat/fork#1", "") in timeline_refs(client, "ann/plans", 1)
    forge.registry.delete(forge.registry.get("cat", "fork"))
    assert timeline_refs(client, "ann/plans", 1) == [("close", "", "")]
    assert "cat/fork" not in client.simulate_get("/ann/plans/issues/1").text


def test_a_first_sight_reads_each_branchs_newest_commits_once(
    forge: Forge, tmp_path: Path
) -> None:
    """A repository none of whose branches was read (pushed whole, or found on disk): the
    default branch's newest commits, then each other branch's newest that those are not,
    its own history too (a branch with no commit in common), each commit read once."""
    ann = account(forge, "ann")
    forge.issues.create("ann", "plans", ann, "One", "")
    repo = forge.registry.get("ann", "plans")
    forge.live.snapshot(repo)  # its refs in memory: the ref check looks at them
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo.path), str(work))
    git(work, "checkout", "-q", "-b", "main")
    for n in range(3):
        commit(work, f"Main {n}, about #1")
    git(work, "checkout", "-q", "-b", "topic")
    for n in range(2):
        commit(work, f"Topic {n}, about #1")
    git(work, "checkout", "-q", "--orphan", "pages")
    for n in range(4):
        commit(work, f"Pages {n}, about #1")
    git(work, "push", "-q", "origin", "main", "topic", "pages")
    forge.maintenance.check_refs()
    wait_for(forge.references.idle)
    assert len(refs_of(forge, "ann/plans", 1)) == 9  # each commit once, whichever branches
    forge.db.execute("DELETE FROM branch_marks WHERE owner = 'ann' AND name = 'plans'")
    assert forge.references.read_commits("ann", "plans") == 3 + 2 + 4
    assert len(refs_of(forge, "ann/plans", 1)) == 9  # recorded once
    assert forge.references.read_commits("ann", "plans") == 0  # every tip marked
