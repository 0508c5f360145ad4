"""The AGit flow with the real git client over HTTP: ``git push origin HEAD:refs/for/main``
opens a pull request without a branch (title and description from push options, else the
first commit's subject), a later push by the same person to the same topic updates it, another
person's push to that topic opens another; git prints its URL; bad targets are refused
clearly; no ``refs/for/*`` ref is ever stored."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.forges import database_for
from support.githttp import PASSWORD, Site, bare, commit, git, rev
from support.serving import serving

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("agit")
    with serving(root / "repos", root / "data") as server:
        for name in ("alice", "bob"):  # bob may write to alice's repository: an administrator
            server.admin(
                "user", "create", name, "--email", f"{name}@example.org", "--admin",
                "--password-stdin", stdin=PASSWORD + "\n",
            )  # fmt: skip
        site = Site(server)
        seed = root / "seed"
        git("init", "-q", str(seed))
        commit(seed, "README.md", "# project\n", "First")
        server.admin("repo", "create", "alice/proj")
        git("push", "-q", site.url("alice/proj", "alice"), "main", cwd=seed)
        yield site


def work(site: Site, tmp_path: Path, user: str, name: str) -> Path:
    path = tmp_path / name
    git("clone", "-q", site.url("alice/proj", user), str(path))
    return path


def pulls(site: Site) -> list[tuple[int, str, str, str]]:
    """(number, title, topic, head) of every pull request, read from the database."""
    database = database_for(site.server.data)
    query = (
        "SELECT i.number, i.title, p.agit_topic, p.head_oid FROM pulls p"
        " JOIN issues i ON i.id = p.issue_id ORDER BY i.number"
    )
    if database:
        import psycopg

        with psycopg.connect(database) as conn:
            return [tuple(row) for row in conn.execute(query).fetchall()]  # type: ignore[misc]
    path = site.server.data / "floorless.sqlite3"
    with sqlite3.connect(path) as conn:
        return [tuple(row) for row in conn.execute(query).fetchall()]


def test_a_push_to_refs_for_opens_then_updates_a_pull_request(site: Site, tmp_path: Path) -> None:
    alice = work(site, tmp_path, "alice", "alice")
    git("checkout", "-q", "-b", "idea", cwd=alice)
    first = commit(alice, "idea.txt", "an idea\n", "Add an idea")
    pushed = git(
        "push", "origin", "HEAD:refs/for/main", "-o", "topic=idea",
        "-o", "title=A better idea", "-o", "description=Read **this**", cwd=alice,
    )  # fmt: skip
    host = site.server.url
    assert f"{host}/alice/proj/pulls/1" in pushed.stderr and "remote:" in pushed.stderr
    assert pulls(site) == [(1, "A better idea", "idea", first)]
    repo = bare(site, "alice/proj")
    assert rev(repo, "refs/pull/1/head") == first
    status, page = site.page("/alice/proj/pulls/1", user="alice")
    assert status == 200 and "A better idea" in page and "<strong>this</strong>" in page
    # the same person, the same topic (from the ref this time): the same pull request
    second = commit(alice, "idea.txt", "a better idea\n", "Improve the idea")
    updated = git("push", "origin", "HEAD:refs/for/main/idea", cwd=alice)
    assert f"{host}/alice/proj/pulls/1" in updated.stderr
    assert pulls(site) == [(1, "A better idea", "idea", second)]
    assert rev(repo, "refs/pull/1/head") == second
    _, page = site.page("/alice/proj/pulls/1", user="alice")
    assert "pushed" in page
    # another person on the same topic: another pull request, titled by its first commit
    bob = work(site, tmp_path, "bob", "bob")
    third = commit(bob, "bob.txt", "bob's\n", "Bob's take")
    opened = git("push", "origin", "HEAD:refs/for/main/idea", cwd=bob)
    assert f"{host}/alice/proj/pulls/2" in opened.stderr
    assert pulls(site)[1] == (2, "Bob's take", "idea", third)
    # fetchable as any pull request, and no refs/for ref anywhere
    fetched = tmp_path / "fetched"
    git("init", "-q", str(fetched))
    git("fetch", "-q", site.url("alice/proj", "alice", "read"), "refs/pull/2/head", cwd=fetched)
    assert rev(fetched / ".git", "FETCH_HEAD") == third
    refs = git("--git-dir", str(repo), "for-each-ref", "--format=%(refname)").stdout.split()
    assert not [r for r in refs if r.startswith("refs/for/")]
    assert rev(repo, "main") != third


def test_bad_targets_are_refused_clearly(site: Site, tmp_path: Path) -> None:
    alice = work(site, tmp_path, "alice", "alice2")
    commit(alice, "x.txt", "x\n", "Something")
    missing = git("push", "origin", "HEAD:refs/for/nowhere/topic", cwd=alice, check=False)
    assert missing.returncode != 0 and "no branch 'nowhere/topic'" in missing.stderr
    untitled = git("push", "origin", "HEAD:refs/for/main", cwd=alice, check=False)
    assert untitled.returncode != 0 and "name a topic" in untitled.stderr
    git("fetch", "-q", "origin", cwd=alice)
    same = git("push", "origin", "origin/main:refs/for/main/nothing", cwd=alice, check=False)
    assert same.returncode != 0 and "already has these commits" in same.stderr
    refs = git("--git-dir", str(bare(site, "alice/proj")), "for-each-ref").stdout
    assert "refs/for/" not in refs and "nothing" not in refs
