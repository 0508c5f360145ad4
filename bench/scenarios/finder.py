"""The ``finder`` scenario: the file finder's path list cold and warm (``bench.finder``) on a
tree of git.git's file count, with one commit per request so that every cold request lists a
tree never listed. Asked for by name."""

from __future__ import annotations

import argparse
from typing import Any

from bench import finder
from bench.harness import Check, Context, Report, Results, Scenario, Standalone, standalone

HEADING = "## File finder"


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--finder-files", type=int, default=4500, help="files of the finder scenario's tree"
    )
    parser.add_argument(
        "--finder-requests", type=int, default=200, help="requests a case (finder scenario)"
    )


def run(context: Context, name: str) -> None:
    options, base = context.options, context.workdir / name
    base.mkdir(parents=True, exist_ok=True)
    requests = options.finder_requests
    repos = base / "repos"
    context.log(f"finder: a tree of {options.finder_files} files, {requests} requests a case")
    finder.build(repos / "bench" / "finder.git", options.finder_files, requests + 1)
    result = finder.measure(repos, base / "data", requests)
    context.log(
        "finder: path list p50 cold {cold} ms, warm {warm} ms, processes {spawned}".format(
            cold=result["paths_cold"]["p50_ms"],  # type: ignore[index]
            warm=result["paths_warm"]["p50_ms"],  # type: ignore[index]
            spawned=result["spawned"],
        )
    )
    context.figures["finder"] = result


# -- the report ---------------------------------------------------------------------------------


def judge(finder: dict[str, Any]) -> list[Check]:
    """The finder's path list and page start no process, cold or warm."""
    spawned = finder.get("spawned")
    target = "the file finder's path list and page start no process"
    if spawned is None:
        return [Check(target, None, "not measured")]
    return [Check(target, spawned == 0, f"{spawned:.0f} in {finder['requests']} rounds")]


def checks(results: Results) -> list[Check]:
    found = results.figures.get("finder")
    return [] if found is None else judge(found)


def figures_section(finder: dict[str, Any]) -> list[str]:
    out = [
        f"A tree of {finder['files']:,} files (git.git's count, as deep as its directories);"
        f" the path list is {finder['body_bytes']:,} bytes of JSON, {finder['gzip_bytes']:,}"
        f" gzipped. {finder['requests']} rounds, each case once a round, in process (the"
        " route's own cost, no sockets); processes started: "
        f"{finder['spawned']:.0f}.",
        "",
        "| case | p50 ms | p95 ms | p50 / warm list |",
        "|---|---|---|---|",
    ]
    labels = {
        "paths_cold": "path list, a tree never listed (cold)",
        "paths_warm": "path list, cached (warm)",
        "paths_304": "path list, revalidated (304)",
        "find_page": "finder page without script, `?q=`",
    }
    for key, label in labels.items():
        case = finder.get(key)
        if case is not None:
            out.append(
                f"| {label} | {case['p50_ms']:.2f} | {case['p95_ms']:.2f} | {case['to_warm']:.2f} |"
            )
    return out


def section(results: Results, command: str) -> list[str]:
    found = results.figures.get("finder")
    return [] if found is None else ["", HEADING, "", *figures_section(found)]


def page_section(results: Results, command: str) -> list[str]:
    found = results.figures["finder"]
    return standalone(results, HEADING, command, judge(found)) + figures_section(found)


SCENARIO = Scenario(
    names=("finder",),
    summary="the file finder's path list cold and warm: bench.finder",
    arguments=arguments,
    run=run,
    report=Report(checks=checks, section=section, standalone=Standalone(HEADING, page_section)),
    key="finder",
)
