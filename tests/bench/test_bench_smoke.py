"""The benchmark runs end to end on the small repository for a handful of requests, so it
cannot rot. It asserts counts (processes, slow-filesystem operations), never times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fuse import fuse_or_skip

from bench import report
from bench.run import options, run

pytestmark = pytest.mark.bench




@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory):
    fuse_or_skip()
    work = tmp_path_factory.mktemp("bench")
    given = options(
        repo="small",
        scenarios=("local", "slow"),
        contenders=("floorless", "reference"),
        requests=3,
        warmup=1,
        throughput_pages=("raw",),
        throughput_seconds=0.5,
        concurrency=4,
        delay_ms=0.3,  # counts matter here, not times
        workdir=work / "run",
        cache_dir=work / "cache",
    )
    return run(given, log=lambda line: None)


def by(results, contender: str, scenario: str):
    (found,) = [r for r in results.runs if r.contender == contender and r.scenario == scenario]
    assert found.skipped is None
    return found


def test_every_page_measured_for_both_contenders_on_both_storages(results) -> None:
    for contender in ("floorless", "reference"):
        for scenario in ("local", "slow"):
            found = by(results, contender, scenario)
            assert set(found.pages) == {
                "home",
                "dir",
                "file",
                "raw",
                "commits",
                "history",
                "commit",
                "blame",
                "explore",
            }
            assert all(p.status == 200 and p.requests == 3 for p in found.pages.values())
            assert found.cold_start_ms is not None and found.cold_push_ms is not None
            raw = found.pages["raw"]
            # measured, or left out because one request outlasts the load's window
            assert raw.throughput_rps is not None or raw.notes
    assert by(results, "floorless", "local").pages["raw"].throughput_rps


def test_the_reference_spawns_and_reaches_the_slow_filesystem_floorless_does_not(results):
    reference = by(results, "reference", "slow")
    ours = by(results, "floorless", "slow")
    # about six git children per repository page (counted machine-wide, so at least five)
    for page in ("home", "raw", "commits"):
        assert reference.pages[page].spawns_per_request >= 5
        assert reference.pages[page].slowfs_ops_per_request > 10
        assert ours.pages[page].slowfs_ops_per_request == 0
    checks = {c.target.split(":")[0]: c for c in report.evaluate(results)}
    assert checks["no process spawned on any browse page"].passed is not None


def test_local_and_slow_floorless_measured_interleaved(results) -> None:
    paired = results.figures["paired"]
    assert paired is not None
    assert (
        set(paired.local)
        == set(paired.slow)
        == {"home", "dir", "file", "raw", "commits", "history", "commit", "blame", "explore"}
    )
    for name, slow in paired.slow.items():
        local = paired.local[name]
        assert slow.status == local.status == 200 and slow.requests == local.requests == 3
        assert local.url != slow.url
        assert local.slowfs_ops_per_request is None  # its storage is local disk
        assert slow.slowfs_ops_per_request == 0  # warm: the slow filesystem is not reached
    (slow_vs_local,) = [c for c in report.evaluate(results) if "within 1.25x" in c.target]
    assert "requests alternating" in slow_vs_local.detail


def test_pushed_commit_becomes_visible(results) -> None:
    for scenario in ("local", "slow"):
        assert by(results, "floorless", scenario).push_visible_after_s is not None
        assert by(results, "reference", scenario).push_visible_after_s is not None


def test_outputs(results, tmp_path: Path) -> None:
    report.write(results, tmp_path / "r.json", tmp_path / "b.md", "python -m bench --smoke")
    body = json.loads((tmp_path / "r.json").read_text())
    assert {r["contender"] for r in body["runs"]} == {"floorless", "reference"}
    assert len(body["checks"]) == 7  # the API reads check: not measured without the api scenario
    page = (tmp_path / "b.md").read_text()
    assert "python -m bench --smoke" in page
    assert "## Slow storage" in page and "| raw | reference |" in page
    assert "## Slow against local storage, interleaved" in page
    assert body["paired"]["slow"]["raw"]["slowfs_ops_per_request"] == 0
    assert "no process spawned on any browse page" in report.table(results)
    # a run's JSON renders the same page again
    again = report.from_json((tmp_path / "r.json").read_text())
    assert report.markdown(again, "python -m bench --smoke") == page
