"""The benchmark's api scenario runs end to end on the small repository for a handful of
requests: every API read measured beside its page in the same rounds, both answering 200,
the server spawning nothing for either, and the report's rows for them. It asserts counts,
never times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
from bench.run import options, run
from bench.scenarios import api

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("bench-api")
    given = options(
        repo="small",
        scenarios=("api",),
        contenders=("floorless",),
        requests=3,
        warmup=1,
        workdir=work / "run",
        cache_dir=work / "cache",
    )
    return run(given, log=lambda line: None)


def test_each_api_read_is_measured_beside_its_page(results) -> None:
    # nothing but the api scenario
    assert results.runs == [] and results.figures.keys() == {"api"}
    reads = results.figures["api"]
    assert [r.read for r in reads] == list(api.READS)
    pages = {r.read: r.page_name for r in reads}
    assert pages == {
        "file": "file",
        "dir": "dir",
        "commits": "commits",
        "branches": "branches",
        "tree": "dir",
    }
    for read in reads:
        for measured in (read.page, read.api):
            assert measured.status == 200 and measured.requests == 3, measured.url
            # counted for this URL alone, by the server itself: nothing spawned
            assert measured.server_spawns_per_request == 0
            assert measured.spawns_per_request >= 0
        assert "/api/v1/repos/bench/small/" in read.api.url
        assert "/api/v1/" not in read.page.url
        assert "spawn" in (read.api.server_timing or "")
    urls = {r.read: r.api.url for r in reads}
    assert urls["commits"].endswith("/commits?sha=main&limit=50")
    assert "/git/trees/" in urls["tree"] and "/contents/" in urls["file"]


def test_the_report_has_a_row_for_each_read(results, tmp_path: Path) -> None:
    (check,) = [c for c in report.evaluate(results) if c.target.endswith("on an API read")]
    assert check.passed is True and "0 on 5 reads by Server-Timing" in check.detail
    report.write(results, tmp_path / "r.json", tmp_path / "b.md", "python -m bench --scenarios api")
    page = (tmp_path / "b.md").read_text()
    assert "## API reads beside their pages" in page
    assert "## Api storage" not in page and "## Local storage" not in page
    section = page.split("## API reads beside their pages", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    assert [row.split()[1] for row in rows] == list(api.READS)
    assert "| file `contents/" in page and "| tree `git/trees/" in page
    body = json.loads((tmp_path / "r.json").read_text())
    assert len(body["api"]) == len(api.READS)
    assert "API reads beside their pages" in report.table(results)
    # a run's JSON renders the same page again
    again = report.from_json((tmp_path / "r.json").read_text())
    assert report.markdown(again, "python -m bench --scenarios api") == page
