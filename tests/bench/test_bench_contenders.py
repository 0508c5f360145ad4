"""The benchmark's peers (bench/contenders.py): each one starts over a small repository,
answers every page it has with the expected content, runs git with the given HOME and
leaves no process behind. A peer that is not installed is skipped, except under CI, which
installs them all (scripts/install-bench-deps.sh)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from support.gitfixtures import FastImportStream, git_env, git_text

pytestmark = [pytest.mark.network, pytest.mark.bench]

# bench/ sits beside src/ and is not installed: import it from the checkout.
sys.path.append(str(Path(__file__).resolve().parents[2]))
contenders = importlib.import_module("bench.contenders")

COMMITS = 200
MODULES = 10  # commit i changes src/mod{i % MODULES}.py
BIG_EVERY = 7  # ... and src/big.py when i % BIG_EVERY == 0
FILE = "src/big.py"
HISTORY_PATH = "src/mod3.py"


def big_file(revision: int) -> bytes:
    return "".join(
        f"def function_{k}(x):  # revision {revision if k % 50 == 0 else 0}\n" for k in range(500)
    ).encode()


def subject(number: int) -> str:
    return f"Commit number {number}"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """repos/alice/demo.git (COMMITS commits) and repos/bob/other.git (one commit)."""
    root = tmp_path_factory.mktemp("contenders")
    repos = root / "repos"
    demo, other = repos / "alice" / "demo.git", repos / "bob" / "other.git"
    for path in (demo, other):
        path.parent.mkdir(parents=True)
        subprocess.run(
            ["git", "init", "-q", "--bare", "-b", "main", str(path)], env=git_env(), check=True
        )
    stream = FastImportStream()
    mark = None
    for i in range(COMMITS):
        files = {f"src/mod{i % MODULES}.py": f"value = {i}\n".encode()}
        if i % BIG_EVERY == 0:
            files[FILE] = big_file(i)
        if i == 0:
            files["README.md"] = b"# Demo\n"
        mark = stream.commit(
            "refs/heads/main", f"{subject(i)}\n", parents=[mark] if mark else [], files=files
        )
    stream.run(demo)
    single = FastImportStream()
    single.commit("refs/heads/main", "Only commit\n", files={"a.txt": b"a\n"})
    single.run(other)
    home = root / "git-home"
    (home / ".config" / "git").mkdir(parents=True)
    commit_number = COMMITS - 4  # changes src/mod6.py
    last_big = (COMMITS - 1) // BIG_EVERY * BIG_EVERY
    return {
        "repos": repos,
        "home": home,
        "work": root / "work",
        "commit": git_text(demo, "rev-parse", f"main~{COMMITS - 1 - commit_number}"),
        "commit_path": f"src/mod{commit_number % MODULES}.py",
        "last_big": git_text(demo, "rev-parse", f"main~{COMMITS - 1 - last_big}"),
        "big": big_file(last_big),
    }


def expectations(site: dict) -> dict[str, tuple[list[str], list[str]]]:
    """Per page kind: strings the page must contain, and strings it must not."""
    touches = [i for i in range(COMMITS) if i % MODULES == 3]
    return {
        "home": ([subject(COMMITS - 1)], []),
        "dir": (["mod3.py", "big.py"], []),
        "file": (["function_0", "function_499"], []),
        "commits": ([subject(COMMITS - 1), subject(COMMITS - 10)], []),
        "history": ([subject(touches[-1]), subject(touches[-2])], [subject(touches[-1] + 1)]),
        "commit": ([site["commit"], site["commit_path"]], []),
        "blame": (["function_499", site["last_big"][:7]], []),
        "explore": (["demo", "other"], []),
    }


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def fetch(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


@pytest.mark.parametrize(
    ("name", "cache"),
    [("cgit", False), ("cgit", True), ("gitweb", False), ("klaus", False)],
    ids=["cgit", "cgit-cache", "gitweb", "klaus"],
)
def test_contender_serves_every_page_and_stops(site: dict, name: str, cache: bool) -> None:
    reason = contenders.available(name)
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs every peer, yet {reason}")
        pytest.skip(reason)

    peer = contenders.start(
        name,
        site["repos"],
        "alice/demo",
        "main",
        FILE,
        "src",
        HISTORY_PATH,
        site["commit"],
        git_home=site["home"],
        workdir=site["work"],
        cgit_cache=cache,
    )
    try:
        assert peer.base_url.startswith("http://127.0.0.1:")
        assert not peer.base_url.endswith("/")
        assert set(peer.urls) == set(contenders.PAGE_KINDS)
        assert all(peer.urls[kind] for kind in contenders.PAGE_KINDS)  # each has every page
        for kind, (present, absent) in expectations(site).items():
            status, body = fetch(peer.urls[kind])
            text = body.decode("utf-8", "replace")
            assert status == 200, kind
            for needle in present:
                assert needle in text, f"{name} {kind}: {needle!r} missing"
            for needle in absent:
                assert needle not in text, f"{name} {kind}: {needle!r} present"
        status, body = fetch(peer.urls["raw"])
        assert (status, body) == (200, site["big"])

        processes = peer.processes()
        assert peer.pid in processes
        assert set(peer.pids) <= set(processes)
        # The leaders stay put (workers and CGI children may come and go while we look).
        runners = [p for p in peer.pids if "fcgiwrap" in cmdline(p) or "gunicorn" in cmdline(p)]
        assert len(runners) == 1, [cmdline(p) for p in peer.pids]
        for pid in runners:  # whatever runs git hands it the benchmark's HOME
            env = environ(pid)
            assert env["HOME"] == str(site["home"])
            assert env["XDG_CONFIG_HOME"] == str(site["home"] / ".config")
    finally:
        processes = peer.processes()
        peer.stop()
    assert processes
    assert [pid for pid in processes if alive(pid)] == []
    assert peer.processes() == []
    peer.stop()  # idempotent


@pytest.mark.parametrize("name", contenders.NAMES)
def test_available_answers_none_or_a_reason(name: str) -> None:
    reason = contenders.available(name)
    assert reason is None or (reason.startswith(f"{name}: ") and "install" in reason)


def test_available_names_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(contenders, "CGIT_CGI", tmp_path / "cgit.cgi")
    assert contenders.available("cgit") == (
        "cgit: Debian package cgit not installed; run scripts/install-bench-deps.sh"
    )
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "gunicorn" else real_find_spec(name, *args),
    )
    reason = contenders.available("klaus")
    assert reason is not None
    assert reason.startswith("klaus: Python package gunicorn not installed")


def test_available_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown contender"):
        contenders.available("gitea")
