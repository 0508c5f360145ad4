"""git's own client against a real ``floorless serve`` on loopback: clone (v0, v2, shallow,
partial), fetch, push (new branch, empty repository, non-fast-forward, force, delete), and
credentials (none, read-only token, private repositories)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import support.githttp
from support.githttp import PASSWORD, Site, bare, commit, git, rev

# the shared fixtures this module's tests ask for
site = support.githttp.site

pytestmark = pytest.mark.network















@pytest.mark.parametrize("version", ["0", "2"])
def test_clone_in_protocol_v0_and_v2(site: Site, tmp_path: Path, version: str) -> None:
    before = site.metric("floorless_spawned_processes_total", "/{owner}/{repo}/info/refs")
    target = tmp_path / "clone"
    git("-c", f"protocol.version={version}", "clone", "-q", site.url("alice/pub"), str(target))
    assert rev(target / ".git", "HEAD") == rev(bare(site, "alice/pub"), "main")
    assert (target / "README.md").read_text() == "# project\n\nversion 2\n"
    spawned = site.metric("floorless_spawned_processes_total", "/{owner}/{repo}/info/refs") - before
    # v2's capability advertisement is git's, asked once at start: no process per clone
    assert spawned == (1 if version == "0" else 0)


def test_each_post_spawns_at_most_one_process(site: Site, tmp_path: Path) -> None:
    route = "/{owner}/{repo}/git-upload-pack"
    spawned = site.metric("floorless_spawned_processes_total", route)
    answered = site.metric("floorless_responses_total", route)
    git("clone", "-q", site.url("alice/pub"), str(tmp_path / "clone"))
    posts = site.metric("floorless_responses_total", route) - answered
    assert posts >= 1
    assert site.metric("floorless_spawned_processes_total", route) - spawned == posts


def test_shallow_clone(site: Site, tmp_path: Path) -> None:
    target = tmp_path / "shallow"
    git("clone", "-q", "--depth", "1", site.url("alice/pub"), str(target))
    assert git("rev-list", "--count", "HEAD", cwd=target).stdout.strip() == "1"
    assert (target / ".git" / "shallow").read_text().strip() == rev(bare(site, "alice/pub"), "main")


def test_partial_clone_fetches_blobs_on_demand(site: Site, tmp_path: Path) -> None:
    target = tmp_path / "partial"
    git("clone", "-q", "--no-checkout", "--filter=blob:none", site.url("alice/pub"), str(target))
    missing = git("rev-list", "--objects", "--missing=print", "HEAD", cwd=target).stdout
    assert len([line for line in missing.splitlines() if line.startswith("?")]) >= 2
    git("checkout", "-q", "main", cwd=target)  # fetches the blobs it lacks, one more request
    assert (target / "big.bin").stat().st_size == 200_000


def test_fetch_and_push_of_a_new_branch_show_at_once(site: Site, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    git("clone", "-q", site.url("alice/pub", "alice"), str(first))
    git("clone", "-q", site.url("alice/pub"), str(second))
    git("switch", "-q", "-c", "topic", cwd=first)
    tip = commit(first, "topic.txt", "topic\n", "Start the topic branch")
    git("push", "-q", "origin", "topic", cwd=first)
    # the very next request sees the branch and its commit: no rescan, no wait
    status, text = site.page("/alice/pub/branches")
    assert status == 200 and "topic" in text
    status, text = site.page("/alice/pub/commits/branch/topic")
    assert "Start the topic branch" in text
    git("fetch", "-q", "origin", cwd=second)
    assert rev(second / ".git", "origin/topic") == tip
    git("tag", "-a", "-m", "First release", "v1.0", cwd=first)
    git("push", "-q", "origin", "v1.0", cwd=first)
    _, text = site.page("/alice/pub/tags")
    assert "v1.0" in text
    assert rev(bare(site, "alice/pub"), "v1.0^{commit}") == tip


def test_push_to_an_empty_repository_sets_its_default_branch(site: Site, tmp_path: Path) -> None:
    site.server.admin("repo", "create", "bob/fresh", "--description", "Made empty")
    status, text = site.page("/bob/fresh")
    assert status == 200 and "empty" in text.lower()
    work = tmp_path / "work"
    git("init", "-q", "-b", "trunk", str(work))
    tip = commit(work, "a.txt", "a\n", "First commit of fresh")
    git("push", "-q", site.url("bob/fresh", "bob"), "trunk", cwd=work)
    assert git(
        "--git-dir", str(bare(site, "bob/fresh")), "symbolic-ref", "HEAD"
    ).stdout.strip() == ("refs/heads/trunk")
    status, text = site.page("/bob/fresh")
    assert status == 200 and "First commit of fresh" in text and tip[:10] in text
    clone = tmp_path / "clone"
    git("clone", "-q", site.url("bob/fresh"), str(clone))
    assert git("branch", "--show-current", cwd=clone).stdout.strip() == "trunk"


def test_non_fast_forward_is_rejected_force_push_and_delete_work(
    site: Site, tmp_path: Path
) -> None:
    site.server.admin("repo", "create", "alice/rewrite")
    url = site.url("alice/rewrite", "alice")
    one, two = tmp_path / "one", tmp_path / "two"
    git("init", "-q", str(one))
    commit(one, "f.txt", "1\n", "base")
    git("push", "-q", url, "main", "main:doomed", cwd=one)
    git("clone", "-q", url, str(two))
    ahead = commit(two, "f.txt", "2\n", "ahead")
    git("push", "-q", "origin", "main", cwd=two)
    diverged = commit(one, "g.txt", "x\n", "diverged")
    rejected = git("push", url, "main", cwd=one, check=False)
    assert rejected.returncode != 0 and "rejected" in rejected.stderr
    assert rev(bare(site, "alice/rewrite"), "main") == ahead
    git("push", "-q", "--force", url, "main", cwd=one)
    assert rev(bare(site, "alice/rewrite"), "main") == diverged
    git("push", "-q", url, ":doomed", cwd=one)
    refs = git("--git-dir", str(bare(site, "alice/rewrite")), "for-each-ref").stdout
    assert "refs/heads/doomed" not in refs
    _, text = site.page("/alice/rewrite/branches")
    assert "doomed" not in text and "main" in text
    git("--git-dir", str(bare(site, "alice/rewrite")), "fsck", "--strict")


def test_push_without_credentials_fails_clearly(site: Site, tmp_path: Path) -> None:
    work = tmp_path / "work"
    git("clone", "-q", site.url("alice/pub"), str(work))
    commit(work, "x.txt", "x\n", "anonymous change")
    before = rev(bare(site, "alice/pub"), "main")
    result = git("push", "origin", "main", cwd=work, check=False)  # times out if it hangs
    assert result.returncode != 0
    assert "could not read Username" in result.stderr or "Authentication failed" in result.stderr
    assert rev(bare(site, "alice/pub"), "main") == before


def test_push_with_a_wrong_password_or_read_token_is_rejected(site: Site, tmp_path: Path) -> None:
    work = tmp_path / "work"
    git("clone", "-q", site.url("alice/pub"), str(work))
    commit(work, "y.txt", "y\n", "change")
    before = rev(bare(site, "alice/pub"), "main")
    host = site.server.url.removeprefix("http://")
    wrong = git(
        "push", f"http://alice:wrong-password@{host}/alice/pub.git", "main", cwd=work, check=False
    )
    assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr
    read_only = git("push", site.url("alice/pub", "alice", "read"), "main", cwd=work, check=False)
    assert read_only.returncode != 0 and "403" in read_only.stderr
    # a reader may propose changes (refs/for/, the AGit flow), not push: told so by the hook
    stranger = git("push", site.url("alice/pub", "dave"), "main", cwd=work, check=False)
    assert stranger.returncode != 0
    assert "main -> main (you may read alice/pub but not push to it" in stranger.stderr
    assert rev(bare(site, "alice/pub"), "main") == before
    # a password works as well as a token
    good = f"http://bob:{PASSWORD.replace(' ', '%20')}@{host}/alice/pub.git"
    assert git("ls-remote", good, "main").stdout.split()[0] == before


def test_private_repository_clones_only_with_credentials(site: Site, tmp_path: Path) -> None:
    anonymous = git("clone", site.url("alice/priv"), str(tmp_path / "a"), check=False)
    assert anonymous.returncode != 0 and "could not read Username" in anonymous.stderr
    # a private repository and a missing one answer alike, with and without credentials
    for user in (None, "dave"):
        answers = {
            site.page(f"/{name}/info/refs?service=git-upload-pack", user=user)
            for name in ("alice/priv", "alice/no-such-repo")
        }
        assert len(answers) == 1 and next(iter(answers))[0] == (401 if user is None else 404)
    stranger = git("clone", site.url("alice/priv", "dave"), str(tmp_path / "d"), check=False)
    assert stranger.returncode != 0 and "not found" in stranger.stderr
    git("clone", "-q", site.url("alice/priv", "alice", "read"), str(tmp_path / "ok"))
    assert rev(tmp_path / "ok" / ".git", "HEAD") == rev(bare(site, "alice/priv"), "main")
    _, text = site.page("/")
    assert "alice/priv" not in text and "alice/pub" in text
    _, text = site.page("/", user="alice")
    assert "alice/priv" in text


def test_admin_commands_take_effect_in_the_running_server(site: Site) -> None:
    assert site.page("/alice/later")[0] == 404
    site.server.admin("repo", "create", "alice/later", "--private")
    assert site.page("/alice/later")[0] == 404
    assert site.page("/alice/later", user="alice")[0] == 200
    token = site.server.admin("token", "create", "dave", "--scope", "read", "--expires", "1")
    assert re.fullmatch(r"flt_[A-Za-z0-9_-]{40,}", token)


def test_a_pull_requests_head_is_fetchable_though_no_branch_holds_it(
    site: Site, tmp_path: Path
) -> None:
    """``refs/pull/{n}/head`` is what git fetches for a pull request: its commit is served
    (the screen of wanted ids counts it as a tip) without showing as a branch; a private
    repository's pull refs answer as the repository does, not found to who may not read it."""
    for name in ("alice/pub", "alice/priv"):
        work = tmp_path / name.replace("/", "-")
        git("clone", "-q", site.url(name, "alice"), str(work))
        git("checkout", "-q", "-b", "proposal", cwd=work)
        head = commit(work, "topic.txt", "only in a pull request\n", "a proposal")
        git("push", "-q", "origin", "proposal", cwd=work)
        # The forge writes this ref as it opens a pull request; here, git behind its back,
        # then a push (the branch deleted) that has the forge read the refs again.
        git("--git-dir", str(bare(site, name)), "update-ref", "refs/pull/7/head", head)
        git("push", "-q", "origin", "--delete", "proposal", cwd=work)
        status, text = site.page(f"/{name}/branches", user="alice")
        assert status == 200 and "proposal" not in text and "pull/7" not in text
        fetcher = tmp_path / f"{work.name}-fetch"
        git("init", "-q", str(fetcher))
        git("fetch", "-q", site.url(name, "alice", "read"), "refs/pull/7/head", cwd=fetcher)
        assert rev(fetcher / ".git", "FETCH_HEAD") == head
        # by its id too, as a client that knows it would ask
        by_id = tmp_path / f"{work.name}-by-id"
        git("init", "-q", str(by_id))
        git("fetch", "-q", site.url(name, "alice", "read"), head, cwd=by_id)
        assert rev(by_id / ".git", "FETCH_HEAD") == head
    stranger = git(
        "fetch",
        site.url("alice/priv", "dave"),
        "refs/pull/7/head",
        cwd=tmp_path / "alice-pub-fetch",
        check=False,
    )
    assert stranger.returncode != 0 and "not found" in stranger.stderr
    anonymous = git(
        "fetch",
        site.url("alice/priv"),
        "refs/pull/7/head",
        cwd=tmp_path / "alice-pub-fetch",
        check=False,
    )
    assert anonymous.returncode != 0 and "could not read Username" in anonymous.stderr
