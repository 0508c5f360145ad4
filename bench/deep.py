"""A commits page deep in a long history, against cgit's, both with floorless's index complete.

Someone following "Older" far enough, or a link to page 801 of git.git's log, asks for
``/{owner}/{repo}/commits/branch/{branch}?after={tip}&skip=40000``: floorless walks the
branch's 40,000 newest commits before it can show the page (``floorless.index.answers``: the
first ``INLINE_BUDGET`` on the request, the rest in the background while the page says it is
being prepared). cgit without its cache walks them on every request of ``log/?ofs=40000``.
A history shorter than that is asked for its last page (its length less a page).

Each run restarts floorless over a copy of the data directory a first visit left
(``bench.cold_suite``'s ``first`` part: the index complete, no deep page asked for yet), so
that every run's page is a walk from nothing, as the first person to ask meets it: the time
is from the first request until the page is complete, asked again every ``POLL_SECONDS``
meanwhile (when the server has the page; the page's own script asks after 250 ms and backs
off, so a browser shows it up to that much later). Then the same page once more (the walk
kept): floorless's warm page. cgit, started once
over the same repositories, is asked the same page in each run, alternating which of the two
goes first, after one request to warm the file cache it shares with floorless. git is the
oracle of what both pages show: floorless's commits are to be ``git rev-list --skip=N``'s, and
cgit's page is to name the first and the last of them (``same_page``).
"""

from __future__ import annotations

import re
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from bench import contenders, measure
from bench.harness import (
    OWNER,
    Target,
    git,
    prepare_store,
    start_floorless,
    wait_floorless_indexed,
    wait_listening,
)
from floorless.core.config import SETTINGS

DEPTH = 40_000  # commits before the page
# floorless's commits a page (its default), as many as cgit's (``max-commit-count``, 50)
PAGE: int = next(s.default for s in SETTINGS if s.name == "commits_per_page")
POLL_SECONDS = 0.02
RUNS = 3


@dataclass
class DeepResult:
    skip: int  # commits before the page
    runs: int
    floorless_ms: list[float] = field(default_factory=list)  # each run's cold page, complete
    floorless_polls: list[int] = field(default_factory=list)  # its requests until then
    floorless_warm_ms: list[float] = field(default_factory=list)  # the same page again
    cgit_ms: list[float] = field(default_factory=list)
    floorless_p50_ms: float = 0.0
    cgit_p50_ms: float = 0.0
    same_page: bool | None = None  # both pages show git's commits (None: not compared)

    @property
    def ratio(self) -> float:
        return self.floorless_p50_ms / self.cgit_p50_ms if self.cgit_p50_ms else 0.0


def depth(commits: int) -> int:
    """The page's skip in a history of ``commits``: ``DEPTH``, or its last page's."""
    return min(DEPTH, max(0, commits - PAGE))


def _complete(client: measure.Client, url: str, deadline: float) -> tuple[float, int, bytes]:
    """Seconds until ``url`` answers its page complete, the requests it took, and the page."""
    began = time.perf_counter()
    polls = 0
    while time.perf_counter() - began < deadline:
        status, body, _ = client.get(url)
        polls += 1
        if status != 200:
            raise RuntimeError(f"floorless answered {status} for {url}")
        if b"being prepared" not in body:
            return time.perf_counter() - began, polls, body
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"{url} not complete after {deadline:.0f} s")


def _cgit(client: measure.Client, url: str) -> tuple[float, bytes]:
    took, status, body, _ = measure.timed_get(client, url)
    if status != 200:
        raise RuntimeError(f"cgit answered {status} for {url}")
    return took, body


def _same_page(ours: bytes, theirs: bytes, expected: list[str]) -> bool:
    """floorless's page lists ``expected`` (git's commits), in order, and cgit's names the
    first and the last of them."""
    shown = [
        m.decode() for m in re.findall(rb'<a class="sha" href="[^"]*/commit/([0-9a-f]+)"', ours)
    ]
    return (
        bool(expected)
        and shown == expected
        and all(oid.encode() in theirs for oid in (expected[0], expected[-1]))
    )


def run(
    first: Path,
    target: Target,
    work: Path,
    runs: int = RUNS,
    deadline: float = 600.0,
    log: Callable[[str], None] = print,
) -> DeepResult:
    """The deep page ``runs`` times on each side; ``first``: the first part's work directory
    (its store and its data directory, the index complete), which is left as it is."""
    repos, home = prepare_store(first / "store", target.path, target.name)  # there already
    if not (first / "data").is_dir():
        raise RuntimeError(f"no data directory in {first}: the first part did not run")
    work.mkdir(parents=True, exist_ok=True)
    tip = git(target.path, "rev-parse", f"refs/heads/{target.branch}", home=home)
    commit = git(target.path, "rev-parse", f"{tip}~1", home=home)
    result = DeepResult(depth(target.commits), runs)
    expected = git(
        target.path, "rev-list", f"--skip={result.skip}", f"--max-count={PAGE}", tip, home=home
    ).split()
    branch = quote(target.branch, safe="")
    path = f"/{OWNER}/{target.name}/commits/branch/{branch}?after={tip}&skip={result.skip}"
    with contenders.running(
        "cgit", repos, f"{OWNER}/{target.name}", target.branch, target.file, target.directory,
        target.history_path, commit, home, work / "cgit",
    ) as cgit:  # fmt: skip
        theirs = measure.Client(cgit.base_url)
        cgit_url = f"{cgit.base_url}/{OWNER}/{target.name}/log/?h={branch}&ofs={result.skip}"
        try:
            _, cgit_page = _cgit(theirs, cgit_url)  # the file cache both read, warmed
            for number in range(runs):
                log(f"deep: run {number + 1}/{runs}, {result.skip:,} commits deep")
                if number % 2:
                    result.cgit_ms.append(round(_cgit(theirs, cgit_url)[0] * 1000, 1))
                took, polls, warm, page = _floorless(
                    first, repos, work / "data", target, commit, path, deadline
                )
                result.floorless_ms.append(round(took * 1000, 1))
                result.floorless_polls.append(polls)
                result.floorless_warm_ms.append(round(warm * 1000, 1))
                if not number % 2:
                    result.cgit_ms.append(round(_cgit(theirs, cgit_url)[0] * 1000, 1))
                if result.same_page is not False:
                    result.same_page = _same_page(page, cgit_page, expected)
        finally:
            theirs.close()
    result.floorless_p50_ms = round(statistics.median(result.floorless_ms), 1)
    result.cgit_p50_ms = round(statistics.median(result.cgit_ms), 1)
    log(
        f"deep: floorless {result.floorless_p50_ms} ms, cgit {result.cgit_p50_ms} ms "
        f"({result.ratio:.2f}x)"
    )
    return result


def _floorless(
    first: Path, repos: Path, data: Path, target: Target, commit: str, path: str, deadline: float
) -> tuple[float, int, float, bytes]:
    """floorless started over a fresh copy of the first part's data directory: seconds until
    the page at ``path`` is complete and the requests it took, seconds for it once more, and
    the page."""
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(first / "data", data, symlinks=True, ignore=_leave(first))
    served, proc = start_floorless(repos, data, target, commit)
    client = measure.Client(served.base_url)
    try:
        wait_listening(int(served.base_url.rsplit(":", 1)[1]), proc, 120)
        wait_floorless_indexed(served, deadline)  # the stored index loaded
        took, polls, page = _complete(client, served.base_url + path, deadline)
        warm, _, _ = _complete(client, served.base_url + path, deadline)
    finally:
        client.close()
        served.stop()
        shutil.rmtree(data, ignore_errors=True)
    return took, polls, warm, page


def _leave(first: Path) -> Callable[[str, list[str]], list[str]]:
    """What a copy of the first part's data directory leaves out: its runtime directory
    (git's HOME, temporary files), which floorless makes again when it starts."""
    return lambda directory, entries: ["run"] if Path(directory) == first / "data" else []
