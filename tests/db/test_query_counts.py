"""Database statements per warm page, fixed: every page names how many statements it runs
once warm, public and signed in, on SQLite and on PostgreSQL (the suite runs on both). On
PostgreSQL, where a statement is a round trip, a repository's row, the lists of
repositories, the session and the access level are remembered between requests while the
node hears every other node's writes (``Database.remembered``): a warm page runs none. The
count is the forge's own (``Server-Timing``'s ``query``), the one the benchmark reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import Browser
from support.forges import start_forge, wait_indexed
from support.queries import warm_counts

from floorless.forge import Forge
from floorless.web.app import create_app

PASSWORD = "a long password"

# page -> statements once warm: (public, signed in) on SQLite
WARM = {
    "/": (1, 2),
    "/alice": (2, 3),
    "/alice/demo": (1, 3),
    "/alice/demo/src/branch/main/src": (1, 3),
    "/alice/demo/src/branch/main/src/app.py": (1, 3),
    "/alice/demo/raw/branch/main/README.md": (1, 3),
    "/alice/demo/commits/branch/main": (1, 3),
    "/alice/demo/commits/branch/main/README.md": (1, 3),
    "/alice/demo/blame/branch/main/README.md": (1, 3),
    "/alice/demo/branches": (1, 3),
    "/alice/demo/tags": (2, 4),  # and which tags have a release, to link them
}
# and on PostgreSQL: the repository, the lists, the session and the access level remembered
WARM_POSTGRESQL = dict.fromkeys(WARM, (0, 0))


@pytest.fixture(scope="module")
def forge(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    forge = start_forge(fixture_root, tmp_path_factory.mktemp("queries"))
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    wait_indexed(forge)
    yield forge
    forge.stop()






def test_warm_pages_run_a_fixed_number_of_statements(forge: Forge) -> None:
    client = testing.TestClient(create_app(forge))
    public = Browser(client)
    signed = Browser(client)
    assert signed.sign_in("ann").status_code == 303
    found = {url: (warm_counts(public, url), warm_counts(signed, url)) for url in WARM}
    assert found == (WARM_POSTGRESQL if forge.db.dialect == "postgresql" else WARM)
