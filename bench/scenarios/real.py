"""The ``real`` scenario: real histories (``--real-repos``, git.git's and flask's), each in
turn: the cold scenario's first index, first visits and distinct URLs against cgit
(``bench.cold_suite``), the other repository served beside it in the first visits, then a
commits page deep in its history against cgit's (``bench.deep``); the machine's load average
at the start and the end of each. Its section puts each figure beside its reference, judged
against the targets of the first-visit work. Asked for by name: on git.git it takes minutes,
and the repositories are not the project's (CI never runs it; its tests render given
figures)."""

from __future__ import annotations

import argparse
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench import cold_suite, contenders, deep
from bench.cold_suite import MEMORY_MB
from bench.harness import (
    Check,
    Context,
    Options,
    Report,
    Results,
    Scenario,
    Standalone,
    Target,
    figure_at,
    load_average,
    names,
    num,
    target_repository,
    why_missing,
    within,
)
from bench.harness import standalone as standalone_head
from bench.index import judge as judge_index
from bench.sweep import judge as judge_sweep

HEADING = "## Real histories"
COLD_PARTS = ("index", "first", "sweep")  # bench.cold_suite's, in this order
# the sweep's throughput is also measured with this many server processes (one a core here)
THROUGHPUT_PROCESSES = 2
COLD_SECONDS = 3.0  # a cold repository's home page and path history, complete
DEEP_RATIO = 2.0  # the deep commits page against cgit's


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--real-repos",
        default=(),
        type=names,
        help="the real scenario's repositories, comma-separated paths, measured in that order "
        "(bare copies of git/git and pallets/flask, heads and tags); each is served beside "
        "the next in its first visits",
    )
    parser.add_argument(
        "--real-runs",
        type=int,
        default=deep.RUNS,
        help="runs of the deep commits page on each side (real scenario)",
    )


def validate(options: Options) -> str | None:
    if "real" not in options.scenarios:
        return None
    if not options.real_repos:
        return "the real scenario needs --real-repos"
    for path in options.real_repos:
        if not (Path(path) / "objects").is_dir() and not (Path(path) / ".git").is_dir():
            return f"--real-repos: {path} is not a git repository"
    short = [Path(path).name.removesuffix(".git") for path in options.real_repos]
    if len(set(short)) < len(short):
        return "--real-repos: two repositories of the same name"
    if options.real_runs < 1:
        return "--real-runs must be at least 1"
    return contenders.available("cgit")


def run(context: Context, name: str) -> None:
    options, base = context.options, context.workdir / name
    targets = [target_repository(path, options.cache_dir) for path in options.real_repos]
    found: dict[str, Any] = {}
    context.figures["real"] = found
    for number, target in enumerate(targets):
        companion = targets[(number + 1) % len(targets)] if len(targets) > 1 else None
        context.log(
            f"real: {target.name}, {target.commits:,} commits"
            + (f", {companion.name} beside it" if companion else "")
        )
        found[target.name] = measure(target, companion, options, base / target.name, context.log)


def measure(
    target: Target,
    companion: Target | None,
    options: Options,
    work: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One repository's figures. Its copies (git.git's are 300 MB each) are removed after."""
    began = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {
        "repo": target.name,
        "path": str(target.path),
        "branch": target.branch,
        "commits": target.commits,
        "companion": companion.name if companion else None,
        "parts": list(COLD_PARTS),  # and deep, once it is run
        "load": {"start": load_average()},
        "errors": {},
    }
    cold = cold_suite.run(
        target,
        options.cache_dir,
        work,
        COLD_PARTS,
        log=log,
        companion=companion,
        throughput_processes=THROUGHPUT_PROCESSES,
    )
    figures["cold"] = asdict(cold)
    figures["deep"] = {}
    if cold.first:  # deep walks the index the first part leaves
        log("real: deep commits page")
        figures["parts"].append("deep")
        try:
            found = deep.run(work / "first", target, work / "deep", options.real_runs, log=log)
            figures["deep"] = asdict(found)
        except Exception as error:  # noqa: BLE001 (recorded, as cold_suite records a part's)
            log(f"real: deep failed: {error}")
            figures["errors"]["deep"] = "".join(traceback.format_exception_only(error)).strip()
            traceback.print_exc()
    figures["load"]["end"] = load_average()
    figures["seconds"] = round(time.monotonic() - began, 1)
    shutil.rmtree(work, ignore_errors=True)
    return figures


# -- the report ---------------------------------------------------------------------------------


def checks(results: Results) -> list[Check]:
    real = results.figures.get("real")
    return [] if real is None else judge(real)


def section(results: Results, command: str) -> list[str]:
    real = results.figures.get("real")
    return [] if real is None else ["", HEADING, "", *figures_section(real)]


def page_section(results: Results, command: str) -> list[str]:
    """The section as it stands on its own in a page another run wrote."""
    real = results.figures["real"]
    return standalone_head(results, HEADING, command, judge(real), git=True) + figures_section(real)


def judge(real: dict[str, Any]) -> list[Check]:
    """Each repository's figures against the targets, each target named with its repository;
    a part that failed is said so ("not measured"), a page never complete is a miss."""
    return [
        replace(check, target=f"{name}: {check.target}")
        for name, repo in real.items()
        for check in _judge(repo)
    ]


def _judge(repo: dict[str, Any]) -> list[Check]:
    cold = repo.get("cold") or {}
    checks = [judge_index(cold.get("index") or {}, why_missing(cold, "index"))]
    first = figure_at(cold, "first", "first") or {}
    target = (
        "a cold repository: the home page's last-commit column and a path's first history "
        f"page complete within {COLD_SECONDS:g} s of being asked for"
    )
    if first:
        home, history = first.get("home_s"), first.get("history_s")
        late = " (-: not complete within the deadline)" if home is None or history is None else ""
        checks.append(
            Check(
                target,
                home is not None and history is not None and max(home, history) <= COLD_SECONDS,
                f"home {num(home, '.2f')} s, history {num(history, '.2f')} s{late}",
            )
        )
    else:
        checks.append(Check(target, None, why_missing(cold, "first")))
    beside = f" and `{repo['companion']}`" if repo.get("companion") else ""
    idle = first.get("rss_idle_all_mb")
    checks.append(
        Check(
            f"RSS of the whole process tree with the repository{beside} indexed and idle at "
            f"most {MEMORY_MB:g} MB",
            within(idle, MEMORY_MB),
            f"{num(idle, '.0f')} MB, {num(first.get('rss_idle_mb'), '.0f')} MB of it the workers'"
            if first
            else why_missing(cold, "first"),
        )
    )
    sweep = judge_sweep(cold.get("sweep") or {}, why_missing(cold, "sweep"))
    checks += [sweep["classes"], sweep["throughput"], sweep["gc"], sweep["memory"]]
    found = repo.get("deep") or {}
    target = (
        f"the commits page {deep.DEPTH:,} commits deep (a shorter history's last page) within "
        f"{DEEP_RATIO:g}x of cgit's (without its cache)"
    )
    if found.get("cgit_p50_ms"):
        ratio = found["floorless_p50_ms"] / found["cgit_p50_ms"]
        wrong = found.get("same_page") is False  # then the two did not do the same work
        checks.append(
            Check(
                target,
                ratio <= DEEP_RATIO and not wrong,
                f"{ratio:.2f}x: {found['floorless_p50_ms']:g} ms against "
                f"{found['cgit_p50_ms']:g} ms, {found['skip']:,} commits deep, median of "
                f"{len(found['floorless_ms'])}"
                + ("; the pages do not show git's commits" if wrong else ""),
            )
        )
    else:
        checks.append(Check(target, None, why_missing(repo, "deep")))
    return checks


@dataclass(frozen=True)
class Row:
    """A row of the section's table: its figure and, where there is one, its reference's,
    from one repository's figures."""

    label: str
    spec: str  # the figures' format
    ours: Callable[[dict[str, Any]], Any]
    theirs: Callable[[dict[str, Any]], Any] | None = None
    ratio: Callable[[dict[str, Any]], Any] | None = None  # the measure's own, when it has one


def _at(*keys: str) -> Callable[[dict[str, Any]], Any]:
    return lambda repo: figure_at(repo, *keys)


_INDEX = _at("cold", "index", "floorless_index_s")
ROWS = (
    Row(
        "whole first index (s), against `git commit-graph write --reachable --changed-paths`",
        ".2f",
        _INDEX,
        _at("cold", "index", "commit_graph_write_s"),
        _at("cold", "index", "ratio_to_commit_graph"),  # of the times before rounding
    ),
    Row(
        "whole first index (s), against `git log --raw --no-renames`",
        ".2f",
        _INDEX,
        _at("cold", "index", "git_log_raw_s"),
    ),
    Row(
        "peak RSS while indexing, workers (MB)", ".0f", _at("cold", "first", "first", "rss_peak_mb")
    ),
    Row(
        "home page's last-commit column complete, cold (s)",
        ".2f",
        _at("cold", "first", "first", "home_s"),
    ),
    Row(
        "first history page of a path complete, cold (s)",
        ".2f",
        _at("cold", "first", "first", "history_s"),
    ),
    Row("RSS idle, workers (MB)", ".0f", _at("cold", "first", "first", "rss_idle_mb")),
    Row(
        "RSS idle, whole process tree (MB)", ".0f", _at("cold", "first", "first", "rss_idle_all_mb")
    ),
    Row("RSS after the sweep (MB)", ".0f", _at("cold", "sweep", "memory_mb", "after sweep")),
    Row(
        "RSS of the sweep's server idle before the crawl (MB)",
        ".0f",
        _at("cold", "sweep", "memory_mb", "idle after index"),
    ),
    Row(
        "RSS of the sweep's server idle after the crawl (MB)",
        ".0f",
        _at("cold", "sweep", "memory_mb", "idle after the crawl"),
    ),
    Row(
        "collector pauses over 20 ms during the sweep",
        ".0f",
        _at("cold", "sweep", "gc", "pauses over 20 ms"),
    ),
    Row(
        "longest collector pause during the sweep, at most (ms)",
        ".0f",
        _at("cold", "sweep", "gc", "longest pause at most ms"),
    ),
    *(
        Row(
            f"distinct URLs, {kind} page p50 (ms)",
            ".2f",
            _at("cold", "sweep", "classes", kind, "floorless_ms", "p50"),
            _at("cold", "sweep", "classes", kind, "cgit_ms", "p50"),
        )
        for kind in ("dir", "file", "history", "commit")
    ),
    Row(
        "throughput on distinct URLs, 16 clients (requests/s)",
        ".1f",
        _at("cold", "sweep", "throughput", "floorless"),
        _at("cold", "sweep", "throughput", "cgit"),
    ),
    Row(
        f"the same, {THROUGHPUT_PROCESSES} floorless processes (requests/s)",
        ".1f",
        _at("cold", "sweep", "throughput", f"floorless, {THROUGHPUT_PROCESSES} processes"),
        _at("cold", "sweep", "throughput", "cgit"),
    ),
    Row(
        f"commits page {deep.DEPTH:,} deep (a shorter history's last), p50 (ms)",
        ".1f",
        _at("deep", "floorless_p50_ms"),
        _at("deep", "cgit_p50_ms"),
    ),
)


def _cells(row: Row, repo: dict[str, Any]) -> list[str]:
    ours = row.ours(repo)
    if row.theirs is None:
        return [num(ours, row.spec), "", ""]
    theirs = row.theirs(repo)
    ratio = row.ratio(repo) if row.ratio else ours / theirs if ours is not None and theirs else None
    return [num(ours, row.spec), num(theirs, row.spec), "-" if ratio is None else f"{ratio:.2f}x"]


def _load(values: list[float] | None) -> str:
    return "-" if not values else ", ".join(f"{v:.2f}" for v in values)


def figures_section(real: dict[str, Any]) -> list[str]:
    """The scenario's figures as Markdown: a row a figure, three columns a repository."""
    repos = list(real.values())
    out = [
        "Each repository in turn: the cold scenario's first index, first visits (the other "
        "repository served beside it) and distinct URLs against cgit (`bench.cold_suite`), "
        "then a commits page deep in its history (`bench.deep`). The reference is git's own "
        "tools for the first index and cgit without its cache (nginx and fcgiwrap, a process a "
        "request) for pages, both measured in the same run; the ratio is floorless's figure "
        "over the reference's.",
        "",
        "Repositories, in the order measured: "
        + "; ".join(
            f"`{r['repo']}` ({r['commits']:,} commits on `{r['branch']}`"
            + (f", `{r['companion']}` beside it" if r.get("companion") else "")
            + (f"; {r['seconds']:.0f} s" if r.get("seconds") else "")
            + ")"
            for r in repos
        )
        + ".",
        "",
        "| |" + "".join(f" `{r['repo']}` floorless | reference | ratio |" for r in repos),
        "|---|" + "---|---|---|" * len(repos),
    ]
    for row in ROWS:
        out.append(
            f"| {row.label} | " + " | ".join(c for r in repos for c in _cells(row, r)) + " |"
        )
    for moment in ("start", "end"):
        out.append(
            f"| load average at the {moment} (1, 5, 15 min) | "
            + " | ".join(c for r in repos for c in (_load(figure_at(r, "load", moment)), "", ""))
            + " |"
        )
    notes = [_deep_note(r["repo"], r["deep"]) for r in repos if figure_at(r, "deep", "cgit_ms")]
    if notes:
        out += [
            "",
            "The deep commits page is floorless's `commits/branch/{branch}?after={tip}&skip=N` "
            "against cgit's `log/?ofs=N`, timed from floorless's first request until the page "
            "is complete (it says it is being prepared meanwhile, and is asked again every "
            f"{deep.POLL_SECONDS * 1000:.0f} ms), floorless restarted for each run over the data "
            "its first visit left, so that each is a walk from nothing: " + "; ".join(notes) + ".",
        ]
    for r in repos:
        errors = {**((r.get("cold") or {}).get("errors") or {}), **(r.get("errors") or {})}
        for part, error in errors.items():
            out += ["", f"`{r['repo']}`: the {part} part failed: `{error}`."]
    return out


def _deep_note(name: str, found: dict[str, Any]) -> str:
    def each(values: list[float]) -> str:
        return ", ".join(f"{v:g}" for v in values)

    oracle = f"the commits of `git rev-list --skip={found['skip']}`"
    agree = {
        True: f"both pages show {oracle}",
        False: f"**the pages do not both show {oracle}**",
        None: "the pages not compared with git's",
    }[found.get("same_page")]
    return (
        f"`{name}` {found['skip']:,} commits deep, floorless {each(found['floorless_ms'])} ms "
        f"({each(found['floorless_polls'])} requests), cgit {each(found['cgit_ms'])} ms, the "
        f"same page again from floorless (its walk kept) {each(found['floorless_warm_ms'])} ms; "
        + agree
    )


SCENARIO = Scenario(
    names=("real",),
    summary="real histories (--real-repos: git.git, flask) each in turn: first index, first "
    "visits, distinct URLs and a deep commits page against cgit, memory, load",
    arguments=arguments,
    run=run,
    report=Report(
        checks=checks,
        section=section,
        standalone=Standalone(HEADING, page_section),
    ),
    key="real",
    validate=validate,
)
