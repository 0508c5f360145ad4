"""Forks: made through ``/{owner}/{repo}/fork`` at once (the fork's objects directory holds
nothing of its own: it borrows the parent's), cloned and pushed to with the real git client;
a pull request from a fork into its parent fetchable as ``refs/pull/N/head``; the parent's
garbage collection, rename and deletion leave every fork whole; a private parent answers
404 to whoever may not read it, and bad names get a clear 4xx."""

from __future__ import annotations

from pathlib import Path

import support.forks
from falcon import testing
from support.accounts import Browser, csrf_of
from support.forks import commit, git, person, rev
from support.spawns import counting

from floorless.forge import Forge
from floorless.repos.forks import ForkRow

# the shared fixtures this module's tests ask for
client = support.forks.client
forge = support.forks.forge


def own_objects(git_dir: Path) -> list[str]:
    """The objects a repository stores itself: loose ones and packs."""
    found = []
    for path in (git_dir / "objects").rglob("*"):
        if path.is_file() and path.parent.name not in ("info",):
            found.append(str(path.relative_to(git_dir)))
    return found








def test_a_fork_is_made_by_its_page_borrowing_every_object(
    forge: Forge, client: testing.TestClient, tmp_path: Path
) -> None:
    cat = person(client, "cat")
    with counting() as spawned:
        page = cat.get("/ann/plans/fork")
        assert page.status_code == 200 and 'value="plans"' in page.text
        result = cat.post("/ann/plans/fork", {"owner": "cat", "name": "plans"})
    assert spawned == []  # refs written, no git process
    assert result.status_code == 303 and result.headers["location"] == "/cat/plans"
    parent, fork = forge.registry.get("ann", "plans"), forge.registry.get("cat", "plans")
    assert fork.parent == ("ann", "plans") and not fork.private
    assert own_objects(fork.path) == []  # nothing copied: every object is the parent's
    assert (fork.path / "objects" / "info" / "alternates").read_text().strip() == str(
        (parent.path / "objects").resolve()
    )
    for ref in ("main", "v1", "HEAD"):
        assert rev(fork.path, ref) == rev(parent.path, ref)
    home = cat.get("/cat/plans")
    assert home.status_code == 200 and 'forked from <a href="/ann/plans">ann/plans</a>' in home.text
    assert "version 2" in cat.get("/cat/plans/commits/branch/main").text
    clone = tmp_path / "clone"
    git("clone", "-q", str(fork.path), str(clone))
    assert rev(clone / ".git", "HEAD") == rev(parent.path, "main")
    # a push to the fork is the fork's alone
    tip = commit(clone, "fork.txt", "only in the fork\n", "In the fork")
    git("push", "-q", "origin", "main", cwd=clone)
    assert rev(fork.path, "main") == tip and rev(parent.path, "main") != tip
    assert git("--git-dir", str(parent.path), "cat-file", "-e", tip, check=False).returncode != 0
    git("--git-dir", str(fork.path), "fsck", "--no-dangling")


def test_a_pull_request_from_a_fork_is_fetchable_from_its_parent(
    forge: Forge, tmp_path: Path
) -> None:
    parent = forge.registry.get("ann", "plans")
    fork = forge.lifecycle.fork(parent, "cat", "plans")
    work = tmp_path / "cat-work"
    git("clone", "-q", str(fork.path), str(work))
    git("checkout", "-q", "-b", "topic", cwd=work)
    head = commit(work, "idea.txt", "an idea\n", "An idea")
    git("push", "-q", "origin", "topic", cwd=work)
    forge.moves.after_push(fork)
    cat = forge.accounts.get("cat")
    assert cat is not None
    pull = forge.pulls.create(
        "ann", "plans", cat, "An idea", "", "main", ("cat", "plans", "topic"), head
    )
    forge.forks.fetch_head_into_base(parent, fork, head)
    forge.moves.set_pull_ref(parent, pull.number, head)
    fetcher = tmp_path / "fetcher"
    git("init", "-q", str(fetcher))
    git("fetch", "-q", str(parent.path), f"refs/pull/{pull.number}/head", cwd=fetcher)
    assert rev(fetcher / ".git", "FETCH_HEAD") == head
    assert "topic" not in [b.decode() for b in forge.live.snapshot(parent).branches]
    # a second call finds the commit there and runs nothing
    with counting() as spawned:
        forge.forks.fetch_head_into_base(parent, fork, head)
    assert spawned == []


def test_the_parents_collection_rename_and_deletion_keep_the_fork_whole(
    forge: Forge, tmp_path: Path
) -> None:
    parent = forge.registry.get("ann", "plans")
    fork = forge.lifecycle.fork(parent, "cat", "plans")
    grandchild = forge.lifecycle.fork(fork, "eve", "plans")
    old_main = rev(parent.path, "main")
    # the parent forgets its history (a forced push of an unrelated commit), then is collected:
    # the forks still reach the old commits, which must stay
    other = tmp_path / "other"
    git("init", "-q", str(other))
    commit(other, "new.txt", "a new start\n", "A new start")
    git("push", "-q", "--force", str(parent.path), "main", cwd=other)
    git("--git-dir", str(parent.path), "tag", "-d", "v1")
    forge.moves.after_push(parent)
    assert forge.garbage.collect(parent)
    for child in (fork, grandchild):
        git("--git-dir", str(child.path), "fsck", "--no-dangling")
        assert rev(child.path, "main") == old_main
    # renamed: the forks' alternates follow
    renamed = forge.lifecycle.rename(parent, "plans-renamed")
    alternates = (fork.path / "objects" / "info" / "alternates").read_text().split()
    assert alternates == [str((renamed.path / "objects").resolve())]
    git("--git-dir", str(fork.path), "fsck", "--no-dangling")
    assert forge.forks.parent_of("cat", "plans") == ForkRow(
        "cat", "plans", "ann", "plans-renamed"
    )
    # deleted: the fork holds its objects first, and is a fork no more
    forge.lifecycle.delete(renamed)
    assert not renamed.path.exists()
    assert not (fork.path / "objects" / "info" / "alternates").exists()
    git("--git-dir", str(fork.path), "fsck", "--no-dangling")
    git("--git-dir", str(grandchild.path), "fsck", "--no-dangling")
    clone = tmp_path / "after"
    git("clone", "-q", str(fork.path), str(clone))
    assert rev(clone / ".git", "HEAD") == old_main
    assert forge.registry.get("cat", "plans").parent is None
    # the middle one deleted too: its own fork still whole
    forge.lifecycle.delete(forge.registry.get("cat", "plans"))
    git("--git-dir", str(grandchild.path), "fsck", "--no-dangling")
    assert rev(grandchild.path, "main") == old_main


def test_a_private_parent_is_forked_only_by_who_may_read_it(
    forge: Forge, client: testing.TestClient
) -> None:
    eve, dan = person(client, "eve"), person(client, "dan")
    token = csrf_of(eve.get("/ann/plans/fork").text)
    missing = eve.get("/ann/no-such/fork")
    for path in ("/ann/secret/fork", "/ann/no-such/fork"):
        answer = eve.get(path)
        assert answer.status_code == 404 and answer.text == missing.text
        assert eve.post(path, {"name": "stolen"}, csrf=token).status_code == 404
    assert Browser(client).get("/ann/secret/fork").status_code in (401, 404)
    # a reader may fork it, and the fork is private as its parent
    assert dan.post("/ann/secret/fork", {"owner": "dan", "name": "mine"}).status_code == 303
    mine = forge.registry.get("dan", "mine")
    assert mine.private and mine.parent == ("ann", "secret")
    assert eve.get("/dan/mine").status_code == 404
    # the fork's page names its parent only to who may read the parent
    forge.policy.set_collaborator(mine, forge.accounts.get("eve"), "read")  # type: ignore[arg-type]
    page = eve.get("/dan/mine")
    assert page.status_code == 200 and "forked from" not in page.text
    assert "forked from" in dan.get("/dan/mine").text


def test_bad_fork_names_and_owners_are_refused_clearly(
    forge: Forge, client: testing.TestClient
) -> None:
    cat = person(client, "cat")
    for name, status in (("../x", 400), ("a b", 400), ("x.git", 400), ("-", 400), ("api", 400)):
        answer = cat.post("/ann/plans/fork", {"owner": "cat", "name": name})
        assert answer.status_code == status, (name, answer.status_code)
    assert cat.post("/ann/plans/fork", {"owner": "cat", "name": "plans"}).status_code == 303
    again = cat.post("/ann/plans/fork", {"owner": "cat", "name": "plans"})
    assert again.status_code == 409 and "already exists" in again.text
    stranger = cat.post("/ann/plans/fork", {"owner": "ann", "name": "copy"})
    assert stranger.status_code == 403 and "cannot create repositories" in stranger.text
    no_csrf = cat.post("/ann/plans/fork", {"owner": "cat", "name": "other"}, csrf=None)
    assert 400 <= no_csrf.status_code < 500
    anonymous = Browser(client).get("/ann/plans/fork")
    assert anonymous.status_code == 303 and "/-/login" in anonymous.headers["location"]
    assert [r.full_name for r in forge.registry.all() if r.owner == "cat"] == ["cat/plans"]
