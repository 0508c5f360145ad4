"""A pull request set up for reviewing, with its people and forge, shared by the review tests
and the conversation cache tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from falcon import testing

from floorless.accounts.accounts import Account
from floorless.collab.pulls import Pull
from floorless.collab.reviews import Anchors
from floorless.forge import Forge
from support.accounts import PASSWORD, Browser
from support.forges import start_forge, wait_for

BASE = {
    "app.py": "".join(f"line {i}\n" for i in range(1, 11)),
    "gone.txt": "old\n",
    "keep.txt": "same\n",
}


# line 3 changed, a line added after line 5, line 8 deleted; gone.txt deleted; new.txt added
HEAD = {
    "app.py": ("line 1\nline 2\nLINE 3\nline 4\nline 5\nadded\nline 6\nline 7\nline 9\nline 10\n"),
    "keep.txt": "same\n",
    "new.txt": "fresh\n",
}


WHEN = 1_700_000_000


def commit(
    handle: pygit2.Repository,
    files: dict[str, str],
    parents: list[str],
    message: str,
    ref: str | None = None,
) -> str:
    builder = handle.TreeBuilder()
    for name, text in sorted(files.items()):
        builder.insert(name, handle.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB)
    signature = pygit2.Signature("Ann", "ann@example.org", WHEN + len(parents), 0)
    oid = handle.create_commit(
        ref, signature, signature, message, builder.write(), [pygit2.Oid(hex=p) for p in parents]
    )
    return str(oid)


class Setup:
    def __init__(self, forge: Forge) -> None:
        self.forge = forge
        self.repo = forge.registry.get("ann", "plans")
        self.handle = forge.live.open(self.repo)
        self.base = commit(self.handle, BASE, [], "base", "refs/heads/main")
        self.head = commit(self.handle, HEAD, [self.base], "the change", "refs/heads/feature")
        forge.moves.refs_moved(self.repo)
        ben = account(forge, "ben")
        self.pull = forge.pulls.create(
            "ann", "plans", ben, "A change", "", "main", ("ann", "plans", "feature"), self.head
        )
        forge.moves.set_pull_ref(self.repo, self.pull.number, self.head)

    def current(self) -> Pull:
        return self.forge.pulls.get("ann", "plans", self.pull.number)

    def anchors(self) -> Anchors:
        return self.forge.reviews.anchors(self.handle, self.current(), self.base)

    def comment(
        self,
        who: str,
        path: str,
        side: str,
        line: int,
        start: int | None = None,
        body: str = "Why?",
    ):  # type: ignore[no-untyped-def]
        return self.forge.reviews.add_comment(
            self.handle,
            self.current(),
            self.anchors(),
            account(self.forge, who),
            path,
            side,
            line if start is None else start,
            line,
            body,
        )

    def push(self, files: dict[str, str], message: str) -> str:
        """A new head on the feature branch, recorded as the merging code records it."""
        pull = self.current()
        new = commit(self.handle, files, [pull.head_oid], message, "refs/heads/feature")
        self.forge.moves.refs_moved(self.repo)  # the follower (merging.py) records the move
        wait_for(lambda: self.current().head_oid == new and self.forge.merger.idle())
        assert self.handle.references[pull.ref].target == pygit2.Oid(hex=new)
        wait_for(self.forge.reviews.idle)
        return new


def account(forge: Forge, name: str) -> Account:
    found = forge.accounts.get(name)
    assert found is not None
    return found


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    forge.registry.create("ann", "plans")
    forge.registry.create("ann", "secret", private=True)
    yield forge
    forge.stop()


@pytest.fixture
def setup(forge: Forge) -> Setup:
    return Setup(forge)


def person(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser
