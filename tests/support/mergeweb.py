"""Opening and merging pull requests through the web, as the merge, status and automerge
tests do."""

from __future__ import annotations

from pathlib import Path

from falcon import testing

from floorless.collab.pulls import Pull
from floorless.forge import Forge
from support.accounts import Browser, csrf_of
from support.gitfixtures import _run, git, git_text
from support.merging import commit, settle


def fill(forge: Forge, tmp_path: Path, name: str = "plans") -> Path:
    """A clone with main and topic (changing different files), pushed to ann/{name}."""
    path = tmp_path / f"work-{name}"
    _run(["init", "-q", "-b", "main", str(path)], cwd=tmp_path)
    git(path, "remote", "add", "origin", str(forge.registry.get("ann", name).path))
    commit(path, "Start", a="a\n")
    git(path, "checkout", "-q", "-b", "topic")
    commit(path, "Topic", t="t\n")
    git(path, "checkout", "-q", "main")
    commit(path, "Main", m="m\n")
    git(path, "push", "-q", "origin", "main", "topic")
    forge.maintenance.check_refs()
    return path


def open_pull(forge: Forge, name: str = "plans", head: str = "topic") -> Pull:
    repo = forge.registry.get("ann", name)
    tip = git_text(repo.path, "rev-parse", f"refs/heads/{head}")
    pull = forge.pulls.create(
        "ann", name, forge.accounts.require("ann"), f"Merge {head}", "", "main",
        ("ann", name, head), tip,
    )  # fmt: skip
    forge.moves.set_pull_ref(repo, pull.number, tip)
    settle(forge)
    return forge.pulls.get("ann", name, pull.number)


def person(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser


def post_merge(
    browser: Browser, repo: str, number: int | str, csrf: str | None = "", **fields: str
) -> testing.Result:
    if csrf == "":  # a form's token, as any page with a form carries it
        page = browser.get("/-/tokens")
        csrf = csrf_of(page.text if page.status_code == 200 else browser.get("/-/login").text)
    return browser.post(f"/{repo}/pulls/{number}/merge", fields, csrf=csrf)


def tip(forge: Forge, branch: str = "main", name: str = "plans") -> str:
    return git_text(forge.registry.get("ann", name).path, "rev-parse", f"refs/heads/{branch}")
