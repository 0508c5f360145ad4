"""Every page of one contender, measured where it is served (``measure_contender``), and
floorless measured beside itself on two storages at once (``measure_paired``): what the
``local`` and ``slow`` scenarios (``bench.scenarios.pages``) measure."""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from pathlib import Path

from bench import measure
from bench.contenders import ContenderError
from bench.harness import (
    OWNER,
    PAGES,
    ContenderRun,
    Context,
    pushed,
    skip_reason,
    start_contender,
    start_floorless,
    visible_after,
    wait_floorless_indexed,
    wait_listening,
)
from bench.measure import PageResult
from bench.slowfs import Mount


@dataclass
class PairedRun:
    """floorless on local disk and on slow storage, both up at once, measured with requests
    alternating between them: the comparison the slow-against-local target is judged on.
    Measured one scenario after the other, the two would differ by whatever else changed on
    the machine in between, which at sub-millisecond pages is as large as the effect."""

    local: dict[str, PageResult] = field(default_factory=dict)
    slow: dict[str, PageResult] = field(default_factory=dict)


def measure_contender(
    context: Context,
    name: str,
    scenario: str,
    repos: Path,
    home: Path,
    data: Path,
    workdir: Path,
    mount: Mount | None,
) -> ContenderRun:
    """Every page of contender ``name``, then its first page after a push."""
    options, repo, log = context.options, context.repo, context.log
    result = ContenderRun(name, scenario)
    reason = skip_reason(name)
    if reason is not None:
        result.skipped = reason
        log(f"  {name}: skipped: {reason}")
        return result
    if mount is not None:
        mount.reset()
    # on slow storage a CGI's first answer (its readiness check) takes tens of seconds
    ready_timeout = 900.0 if mount is not None else 60.0
    try:
        served, stop = start_contender(
            name, repos, home, data, repo, context.commit, workdir, ready_timeout
        )
    except ContenderError as exc:
        result.skipped = f"did not start: {str(exc).splitlines()[0]}"
        log(f"  {name}: {result.skipped}")
        return result
    try:
        port = int(served.base_url.rsplit(":", 1)[1])
        wait_listening(port, None, 120)
        result.cold_start_ms, _ = measure.first_request_ms(served.urls["home"] or "")
        if name == "floorless":
            wait_floorless_indexed(served, 3600)
        for page in PAGES:
            url = served.urls.get(page)
            if url is None:
                continue
            try:
                outcome = measure.measure_page(
                    page,
                    url,
                    options.requests,
                    options.warmup,
                    slowfs_ops=mount.request_threads if mount is not None else None,
                    slowfs_reset=mount.reset if mount is not None else None,
                    deadline_seconds=options.page_deadline,
                )
            except (OSError, http.client.HTTPException) as exc:
                result.errors.append(f"{page}: {exc or type(exc).__name__}")
                log(f"  {name:10} {page:8} not measured: {result.errors[-1]}")
                continue
            too_slow = outcome.p50_ms > options.throughput_seconds * 1000 / 4
            if too_slow and page in options.throughput_pages:
                # Requests left queued by the load would still run when the next page is
                # measured and count against it; a page this slow has no throughput to speak of.
                outcome.notes.append("throughput not measured: a request takes too long")
            elif page in options.throughput_pages and outcome.status == 200:
                outcome.throughput_rps = measure.throughput(
                    url, options.concurrency, options.throughput_seconds
                )
            result.pages[page] = outcome
            log(
                f"  {name:10} {page:8} {outcome.status} p50 {outcome.p50_ms:9.2f} ms"
                f"  p95 {outcome.p95_ms:9.2f}  spawns {outcome.spawns_per_request:5.1f}"
                + (
                    f"  fs-ops {outcome.slowfs_ops_per_request:7.1f}{by_thread(outcome)}"
                    if outcome.slowfs_ops_per_request is not None
                    else ""
                )
                + (f"  {outcome.throughput_rps:8.0f} req/s" if outcome.throughput_rps else "")
            )
        git_dir = repos / OWNER / f"{repo.name}.git"
        with pushed(git_dir, repo.branch, home) as new:
            result.cold_push_ms, _ = measure.first_request_ms(served.urls["home"] or "")
            result.push_visible_after_s = visible_after(served.urls["home"] or "", new[:10], 30)
    finally:
        stop()
    return result


def measure_paired(
    context: Context, local_repos: Path, slow_repos: Path, mount: Mount
) -> PairedRun:
    """Both floorless servers up; every page measured with requests alternating."""
    options, repo, commit, workdir = context.options, context.repo, context.commit, context.workdir
    paired = PairedRun()
    local, _ = start_floorless(local_repos, workdir / "paired-local-data", repo, commit)
    try:
        slow, _ = start_floorless(slow_repos, workdir / "paired-slow-data", repo, commit)
        try:
            for served in (local, slow):
                wait_listening(int(served.base_url.rsplit(":", 1)[1]), None, 120)
                wait_floorless_indexed(served, 3600)
            for page in PAGES:
                local_url, slow_url = local.urls.get(page), slow.urls.get(page)
                if local_url is None or slow_url is None:
                    continue
                mount.reset()
                near, far = measure.measure_interleaved(
                    page,
                    [local_url, slow_url],
                    options.requests,
                    options.warmup,
                    slowfs_ops=mount.request_threads,
                    slowfs_reset=mount.reset,
                    deadline_seconds=options.page_deadline,
                    on_slowfs=1,
                )
                paired.local[page], paired.slow[page] = near, far
                context.log(
                    f"  paired     {page:8} local p50 {near.p50_ms:7.3f} ms  slow p50 "
                    f"{far.p50_ms:7.3f} ms  {far.p50_ms / near.p50_ms:5.2f}x  "
                    f"fs-ops {far.slowfs_ops_per_request:5.1f}{by_thread(far)}"
                )
        finally:
            slow.stop()
    finally:
        local.stop()
    return paired


def by_thread(result: measure.PageResult) -> str:
    """A page's slow-filesystem operations by thread name, when it made any."""
    named = sorted((result.slowfs_ops_by_thread or {}).items(), key=lambda item: -item[1])
    return " (" + ", ".join(f"{name} {count}" for name, count in named) + ")" if named else ""
