"""``python -m bench --scenarios search,finder`` runs code search and the file finder inside
the one benchmark: on the small repository widened by a few files, for a handful of requests,
their figures land in the JSON and in docs/benchmarks.md with their targets judged, and a run
of those scenarios alone replaces only their own sections of a page another run wrote. It
asserts counts and the report's wording, never times."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench import report
from bench.__main__ import main
from bench.scenarios import finder as finder_scenario
from bench.scenarios import search as search_scenario

pytestmark = pytest.mark.bench


def _figure(query: str, mode: str, p50: float, spawns: float | None = 0.0) -> dict[str, Any]:
    return {
        "query": query,
        "text": "t",
        "mode": mode,
        "scope": "repository",
        "status": 200,
        "p50_ms": p50,
        "p95_ms": p50,
        "server_spawns": spawns,
        "spawns_per_request": 0.0,
        "files": 1,
        "candidates": 1,
        "read": 1,
        "partial": False,
    }


def test_the_targets_are_judged_on_the_slowest_query() -> None:
    search = {"figures": [_figure("a", "literal", 40.0), _figure("b", "regex", 900.0)]}
    judged = {c.target: c.passed for c in search_scenario.judge(search)}
    assert judged == {
        "literal code search p50 within 100 ms (slowest query)": True,
        "regex code search p50 within 1000 ms (slowest query)": True,
        "code search starts no process": True,
    }
    slow = copy.deepcopy(search)
    slow["figures"] += [_figure("c", "literal", 100.5), _figure("d", "regex", 1001.0, 1.0)]
    checks = search_scenario.judge(slow)
    assert [c.passed for c in checks] == [False, False, False]
    assert checks[0].detail.startswith("c (repository): 100.5 ms")
    unknown = {"figures": [_figure("a", "literal", 1.0, None)]}
    assert [c.passed for c in search_scenario.judge(unknown)] == [True, None, None]
    assert [c.passed for c in finder_scenario.judge({"spawned": 2.0, "requests": 3})] == [False]


def test_search_and_finder_run_as_scenarios_and_keep_the_rest_of_the_page(
    tmp_path: Path,
) -> None:
    docs, found = tmp_path / "benchmarks.md", tmp_path / "results.json"
    before = "\n".join(
        [
            "# Benchmarks",
            "",
            "<!-- Written by `python -m bench`; the figures below come from one run. -->",
            "",
            "## Local storage",
            "",
            "the local figures",
            "",
            search_scenario.HEADING,
            "",
            "an older run's search figures",
            "",
            "## Cold requests",
            "",
            "the cold requests",
            "",
        ]
    )
    docs.write_text(before)
    argv = ["--repo", "small", "--scenarios", "search,finder"]
    argv += ["--search-files", "60", "--search-megabytes", "0.2", "--search-requests", "2"]
    argv += ["--finder-files", "30", "--finder-requests", "3"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--workdir", str(tmp_path / "work")]
    assert main([*argv, "--json", str(found), "--docs", str(docs)]) == 0
    body = json.loads(found.read_text())
    assert body["finder"]["files"] == 30 + 3 and body["finder"]["spawned"] == 0
    assert all(f["status"] == 200 for f in body["search"]["figures"])
    assert all(f["server_spawns"] == 0 for f in body["search"]["figures"])
    marks = {c["target"]: c["passed"] for c in body["checks"]}
    assert marks["code search starts no process"] is True
    assert marks["the file finder's path list and page start no process"] is True
    assert "literal code search p50 within 100 ms (slowest query)" in marks
    text = docs.read_text()
    assert "an older run's search figures" not in text  # its section replaced
    assert text.count(search_scenario.HEADING) == 1 and text.count(finder_scenario.HEADING) == 1
    assert "the local figures" in text and "the cold requests" in text  # the rest kept
    assert text.index(finder_scenario.HEADING) < text.index("## Cold requests")
    assert "- code search starts no process: met" in text
    assert "| literal, one file | `floorless_rare_marker_7431` | repository | 200 |" in text
    assert "| path list, a tree never listed (cold) |" in text
    again = report.from_json(found.read_text())
    assert again.figures == {"search": body["search"], "finder": body["finder"]}
