"""The benchmark's ``api`` scenario: ``/api/v1`` reads beside the pages that show the same
thing, on one floorless server (local disk, index complete).

Each read is measured with its page in the same rounds (``measure.measure_interleaved``: one
request to each in turn, the order flipping every round), so the ratio of the two is not
disturbed by whatever else the machine does meanwhile; processes are counted for each URL
apart: as the server reports them for each request (``Server-Timing``'s ``spawn``, exact),
and from the kernel's fork counter read around each request (as the main benchmark counts
them, whoever spawns them; on a busy machine it counts others' processes too).

The API answers are those a client gets without options: a file's and a directory's
``contents`` at the branch, ``commits`` as many as the commits page shows (with Forgejo's
defaults: files and line counts included), the ``branches``, and a ``git/trees`` of the
directory.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bench import measure
from bench.harness import (
    OWNER,
    Check,
    Context,
    Report,
    Results,
    Scenario,
    git,
    measuring,
    num,
    page_result,
    prepare_store,
    start_floorless,
    wait_floorless_indexed,
    wait_listening,
)
from bench.measure import PageResult

READS = ("file", "dir", "commits", "branches", "tree")
COMMITS = 50  # floorless's commits page shows 50 (commits_per_page), the API's most


@dataclass
class ApiRead:
    """One API read and the page it is measured beside."""

    read: str
    page_name: str
    page: PageResult
    api: PageResult


def read_urls(
    base: str, owner: str, name: str, branch: str, file: str, directory: str, tree: str
) -> dict[str, tuple[str, str, str]]:
    """For each read: the page it stands beside, the page's URL and the API's URL."""
    page = f"{base}/{owner}/{name}"
    api = f"{base}/api/v1/repos/{owner}/{name}"
    ref = quote(branch, safe="")
    b, f, d = quote(branch), quote(file), quote(directory)
    return {
        "file": ("file", f"{page}/src/branch/{b}/{f}", f"{api}/contents/{f}?ref={ref}"),
        "dir": ("dir", f"{page}/src/branch/{b}/{d}", f"{api}/contents/{d}?ref={ref}"),
        "commits": (
            "commits",
            f"{page}/commits/branch/{b}",
            f"{api}/commits?sha={ref}&limit={COMMITS}",
        ),
        "branches": ("branches", f"{page}/branches", f"{api}/branches"),
        "tree": ("dir", f"{page}/src/branch/{b}/{d}", f"{api}/git/trees/{tree}"),
    }


def measure_reads(
    urls: dict[str, tuple[str, str, str]],
    requests: int,
    warmup: int,
    deadline_seconds: float,
    log: Callable[[str], None],
) -> list[ApiRead]:
    found = []
    for read in READS:
        page_name, page_url, api_url = urls[read]
        page, api = measure.measure_interleaved(
            read,
            [page_url, api_url],
            requests,
            warmup,
            deadline_seconds=deadline_seconds,
            spawns_each=True,
        )
        page.page = page_name
        found.append(ApiRead(read, page_name, page, api))
        log(
            f"  api        {read:8} page p50 {page.p50_ms:7.3f} ms  API p50 {api.p50_ms:7.3f} ms"
            f"  {api.p50_ms / page.p50_ms:5.2f}x  processes {page.server_spawns_per_request}"
            f" / {api.server_spawns_per_request}  (forks machine-wide {page.spawns_per_request:.2f}"
            f" / {api.spawns_per_request:.2f})"
        )
    return found


def arguments(parser: argparse.ArgumentParser) -> None:
    """None of its own: it measures with ``--requests``, ``--warmup`` and ``--page-deadline``."""


def run(context: Context, name: str) -> None:
    """floorless alone on local disk, its index complete; each API read measured with the
    page that shows the same thing, requests alternating."""
    options, repo, base = context.options, context.repo, context.workdir / name
    repos, _ = prepare_store(base, repo.path, repo.name)
    ref = f"refs/heads/{repo.branch}:{repo.directory}"
    tree = git(repo.path, "rev-parse", ref, home=context.home)
    data = context.workdir / f"{name}-floorless-data"
    served, _ = start_floorless(repos, data, repo, context.commit)
    try:
        wait_listening(int(served.base_url.rsplit(":", 1)[1]), None, 120)
        wait_floorless_indexed(served, 3600)
        urls = read_urls(
            served.base_url, OWNER, repo.name, repo.branch, repo.file, repo.directory, tree
        )
        context.figures["api"] = measure_reads(
            urls, options.requests, options.warmup, options.page_deadline, context.log
        )
    finally:
        served.stop()


# -- the report ---------------------------------------------------------------------------------


def reads_of(results: Results) -> list[ApiRead] | None:
    found = results.figures.get("api")
    assert found is None or isinstance(found, list)
    return found


def checks(results: Results) -> list[Check]:
    """Judged on what the server says each request spawned (``Server-Timing``), counted for
    that request alone; the kernel's fork counter, machine-wide, is shown beside it."""
    target = "no process spawned on an API read"
    reads = reads_of(results)
    if not reads:
        return [Check(target, None, "needs the api scenario")]
    spawned = {r.read: r.api.server_spawns_per_request for r in reads}
    forked = ", ".join(f"{r.read} {r.api.spawns_per_request:.2f}" for r in reads)
    bad = {k: v for k, v in spawned.items() if v is None or v > 0}
    return [
        Check(
            target,
            not bad,
            (
                ", ".join(f"{k} {num(v, '.2f')}/request" for k, v in bad.items())
                or f"0 on {len(spawned)} reads by Server-Timing"
            )
            + f"; forks per request machine-wide: {forked}",
        )
    ]


def table(results: Results) -> list[str]:
    reads = reads_of(results)
    if not reads:
        return []
    lines = [
        "\nfloorless API reads beside their pages: p50 ms page, API (API / page),"
        " processes per request page, API (Server-Timing)"
    ]
    for read in reads:
        lines.append(
            f"{read.read:9}{read.page.p50_ms:10.3f}{read.api.p50_ms:10.3f}"
            f"{read.api.p50_ms / read.page.p50_ms:9.2f}x"
            f"{num(read.page.server_spawns_per_request, '8.1f')}"
            f"{num(read.api.server_spawns_per_request, '8.1f')}"
        )
    return lines


def intro(results: Results) -> list[str]:
    return measuring(results) if reads_of(results) else []


def section(results: Results, command: str) -> list[str]:
    reads = reads_of(results)
    if not reads:
        return []
    rows = [
        "",
        "## API reads beside their pages",
        "",
        "floorless alone on local disk: each `/api/v1` read measured with the page that "
        "shows the same thing, one request to each in turn (the order flipping every "
        "round). Processes per request are those the server reports spawning for each "
        "request (`Server-Timing`); beside them, the kernel's fork counter read around each "
        "request, which counts whatever else the machine starts meanwhile.",
        "",
        "| API read | beside the page | page p50 ms | API p50 ms | API / page | page p95 ms "
        "| API p95 ms | processes / request, page / API | forks / request machine-wide, "
        "page / API |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for read in reads:
        page, api = read.page, read.api
        rows.append(
            f"| {read.read} `{_api_path(api.url)}` | {read.page_name} | {page.p50_ms:.3f} | "
            f"{api.p50_ms:.3f} | {api.p50_ms / page.p50_ms:.2f}x | {page.p95_ms:.3f} | "
            f"{api.p95_ms:.3f} | {num(page.server_spawns_per_request, '.1f')} / "
            f"{num(api.server_spawns_per_request, '.1f')} | {page.spawns_per_request:.2f} / "
            f"{api.spawns_per_request:.2f} |"
        )
    return rows


def _api_path(url: str) -> str:
    """An API URL as the table shows it: from the repository on, without the server."""
    tail = url.split("/api/v1/repos/", 1)[-1]
    return tail.split("/", 2)[-1] if tail.count("/") >= 2 else tail


def decode(raw: list[dict[str, Any]]) -> list[ApiRead]:
    return [
        ApiRead(
            read=str(item["read"]),
            page_name=str(item["page_name"]),
            page=page_result(item["page"]),
            api=page_result(item["api"]),
        )
        for item in raw
    ]


SCENARIO = Scenario(
    names=("api",),
    summary="floorless's API reads beside their pages",
    arguments=arguments,
    run=run,
    report=Report(checks=checks, table=table, section=section, intro=intro),
    key="api",
    decode=decode,
    default=True,
)
