"""A repository with a protected branch and its writer, owner and administrator, for the
protection tests and the push attacks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.githttp import PASSWORD, Site, commit, git
from support.pushes import api
from support.serving import serving

WRITER, ADMIN, OWNER, OTHER = "wendy", "adam", "alice", "walt"


class Repo:
    """alice/proj, with wendy and walt writing to it and adam administering it."""

    def __init__(self, site: Site, root: Path) -> None:
        self.site = site
        self.root = root
        self.count = 0

    def branch(self, rule: dict[str, object] | None) -> str:
        """A new branch at main, protected by ``rule`` (Forgejo's fields) when given."""
        self.count += 1
        name = f"b{self.count}"
        status, _ = api(
            self.site, "POST", "/repos/alice/proj/branches", OWNER,
            {"new_branch_name": name, "old_branch_name": "main"},
        )  # fmt: skip
        assert status == 201
        if rule is not None:
            status, answer = api(
                self.site, "POST", "/repos/alice/proj/branch_protections", OWNER,
                {"rule_name": name, **rule},
            )  # fmt: skip
            assert status == 201, answer
        return name

    def clone(self, user: str) -> Path:
        self.count += 1
        path = self.root / f"{user}-{self.count}"
        git("clone", "-q", self.site.url("alice/proj", user), str(path))
        return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repo]:
    root = tmp_path_factory.mktemp("protect")
    with serving(root / "repos", root / "data") as server:
        for name in (OWNER, WRITER, ADMIN, OTHER):
            server.admin(
                "user", "create", name, "--email", f"{name}@example.org",
                "--password-stdin", stdin=PASSWORD + "\n",
            )  # fmt: skip
        site = Site(server)
        seed = root / "seed"
        git("init", "-q", str(seed))
        commit(seed, "README.md", "# project\n", "First")
        (seed / "docs").mkdir()
        commit(seed, "docs/guide.md", "a guide\n", "Guide")
        server.admin("repo", "create", "alice/proj")
        git("push", "-q", site.url("alice/proj", OWNER), "main", cwd=seed)
        for user, role in ((WRITER, "write"), (OTHER, "write"), (ADMIN, "admin")):
            status, _ = api(
                site, "PUT", f"/repos/alice/proj/collaborators/{user}", OWNER,
                {"permission": role},
            )  # fmt: skip
            assert status == 204
        yield Repo(site, root)
