"""Cold pages against git doing the same work, measured side by side in one run.

``python -m bench.cold blame --repo PATH --file F [--ref REF]`` times ``git blame --porcelain``
of a file and floorless's first (cold) blame page of the same file, in one process, and prints
the ratio and the page's bytes. The page is asked of a forge started for the run over a fresh
data directory (no answer, page or highlight cached), through the WSGI app in-process: the
time to the first row of the page (it is streamed) and to its end are both reported.

``python -m bench.cold blame-repo DEST [--lines N] [--commits N]`` builds a repository with one
large C file (``BLAME_FILE``, 7,000 lines by default) edited by several authors over many
commits (lines replaced, inserted, deleted and blocks moved), so that blame shows thousands of
groups: the shape of git.git's ``sequencer.c``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from bench.repos import fast_import, git_env

_GIT = shutil.which("git") or "/usr/bin/git"

BLAME_FILE = "src/sequencer.c"
BLAME_BRANCH = "main"
_AUTHORS = (
    ("Ada Lovelace", "ada@example.org"),
    ("Brian Kernighan", "bwk@example.org"),
    ("Grace Hopper", "grace@example.org"),
    ("Dennis Ritchie", "dmr@example.org"),
    ("Margaret Hamilton", "mh@example.org"),
    ("Linus Torvalds", "lt@example.org"),
)
_EPOCH = 1_500_000_000
_DAY = 86_400
_VOCABULARY = (
    "todo sequencer commit pick revert squash fixup reword edit drop label reset merge replay "
    "opts state author message parent tree index lock head onto strbuf oid list"
)
_WORDS = tuple(_VOCABULARY.split())


# -- the repository ---------------------------------------------------------------------------


def _line(rng: random.Random) -> bytes:
    """One line of plausible C."""
    a, b, c = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
    indent = b"\t" * rng.choice((0, 1, 1, 1, 2, 2, 3))
    shape = rng.randrange(8)
    if shape == 0:
        text = f"static int {a}_{b}(struct {c} *{a}, const char *{b})"
    elif shape == 1:
        text = f"if (!{a}->{b} && {c}_{a}(&{b}, {rng.randrange(100)}) < 0)"
    elif shape == 2:
        text = f"return error(_(\"could not {a} {b} '%s'\"), {c});"
    elif shape == 3:
        text = f'strbuf_addf(&{a}, "{b} %s\\n", oid_to_hex(&{c}->oid));'
    elif shape == 4:
        text = f"/* {a} the {b} before the {c} */"
    elif shape == 5:
        text = "}" if indent else "{"
    elif shape == 6:
        text = f"{a}_{b} = {c}_{a}({b}, {rng.randrange(1 << 16)});"
    else:
        text = f"for (i = 0; i < {a}->nr; i++)"
    return indent + text.encode() + b"\n"


def _edit(rng: random.Random, lines: list[bytes], target: int) -> None:
    """Change ``lines`` the way a commit does: replace, insert, delete or move a few runs."""
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(lines))
        span = rng.randint(1, 12)
        kind = rng.randrange(10)
        if kind < 5:  # rewrite
            lines[at : at + span] = [_line(rng) for _ in range(span)]
        elif kind < 7 or len(lines) < target:  # add
            lines[at:at] = [_line(rng) for _ in range(span)]
        elif kind < 9 and len(lines) > target:  # remove
            del lines[at : at + span]
        else:  # move a block elsewhere
            block = lines[at : at + span * 3]
            del lines[at : at + span * 3]
            to = rng.randrange(len(lines) + 1)
            lines[to:to] = block


def build_blame_repo(
    dest: Path, lines: int = 7_000, commits: int = 600, years: float = 6.0, seed: int = 11
) -> Path:
    """A bare repository at ``dest`` whose ``BLAME_FILE`` has about ``lines`` lines, written
    by ``commits`` commits of six authors over ``years`` (every other commit also changes
    another file)."""
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty")
    rng = random.Random(seed)
    content = [_line(rng) for _ in range(lines)]
    fast_import(
        dest,
        BLAME_BRANCH,
        lambda out: _write_history(out, rng, content, lines, commits, years),
    )
    with tempfile.TemporaryDirectory(prefix="bench-git-home-") as tmp:
        env = git_env(Path(tmp))
        subprocess.run(
            [_GIT, f"--git-dir={dest}", "commit-graph", "write", "--reachable", "--changed-paths"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
        )
    return dest


def _write_history(
    out: IO[bytes],
    rng: random.Random,
    content: list[bytes],
    target: int,
    commits: int,
    years: float,
) -> None:
    step = max(1, int(years * 365 * _DAY / max(1, commits - 1)))

    def data(payload: bytes) -> None:
        out.write(b"data %d\n" % len(payload) + payload + b"\n")

    for number in range(commits):
        if number:
            _edit(rng, content, target)
        name, email = _AUTHORS[rng.randrange(len(_AUTHORS))]
        when = _EPOCH + step * number
        out.write(f"commit refs/heads/{BLAME_BRANCH}\n".encode())
        out.write(f"author {name} <{email}> {when} +0000\n".encode())
        out.write(f"committer {name} <{email}> {when} +0000\n".encode())
        data(f"sequencer: {rng.choice(_WORDS)} the {rng.choice(_WORDS)} ({number})\n".encode())
        out.write(f"M 100644 inline {BLAME_FILE}\n".encode())
        data(b"".join(content))
        if number % 2:
            out.write(f"M 100644 inline notes/{number % 40}.txt\n".encode())
            data(f"note {number}\n".encode())
        out.write(b"\n")
    out.write(b"done\n")


# -- measuring --------------------------------------------------------------------------------


@dataclass
class BlameFigures:
    """Medians over the runs (seconds) and the page's size. Wall times on a shared machine
    move with its load; the CPU times (floorless's own, and its git child's) do not."""

    repo: str
    file: str
    ref: str
    runs: int
    lines: int
    groups: int
    git_blame_s: float  # git blame --porcelain, to its end
    git_blame_cpu_s: float
    page_first_row_s: float  # floorless's cold page: to the piece holding line 1's row
    page_s: float  # ... to its end
    page_cpu_s: float  # the interpreter's CPU for the page
    page_git_cpu_s: float  # its git child's CPU
    page_bytes: int
    spawns: int  # git processes the cold page started (one run's)

    @property
    def ratio(self) -> float:
        return self.page_s / self.git_blame_s

    @property
    def bytes_per_line(self) -> float:
        return self.page_bytes / max(1, self.lines)


class _Stopwatch:
    """Wall time, this process's CPU time and its children's, from its creation."""

    def __init__(self) -> None:
        self.wall, self.cpu, self.children = time.perf_counter(), time.process_time(), _children()

    def read(self) -> tuple[float, float, float]:
        return (
            time.perf_counter() - self.wall,
            time.process_time() - self.cpu,
            _children() - self.children,
        )


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_git_blame(git_dir: Path, ref: str, path: str) -> tuple[float, float, bytes]:
    """``git blame --porcelain`` of ``path`` at ``ref`` in an isolated environment, timed to
    its exit with a blocking wait (no polling): wall and CPU seconds, and its output."""
    with tempfile.TemporaryDirectory(prefix="bench-git-home-") as home:
        watch = _Stopwatch()
        proc = subprocess.Popen(
            [_GIT, f"--git-dir={git_dir}", "blame", "--porcelain", ref, "--", path],
            env=git_env(Path(home)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        out, _ = proc.communicate()
        wall, _, cpu = watch.read()
    if proc.returncode != 0:
        raise RuntimeError(f"git blame exited with {proc.returncode}")
    return wall, cpu, out


@dataclass
class _Page:
    first_row_s: float
    wall_s: float
    cpu_s: float
    git_cpu_s: float
    body: bytes
    spawns: int


def _cold_page(git_dir: Path, url_path: str, work: Path) -> _Page:
    """floorless's first blame page of ``url_path`` from a forge started over a fresh data
    directory, through its WSGI app in-process: seconds to the piece holding the first row
    and to the end, the page, and the processes it started."""
    from falcon import testing

    from floorless.core.config import Settings
    from floorless.forge import Forge
    from floorless.web.app import create_app

    repos = work / "repos"
    (repos / "bench").mkdir(parents=True)
    (repos / "bench" / "target.git").symlink_to(git_dir.resolve())
    forge = Forge(Settings.load(environ={}, data=work / "data", repos=repos))
    forge.start()
    try:
        deadline = time.monotonic() + 3600
        while not forge.indexer.idle():  # the background index would share the cores
            if time.monotonic() > deadline:
                raise RuntimeError("the index took over an hour")
            time.sleep(0.1)
        app = create_app(forge)
        testing.TestClient(app).simulate_get("/bench/target")  # the shared templates compile
        answer: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> Any:
            answer.append((status, headers))

        environ = testing.create_environ(path=url_path)
        watch = _Stopwatch()
        body = app(environ, start_response)
        first = 0.0
        pieces = []
        try:
            for piece in body:
                pieces.append(piece)
                if not first and b'<tr id="L1"' in piece:
                    first = watch.read()[0]
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        wall, cpu, git_cpu = watch.read()
        if not answer or not answer[0][0].startswith("200"):
            raise RuntimeError(f"the blame page answered {answer}")
        headers = {name.lower(): value for name, value in answer[0][1]}
        found = re.search(r'spawn;desc="processes";dur=(\d+)', headers.get("server-timing", ""))
        spawns = int(found[1]) if found else -1
        return _Page(first or wall, wall, cpu, git_cpu, b"".join(pieces), spawns)
    finally:
        forge.stop()


def measure_blame(git_dir: Path, path: str, ref: str = "HEAD", runs: int = 3) -> BlameFigures:
    """``git blame --porcelain`` against floorless's cold blame page of the same file, ``runs``
    times each, alternately; medians."""
    commit = subprocess.run(
        [_GIT, f"--git-dir={git_dir}", "rev-parse", "--verify", f"{ref}^{{commit}}"],
        env=git_env(Path(tempfile.gettempdir())),
        capture_output=True,
        check=True,
        text=True,
    ).stdout.strip()
    url = f"/bench/target/blame/commit/{commit}/{quote(path)}"
    gits: list[tuple[float, float]] = []
    pages: list[_Page] = []
    lines = 0
    for _ in range(runs):
        wall, cpu, out = time_git_blame(git_dir, commit, path)
        gits.append((wall, cpu))
        lines = sum(1 for line in out.split(b"\n") if line.startswith(b"\t"))
        with tempfile.TemporaryDirectory(prefix="bench-cold-") as work:
            pages.append(_cold_page(git_dir, url, Path(work)))
    last = pages[-1]
    return BlameFigures(
        repo=str(git_dir),
        file=path,
        ref=ref,
        runs=runs,
        lines=lines,
        groups=last.body.count(b'class="blame-commit'),
        git_blame_s=statistics.median(wall for wall, _ in gits),
        git_blame_cpu_s=statistics.median(cpu for _, cpu in gits),
        page_first_row_s=statistics.median(p.first_row_s for p in pages),
        page_s=statistics.median(p.wall_s for p in pages),
        page_cpu_s=statistics.median(p.cpu_s for p in pages),
        page_git_cpu_s=statistics.median(p.git_cpu_s for p in pages),
        page_bytes=len(last.body),
        spawns=last.spawns,
    )


def report_blame(figures: BlameFigures) -> str:
    f = figures
    return (
        f"{f.file} ({f.lines:,} lines, {f.groups:,} groups) at {f.ref}, median of {f.runs}:\n"
        f"  git blame --porcelain      {f.git_blame_s * 1000:8.0f} ms"
        f"  (CPU {f.git_blame_cpu_s * 1000:.0f} ms)\n"
        f"  floorless cold blame page  {f.page_s * 1000:8.0f} ms"
        f"  (first row at {f.page_first_row_s * 1000:.0f} ms)\n"
        f"    CPU: floorless {f.page_cpu_s * 1000:.0f} ms,"
        f" its {f.spawns} git process {f.page_git_cpu_s * 1000:.0f} ms\n"
        f"  ratio                      {f.ratio:8.2f}x\n"
        f"  page                       {f.page_bytes:8,} bytes ({f.bytes_per_line:.0f} B/line)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    blame = commands.add_parser("blame", help="git blame against floorless's cold blame page")
    blame.add_argument("--repo", type=Path, required=True, help="a bare repository (git dir)")
    blame.add_argument("--file", required=True, help="the file's path in the repository")
    blame.add_argument("--ref", default="HEAD")
    blame.add_argument("--runs", type=int, default=3)
    blame.add_argument("--json", action="store_true", help="print the figures as JSON")
    build = commands.add_parser("blame-repo", help="build a repository with a large file")
    build.add_argument("dest", type=Path)
    build.add_argument("--lines", type=int, default=7_000)
    build.add_argument("--commits", type=int, default=600)
    args = parser.parse_args(argv)
    if args.command == "blame-repo":
        build_blame_repo(args.dest, args.lines, args.commits)
        print(json.dumps({"repo": str(args.dest), "file": BLAME_FILE, "ref": BLAME_BRANCH}))
        return 0
    figures = measure_blame(args.repo, args.file, args.ref, args.runs)
    if args.json:
        print(json.dumps({**asdict(figures), "ratio": figures.ratio}, indent=2))
    else:
        print(report_blame(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
