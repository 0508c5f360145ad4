"""``python -m bench.collab``: issue and pull request pages at scale, against a commits page.

One repository (a generated size, as ``python -m bench`` builds) is given ``--issues``
issues and pull requests (one in ``--pull-every`` a pull request of a real topic branch),
an issue with ``--comments`` comments and a pull request with as many, all written through
floorless's own services before the server starts. Then ``floorless serve`` answers, and
each page's warm p50 is measured with its requests alternating with those of the
repository's commits page (one keep-alive connection each, as the ``slow`` scenario's paired
measurement does), so that every figure comes with its ratio to a commits page measured in the
same rounds. Processes per page are counted as the main benchmark counts them, and the
database statements from ``Server-Timing`` (``query``).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pygit2

from bench import measure
from bench.harness import (
    OWNER,
    machine,
    prepare_store,
    start_floorless,
    target_repository,
    wait_floorless_indexed,
    wait_listening,
)

TOPIC = "topic"  # the branch every pull request of the benchmark comes from


@dataclass
class Figure:
    page: str
    url: str
    status: int
    p50_ms: float
    commits_p50_ms: float  # the commits page, measured in the same rounds
    spawns_per_request: float  # forks on the whole machine around each request
    server_spawns: float | None  # the processes the server says it started (Server-Timing)
    queries: int | None
    rendered_p50_ms: float  # each request just after a write to the repository's issues
    rendered_queries: int | None

    @property
    def ratio(self) -> float:
        return self.p50_ms / self.commits_p50_ms


@dataclass
class Collab:
    repo: str
    options: dict[str, object]
    machine: dict[str, str]
    fill_seconds: float
    figures: list[Figure]


def topic_branch(git_dir: Path, branch: str, commits: int = 3) -> str:
    """A branch of ``commits`` new commits on ``branch``'s tip, each adding a line to a new
    file and changing a second one: what a pull request brings. Its tip, hex."""
    repo = pygit2.Repository(str(git_dir))
    tip = repo.revparse_single(f"refs/heads/{branch}").peel(pygit2.Commit)
    signature = pygit2.Signature("Bench", "bench@example.org", int(time.time()), 0)
    parent, lines = tip, []
    for n in range(commits):
        lines.append(f"line {n}: the change under review\n")
        builder = repo.TreeBuilder(parent.tree)
        builder.insert(
            "REVIEW.md", repo.create_blob("".join(lines).encode()), pygit2.GIT_FILEMODE_BLOB
        )
        builder.insert(
            f"change-{n}.txt", repo.create_blob(f"{n}\n".encode()), pygit2.GIT_FILEMODE_BLOB
        )
        oid = repo.create_commit(
            None,
            signature,
            signature,
            f"Change {n}\n\nPart {n} of the topic.",
            builder.write(),
            [parent.id],
        )
        parent = repo[oid].peel(pygit2.Commit)
    repo.references.create(f"refs/heads/{TOPIC}", parent.id, force=True)
    return str(parent.id)


def fill(
    data: Path, repos: Path, name: str, branch: str, head: str, options: argparse.Namespace
) -> dict[str, int]:
    """Accounts, issues, pull requests and comments, through floorless's services; the
    numbers of the long issue and the long pull request."""
    from floorless.core.config import Settings
    from floorless.forge import Forge

    forge = Forge(Settings.load(environ={}, data=data, repos=repos))
    forge.start(background=False)
    try:
        for person in (OWNER, "reader"):
            if forge.accounts.get(person) is None:
                forge.accounts.create_user(person, f"{person}@example.org", "a bench password 1")
        author = forge.accounts.get(OWNER)
        assert author is not None
        repo = forge.registry.get(OWNER, name)
        body = "A report with **Markdown**, a list:\n\n- one\n- two\n\nand `code`, see #1."
        last_pull = 0
        for n in range(1, options.issues + 1):
            if n % options.pull_every == 0:
                pull = forge.pulls.create(
                    OWNER,
                    name,
                    author,
                    f"Pull request {n}",
                    body,
                    branch,
                    (OWNER, name, TOPIC),
                    head,
                )
                last_pull = pull.number
            else:
                issue = forge.issues.create(
                    OWNER, name, author, f"Issue {n} about the parser", body
                )
                if n % 3 == 0:
                    forge.issues.close(issue, author, "completed")
        long_issue = forge.issues.create(OWNER, name, author, "A long conversation", body)
        long_pull = forge.pulls.create(
            OWNER, name, author, "A long review", body, branch, (OWNER, name, TOPIC), head
        )
        for n in range(options.comments):
            text = f"Comment {n}: with *this* input I got `{n}`; see #{long_issue.number}."
            forge.issues.comment(long_issue, author, text)
            forge.issues.comment(long_pull.issue, author, text)
        forge.moves.set_pull_ref(repo, long_pull.number, head)
        return {"issue": long_issue.number, "pull": long_pull.number, "some_pull": last_pull}
    finally:
        forge.stop()


def wait_checked(database: Path, deadline: float) -> float:
    """Wait until the server has checked whether each pull request can merge (background
    work at its start, which pages should not be measured against); how long it took."""
    began = time.monotonic()
    while time.monotonic() - began < deadline:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
            (left,) = conn.execute(
                "SELECT COUNT(*) FROM pulls WHERE check_state = 'checking'"
            ).fetchone()
        if not left:
            return time.monotonic() - began
        time.sleep(0.5)
    raise RuntimeError("the pull requests were not checked in time")


def statements(server_timing: str | None) -> int | None:
    found = re.search(r"query;[^,]*dur=(\d+)", server_timing or "")
    return int(found.group(1)) if found else None


def run(options: argparse.Namespace, log: Callable[[str], None] = print) -> Collab:
    target = target_repository(options.repo, options.cache_dir)
    work = Path(tempfile.mkdtemp(prefix="bench-collab-"))
    repos, _home = prepare_store(work / "store", target.path, target.name)
    git_dir = repos / OWNER / f"{target.name}.git"
    head = topic_branch(git_dir, target.branch)
    data = work / "data"
    began = time.monotonic()
    numbers = fill(data, repos, target.name, target.branch, head, options)
    filled = time.monotonic() - began
    log(f"filled {options.issues} issues and pull requests in {filled:.1f} s")
    served, proc = start_floorless(repos, data, target, head)
    try:
        wait_listening(int(served.base_url.rsplit(":", 1)[1]), proc, time.monotonic() + 60)
        wait_floorless_indexed(served, 600)
        checked = wait_checked(data / "floorless.sqlite3", 600)
        log(f"every pull request checked after {checked:.1f} s")
        r = f"{served.base_url}/{OWNER}/{target.name}"
        total = options.issues + 2
        pages = {
            "issues": f"{r}/issues",
            "issues, page 100": f"{r}/issues?state=all&before={max(2, total - 99 * 25)}",
            "issues, search": f"{r}/issues?q=parser",
            f"issue #1, mentioned by the {options.issues} others": f"{r}/issues/1",
            f"issue, {options.comments} comments": f"{r}/issues/{numbers['issue']}",
            "pull requests": f"{r}/pulls",
            f"pull request, {options.comments} comments": f"{r}/pulls/{numbers['pull']}",
            "pull request commits": f"{r}/pulls/{numbers['pull']}/commits",
            "pull request files": f"{r}/pulls/{numbers['pull']}/files",
            "compare": f"{r}/compare/{target.branch}...{TOPIC}",
        }
        commits = f"{r}/commits/branch/{target.branch}"
        figures = []
        writer = sqlite3.connect(data / "floorless.sqlite3", timeout=30, isolation_level=None)

        def write(index: int) -> None:
            """A write to one of the repository's issues (its triggers move the activity
            version), as a comment anywhere in the repository does."""
            if index == 0:
                writer.execute(
                    "UPDATE issues SET updated_at = updated_at WHERE owner = ? AND name = ?"
                    " AND number = ?",
                    (OWNER, target.name, 2),
                )

        for page, url in pages.items():
            mine, reference = measure.measure_interleaved(
                page,
                [url, commits],
                options.requests,
                options.warmup,
                deadline_seconds=60,
                spawns_each=True,
            )
            rendered, _ = measure.measure_interleaved(
                page,
                [url, commits],
                options.requests // 2,
                2,
                deadline_seconds=60,
                prepare=write,
            )
            figure = Figure(
                page,
                url.removeprefix(served.base_url),
                mine.status,
                mine.p50_ms,
                reference.p50_ms,
                mine.spawns_per_request,
                mine.server_spawns_per_request,
                statements(mine.server_timing),
                rendered.p50_ms,
                statements(rendered.server_timing),
            )
            figures.append(figure)
            log(
                f"{page:32} {figure.status}  p50 {figure.p50_ms:7.2f} ms  commits page"
                f" {figure.commits_p50_ms:6.2f} ms  ratio {figure.ratio:5.2f}"
                f"  processes {figure.server_spawns} (machine {figure.spawns_per_request:.2f})"
                f"  statements {figure.queries}"
                f"  after a write {figure.rendered_p50_ms:7.2f} ms"
                f" ({figure.rendered_queries} statements)"
            )
        writer.close()
    finally:
        served.stop()
    return Collab(
        target.name,
        vars(options) | {"cache_dir": str(options.cache_dir)},
        machine(),
        filled,
        figures,
    )


def markdown(result: Collab, command: str) -> str:
    options = result.options
    lines = [
        "# Issues and pull requests at scale",
        "",
        f"`{command}` on {result.machine.get('cpu', 'this machine')}: the `{result.repo}`"
        f" repository with {options['issues']} issues and pull requests (one in"
        f" {options['pull_every']} a pull request), an issue and a pull request with"
        f" {options['comments']} comments each (written in {result.fill_seconds:.0f} s through"
        " floorless's services). Each page's requests alternate with requests of the"
        " repository's commits page, so the ratio compares figures taken in the same rounds.",
        "",
        "| page | status | p50 ms | commits page p50 ms | ratio | processes per page"
        " (server) | forks on the machine per page | statements | p50 ms after a write"
        " | statements after a write |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in result.figures:
        lines.append(
            f"| {f.page} | {f.status} | {f.p50_ms:.2f} | {f.commits_p50_ms:.2f} | {f.ratio:.2f}"
            f" | {'' if f.server_spawns is None else f'{f.server_spawns:.2f}'}"
            f" | {f.spawns_per_request:.2f} | {'' if f.queries is None else f.queries}"
            f" | {f.rendered_p50_ms:.2f}"
            f" | {'' if f.rendered_queries is None else f.rendered_queries} |"
        )
    lines += [
        "",
        "Every issue's description mentions #1, so issue #1's timeline holds one reference"
        " event from each: it shows its first and last 30 entries, as the long conversations"
        " do. Like the commits page, these pages are served whole from the page cache while"
        " the repository's refs and its activity version (moved by the database's triggers"
        " on every write to its issues, pull requests, comments, reviews, labels and"
        " milestones) stay the same: the p50 column. The last two columns are the same page"
        " with a write to one of the repository's issues before each request, so that each"
        " is rendered again, from a few statements whatever the number of issues or comments.",
        "",
        "Processes per page are those the server reports starting for the page in its"
        " `Server-Timing` header (the audit hook's count); beside them, every fork on the"
        " machine while the page's requests were in flight, which counts whatever else runs"
        " on the machine. Statements are those the page ran on the data directory's SQLite,"
        " from the same header.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.collab", description=__doc__)
    parser.add_argument("--repo", default="small", help="small, medium, large, or a path")
    parser.add_argument("--issues", type=int, default=10_000)
    parser.add_argument("--pull-every", type=int, default=5)
    parser.add_argument("--comments", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--docs", type=Path, default=None, help="write the Markdown here")
    options = parser.parse_args(argv)
    result = run(options)
    command = "python -m bench.collab " + shlex.join(argv if argv is not None else sys.argv[1:])
    if options.json is not None:
        options.json.write_text(json.dumps(asdict(result), indent=2, default=str))
    if options.docs is not None:
        options.docs.write_text(markdown(result, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
