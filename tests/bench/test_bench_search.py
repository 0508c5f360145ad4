"""``python -m bench.search`` runs end to end on the small repository widened by a few files,
for a handful of requests: the index is built and brought up to date after a three-file push
(reading those three blobs alone), every query answers 200 with no process started, and the
rare marker is found in its one file. It asserts counts, never times."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import search

pytestmark = pytest.mark.bench


def test_the_search_benchmark_runs(tmp_path: Path) -> None:
    options = argparse.Namespace(
        repo="small",
        files=150,  # wide/d00/ gets four of them: the push changes three
        megabytes=0.6,
        requests=2,
        warmup=1,
        index_deadline=600.0,
        cache_dir=tmp_path / "cache",
        json=None,
        docs=None,
    )
    result = search.run(options, log=lambda line: None)
    assert result.push_blobs_read == 3
    assert result.index_sizes["search_blobs_rows"] >= result.tree_files
    assert len(result.figures) == 2 * len(search.QUERIES)
    for figure in result.figures:
        assert figure.status == 200, figure
        assert figure.server_spawns == 0, figure
    rare = [f for f in result.figures if f.query == "literal, one file"]
    assert [f.files for f in rare] == [1, 1]
    assert "| literal, one file |" in search.markdown(result, "python -m bench.search")
