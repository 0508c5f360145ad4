"""The ``local`` and ``slow`` scenarios: every contender serves the same repository and each
page is measured, with the repositories and the contenders' git HOME on (a) local disk and
(b) the slow-storage simulator (``bench.slowfs``).

floorless keeps its data directory (database and runtime directory, i.e. its git HOME) on
local disk in both, as its documentation asks; the others get the HOME they would have on
such a machine: the storage under test. On slow storage, floorless is measured a second time
beside itself on local disk, both up at once, requests alternating (``bench.pages``).
"""

from __future__ import annotations

import argparse
from typing import Any

from bench import slowfs
from bench.harness import (
    CONTENDERS,
    PAGES,
    Check,
    ContenderRun,
    Context,
    Options,
    Report,
    Results,
    Scenario,
    measuring,
    names,
    num,
    page_result,
    prepare_store,
)
from bench.measure import PageResult
from bench.pages import PairedRun, by_thread, measure_contender, measure_paired

BROWSE_PAGES = ("home", "dir", "file", "raw", "commits", "history", "commit", "explore")
STORAGES = ("local", "slow")
SPAWN_NOISE = 0.05  # forks per request below this are other activity on the machine


def _jitter(text: str) -> tuple[float, float] | None:
    if not text:
        return None
    low, _, high = text.partition("-")
    return float(low), float(high)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contenders", default=",".join(CONTENDERS), type=names)
    parser.add_argument(
        "--slow-contenders",
        default="",
        type=lambda text: names(text) or None,
        help="contenders of the slow scenario (default: --contenders)",
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--throughput-seconds", type=float, default=3.0)
    parser.add_argument(
        "--throughput-pages",
        default=",".join(PAGES),
        type=names,
        help="pages whose throughput is measured ('' for none)",
    )
    parser.add_argument("--delay-ms", type=float, default=30.0)
    parser.add_argument(
        "--jitter",
        dest="jitter_ms",
        metavar="JITTER",
        default="",
        type=_jitter,
        help="a random delay range, e.g. 20-100 (ms)",
    )
    parser.add_argument(
        "--cache-seconds",
        type=float,
        default=0.0,
        help="kernel attribute/entry cache of the slow filesystem",
    )


def validate(options: Options) -> str | None:
    unknown = set(options.contenders) - set(CONTENDERS)
    return f"unknown contenders: {', '.join(sorted(unknown))}" if unknown else None


# -- the run ------------------------------------------------------------------------------------


def run(context: Context, storage: str) -> None:
    if storage == "local":
        _local(context)
    else:
        _slow(context)


def _local(context: Context) -> None:
    options, repo, base = context.options, context.repo, context.workdir / "local"
    repos, git_home = prepare_store(base, repo.path, repo.name)
    for name in options.contenders:
        context.runs.append(
            measure_contender(
                context,
                name,
                "local",
                repos,
                git_home,
                context.workdir / "local-floorless-data" / name,
                context.workdir / name,
                None,
            )
        )


def _slow(context: Context) -> None:
    options, repo, workdir = context.options, context.repo, context.workdir
    reason = slowfs.fuse_available()
    if reason is not None:
        context.log(f"scenario slow: skipped: {reason}")
        context.runs.extend(
            ContenderRun(name, "slow", skipped=reason) for name in options.contenders
        )
        return
    base = workdir / "slow"
    store = base / "store"
    prepare_store(store, repo.path, repo.name)
    mountpoint = base / "mnt"
    mountpoint.mkdir(parents=True, exist_ok=True)
    slowfs.cleanup_stale(mountpoint)
    slownames = options.slow_contenders or options.contenders
    context.runs.extend(
        ContenderRun(name, "slow", skipped="left out of the slow scenario in this run")
        for name in options.contenders
        if name not in slownames
    )
    with slowfs.mounted(
        store,
        mountpoint,
        delay_ms=options.delay_ms,
        jitter_ms=options.jitter_ms,
        cache_seconds=options.cache_seconds,
    ) as mount:
        for name in slownames:
            context.runs.append(
                measure_contender(
                    context,
                    name,
                    "slow",
                    mountpoint / "repos",
                    mountpoint / "home",
                    workdir / "slow-floorless-data" / name,
                    workdir / f"slow-{name}",
                    mount,
                )
            )
        if "floorless" in slownames:
            context.log("floorless on local disk and slow storage at once, requests alternating")
            local_repos, _ = prepare_store(workdir / "paired", repo.path, repo.name)
            context.figures["paired"] = measure_paired(
                context, local_repos, mountpoint / "repos", mount
            )


# -- the report ---------------------------------------------------------------------------------


def storages(results: Results) -> list[str]:
    """The storages the run measured, in the order it measured them."""
    return [s for s in results.options["scenarios"] if s in STORAGES]


def paired_of(results: Results) -> PairedRun | None:
    found = results.figures.get("paired")
    assert found is None or isinstance(found, PairedRun)
    return found


def page(results: Results, contender: str, scenario: str, name: str) -> PageResult | None:
    for run in results.runs:
        if run.contender == contender and run.scenario == scenario and not run.skipped:
            return run.pages.get(name)
    return None


def checks(results: Results) -> list[Check]:
    return [
        _slow_vs_local(results),
        _vs_reference(results),
        *(_vs_cgit(results, peer) for peer in ("cgit", "cgit-cache")),
        _no_spawns(results),
        _no_slow_ops(results),
    ]


def _slow_vs_local(results: Results) -> Check:
    """Judged on the interleaved measurement when the run has one (see PairedRun), else on
    the two scenarios' own tables."""
    target = "warm, slow storage: each page's p50 within 1.25x of its p50 on local disk"
    pairs: dict[str, tuple[PageResult, PageResult]] = {}
    paired = paired_of(results)
    if paired is not None:
        how = "both servers up, requests alternating"
        for name in PAGES:
            if name in paired.slow and name in paired.local:
                pairs[name] = (paired.slow[name], paired.local[name])
    else:
        how = "one scenario after the other"
        for name in PAGES:
            slow, local = (page(results, "floorless", s, name) for s in ("slow", "local"))
            if slow and local:
                pairs[name] = (slow, local)
    failed = [
        name for name, (slow, local) in pairs.items() if slow.status != 200 or local.status != 200
    ]
    if failed:
        return Check(target, False, f"{how}; not answered 200: {', '.join(failed)}")
    if not pairs:
        return Check(target, None, "needs floorless on both storages")
    ratios = {name: slow.p50_ms / local.p50_ms for name, (slow, local) in pairs.items()}
    worst = max(ratios, key=lambda k: ratios[k])
    detail = ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
    return Check(
        target, ratios[worst] <= 1.25, f"{how}; worst {worst} {ratios[worst]:.2f}x; {detail}"
    )


def _vs_reference(results: Results) -> Check:
    target = (
        "warm, slow storage: p50 at least 100x lower than the spawn-per-page reference "
        "on home, raw and commits"
    )
    ratios = {}
    for name in ("home", "raw", "commits"):
        ours, theirs = (
            page(results, "floorless", "slow", name),
            page(results, "reference", "slow", name),
        )
        if ours and theirs:
            ratios[name] = theirs.p50_ms / ours.p50_ms
    if len(ratios) < 3:
        return Check(target, None, "needs the slow scenario with the reference")
    detail = ", ".join(f"{k} {v:.0f}x" for k, v in ratios.items())
    return Check(target, min(ratios.values()) >= 100, detail)


def _vs_cgit(results: Results, peer: str) -> Check:
    target = (
        f"warm, local disk: p50 below {peer}'s on every page both serve; throughput at "
        f"concurrency 16 at least 2x {peer}'s on raw and file"
    )
    if peer != "cgit":  # the targets name cgit as Debian ships it; a cache is a comparison
        target = f"beyond the targets, the same against {peer}: " + target.split(": ", 1)[1]
    slower: list[str] = []
    faster: list[str] = []
    for name in PAGES:
        ours, theirs = page(results, "floorless", "local", name), page(results, peer, "local", name)
        if ours and theirs:
            (faster if ours.p50_ms < theirs.p50_ms else slower).append(
                f"{name} {ours.p50_ms:.2f}/{theirs.p50_ms:.2f} ms"
            )
    ratios = {}
    for name in ("raw", "file"):
        ours, theirs = page(results, "floorless", "local", name), page(results, peer, "local", name)
        if ours and theirs and ours.throughput_rps and theirs.throughput_rps:
            ratios[name] = ours.throughput_rps / theirs.throughput_rps
    if not faster and not slower:
        return Check(target, None, f"{peer} not measured")
    passed = not slower and len(ratios) == 2 and min(ratios.values()) >= 2
    detail = f"slower on: {', '.join(slower) or 'none'}; throughput " + ", ".join(
        f"{k} {v:.1f}x" for k, v in ratios.items()
    )
    return Check(target, passed, detail)


def _no_spawns(results: Results) -> Check:
    target = "no process spawned on any browse page"
    seen = {}
    for run in results.runs:
        if run.contender == "floorless" and not run.skipped:
            for name in BROWSE_PAGES:
                if name in run.pages:
                    seen[f"{run.scenario}/{name}"] = run.pages[name].spawns_per_request
    if not seen:
        return Check(target, None, "floorless not measured")
    bad = {k: v for k, v in seen.items() if v > SPAWN_NOISE}
    return Check(
        target,
        not bad,
        ", ".join(f"{k} {v:.2f}" for k, v in bad.items())
        or f"0 on {len(seen)} pages (forks per request counted machine-wide)",
    )


def _no_slow_ops(results: Results) -> Check:
    target = "no slow-filesystem operation on a warm page"
    seen: dict[str, PageResult] = {}
    for run in results.runs:
        if run.contender == "floorless" and run.scenario == "slow" and not run.skipped:
            for name, result in run.pages.items():
                if result.slowfs_ops_per_request is not None:
                    seen[name] = result
    paired = paired_of(results)
    if paired is not None:
        for name, result in paired.slow.items():
            if result.slowfs_ops_per_request is not None:
                seen[f"{name} (interleaved)"] = result
    if not seen:
        return Check(target, None, "needs the slow scenario")
    bad = {k: r for k, r in seen.items() if r.slowfs_ops_per_request}
    return Check(
        target,
        not bad,
        "; ".join(
            f"{k} {r.slowfs_ops_per_request:.2f}/request{by_thread(r)}" for k, r in bad.items()
        )
        or f"0 on {len(seen)} pages (every thread but floorless's named background ones)",
    )


def table(results: Results) -> list[str]:
    lines = []
    names = list(results.options["contenders"])
    for scenario in storages(results):
        lines.append(f"\n{scenario}: p50 ms (spawns/request) by page")
        lines.append(f"{'page':9}" + "".join(f"{n:>20}" for n in names))
        for name in PAGES:
            cells = []
            for contender in names:
                result = page(results, contender, scenario, name)
                cells.append(
                    "-"
                    if result is None
                    else f"{result.p50_ms:.2f} ({result.spawns_per_request:.1f})"
                )
            lines.append(f"{name:9}" + "".join(f"{c:>20}" for c in cells))
    paired = paired_of(results)
    if paired is not None:
        lines.append("\nfloorless, local and slow interleaved: p50 ms (slow / local)")
        for name, slow in paired.slow.items():
            local = paired.local.get(name)
            if local is None:
                continue
            lines.append(
                f"{name:9}{local.p50_ms:10.3f}{slow.p50_ms:10.3f}{slow.p50_ms / local.p50_ms:9.2f}x"
            )
    return lines


def intro(results: Results) -> list[str]:
    return measuring(results) if storages(results) else []


def section(results: Results, command: str) -> list[str]:
    out = []
    paired = paired_of(results)
    if paired is not None:
        out += [
            "",
            "## Slow against local storage, interleaved",
            "",
            "floorless on local disk and on slow storage, both running, each page measured "
            "with one request to each in turn (the order flipping every round), so what else "
            "happens on the machine falls on both alike. The slow-against-local target is "
            "judged on this table.",
            "",
        ]
        out += _paired_table(paired)
    for scenario in storages(results):
        out += ["", f"## {scenario.capitalize()} storage", ""]
        out += _storage_table(results, scenario)
    return out


def _storage_table(results: Results, scenario: str) -> list[str]:
    runs = [r for r in results.runs if r.scenario == scenario and not r.skipped]
    if not runs:
        return ["Not measured."]
    ours = {n: page(results, "floorless", scenario, n) for n in PAGES}
    rows = [
        "| page | contender | p50 ms | p95 ms | p99 ms | vs floorless p50 | req/s at c16 "
        "| processes / request | slow-fs ops / request |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in PAGES:
        for run in runs:
            result = run.pages.get(name)
            if result is None:
                continue
            base = ours.get(name)
            ratio = f"{result.p50_ms / base.p50_ms:.1f}x" if base else "-"
            who = (
                run.contender if result.status == 200 else f"{run.contender} (HTTP {result.status})"
            )
            rows.append(
                f"| {name} | {who} | {result.p50_ms:.2f} | {result.p95_ms:.2f} | "
                f"{result.p99_ms:.2f} | {ratio} | "
                f"{num(result.throughput_rps, '.0f')} | {result.spawns_per_request:.1f} | "
                f"{num(result.slowfs_ops_per_request, '.1f')} |"
            )
    return rows


def _paired_table(paired: PairedRun) -> list[str]:
    rows = [
        "| page | local p50 ms | slow p50 ms | slow / local | difference ms | local p95 ms "
        "| slow p95 ms | slow-fs ops / request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in PAGES:
        local, slow = paired.local.get(name), paired.slow.get(name)
        if local is None or slow is None:
            continue
        rows.append(
            f"| {name} | {local.p50_ms:.3f} | {slow.p50_ms:.3f} | "
            f"{slow.p50_ms / local.p50_ms:.2f}x | {slow.p50_ms - local.p50_ms:+.3f} | "
            f"{local.p95_ms:.3f} | {slow.p95_ms:.3f} | "
            f"{num(slow.slowfs_ops_per_request, '.1f')} |"
        )
    return rows


def decode(raw: dict[str, Any]) -> PairedRun:
    return PairedRun(
        {n: page_result(p) for n, p in raw["local"].items()},
        {n: page_result(p) for n, p in raw["slow"].items()},
    )


SCENARIO = Scenario(
    names=STORAGES,
    summary="every contender's pages on each storage",
    arguments=arguments,
    run=run,
    report=Report(checks=checks, table=table, section=section, intro=intro),
    key="paired",
    decode=decode,
    default=True,
    validate=validate,
)
