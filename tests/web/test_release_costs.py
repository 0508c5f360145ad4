"""What the release pages cost once warm: no process (tags and releases are read in
process), and a fixed number of statements however many releases and files there are, public
and signed in, on SQLite and PostgreSQL (where nodes remember the tables: none)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser
from support.forges import start_forge
from support.queries import warm_counts
from support.spawns import get, spawn_timing

from floorless.forge import Forge
from floorless.web.app import create_app

# page -> statements once warm on SQLite: (public, signed in). The pages are kept: the
# repository's row and which releases it has (and the session, signed in). A feed is made
# anew: its releases, their notes' references, their files and their publishers, one each.
WARM = {
    "/ann/plans/releases": (2, 4),
    "/ann/plans/releases?page=2": (2, 4),
    "/ann/plans/releases/tag/v3": (2, 4),
    "/ann/plans/tags": (2, 4),
    "/ann/plans/releases.rss": (6, 8),
    "/ann/plans/tags.atom": (1, 3),
}
KEPT = [url for url in WARM if ".rss" not in url and ".atom" not in url]


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    root = tmp_path_factory.mktemp("release-costs")
    forge = start_forge(root / "repos", root / "data")
    ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    repo = forge.registry.create("ann", "plans")
    handle = pygit2.Repository(str(repo.path))
    signature = pygit2.Signature("Ann", "ann@example.org", 1_700_000_000, 0)
    tree = handle.TreeBuilder().write()
    parents: list[pygit2.Oid] = []
    for n in range(12):
        commit = handle.create_commit(
            "refs/heads/main", signature, signature, f"c{n}", tree, parents
        )
        parents = [commit]
    forge.moves.refs_moved(repo)
    for n in range(12):  # more than a page, each with files and notes that link
        release = forge.releases.create(
            repo, ann.id, f"v{n}", title=f"Version {n}", note=f"Fixes #1, by @ann {n}",
            draft=n == 11, prerelease=n == 10,
        )  # fmt: skip
        for name in ("build.tar.gz", "notes.txt"):
            forge.attachments.upload(
                repo.id, ann.id, name, io.BytesIO(b"x" * 1000).read, release_id=release.id
            )
    forge.issues.create("ann", "plans", ann, "One", "")
    yield forge
    forge.stop()


def test_release_pages_spawn_nothing(forge: Forge) -> None:
    client = testing.TestClient(create_app(forge))
    for url in (*WARM, "/ann/plans/releases/download/v3/notes.txt"):
        for _ in range(2):  # cold, then warm
            path, _, query = url.partition("?")
            result, spawns = get(client, path, query_string=query or None)
            assert result.status_code in (200, 302), (url, result.status_code)
            assert spawns == 0 == spawn_timing(result), url


def test_release_pages_run_a_fixed_number_of_statements(forge: Forge) -> None:
    client = testing.TestClient(create_app(forge))
    public, signed = Browser(client), Browser(client)
    assert signed.sign_in("ben").status_code == 303
    found = {url: (warm_counts(public, url), warm_counts(signed, url)) for url in WARM}
    if forge.db.dialect != "postgresql":
        assert found == WARM
        return
    # PostgreSQL's nodes remember the rows the kept pages read: none; a feed no more
    assert {url: found[url] for url in KEPT} == dict.fromkeys(KEPT, (0, 0))
    assert all(found[url] <= WARM[url] for url in WARM)
