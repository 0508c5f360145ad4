"""AGit is for the people who may not push: anyone who may read a repository proposes a
change with ``git push origin HEAD:refs/for/main/topic``, no fork needed, as on Forgejo. The
pull request is theirs: they update it by pushing the same topic again and may close it;
its webhooks fire as for any other; a head with no history in common with the base is
refused, as the web and the API refuse it; a reader's push anywhere else is refused."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import support.webhooks
from support.api import token_for
from support.forges import wait_for
from support.webhooks import FAST, Receiver, Site, _commit, _site, git

# the shared fixtures this module's tests ask for
receiver = support.webhooks.receiver

pytestmark = pytest.mark.network


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    yield from _site(tmp_path, webhook_allowed_hosts=("loopback",), **FAST)


def remote(site: Site, user: str, token: str) -> str:
    return site.url.replace("http://", f"http://{user}:{token}@") + "/ann/plans.git"


def push(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "credential.helper=", "push", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0", "HOME": str(work)},
    )


def test_a_reader_opens_updates_and_closes_a_pull_request_by_agit(
    site: Site,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/pulls", "content_type": "json"},
        events=["pull_request", "pull_request_sync"],
    )
    work = tmp_path / "ann"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    _commit(work, "First", 1_700_000_000)
    git(work, "push", "-q", remote(site, "ann", site.token), "main")
    ben = token_for(site.http, "ben")  # ben may read ann/plans (public), not write to it
    mine = tmp_path / "ben"
    git(tmp_path, "clone", "-q", remote(site, "ben", ben), str(mine))
    (mine / "a.txt").write_text("a, better\n")
    first = _commit(mine, "Better a", 1_700_000_100)
    opened = push(mine, "origin", "HEAD:refs/for/main/better", "-o", "title=Better a")
    assert opened.returncode == 0, opened.stderr
    assert "/ann/plans/pulls/1" in opened.stderr
    pull = site.http.get("/api/v1/repos/ann/plans/pulls/1").json()
    assert pull["user"]["login"] == "ben" and pull["head"]["sha"] == first
    assert pull["title"] == "Better a" and pull["state"] == "open"
    wait_for(lambda: len(receiver.at("/pulls")) >= 1)
    assert receiver.at("/pulls")[0].json["action"] == "opened"
    # the same topic again: the same pull request, its head moved
    (mine / "a.txt").write_text("a, better still\n")
    second = _commit(mine, "Better still", 1_700_000_200)
    updated = push(mine, "origin", "HEAD:refs/for/main/better")
    assert updated.returncode == 0, updated.stderr
    assert site.http.get("/api/v1/repos/ann/plans/pulls/1").json()["head"]["sha"] == second
    wait_for(lambda: len(receiver.at("/pulls")) >= 2)
    assert receiver.at("/pulls")[1].json["action"] == "synchronized"
    # a reader pushes nowhere else
    direct = push(mine, "origin", "HEAD:main")
    assert direct.returncode != 0 and "may read ann/plans but not push to it" in direct.stderr
    branch = push(mine, "origin", "HEAD:refs/heads/ben-was-here")
    assert branch.returncode != 0
    assert "ben-was-here" not in git(tmp_path, "ls-remote", remote(site, "ann", site.token))
    # their pull request, which they may close
    closed = site.http.patch(
        "/api/v1/repos/ann/plans/pulls/1",
        headers={"Authorization": f"token {ben}"},
        json={"state": "closed"},
    )
    assert closed.status_code == 201, closed.text
    assert closed.json()["state"] == "closed"


def test_agit_refuses_unrelated_histories_and_the_anonymous(site: Site, tmp_path: Path) -> None:
    work = tmp_path / "ann"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    _commit(work, "First", 1_700_000_000)
    git(work, "push", "-q", remote(site, "ann", site.token), "main")
    stranger = tmp_path / "stranger"
    git(tmp_path, "init", "-q", "-b", "main", str(stranger))
    (stranger / "b.txt").write_text("b\n")
    _commit(stranger, "Another project", 1_700_000_300)
    ben = token_for(site.http, "ben")
    refused = push(stranger, remote(site, "ben", ben), "HEAD:refs/for/main/other")
    assert refused.returncode != 0 and "unrelated histories" in refused.stderr
    assert site.http.get("/api/v1/repos/ann/plans/pulls?state=all").json() == []
    anonymous = push(stranger, site.url + "/ann/plans.git", "HEAD:refs/for/main/other")
    assert anonymous.returncode != 0
    assert (
        "401" in anonymous.stderr
        or "Authentication failed" in anonymous.stderr
        or ("could not read Username" in anonymous.stderr)
    )
