"""Commits and pushes to make pull requests from, and waiting for the forge to see them."""

from __future__ import annotations

from pathlib import Path

from floorless.forge import Forge
from floorless.repos.registry import Repo
from support.forges import wait_for
from support.gitfixtures import git, git_text


def repo_of(forge: Forge) -> Repo:
    return forge.registry.get("ann", "plans")


def write(work: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.unlink()
        else:
            path.write_text(text)


def commit(work: Path, message: str, **files: str) -> str:
    write(work, {k.replace("__", "/"): v for k, v in files.items()})
    git(work, "add", "-A")
    git(work, "commit", "-q", "--allow-empty", "-m", message)
    return git_text(work, "rev-parse", "HEAD")


def push(forge: Forge, work: Path, *refspecs: str) -> None:
    """A plain ``git push`` straight to the repository's directory, as behind floorless's
    back; then the ref check notices it, as it would."""
    git(work, "push", "-q", "-f", "origin", *refspecs)
    forge.maintenance.check_refs()
    settle(forge)


def settle(forge: Forge) -> None:
    wait_for(forge.merger.idle)


def tip(forge: Forge, branch: str) -> str:
    return git_text(repo_of(forge).path, "rev-parse", f"refs/heads/{branch}")
