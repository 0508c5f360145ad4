"""A cold commit page against ``git show --stat`` of the same commit, side by side in one run.

``python -m bench.cold_commit --repo PATH --commit SHA [--warm SHA] [--runs N]`` times, for the
same commit of the same repository:

- ``git show --stat`` (an isolated git environment, the child timed with a blocking wait), the
  median of ``--runs`` after one unmeasured run, so that both read from the OS page cache;
- floorless's commit page, asked through the WSGI app in-process of a forge started anew for
  each run over a fresh data directory: no diff, highlighted file or page is cached. Each forge
  first serves ``--warm`` (another commit, by default the commit's parent), so the measured
  page is the first view of a commit, not the first request of a process (Pygments compiles
  a language's lexer once per process).

Where cgit is installed, its commit page of the same commit (without its cache, so each is
the first view; one unmeasured request first, as for ``git show --stat``) is timed the same
number of times over HTTP, with its bytes: cgit shows every file's diff whole, floorless the
files that fit its page budget, the others loading on request.

The target is "within 2x of ``git show --stat`` plus the rendering of what it shows", and it
is judged that way: the server measures, for the page's own request, its ``render`` phase
(``Server-Timing``: highlighting the lines shown, making their rows and the template), and the
page's time less that rendering is set against ``git show --stat`` (``target_ratio``, met at
2.0 or below). The whole page's ratio is reported beside it (``ratio``).

It prints the medians, the ratios, the page's bytes, files listed and shown, lines highlighted
and ``Server-Timing``, as JSON with ``--json``.

``python -m bench.cold_commit build DEST [--files N]`` builds a repository whose ``main`` ends
with two commits changing ``N`` (300) generated C, Python and JavaScript files each in a few
places: the shape of a tree-wide change. The last commit is the one to measure, the one before
it warms the process.

Both are plain functions (``build_commit_repo``, ``measure``) that ``bench.cold`` may join as
subcommands.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from bench.repos import fast_import, git_env

_GIT = shutil.which("git") or "/usr/bin/git"
_WORDS = (
    "value", "result", "index", "count", "name", "path", "data", "items", "node", "parent",
    "child", "buffer", "length", "offset", "token", "state", "config", "handle", "error",
    "reader", "writer", "cache", "entry", "table",
)  # fmt: skip
_EPOCH = 1_600_000_000


# -- the repository ---------------------------------------------------------------------------


def _line(rng: random.Random, ext: str) -> str:
    a, b, c = rng.sample(_WORDS, 3)
    n = rng.randrange(1000)
    pad = "    " * rng.randrange(4)
    if ext == "py":
        shapes = (
            f'{pad}{a} = {b}.{c}({n}, "{a}-{n}")  # {b}',
            f"{pad}def {a}_{n}({b}, {c}={n}):",
            f"{pad}return [{a} for {b} in {c} if {b} > {n}]",
        )
    elif ext == "c":
        shapes = (
            f'{pad}{a}->{b} = {c}_get({n}, "{a}");',
            f"{pad}if ({a} < {n} && {b} != NULL) /* {c} */",
            f"{pad}static int {a}_{b}(struct {c} *p, size_t n);",
        )
    else:
        shapes = (
            f'{pad}const {a} = {b}.{c}({n}, "{a}");',
            f"{pad}if ({a} > {n}) {{ {b}({c}); }}",
            f"{pad}// {a} {b} {c} {n}",
        )
    return rng.choice(shapes)


def _edit(rng: random.Random, lines: list[str], ext: str) -> None:
    for _ in range(rng.randint(2, 6)):
        at = rng.randrange(len(lines))
        lines[at : at + rng.randint(1, 6)] = [_line(rng, ext) for _ in range(rng.randint(1, 8))]


def build_commit_repo(dest: Path, files: int = 300, seed: int = 7) -> Path:
    """A bare repository at ``dest``: a root commit adding ``files`` files of 150-600 lines,
    then two commits changing every one of them in 2-6 places (``main`` is the last)."""
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty")
    rng = random.Random(seed)
    names = [f"src/part{i // 40}/file{i:03d}.{('c', 'py', 'js')[i % 3]}" for i in range(files)]
    contents = {
        n: [_line(rng, n.rsplit(".", 1)[1]) for _ in range(rng.randint(150, 600))] for n in names
    }

    def write(out: IO[bytes]) -> None:
        for number, message in enumerate(
            ("Add the files", "Change every file", "Change every file again")
        ):
            if number:
                for name in names:
                    _edit(rng, contents[name], name.rsplit(".", 1)[1])
            _commit(out, number, message, contents)
        out.write(b"done\n")

    fast_import(dest, "main", write)
    return dest


def _commit(out: IO[bytes], number: int, message: str, contents: dict[str, list[str]]) -> None:
    def data(payload: bytes) -> None:
        out.write(b"data %d\n" % len(payload) + payload + b"\n")

    when = _EPOCH + 60 * number
    out.write(b"commit refs/heads/main\n")
    out.write(f"author Ada Author <ada@example.org> {when} +0000\n".encode())
    out.write(f"committer Ada Author <ada@example.org> {when} +0000\n".encode())
    data(f"{message}\n".encode())
    for name, lines in contents.items():
        out.write(f"M 100644 inline {name}\n".encode())
        data(("\n".join(lines) + "\n").encode())
    out.write(b"\n")


# -- the measurement --------------------------------------------------------------------------


@dataclass
class ColdCommit:
    repo: str
    commit: str
    runs: int
    git_show_stat_ms: float
    page_ms: float
    ratio: float
    page_bytes: int
    files_changed: int
    files_listed: int
    files_shown: int
    lines_highlighted: int
    server_timing: str
    # the page's own git work (Server-Timing's git phase, median) against ``git show --stat``:
    # the rest of the page is showing what git found (highlighting, HTML)
    page_git_ms: float = 0.0
    git_ratio: float = 0.0
    # the server's rendering of what the page shows (Server-Timing's render phase, median:
    # highlighting, diff rows, template), and the target's measure: the page less it, per run
    # (median), against ``git show --stat``
    page_render_ms: float = 0.0
    unrendered_ms: float = 0.0
    target_ratio: float = 0.0
    target_met: bool = False
    # cgit's commit page of the same commit (without its cache), median, and its bytes;
    # None where cgit is not installed
    cgit_ms: float | None = None
    cgit_bytes: int | None = None


def _git_ms(repo: Path, commit: str, home: Path) -> float:
    """One ``git show --stat``, timed with a blocking wait (no polling)."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [_GIT, f"--git-dir={repo}", "show", "--stat", "--format=medium", commit],
        env=git_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if proc.wait() != 0:
        raise RuntimeError(f"git show --stat {commit} failed")
    return (time.perf_counter() - began) * 1000


def measure(repo: Path, commit: str, warm: str | None = None, runs: int = 5) -> ColdCommit:
    """``git show --stat`` and floorless's cold commit page for ``commit`` of ``repo``."""
    from falcon import testing

    from floorless.core.config import Settings
    from floorless.forge import Forge
    from floorless.web import markup
    from floorless.web.app import create_app

    repo = repo.absolute()
    commit = _rev_parse(repo, commit)
    # a full id: the page takes no revision expression (``X^`` would be a 404, and warm nothing)
    warm = _rev_parse(repo, warm or f"{commit}^")
    git_times, page_times, phase_times, render_times, unrendered = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-cold-commit-") as tmp:
        root = Path(tmp)
        (root / "repos" / "bench").mkdir(parents=True)
        (root / "repos" / "bench" / "big.git").symlink_to(repo)
        (root / "home").mkdir()
        _git_ms(repo, commit, root / "home")
        for run in range(runs):
            git_times.append(_git_ms(repo, commit, root / "home"))
            settings = Settings.load(environ={}, data=root / f"data{run}", repos=root / "repos")
            forge = Forge(settings)
            forge.start()
            try:
                client = testing.TestClient(create_app(forge))
                _wait_idle(forge)
                warmed = client.simulate_get(f"/bench/big/commit/{warm}")
                if warmed.status_code != 200:
                    raise RuntimeError(f"the warming page answered {warmed.status_code}")
                counted = getattr(markup, "HIGHLIGHTED", None)  # None: a version before it
                lexed = counted.lines if counted else 0
                began = time.perf_counter()
                result = client.simulate_get(f"/bench/big/commit/{commit}")
                page_times.append((time.perf_counter() - began) * 1000)
                header = result.headers.get("server-timing", "")
                phase_times.append(_phase(header, "git"))
                render_times.append(_phase(header, "render"))
                unrendered.append(page_times[-1] - render_times[-1])
                lexed = counted.lines - lexed if counted else -1
            finally:
                forge.stop()
            if result.status_code != 200:
                raise RuntimeError(f"the commit page answered {result.status_code}")
        cgit = _cgit_page(root, commit, runs)
    page = result.text
    files_changed = len(
        subprocess.run(
            [
                _GIT,
                f"--git-dir={repo}",
                "diff-tree",
                "-r",
                "-M",
                "--name-only",
                "--no-commit-id",
                f"{commit}^",
                commit,
            ],
            capture_output=True,
            check=True,
        ).stdout.splitlines()
    )
    git_ms, page_ms = statistics.median(git_times), statistics.median(page_times)
    target_ratio = statistics.median(unrendered) / git_ms
    return ColdCommit(
        repo=str(repo),
        commit=commit,
        runs=runs,
        git_show_stat_ms=round(git_ms, 1),
        page_ms=round(page_ms, 1),
        ratio=round(page_ms / git_ms, 2),
        page_bytes=len(result.content),
        files_changed=files_changed,
        files_listed=page.count('<li><span class="status '),
        files_shown=page.count('<section class="file-diff"'),
        lines_highlighted=lexed,
        server_timing=result.headers.get("server-timing", ""),
        page_git_ms=round(statistics.median(phase_times), 1),
        git_ratio=round(statistics.median(phase_times) / git_ms, 2),
        page_render_ms=round(statistics.median(render_times), 1),
        unrendered_ms=round(statistics.median(unrendered), 1),
        target_ratio=round(target_ratio, 2),
        target_met=target_ratio <= 2.0,
        cgit_ms=cgit[0] if cgit else None,
        cgit_bytes=cgit[1] if cgit else None,
    )


def _cgit_page(root: Path, commit: str, runs: int) -> tuple[float, int] | None:
    """cgit's commit page of ``commit`` (``root``'s ``repos/bench/big.git``, no cache): the
    median of ``runs`` after one unmeasured request, and its bytes; None without cgit."""
    from bench import contenders, measure

    if contenders.available("cgit") is not None:
        return None
    repos, home = root / "repos", root / "home"
    with contenders.running(
        "cgit", repos, "bench/big", "main", "", "", "", commit, home, root / "cgit"
    ) as cgit:
        client = measure.Client(cgit.base_url)
        try:
            url = f"{cgit.base_url}/bench/big/commit/?id={commit}"
            status, body, _ = client.get(url)
            if status != 200:
                raise RuntimeError(f"cgit's commit page answered {status}")
            times = [measure.timed_get(client, url)[0] * 1000 for _ in range(runs)]
        finally:
            client.close()
    return round(statistics.median(times), 1), len(body)


def _phase(header: str, name: str) -> float:
    """A phase's milliseconds in a ``Server-Timing`` header (0 when it is not there)."""
    for part in header.split(","):
        fields = [field.strip() for field in part.split(";")]
        if fields[0] == name:
            for field in fields[1:]:
                if field.startswith("dur="):
                    return float(field[4:])
    return 0.0


def _rev_parse(repo: Path, revision: str) -> str:
    return subprocess.run(
        [_GIT, f"--git-dir={repo}", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _wait_idle(forge: object, timeout: float = 600.0) -> None:
    """Wait (bounded) for the forge's background work, the history index and code search's
    (which reads every file of the branch), so that it takes no CPU from the page: idle on
    two looks in a row, as one may queue the other's work."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        idle = forge.indexer.idle() and forge.code.idle()  # type: ignore[attr-defined]
        quiet = quiet + 1 if idle else 0
        time.sleep(0.05)


# -- command line -----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", type=Path, required=True, help="a bare repository")
    parser.add_argument("--commit", default="HEAD", help="the commit to measure (default HEAD)")
    parser.add_argument("--warm", help="a commit whose page is served first (default: the parent)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    result = measure(args.repo, args.commit, args.warm, args.runs)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
        return 0
    print(
        f"{result.commit[:12]} ({result.files_changed} files) in {result.repo}\n"
        f"  git show --stat     {result.git_show_stat_ms:8.1f} ms (median of {result.runs})\n"
        f"  cold commit page    {result.page_ms:8.1f} ms  x{result.ratio}\n"
        f"  its git work        {result.page_git_ms:8.1f} ms  x{result.git_ratio}\n"
        f"  its rendering       {result.page_render_ms:8.1f} ms  (Server-Timing render)\n"
        f"  page less rendering {result.unrendered_ms:8.1f} ms  x{result.target_ratio}"
        f" (target: 2x or below, {'met' if result.target_met else 'missed'})\n"
        f"  page                {result.page_bytes:8d} bytes, {result.files_listed} files listed,"
        f" {result.files_shown} shown, {result.lines_highlighted} lines highlighted\n"
        + (
            f"  cgit's page         {result.cgit_ms:8.1f} ms, {result.cgit_bytes} bytes\n"
            if result.cgit_ms is not None
            else ""
        )
        + f"  Server-Timing       {result.server_timing}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["build"]:
        parser = argparse.ArgumentParser(prog="python -m bench.cold_commit build")
        parser.add_argument("dest", type=Path)
        parser.add_argument("--files", type=int, default=300)
        options = parser.parse_args(argv[1:])
        print(build_commit_repo(options.dest, options.files))
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.cold_commit", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
