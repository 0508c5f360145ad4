"""``/-/health`` and ``/-/ready``: what a load balancer asks, answered without a session, a
cache or compression, and saying which part failed without saying more."""

from __future__ import annotations

import shutil
from pathlib import Path

from falcon import testing
from support.forges import start_forge

from floorless.web.app import create_app

ASKS = {"Accept-Encoding": "gzip, br", "Cookie": "floorless_session=forged.value"}


def test_health_and_ready_answer_anyone_uncached(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    repos.mkdir()
    forge = start_forge(repos, tmp_path / "data")
    try:
        client = testing.TestClient(create_app(forge))
        for path in ("/-/health", "/-/ready"):
            result = client.simulate_get(path, headers=ASKS)
            assert result.status_code == 200, result.text
            assert result.headers["cache-control"] == "no-store"
            assert "content-encoding" not in result.headers
            assert "set-cookie" not in result.headers  # the forged session was not looked at
            assert client.simulate_head(path).status_code == 200
        assert client.simulate_get("/-/health").json == {"status": "alive"}
        assert client.simulate_get("/-/ready").json == {
            "status": "ready",
            "database": "ok",
            "repositories": "ok",
        }
        # the repositories directory gone (a share not mounted): not ready, and says which
        shutil.move(repos, tmp_path / "elsewhere")
        result = client.simulate_get("/-/ready")
        assert result.status_code == 503
        assert result.json == {
            "status": "not ready",
            "database": "ok",
            "repositories": "unreadable",
        }
        assert str(tmp_path) not in result.text
        assert client.simulate_get("/-/health").status_code == 200  # alive all the same
        shutil.move(tmp_path / "elsewhere", repos)
        assert client.simulate_get("/-/ready").status_code == 200
    finally:
        forge.stop()
