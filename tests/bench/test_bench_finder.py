"""``python -m bench.finder`` runs end to end on a small tree: every case answers as it should,
the list holds every file, and nothing spawns a process. It asserts counts, never times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import finder

pytestmark = pytest.mark.bench


def test_the_finder_benchmark_runs(tmp_path: Path) -> None:
    finder.build(tmp_path / "repos" / "bench" / "finder.git", 40, 4)
    result = finder.measure(tmp_path / "repos", tmp_path / "data", 3)
    assert result["files"] == 40 + 3  # the first commit's files, and one a later commit
    assert result["spawned"] == 0
    for case in ("paths_cold", "paths_warm", "paths_304", "find_page"):
        figures = result[case]
        assert isinstance(figures, dict) and figures["p50_ms"] > 0, case
    json.dumps(result)  # printable as the command prints it
