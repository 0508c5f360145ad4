"""The ``cold`` scenario: first visits on a real-sized history (``bench.cold_suite`` runs its
parts: the first index, the first visits, a cold blame and commit, distinct URLs against cgit,
cheap pages beside dear ones), and how its figures are judged against the targets of the
first-visit work. Asked for by name: it indexes the repository several times over."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from bench import cold_suite
from bench.cold_suite import FEW_SECONDS, MEMORY_MB, PARTS
from bench.harness import (
    Check,
    Context,
    Options,
    Report,
    Results,
    Scenario,
    Standalone,
    figure_at,
    names,
    num,
    why_missing,
    within,
)
from bench.harness import standalone as standalone_head
from bench.index import judge as judge_index
from bench.lanes import TARGET_RATIO as LANES_RATIO
from bench.lanes import LanesResult
from bench.lanes import markdown as lanes_markdown
from bench.sweep import judge as judge_sweep
from bench.sweep import rounds_line

HEADING = "## Cold work: first index, first visits, distinct URLs"


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cold-parts",
        default="",
        type=names,
        help="the cold scenario's parts (default all: index,first,blame,commit,sweep,lanes)",
    )
    parser.add_argument(
        "--cold-runs", type=int, default=3, help="runs of the cold blame and commit pages"
    )
    parser.add_argument(
        "--cold-postgres",
        default=None,
        help="a PostgreSQL server's URL: floorless keeps its data there in the cold scenario "
        "(a fresh database for each part)",
    )
    parser.add_argument(
        "--cold-processes",
        type=int,
        default=1,
        help="floorless serve --processes in the cold scenario (more than one needs "
        "--cold-postgres)",
    )


def validate(options: Options) -> str | None:
    unknown = set(options.cold_parts) - set(PARTS)
    if unknown:
        return f"unknown cold parts: {', '.join(sorted(unknown))}"
    if options.cold_processes > 1 and not options.cold_postgres:
        return "--cold-processes above 1 needs --cold-postgres"
    return None


def run(context: Context, name: str) -> None:
    options, base = context.options, context.workdir / name
    base.mkdir(parents=True, exist_ok=True)
    found = cold_suite.run(
        context.repo,
        options.cache_dir,
        base,
        options.cold_parts or PARTS,
        options.cold_runs,
        log=context.log,
        postgres=options.cold_postgres,
        processes=options.cold_processes,
    )
    context.figures["cold"] = asdict(found)


# -- the report ---------------------------------------------------------------------------------


def checks(results: Results) -> list[Check]:
    cold = results.figures.get("cold")
    return [] if cold is None else judge(cold)


def section(results: Results, command: str) -> list[str]:
    cold = results.figures.get("cold")
    return [] if cold is None else ["", HEADING, "", *figures_section(cold)]


def page_section(results: Results, command: str) -> list[str]:
    """The section as it stands on its own in a page another run wrote: its run, its
    command and its targets with it."""
    cold = results.figures["cold"]
    return standalone_head(results, HEADING, command, judge(cold), git=True) + figures_section(cold)


def judge(cold: dict[str, Any]) -> list[Check]:
    """The cold scenario's figures against the targets of the first-visit work; a figure
    missing because its part failed or timed out is a miss, not "not measured"."""
    checks = [judge_index(cold.get("index") or {}, why_missing(cold, "index"))]
    first = cold.get("first") or {}
    for attempt, target in (
        (
            "first",
            f"a cold repository: a viewed path's first history page and the home page's "
            f"last-commit column complete within {FEW_SECONDS:g} s of being asked for",
        ),
        ("restart", f"after a restart, the same two pages complete within {FEW_SECONDS:g} s"),
    ):
        found = first.get(attempt)
        if not found:
            checks.append(Check(target, None, why_missing(cold, "first")))
            continue
        history, home = found.get("history_s"), found.get("home_s")
        worst = max(
            float("inf") if history is None else history, float("inf") if home is None else home
        )
        late = " (-: not complete within the deadline)" if worst == float("inf") else ""
        checks.append(
            Check(
                target,
                worst <= FEW_SECONDS,
                f"history {num(history, '.2f')} s, home {num(home, '.2f')} s{late}",
            )
        )
    beside = f" and {first['companion']}" if first.get("companion") else ""
    target = f"RSS with the repository{beside} indexed and idle at most {MEMORY_MB:g} MB"
    idle = figure_at(first, "first", "rss_idle_mb")
    checks.append(
        Check(
            target,
            within(idle, MEMORY_MB),
            f"{num(idle, '.0f')} MB idle"
            + (
                f", {anonymous:.0f} MB of it anonymous (the rest mapped pack files)"
                if (anonymous := figure_at(first, "first", "rss_idle_anon_mb"))
                else ""
            )
            + (
                f" ({everything:.0f} MB with granian's main process)"
                if (everything := figure_at(first, "first", "rss_idle_all_mb"))
                else ""
            )
            + "; "
            f"{num(figure_at(first, 'first', 'rss_peak_mb'), '.0f')} "
            f"MB at most while indexing; {num(figure_at(first, 'restart', 'rss_idle_mb'), '.0f')} "
            "MB after a restart"
            if first
            else why_missing(cold, "first"),
        )
    )
    blame = cold.get("blame") or {}
    target = "cold blame page within 1.5x of `git blame --porcelain`"
    if blame:
        ratio = blame["page_s"] / blame["git_blame_s"]
        checks.append(
            Check(
                target,
                ratio <= 1.5,
                f"{ratio:.2f}x: {blame['page_s'] * 1000:.0f} ms against "
                f"{blame['git_blame_s'] * 1000:.0f} ms, {blame['lines']:,} lines, "
                f"{blame['page_bytes']:,} bytes",
            )
        )
    else:
        checks.append(Check(target, None, why_missing(cold, "blame")))
    commit = cold.get("commit") or {}
    target = (
        "cold 300-file commit page within 2x of `git show --stat` plus the rendering of what it"
        " shows"
    )
    if commit:
        # judged as the target says: the page less the server's own rendering (Server-Timing's
        # render phase) against git; a report from before that measure judges the whole page
        judged = commit.get("target_ratio") or commit["ratio"]
        checks.append(
            Check(
                target,
                judged <= 2,
                f"{judged:.2f}x: {commit.get('unrendered_ms', commit['page_ms']):.0f} ms (the"
                f" page, {commit['page_ms']:.0f} ms, less {commit.get('page_render_ms', 0):.0f}"
                f" ms of rendering) against {commit['git_show_stat_ms']:.0f} ms; whole page"
                f" {commit['ratio']:.2f}x, {commit['page_bytes']:,} bytes",
            )
        )
    else:
        checks.append(Check(target, None, why_missing(cold, "commit")))
    checks += judge_sweep(cold.get("sweep") or {}, why_missing(cold, "sweep")).values()
    checks += _lanes_checks(cold)
    return checks


def _lanes_checks(cold: dict[str, Any]) -> list[Check]:
    lanes = cold.get("lanes") or {}
    targets = (
        f"cheap pages beside dear ones: raw and file p50 at 16 clients while blames, diffs "
        f"and archives run within {LANES_RATIO:g}x of the same pages at 16 clients without "
        "them",
        f"the same within {LANES_RATIO:g}x of their unloaded p50 (one client, nothing else "
        "running)",
    )
    if not lanes or not lanes.get("ms"):
        return [Check(t, None, why_missing(cold, "lanes")) for t in targets]
    checks = []
    for target, against in zip(targets, ("busy", "unloaded"), strict=True):
        ratios = {}
        for kind in ("raw", "file"):
            base = figure_at(lanes, "ms", against, kind, "p50")
            loaded = figure_at(lanes, "ms", "dear", kind, "p50")
            if base and loaded:
                ratios[kind] = loaded / base
        dear = sum((lanes.get("dear_kinds") or {}).values())
        checks.append(
            Check(
                target,
                None if len(ratios) < 2 else max(ratios.values()) <= LANES_RATIO,
                ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
                + f"; {dear} dear answers meanwhile"
                + (_cgit_busy(lanes) if against == "unloaded" else ""),
            )
        )
    return checks


def _cgit_busy(lanes: dict[str, Any]) -> str:
    """cgit's own p50 at 16 clients (cheap pages alone) against its unloaded p50, when the
    lanes part measured it: what the clients alone do to a server's p50 on this machine."""
    found = LanesResult(**lanes)
    ratios = {k: found.ratio("busy", k, cgit=True) for k in ("raw", "file")}
    ratios = {k: v for k, v in ratios.items() if v}
    if not ratios:
        return ""
    return (
        f"; cgit (no cache), the same {lanes.get('clients', 16)} clients and no dear pages: "
        + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items())
        + " its unloaded p50"
    )


def figures_section(cold: dict[str, Any]) -> list[str]:
    """The cold scenario's figures as Markdown: a table for each part that ran."""
    processes = cold.get("processes", 1)
    out = [
        f"Repository `{cold['repo']}` ({cold['commits']:,} commits); parts run: "
        f"{', '.join(cold['parts'])}; `floorless serve` with {processes} "
        f"process{'es' if processes > 1 else ''} on {cold.get('database', 'sqlite')}"
        + (
            " (figures read from `/-/metrics`, the sweep's memory and collections among them, "
            "are one process's)."
            if processes > 1
            else "."
        )
    ]
    for part, error in (cold.get("errors") or {}).items():
        out += ["", f"The {part} part failed: `{error}`."]
    index = cold.get("index") or {}
    if index:
        out += [
            "",
            "### First index",
            "",
            "| | seconds |",
            "|---|---|",
            f"| `git log --raw --no-renames` | {index['git_log_raw_s']:.1f} |",
            f"| `git commit-graph write --reachable --changed-paths` | "
            f"{index['commit_graph_write_s']:.1f} |",
            f"| floorless's first index, whole history | {index['floorless_index_s']:.1f} |",
            f"| a restart: the stored index loaded, nothing to add | {index['restart_s']:.1f} |",
            "",
            f"Resident memory of the indexing process: {index['rss_before_mb']:.0f} MB before, "
            f"{index['rss_after_index_mb']:.0f} MB after indexing, "
            f"{index['rss_after_restart_mb']:.0f} MB after the restart; the index takes "
            f"{index['index_memory_mb']} MB in memory, the database {index['db_mb']} MB.",
        ]
    first = cold.get("first") or {}
    if first:
        beside = f", with `{first['companion']}` beside it" if first.get("companion") else ""
        out += [
            "",
            "### First visits",
            "",
            f"`floorless serve` over a fresh data directory{beside}; the path history and the "
            "home page asked for as soon as it listens, then every 0.25 s until complete.",
            "",
            "| | path history complete (s) | home's last-commit column (s) | whole index (s) "
            "| RSS peak (MB) | RSS idle (MB) |",
            "|---|---|---|---|---|---|",
        ]
        for attempt in ("first", "restart"):
            f = first.get(attempt) or {}
            out.append(
                f"| {attempt} | {num(f.get('history_s'), '.2f')} | "
                f"{num(f.get('home_s'), '.2f')} | {num(f.get('indexed_s'), '.1f')} | "
                f"{num(f.get('rss_peak_mb'), '.0f')} | {num(f.get('rss_idle_mb'), '.0f')} |"
            )
    blame = cold.get("blame") or {}
    if blame:
        out += [
            "",
            "### Cold blame",
            "",
            f"`{blame['file']}` ({blame['lines']:,} lines, {blame['groups']:,} groups), median "
            f"of {blame['runs']}: `git blame --porcelain` {blame['git_blame_s'] * 1000:.0f} ms; "
            f"floorless's cold page {blame['page_s'] * 1000:.0f} ms (first row at "
            f"{blame['page_first_row_s'] * 1000:.0f} ms, "
            f"{blame['page_s'] / blame['git_blame_s']:.2f}x), {blame['page_bytes']:,} bytes, "
            f"{blame['spawns']} process.",
        ]
    commit = cold.get("commit") or {}
    if commit:
        out += [
            "",
            "### A big commit",
            "",
            f"A {commit['files_changed']}-file commit, median of {commit['runs']}: "
            f"`git show --stat` {commit['git_show_stat_ms']:.0f} ms; floorless's cold page "
            f"{commit['page_ms']:.0f} ms ({commit['ratio']:.2f}x), {commit['page_bytes']:,} "
            f"bytes, {commit['files_listed']} files listed, {commit['files_shown']} shown, "
            f"{commit['lines_highlighted']} lines highlighted. Of the page, "
            f"{commit.get('page_render_ms', 0):.0f} ms is the server's rendering of what it "
            f"shows (highlighting, diff rows, template: `Server-Timing`'s render); the page "
            f"less it, {commit.get('unrendered_ms', 0):.0f} ms, is "
            f"{commit.get('target_ratio', 0):.2f}x `git show --stat`, the target's measure."
            + (
                f" cgit's commit page of the same commit (no cache, over HTTP): "
                f"{commit['cgit_ms']:.0f} ms, {commit['cgit_bytes']:,} bytes (every file's "
                f"diff); floorless's page is {commit['page_ms'] / commit['cgit_ms']:.2f}x it."
                if commit.get("cgit_ms")
                else ""
            ),
        ]
    sweep = cold.get("sweep") or {}
    if sweep.get("classes"):
        out += [
            "",
            "### Distinct URLs against cgit",
            "",
            "Each URL asked once of floorless (index complete, every page a cache miss) and of "
            "cgit without its cache, in turn"
            + (
                f", in each of {len(sweep['rounds'])} rounds (floorless restarted between "
                "rounds, every cache empty); the percentiles are over every round's requests."
                if sweep.get("rounds")
                else "."
            ),
            "",
            "| page | n | floorless p50 / p95 / p99 ms | cgit p50 / p95 / p99 ms | p50 ratio |",
            "|---|---|---|---|---|",
        ]
        for kind, c in sweep["classes"].items():
            f, g = c["floorless_ms"], c["cgit_ms"]
            ratio = f["p50"] / g["p50"] if g["p50"] else 0.0
            out.append(
                f"| {kind} | {c['requests']} | {f['p50']} / {f['p95']} / {f['p99']} | "
                f"{g['p50']} / {g['p95']} / {g['p99']} | {ratio:.2f}x |"
            )
        if sweep.get("rounds"):
            out += ["", rounds_line(sweep["rounds"]) + "."]
        out += [
            "",
            "Throughput on distinct URLs, 16 clients: "
            + ", ".join(f"{k} {v:,.1f}/s" for k, v in sweep["throughput"].items())
            + ". floorless's RSS (MB): "
            + ", ".join(f"{k} {v:,.0f}" for k, v in sweep["memory_mb"].items())
            + ". Garbage collection during the sweep: "
            + ", ".join(f"{k} {v:g}" for k, v in sweep["gc"].items())
            + ".",
        ]
    lanes = cold.get("lanes") or {}
    if lanes.get("ms"):
        out += ["", "### Cheap pages beside dear ones", ""]
        out += lanes_markdown(LanesResult(**lanes))
    return out


SCENARIO = Scenario(
    names=("cold",),
    summary="first index, first visits, cold blame and commit, distinct URLs against cgit, "
    "cheap pages beside dear ones, memory: bench.cold_suite",
    arguments=arguments,
    run=run,
    report=Report(
        checks=checks,
        section=section,
        standalone=Standalone(HEADING, page_section),
    ),
    key="cold",
    validate=validate,
)
