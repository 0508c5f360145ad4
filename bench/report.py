"""Turning a run's results into the terminal table, the JSON file and docs/benchmarks.md,
judged against the targets floorless is held to.

The page is the same for every run: its header (machine, command, repository), the targets
every scenario judged, each scenario's section in the registry's order (``bench.scenarios``),
then the contenders' first requests and what was skipped. A run of scenarios that each have a
section of their own (``Standalone``: cold, search, finder) replaces only those sections of a
page another run wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path

from bench.harness import Check, ContenderRun, Results, judged, num, page_result
from bench.scenarios import REGISTRY

MARK = "<!-- Written by `python -m bench`"


def evaluate(results: Results) -> list[Check]:
    return [check for scenario in REGISTRY for check in scenario.report.checks(results)]


def table(results: Results) -> str:
    lines = [line for scenario in REGISTRY for line in scenario.report.table(results)]
    lines.append("")
    for check in evaluate(results):
        mark = {True: "PASS", False: "MISS", None: "n/a "}[check.passed]
        lines.append(f"[{mark}] {check.target}: {check.detail}")
    return "\n".join(lines)


def to_json(results: Results) -> str:
    """The results as one object: each scenario's figures under its key (null when it did
    not run), and the checks."""
    whole = asdict(results)
    figures = whole.pop("figures")
    for scenario in REGISTRY:
        if scenario.key is not None:
            whole[scenario.key] = figures.get(scenario.key)
    whole["checks"] = [asdict(c) for c in evaluate(results)]
    return json.dumps(whole, indent=2, default=str)


def from_json(text: str) -> Results:
    """The results a run wrote with ``to_json``, to render them again."""
    body = json.loads(text)
    run_fields = {f.name for f in fields(ContenderRun)}
    runs = [
        ContenderRun(
            **{
                **{k: v for k, v in run.items() if k in run_fields},
                "pages": {name: page_result(p) for name, p in run["pages"].items()},
            }
        )
        for run in body["runs"]
    ]
    figures = {
        s.key: s.decode(body[s.key])
        for s in REGISTRY
        if s.key is not None and body.get(s.key) is not None
    }
    return Results(
        repo=body["repo"],
        options=body["options"],
        runs=runs,
        machine=body["machine"],
        started=body["started"],
        seconds=body["seconds"],
        figures=figures,
    )


def markdown(results: Results, command: str) -> str:
    out = [
        "# Benchmarks",
        "",
        f"{MARK}; the figures below come from one run. -->",
        "",
        f"Measured {results.started} on {results.machine['cores']} cores "
        f"({results.machine['cpu']}), Linux {results.machine['kernel']}, Python "
        f"{results.machine['python']}, {results.machine['git']}. The run took "
        f"{results.seconds:.0f} s.",
        "",
        "```sh",
        command,
        "```",
        "",
        f"Repository: `{results.repo['kind']}` ({results.repo['commits']} commits); file "
        f"`{results.repo['file']}`, directory `{results.repo['directory']}`, path history of "
        f"`{results.repo['history_path']}`.",
    ]
    # scenarios measured alike say so once
    out += dict.fromkeys(line for s in REGISTRY for line in s.report.intro(results))
    out += ["", "## Targets", "", *judged(evaluate(results))]
    for scenario in REGISTRY:
        out += scenario.report.section(results, command)
    if any(not run.skipped for run in results.runs):
        out += _cold_requests(results)
    skipped = [r for r in results.runs if r.skipped or r.errors]
    if skipped:
        out += ["", "## Skipped", ""]
        out += [f"- {r.contender} ({r.scenario}): {r.skipped}" for r in skipped if r.skipped]
        out += [
            f"- {r.contender} ({r.scenario}), page {error}" for r in skipped for error in r.errors
        ]
    return "\n".join(out) + "\n"


def _cold_requests(results: Results) -> list[str]:
    out = [
        "",
        "## Cold requests",
        "",
        "| contender | storage | first request after start (ms) | first request after a "
        "push (ms) | push visible after (s) |",
        "|---|---|---|---|---|",
    ]
    for run in results.runs:
        if run.skipped:
            continue
        out.append(
            f"| {run.contender} | {run.scenario} | {num(run.cold_start_ms, '.1f')} | "
            f"{num(run.cold_push_ms, '.1f')} | {num(run.push_visible_after_s, '.2f')} |"
        )
    return out


def splice(page: str, heading: str, section: list[str]) -> str:
    """``page`` with the section under ``heading`` replaced by ``section`` (which starts with
    that heading), or given one before the cold requests' table or at the end."""
    lines = page.rstrip("\n").split("\n")
    if heading in lines:
        start = lines.index(heading)
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
    else:
        start = end = next(
            (i for i, line in enumerate(lines) if line == "## Cold requests"), len(lines)
        )
        if start == len(lines):
            lines.append("")
            start = end = len(lines)
    tail = lines[end:]
    return "\n".join([*lines[:start], *section, *([""] if tail else []), *tail]) + "\n"


def write(results: Results, json_path: Path, docs_path: Path | None, command: str) -> None:
    """The JSON, and the docs page (see ``write_docs``)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(to_json(results))
    if docs_path is not None:
        write_docs(results, docs_path, command)


def write_docs(results: Results, docs_path: Path, command: str) -> None:
    """The page: when every scenario the run measured has a section of its own and
    ``python -m bench`` wrote the page already, only those sections are replaced (the rest
    keeps the figures of the run that wrote it); otherwise the whole page."""
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    ran = [s for s in REGISTRY if results.ran(s)]
    if all(s.report.standalone for s in ran) and docs_path.is_file():
        page = docs_path.read_text()
        if MARK in page:
            for s in ran:
                own = s.report.standalone
                if own is not None and s.key is not None and s.key in results.figures:
                    page = splice(page, own.heading, own.section(results, command))
            docs_path.write_text(page)
            return
    docs_path.write_text(markdown(results, command))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.report RESULTS.json --command CMD [--docs PATH]``: render a run's
    JSON again (the table, and docs/benchmarks.md), e.g. after the report's layout changed."""
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=main.__doc__)
    parser.add_argument("results", type=Path)
    parser.add_argument("--command", required=True, help="the command that produced the run")
    parser.add_argument("--docs", type=Path, default=None)
    args = parser.parse_args(argv)
    results = from_json(args.results.read_text())
    print(table(results))
    if args.docs is not None:
        write_docs(results, args.docs, args.command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
