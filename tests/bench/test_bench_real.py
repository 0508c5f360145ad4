"""The benchmark's real scenario (real histories: git.git's and flask's) as its report shows
and judges it, on hand-made figures: no repository, no server. The scenario itself runs only
by hand (``--scenarios real --real-repos ...``), never in CI."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from bench import deep, report
from bench import run as bench_run
from bench.harness import Results
from bench.scenarios import real as scenario

pytestmark = pytest.mark.unit


def sweep(p50: float, throughput: float) -> dict[str, Any]:
    """A sweep's figures: cgit's p50 4 ms on every page class, floorless's ``p50`` but on
    history pages (1 ms)."""
    return {
        "repo": "r",
        "commits": 1,
        "classes": {
            kind: {
                "requests": 300,
                "floorless_ms": {"p50": 1.0 if kind == "history" else p50, "p95": 9.0, "p99": 9.5},
                "cgit_ms": {"p50": 4.0, "p95": 6.0, "p99": 8.0},
                "floorless_errors": 0,
                "cgit_errors": 0,
            }
            for kind in ("file", "dir", "history", "commit")
        },
        "throughput": {
            "floorless": throughput,
            "cgit": 100.0,
            "floorless, 2 processes": throughput + 40.0,
        },
        "memory_mb": {
            "after index": 150.0,
            "idle after index": 120.0,
            "after sweep": 180.0,
            "after throughput": 190.0,
            "idle after the crawl": 160.0,
        },
        "gc": {
            "full collections": 1,
            "full collection seconds": 0.02,
            "pauses over 20 ms": 2,
            "longest pause at most ms": 50.0,
        },
        "rounds": [{"file": 0.5, "dir": 0.5, "history": 0.25, "commit": 0.5}],
    }


def repository(name: str, commits: int, companion: str) -> dict[str, Any]:
    return {
        "repo": name,
        "path": f"/srv/real/{name}.git",
        "branch": "master",
        "commits": commits,
        "companion": companion,
        "parts": ["index", "first", "sweep", "deep"],
        "load": {"start": [0.25, 0.5, 1.0], "end": [1.75, 1.5, 1.25]},
        "errors": {},
        "seconds": 600.0,
        "cold": {
            "repo": name,
            "commits": commits,
            "parts": ["index", "first", "sweep"],
            "processes": 1,
            "database": "sqlite",
            "index": {
                "git_log_raw_s": 6.0,
                "commit_graph_write_s": 8.0,
                "floorless_index_s": 9.0,
                "ratio_to_commit_graph": 1.125,
                "restart_s": 1.0,
                "rss_before_mb": 40.0,
                "rss_after_index_mb": 90.0,
                "rss_after_restart_mb": 85.0,
                "index_memory_mb": 9.0,
                "db_mb": 10.0,
                "commits": commits,
                "slices": 17,
            },
            "first": {
                "companion": companion,
                "first": {
                    "history_s": 0.6,
                    "home_s": 1.2,
                    "indexed_s": 20.0,
                    "rss_peak_mb": 320.0,
                    "rss_idle_mb": 210.0,
                    "rss_idle_all_mb": 280.0,
                    "rss_idle_anon_mb": 150.0,
                },
                "restart": {"history_s": 0.0, "home_s": 0.0, "rss_idle_mb": 160.0},
            },
            "blame": {},
            "commit": {},
            "sweep": sweep(2.0, 250.0),
            "lanes": {},
            "errors": {},
        },
        "deep": {
            "skip": 40000,
            "runs": 3,
            "floorless_ms": [500.0, 480.0, 520.0],
            "floorless_polls": [12, 11, 13],
            "floorless_warm_ms": [9.0, 8.5, 9.5],
            "cgit_ms": [200.0, 210.0, 190.0],
            "floorless_p50_ms": 500.0,
            "cgit_p50_ms": 200.0,
            "same_page": True,
        },
    }


def figures() -> dict[str, Any]:
    """git.git's and flask's: git's deep page 2.5x cgit's (a miss), flask's within 2x (0.5x);
    flask's throughput 1.5x cgit's (a miss)."""
    git = repository("git", 81966, "flask")
    flask = repository("flask", 5531, "git")
    flask["cold"]["index"].update(
        git_log_raw_s=0.3,
        commit_graph_write_s=0.4,
        floorless_index_s=0.5,
        ratio_to_commit_graph=1.3,
    )
    flask["cold"]["sweep"] = sweep(3.0, 150.0)
    flask["deep"].update(skip=5481, floorless_p50_ms=50.0, cgit_p50_ms=100.0)
    return {"git": git, "flask": flask}


def results(real: dict[str, Any] | None) -> Results:
    return Results(
        repo={
            "kind": "small",
            "name": "small",
            "commits": 500,
            "file": "f.py",
            "directory": "src",
            "history_path": "f.py",
            "branch": "main",
        },
        options={"scenarios": ["real"]},
        runs=[],
        machine={"cores": "2", "cpu": "cpu", "kernel": "6", "python": "3.11", "git": "git"},
        started="today",
        seconds=900.0,
        figures={} if real is None else {"real": real},
    )


def judged(real: dict[str, Any]) -> dict[str, bool | None]:
    return {c.target: c.passed for c in scenario.judge(real)}


def find(checks: dict[str, bool | None], repo: str, words: str) -> bool | None:
    (found,) = [p for t, p in checks.items() if t.startswith(f"{repo}: ") and words in t]
    return found


COMMAND = (
    "python -m bench --scenarios real --real-repos /srv/real/git.git,/srv/real/flask.git "
    "--docs docs/benchmarks.md --json bench-real.json"
)


def test_the_section_has_a_row_a_figure_and_three_columns_a_repository() -> None:
    lines = scenario.page_section(results(figures()), COMMAND)
    assert lines[0] == "## Real histories"
    assert COMMAND in lines
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == (
        "| | `git` floorless | reference | ratio | `flask` floorless | reference | ratio |"
    )
    assert table[1] == "|---|---|---|---|---|---|---|"
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table[2:]}
    assert len(rows) == len(scenario.ROWS) + 2  # and the load average at the start and end
    assert rows[
        "whole first index (s), against `git commit-graph write --reachable --changed-paths`"
    ].endswith("| 9.00 | 8.00 | 1.12x | 0.50 | 0.40 | 1.30x |")  # the index's own ratio
    assert rows["whole first index (s), against `git log --raw --no-renames`"].endswith(
        "| 9.00 | 6.00 | 1.50x | 0.50 | 0.30 | 1.67x |"
    )
    assert rows["peak RSS while indexing, workers (MB)"].endswith("| 320 |  |  | 320 |  |  |")
    assert rows["home page's last-commit column complete, cold (s)"].endswith(
        "| 1.20 |  |  | 1.20 |  |  |"
    )
    assert rows["first history page of a path complete, cold (s)"].endswith("| 0.60 |  |  |")
    assert rows["RSS idle, workers (MB)"].endswith("| 210 |  |  |")
    assert rows["RSS idle, whole process tree (MB)"].endswith("| 280 |  |  |")
    assert rows["RSS after the sweep (MB)"].endswith("| 180 |  |  |")
    assert rows["collector pauses over 20 ms during the sweep"].endswith("| 2 |  |  |")
    assert rows["longest collector pause during the sweep, at most (ms)"].endswith("| 50 |  |  |")
    assert rows["distinct URLs, dir page p50 (ms)"].endswith(
        "| 2.00 | 4.00 | 0.50x | 3.00 | 4.00 | 0.75x |"
    )
    assert rows["distinct URLs, history page p50 (ms)"].endswith(
        "| 1.00 | 4.00 | 0.25x | 1.00 | 4.00 | 0.25x |"
    )
    for kind in ("file", "commit"):
        assert f"distinct URLs, {kind} page p50 (ms)" in rows
    assert rows["throughput on distinct URLs, 16 clients (requests/s)"].endswith(
        "| 250.0 | 100.0 | 2.50x | 150.0 | 100.0 | 1.50x |"
    )
    assert rows["the same, 2 floorless processes (requests/s)"].endswith(
        "| 290.0 | 100.0 | 2.90x | 190.0 | 100.0 | 1.90x |"
    )
    assert rows["commits page 40,000 deep (a shorter history's last), p50 (ms)"].endswith(
        "| 500.0 | 200.0 | 2.50x | 50.0 | 100.0 | 0.50x |"
    )
    assert rows["load average at the start (1, 5, 15 min)"].endswith(
        "| 0.25, 0.50, 1.00 |  |  | 0.25, 0.50, 1.00 |  |  |"
    )
    assert rows["load average at the end (1, 5, 15 min)"].endswith("| 1.75, 1.50, 1.25 |  |  |")
    text = "\n".join(lines)
    assert "`git` (81,966 commits on `master`, `flask` beside it; 600 s)" in text
    assert (
        "`flask` 5,481 commits deep, floorless 500, 480, 520 ms (12, 11, 13 requests), cgit 200, "
        "210, 190 ms, the same page again from floorless (its walk kept) 9, 8.5, 9.5 ms; both "
        "pages show the commits of `git rev-list --skip=5481`." in text
    )


def test_each_target_is_judged_for_each_repository() -> None:
    checks = judged(figures())
    for repo in ("git", "flask"):
        assert find(checks, repo, "first index within 2x") is True
        assert find(checks, repo, "complete within 3 s") is True
        assert find(checks, repo, "indexed and idle at most 300 MB") is True
        assert find(checks, repo, "on every page class") is True
    assert find(checks, "git", "throughput on distinct URLs") is True  # 2.5x
    assert find(checks, "flask", "throughput on distinct URLs") is False  # 1.9x at best
    assert find(checks, "git", "commits page 40,000 commits deep") is False  # 2.5x
    assert find(checks, "flask", "commits page 40,000 commits deep") is True  # 0.5x
    for repo in ("git", "flask"):
        assert find(checks, repo, "pause over 20 ms") is False  # 2 of them
        assert find(checks, repo, "within 50 MB of idle") is True  # 160 against 120
    assert len(checks) == 2 * 8
    page = "\n".join(scenario.page_section(results(figures()), COMMAND))
    assert (
        "- git: the commits page 40,000 commits deep (a shorter history's last page) within 2x "
        "of cgit's (without its cache): **missed** (2.50x: 500 ms against 200 ms, 40,000 commits "
        "deep, median of 3)" in page
    )
    assert (
        "- flask: RSS of the whole process tree with the repository and `git` indexed and idle "
        "at most 300 MB: met (280 MB, 210 MB of it the workers')" in page
    )


def test_a_figure_over_its_limit_turns_the_check() -> None:
    real = figures()
    real["git"]["cold"]["first"]["first"]["home_s"] = 3.1
    real["git"]["cold"]["first"]["first"]["rss_idle_all_mb"] = 301.0
    real["git"]["cold"]["index"]["ratio_to_commit_graph"] = 2.1
    real["git"]["cold"]["sweep"]["classes"]["commit"]["floorless_ms"]["p50"] = 4.0
    real["git"]["cold"]["sweep"]["memory_mb"]["idle after the crawl"] = 171.0
    real["git"]["cold"]["sweep"]["gc"]["pauses over 20 ms"] = 0
    real["flask"]["cold"]["sweep"]["throughput"]["floorless, 2 processes"] = 200.0  # 2x
    checks = judged(real)
    assert find(checks, "flask", "throughput on distinct URLs") is True  # the best of the two
    assert find(checks, "git", "within 50 MB of idle") is False  # 51 MB, none of it cached
    assert find(checks, "git", "pause over 20 ms") is True
    assert find(checks, "git", "complete within 3 s") is False
    assert find(checks, "git", "indexed and idle at most 300 MB") is False
    assert find(checks, "git", "first index within 2x") is False
    assert find(checks, "git", "on every page class") is False  # 1.0x is not below
    assert find(checks, "flask", "complete within 3 s") is True
    real["git"]["cold"]["sweep"]["memory_mb"]["caches idle after the crawl"] = 30.0
    assert find(judged(real), "git", "within 50 MB of idle") is True  # 21 MB beyond them
    real["flask"]["deep"]["same_page"] = False  # then the two did not do the same work
    assert find(judged(real), "flask", "commits page 40,000 commits deep") is False


def test_a_failed_part_is_said_so_and_the_rest_still_shown() -> None:
    real = figures()
    real["git"]["deep"] = {}
    real["git"]["errors"] = {"deep": "RuntimeError: cgit answered 502"}
    real["flask"]["cold"]["first"] = {}
    real["flask"]["cold"]["errors"] = {"first": "RuntimeError: server exited with 1"}
    real["flask"]["parts"] = ["index", "first", "sweep"]  # deep needs the first part's index
    real["flask"]["deep"] = {}
    details = {c.target: (c.passed, c.detail) for c in scenario.judge(real)}

    def detail(repo: str, words: str) -> tuple[bool | None, str]:
        (found,) = [v for t, v in details.items() if t.startswith(f"{repo}: ") and words in t]
        return found

    assert detail("git", "commits deep") == (
        None,
        "the deep part failed: RuntimeError: cgit answered 502",
    )
    assert detail("flask", "commits deep") == (None, "the deep part was not run")
    assert detail("flask", "complete within 3 s") == (
        None,
        "the first part failed: RuntimeError: server exited with 1",
    )
    assert detail("flask", "first index within 2x")[0] is True
    lines = scenario.page_section(results(real), COMMAND)
    assert "`git`: the deep part failed: `RuntimeError: cgit answered 502`." in lines
    assert "`flask`: the first part failed: `RuntimeError: server exited with 1`." in lines
    rows = [line for line in lines if line.startswith("| RSS idle, workers (MB) |")]
    assert rows == ["| RSS idle, workers (MB) | 210 |  |  | - |  |  |"]
    deep_row = [line for line in lines if line.startswith("| commits page")]
    assert deep_row[0].endswith("| - | - | - | - | - | - |")


def test_a_real_run_alone_replaces_only_its_section_and_keeps_its_figures(
    tmp_path: Path,
) -> None:
    again = report.from_json(report.to_json(results(figures())))
    assert again.figures["real"] == figures()
    docs = tmp_path / "benchmarks.md"
    warm = results(None)
    warm.options = {**bench_run.options().record(), "scenarios": ["local"]}
    docs.write_text(report.markdown(warm, "python -m bench --repo small"))
    before = docs.read_text()
    report.write_docs(results(figures()), docs, COMMAND)
    once = docs.read_text()
    assert once.startswith(before.rstrip("\n"))
    assert once.count(scenario.HEADING) == 1
    later = copy.deepcopy(figures())
    later["git"]["deep"]["floorless_p50_ms"] = 300.0
    report.write_docs(results(later), docs, COMMAND)
    twice = docs.read_text()
    assert twice.count(scenario.HEADING) == 1
    assert "**missed** (2.50x" not in twice and "met (1.50x: 300 ms" in twice


def test_the_scenario_is_asked_for_by_name_with_its_repositories(tmp_path: Path) -> None:
    assert "real" not in bench_run.DEFAULT_SCENARIOS
    with pytest.raises(ValueError, match="needs --real-repos"):
        bench_run.options(scenarios=("real",))
    with pytest.raises(ValueError, match="is not a git repository"):
        bench_run.options(scenarios=("real",), real_repos=(str(tmp_path),))
    for name in ("a", "b"):
        (tmp_path / name / "flask.git" / "objects").mkdir(parents=True)
    twice = tuple(str(tmp_path / name / "flask.git") for name in ("a", "b"))
    with pytest.raises(ValueError, match="same name"):
        bench_run.options(scenarios=("real",), real_repos=twice)


def test_the_deep_page_is_40000_commits_deep_or_a_shorter_historys_last() -> None:
    assert deep.PAGE == 50  # floorless's commits_per_page, cgit's max-commit-count
    assert deep.depth(81966) == 40000
    assert deep.depth(5531) == 5531 - 50
    assert deep.depth(20) == 0
