"""``python -m bench.lfs`` runs end to end on small files: every way of every round moves the
files (the clones are checked against them), the LFS routes start no process, both release
uploads land, and the page is written from the figures. It asserts counts, never times."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import lfs

pytestmark = [
    pytest.mark.bench,
    pytest.mark.skipif(shutil.which("git-lfs") is None, reason="git-lfs is not installed"),
]


def test_the_lfs_benchmark_runs(tmp_path: Path) -> None:
    result = lfs.measure(tmp_path, files=2, file_mb=1, rounds=2, asset_mb=2, max_seconds=600)
    assert result["rounds"] == 2
    assert result["lfs_spawned_per_object"] == [0.0]
    # the LFS routes were asked (the batch, then each object), and are told apart by route
    for way in lfs.LFS_WAYS:
        assert min(result["lfs_requests_per_round"][way]) >= 1 + 2, result
    assert result["copy"]["spawned_per_round"] == [0]
    for way in lfs.WAYS:
        assert result[way]["p50_s"] > 0 and result[way]["peak_mb"] > 0
    assert set(result["assets"]) == {"multipart", "raw", "pyforgejo"}  # (the tests have it)
    # two LFS objects a round, and the three assets: each kept once, by its hash
    stored = list((tmp_path / "data" / "storage" / "sha256").glob("*/*/*"))
    assert len(stored) == 2 * 2 + 3
    assert list((tmp_path / "data" / "storage" / "tmp").iterdir()) == []
    repos = sorted(p.name for p in (tmp_path / "repos" / lfs.OWNER).iterdir())
    assert repos == ["lfs-0.git", "lfs-1.git", "plain-0.git", "plain-1.git"]
    result["command"] = "python -m bench.lfs"
    text = lfs.page(result)
    assert "| lfs push |" in text and "| multipart |" in text
    assert f"**{result['lfs_push_to_plain_push']:.2f}x**" in text
