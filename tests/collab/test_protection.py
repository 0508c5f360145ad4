"""Branch protection holds every way a branch moves, with real git over HTTP and the API:
a push, a force push, a deletion by git and by the API, the contents API, a merge; for a
writer, an administrator the rule binds (``apply_to_admins``) and one it does not. Each rule
is set through the API as Forgejo's clients set it, on a branch of its own."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
import support.protection
from support.githttp import commit, git
from support.protection import ADMIN, OTHER, OWNER, WRITER, Repo
from support.pushes import api

# the shared fixtures this module's tests ask for
repo = support.protection.repo

pytestmark = pytest.mark.network







# -- the ways a branch moves: each True when it moved ------------------------------------------


def push(repo: Repo, user: str, branch: str, path: str = "change.txt") -> bool:
    work = repo.clone(user)
    git("checkout", "-q", branch, cwd=work)
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    commit(work, path, f"a change to {path}\n", f"Change {path}")
    return git("push", "origin", branch, cwd=work, check=False).returncode == 0


def force_push(repo: Repo, user: str, branch: str) -> bool:
    work = repo.clone(user)
    git("checkout", "-q", branch, cwd=work)
    git("reset", "-q", "--hard", "HEAD~1", cwd=work)
    commit(work, "other.txt", "history rewritten\n", "Rewrite")
    return git("push", "-f", "origin", branch, cwd=work, check=False).returncode == 0


def delete_by_git(repo: Repo, user: str, branch: str) -> bool:
    work = repo.clone(user)
    return git("push", "origin", "--delete", branch, cwd=work, check=False).returncode == 0


def delete_by_api(repo: Repo, user: str, branch: str) -> bool:
    status, _ = api(repo.site, "DELETE", f"/repos/alice/proj/branches/{branch}", user)
    assert status in (204, 403), status
    return status == 204


def contents(repo: Repo, user: str, branch: str) -> bool:
    status, answer = api(
        repo.site, "POST", f"/repos/alice/proj/contents/new-{user}.txt", user,
        {"branch": branch, "content": base64.b64encode(b"by the API\n").decode()},
    )  # fmt: skip
    assert status in (201, 403), (status, answer)
    return status == 201


def heads(repo: Repo) -> str:
    return git("ls-remote", repo.site.url("alice/proj", OWNER)).stdout


WAYS: dict[str, Callable[[Repo, str, str], bool]] = {
    "push": push,
    "force push": force_push,
    "delete by git": delete_by_git,
    "delete by the API": delete_by_api,
    "contents API": contents,
}
NO_PUSH: dict[str, object] = {"enable_push": False}


@pytest.mark.parametrize("way", list(WAYS))
def test_an_unprotected_branch_moves_every_way(repo: Repo, way: str) -> None:
    branch = repo.branch(None)
    if way == "force push":
        push(repo, WRITER, branch)  # something to rewrite
    assert WAYS[way](repo, WRITER, branch)


@pytest.mark.parametrize(
    ("rule", "who", "expected"),
    [
        # pushing off: no writer, an administrator only when the rule does not bind them
        (NO_PUSH, WRITER, {"push": False, "force push": False, "contents API": False}),
        (NO_PUSH, ADMIN, {"push": True, "force push": True, "contents API": True}),
        (NO_PUSH, OWNER, {"push": True, "force push": True, "contents API": True}),
        (
            {**NO_PUSH, "apply_to_admins": True},
            ADMIN,
            {"push": False, "force push": False, "contents API": False},
        ),
        # pushing on for writers: history may not be rewritten, unless the rule says so
        ({"enable_push": True}, WRITER, {"push": True, "force push": False, "contents API": True}),
        (
            {"enable_push": True, "enable_force_push": True},
            WRITER,
            {"push": True, "force push": True, "contents API": True},
        ),
        (
            {"enable_push": True, "apply_to_admins": True},
            ADMIN,
            {"push": True, "force push": False, "contents API": True},
        ),
        # pushing for the people listed only
        (
            {"enable_push": True, "enable_push_whitelist": True,
             "push_whitelist_usernames": [WRITER]},
            OTHER,
            {"push": False, "force push": False, "contents API": False},
        ),
        (
            {"enable_push": True, "enable_push_whitelist": True,
             "push_whitelist_usernames": [WRITER]},
            WRITER,
            {"push": True, "force push": False, "contents API": True},
        ),
        (
            {"enable_push": True, "enable_force_push": True, "enable_force_push_allowlist": True,
             "force_push_allowlist_usernames": [ADMIN], "apply_to_admins": True},
            WRITER,
            {"push": True, "force push": False, "contents API": True},
        ),
        (
            {"enable_push": True, "enable_force_push": True, "enable_force_push_allowlist": True,
             "force_push_allowlist_usernames": [ADMIN], "apply_to_admins": True},
            ADMIN,
            {"push": True, "force push": True, "contents API": True},
        ),
    ],
)  # fmt: skip
def test_what_a_rule_lets_each_person_do(
    repo: Repo, rule: dict[str, object], who: str, expected: dict[str, bool]
) -> None:
    for way, allowed in expected.items():
        branch = repo.branch(rule)
        before = heads(repo)
        assert WAYS[way](repo, who, branch) is allowed, (way, who, rule)
        if not allowed:
            assert heads(repo) == before, (way, who, rule)


@pytest.mark.parametrize("who", [WRITER, ADMIN, OWNER])
@pytest.mark.parametrize("way", ["delete by git", "delete by the API"])
@pytest.mark.parametrize("admins", [False, True])
def test_a_protected_branch_is_never_deleted(repo: Repo, who: str, way: str, admins: bool) -> None:
    rule = {"enable_push": True, "enable_force_push": True, "apply_to_admins": admins}
    branch = repo.branch(rule)
    assert not WAYS[way](repo, who, branch)
    assert f"refs/heads/{branch}\n" in heads(repo)


def test_a_refused_push_says_why(repo: Repo) -> None:
    branch = repo.branch(NO_PUSH)
    work = repo.clone(WRITER)
    git("checkout", "-q", branch, cwd=work)
    commit(work, "x.txt", "x\n", "X")
    refused = git("push", "origin", branch, cwd=work, check=False)
    assert refused.returncode != 0
    assert f"Not allowed to push to protected branch {branch}" in refused.stderr
    git("reset", "-q", "--hard", "HEAD~2", cwd=work)
    commit(work, "y.txt", "y\n", "Y")
    forced = git("push", "-f", "origin", branch, cwd=work, check=False)
    assert "protected from force push" in forced.stderr or "protected branch" in forced.stderr
    status, answer = api(repo.site, "DELETE", f"/repos/alice/proj/branches/{branch}", WRITER)
    assert status == 403 and f"branch {branch} is protected from deletion" in str(answer)


def test_protected_and_unprotected_files(repo: Repo) -> None:
    guarded = repo.branch({"enable_push": True, "protected_file_patterns": "*.lock;ci/**"})
    assert not push(repo, WRITER, guarded, "deps.lock")
    assert not push(repo, WRITER, guarded, "ci/run.yml")
    assert push(repo, WRITER, guarded, "src.txt")  # "*" does not cross "/" or "."
    open_docs = repo.branch({"enable_push": False, "unprotected_file_patterns": "docs/**"})
    assert push(repo, WRITER, open_docs, "docs/more.md")
    assert not push(repo, WRITER, open_docs, "README.md")


def test_the_rule_reads_back_in_forgejos_shape(repo: Repo) -> None:
    branch = repo.branch(
        {"enable_push": True, "enable_push_whitelist": True, "push_whitelist_usernames": [WRITER],
         "required_approvals": 2, "block_on_rejected_reviews": True,
         "protected_file_patterns": "*.lock", "apply_to_admins": True}
    )  # fmt: skip
    status, rule = api(repo.site, "GET", f"/repos/alice/proj/branch_protections/{branch}", OWNER)
    assert status == 200 and isinstance(rule, dict)
    assert rule["push_whitelist_usernames"] == [WRITER] and rule["required_approvals"] == 2
    assert rule["block_on_rejected_reviews"] and rule["protected_file_patterns"] == "*.lock"
    status, answer = api(
        repo.site, "PATCH", f"/repos/alice/proj/branch_protections/{branch}", OWNER,
        {"push_whitelist_teams": ["core"]},
    )  # fmt: skip
    assert status == 422 and "teams" in str(answer)
    status, answer = api(
        repo.site, "PATCH", f"/repos/alice/proj/branch_protections/{branch}", OWNER,
        {"push_whitelist_usernames": ["nobody-here"]},
    )  # fmt: skip
    assert status == 422 and "nobody-here" in str(answer)
    status, _ = api(repo.site, "GET", f"/repos/alice/proj/branch_protections/{branch}", WRITER)
    assert status == 403


def test_nobody_pushes_to_refs_pull(repo: Repo) -> None:
    """refs/pull/N/head is where the forge keeps each pull request's head: a push there
    (even by the owner) would change what a pull request shows."""
    work = repo.clone(OWNER)
    commit(work, "spoof.txt", "spoof\n", "Spoof")
    refused = git("push", "origin", "HEAD:refs/pull/1/head", cwd=work, check=False)
    assert refused.returncode != 0 and "refs/pull/ is the forge's own" in refused.stderr
    assert "refs/pull/" not in heads(repo)
