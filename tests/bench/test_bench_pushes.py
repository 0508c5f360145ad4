"""``python -m bench.pushes`` runs end to end on a small history: both pushes of every round
land (in the plain copy and in the fork), and the fork advertises its parent's refs as its
own. It asserts counts, never times."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.gitfixtures import _run, git_text

from bench import pushes

pytestmark = pytest.mark.bench


def test_the_push_benchmark_runs(tmp_path: Path) -> None:
    source = tmp_path / "source"
    _run(["init", "-q", "-b", "main", str(source)], cwd=tmp_path)
    (source / "a.txt").write_text("a\n")
    _run(["add", "a.txt"], cwd=source)
    _run(["commit", "-q", "-m", "First"], cwd=source)
    root = tmp_path / "run"
    root.mkdir()
    result = pushes.measure(source, root, 2)
    assert result["rounds"] == 2 and result["fork_to_plain"] > 0
    assert result["refs"] == {"plain": 3, "fork": 3}  # main and the two pushed branches
    for side in ("plain", "fork"):
        assert result[side]["p50_s"] > 0
    fork = root / "repos" / "bench" / "fork.git"
    branches = git_text(fork, "for-each-ref", "--format=%(refname)")
    assert "refs/heads/bench-push-1" in branches
