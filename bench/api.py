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

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from bench import measure
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


def from_json(
    raw: list[dict[str, object]], page_result: Callable[[object], PageResult]
) -> list[ApiRead]:
    return [
        ApiRead(
            read=str(item["read"]),
            page_name=str(item["page_name"]),
            page=page_result(item["page"]),
            api=page_result(item["api"]),
        )
        for item in raw
    ]
