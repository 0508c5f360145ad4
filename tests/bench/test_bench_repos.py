"""The benchmark's repositories (``bench.repos``, the ``small`` kind only, to stay quick) and
its spawn-per-page reference forge (``bench.reference``), called in-process as a WSGI app:
every page answers 200 with the number of processes it was designed to start, which its
``X-Spawned`` header reports and an audit hook of the test's own counts, and every child is
reaped before the response is returned."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest
from support.gitfixtures import git, git_text

from bench import reference
from bench.repos import RARE_PATH, BenchRepo, build, ensure, from_path

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.bench

OWNER = "bench"


class _Spawns:
    """Audit hooks cannot be removed: one for the module, counting ``subprocess.Popen``
    events only while active and only on the thread that activated it."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.count = 0

    def __call__(self, event: str, args: tuple) -> None:
        if event == "subprocess.Popen" and self.thread == threading.get_ident():
            self.count += 1


_SPAWNS = _Spawns()
sys.addaudithook(_SPAWNS)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> BenchRepo:
    root = tmp_path_factory.mktemp("bench-repos")
    return build("small", root / OWNER / "small.git")


# ---------------------------------------------------------------------------- repositories


def test_small_history(small: BenchRepo) -> None:
    assert small.kind == "small" and small.branch == "main" and small.commits == 500
    assert git_text(small.path, "rev-list", "--count", "main") == "500"
    assert git_text(small.path, "rev-list", "--count", "--merges", "main") == "2"
    assert git_text(small.path, "log", "--format=%H", "--", RARE_PATH).count("\n") == 2
    assert git_text(small.path, "ls-tree", "-r", "--name-only", "main").count("\n") == 199
    assert git_text(small.path, "cat-file", "-t", f"main:{small.directory}") == "tree"
    assert git_text(small.path, "cat-file", "-p", "main:README.md").startswith("# bench-small")
    assert (small.path / "objects" / "info" / "commit-graph").is_file()


def test_the_file_is_about_500_lines_with_a_history(small: BenchRepo) -> None:
    text = git(small.path, "cat-file", "-p", f"main:{small.file}")
    assert 480 <= text.count(b"\n") <= 520
    compile(text, small.file, "exec")  # realistic-looking Python, and valid
    changes = git_text(small.path, "log", "--format=%H", "--", small.history_path)
    assert len(changes.split()) == 11  # created, then changed every 50 commits
    blame = git_text(small.path, "blame", "--porcelain", "main", "--", small.file)
    headers = [line.split(" ") for line in blame.splitlines() if not line.startswith("\t")]
    groups = {fields[0] for fields in headers if len(fields[0]) == 40 and len(fields) == 4}
    assert len(groups) >= 5  # blame shows several commits


def test_builds_are_deterministic_and_cached(small: BenchRepo, tmp_path: Path) -> None:
    cached = ensure("small", tmp_path)
    assert cached.path == tmp_path / "small.git"
    assert [cached.file, cached.directory, cached.commits] == [
        small.file,
        small.directory,
        small.commits,
    ]
    for ref in ("main", "feature"):
        assert git_text(cached.path, "rev-parse", ref) == git_text(small.path, "rev-parse", ref)
    marker = max(cached.path.iterdir(), key=lambda p: p.stat().st_mtime_ns)
    stamp = marker.stat().st_mtime_ns
    assert ensure("small", tmp_path) == cached  # reused, not rebuilt
    assert marker.stat().st_mtime_ns == stamp
    marker.unlink()  # an incomplete build is built again
    assert ensure("small", tmp_path) == cached
    assert marker.is_file()


def test_from_path_picks_pages_in_any_repository(small: BenchRepo) -> None:
    found = from_path(small.path)
    assert (found.branch, found.file, found.directory) == ("main", small.file, small.directory)
    assert found.history_path == found.file and found.commits == 500


# ---------------------------------------------------------------------------- reference forge


@contextmanager
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Count spawns with the audit hook and keep every child started on this thread."""
    created: list[subprocess.Popen[bytes]] = []
    me = threading.get_ident()

    class Recording(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            if threading.get_ident() == me:
                created.append(self)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    _SPAWNS.count, _SPAWNS.thread = 0, me
    try:
        yield created
    finally:
        _SPAWNS.thread = None


def call(app, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    environ: dict = {"PATH_INFO": path, "REQUEST_METHOD": method}
    setup_testing_defaults(environ)
    answer: dict = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info=None) -> None:
        answer["status"], answer["headers"] = int(status[:3]), dict(headers)

    body = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], body


@pytest.fixture(scope="module")
def app(small: BenchRepo, tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("reference-home")
    forge = reference.make_app(small.path.parent.parent, home)
    assert "[user]" in (home / ".gitconfig").read_text()
    return forge


def _pages(small: BenchRepo) -> dict[str, tuple[str, int]]:
    r, b = f"/{OWNER}/small", small.branch
    parent = git_text(small.path, "rev-parse", "main~1")
    merge = git_text(small.path, "rev-list", "-n", "1", "--merges", "main")
    return {
        "explore": ("/", 0),
        "home": (r, 6),
        "dir": (f"{r}/src/branch/{b}/{small.directory}", 6),
        "file": (f"{r}/src/branch/{b}/{small.file}", 6),
        "raw": (f"{r}/raw/branch/{b}/{small.file}", 5),
        "commits": (f"{r}/commits/branch/{b}", 6),
        "history": (f"{r}/commits/branch/{b}/{small.history_path}", 6),
        "commit": (f"{r}/commit/{parent}", 6),
        "merge": (f"{r}/commit/{merge}", 6),
        "blame": (f"{r}/blame/branch/{b}/{small.file}", 6),
        "file at a commit": (f"{r}/src/commit/{parent}/{small.file}", 6),
    }


def test_every_page_spawns_what_it_says(app, small: BenchRepo, monkeypatch) -> None:
    for page, (url, designed) in _pages(small).items():
        with recording(monkeypatch) as children:
            status, headers, body = call(app, url)
        assert status == 200, (page, body[:300])
        assert int(headers["X-Spawned"]) == designed == _SPAWNS.count == len(children), page
        for child in children:  # every child waited for: none left running or a zombie
            assert child.returncode is not None, (page, child.args)
            with pytest.raises(ChildProcessError):
                os.waitpid(child.pid, os.WNOHANG)
        monkeypatch.undo()


def test_pages_show_the_repository(app, small: BenchRepo) -> None:
    tip = git_text(small.path, "rev-parse", "main")
    assert tip.encode() in call(app, f"/{OWNER}/small")[2]  # the benchmark looks for new tips
    raw = call(app, f"/{OWNER}/small/raw/branch/main/{small.file}")
    assert raw[2] == git(small.path, "cat-file", "-p", f"main:{small.file}")
    assert raw[1]["Content-Type"].startswith("text/plain")
    assert b"small" in call(app, "/")[2]
    history = call(app, f"/{OWNER}/small/commits/branch/main/{small.history_path}")[2]
    assert history.count(b"/commit/") == 11
    status, headers, body = call(app, f"/{OWNER}/small", method="HEAD")
    assert (status, body, headers["X-Spawned"]) == (200, b"", "6")


def test_unknown_things_are_404(app, monkeypatch) -> None:
    for url, spawned in (
        ("/nobody/nothing", 0),
        ("/bench/small.git", 0),
        ("/bench/../bench/small", 0),
        ("/bench/small/src/branch/main/no/such/file", 4),
        ("/bench/small/src/branch/no-such-branch", 4),
        ("/bench/small/commit/0123456789abcdef0123456789abcdef01234567", 4),
        ("/bench/small/blame/branch/main/src", 4),
        ("/bench/small/elsewhere/branch/main", 4),
    ):
        with recording(monkeypatch) as children:
            status, headers, _ = call(app, url)
        assert (status, int(headers["X-Spawned"])) == (404, spawned), url
        assert all(child.returncode is not None for child in children), url
        monkeypatch.undo()
