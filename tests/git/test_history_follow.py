"""A file's history follows its renames as ``git log --follow`` does, page by page: the list
goes on past the commit that renamed the file, on the same page and through ``Older``, with
the old path's history from that commit's parent, behind a "renamed from" row. The oracle is
``git log --follow`` on a file renamed twice, at page sizes that put a rename in the middle
of a page, at its end, and on a page of its own; no page spawns a process."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import _run, git
from support.spawns import get

from floorless.web.app import create_app

DAY = 86_400
WHEN = 1_600_000_000
BODY = [f"line {n} of a file that moves about" for n in range(1, 21)]


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def build(path: Path) -> None:
    """``a.txt`` added beside ``other.txt``, changed, renamed to ``b.txt`` (and changed a
    little in the same commit), changed twice, renamed to ``c.txt``, changed twice; commits
    touching ``other.txt`` alone in between."""
    work = path.parent / "work"
    work.mkdir(parents=True)
    _run(["init", "-q", "-b", "main", str(work)], cwd=work.parent)
    steps = 0

    def commit(message: str) -> None:
        nonlocal steps
        steps += 1
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", message, when=WHEN + steps * DAY)

    lines = list(BODY)
    (work / "a.txt").write_text(_text(lines))
    (work / "other.txt").write_text("other 0\n")
    commit("Add a.txt")
    lines[3] = "line 4 changed"
    (work / "a.txt").write_text(_text(lines))
    commit("Change a.txt")
    (work / "other.txt").write_text("other 1\n")
    commit("Change other.txt")
    (work / "a.txt").unlink()
    lines[5] = "line 6 changed while moving"
    (work / "b.txt").write_text(_text(lines))
    commit("Rename a.txt to b.txt")
    for n in (8, 10):
        lines[n] = f"line {n + 1} changed in b"
        (work / "b.txt").write_text(_text(lines))
        commit(f"Change b.txt at {n + 1}")
        (work / "other.txt").write_text(f"other {n}\n")
        commit("Change other.txt again")
    (work / "b.txt").rename(work / "c.txt")
    commit("Rename b.txt to c.txt")
    for n in (12, 14):
        lines[n] = f"line {n + 1} changed in c"
        (work / "c.txt").write_text(_text(lines))
        commit(f"Change c.txt at {n + 1}")
    _run(["clone", "-q", "--bare", str(work), str(path)], cwd=work.parent)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("follow")
    build(root / "repos" / "alice" / "moving.git")
    return root


@pytest.fixture(params=[2, 3, 4, 50], ids=lambda n: f"{n}-a-page")
def client(request, repo: Path, tmp_path: Path) -> Iterator[testing.TestClient]:
    forge = start_forge(repo / "repos", tmp_path / "data", commits_per_page=request.param)
    wait_indexed(forge)
    yield testing.TestClient(create_app(forge))
    forge.stop()


def _pages(client: testing.TestClient, url: str) -> Iterator[str]:
    while url:
        page, spawns = get(client, url)
        assert spawns == 0, url
        yield page.text
        older = re.search(r'<a rel="next" href="([^"]+)">Older', page.text)
        href = html.unescape(older.group(1)) if older else ""
        url = url.split("?")[0] + href if href.startswith("?") else href


def test_the_history_follows_two_renames_as_git_log_follow_does(client, repo) -> None:
    bare = repo / "repos" / "alice" / "moving.git"
    expected = git(bare, "log", "--follow", "--format=%H", "main", "--", "c.txt").decode().split()
    assert len(expected) == 8  # both renames followed by git itself
    shown: list[str] = []
    marks: list[tuple[str, str]] = []
    for text in _pages(client, "/alice/moving/commits/branch/main/c.txt"):
        assert "Continue with the history" not in text
        items = re.findall(
            r'<li>\s*<a class="summary" href="/alice/moving/commit/([0-9a-f]+)"'
            r'|<li class="renamed-from">Renamed from <code>([^<]+)</code> in <a class="sha"'
            r' href="/alice/moving/commit/([0-9a-f]+)"',
            text,
        )
        for commit, old, renaming in items:
            if commit:
                shown.append(commit)
            else:
                assert renaming == shown[-1]  # right after the commit that renamed it
                marks.append((old, renaming))
    assert shown == expected
    renames = git(bare, "log", "--follow", "--diff-filter=R", "--format=%H", "main", "--", "c.txt")
    assert marks == list(zip(["b.txt", "a.txt"], renames.decode().split(), strict=True))


def test_a_followed_path_in_the_cursor_is_checked(client) -> None:
    base = "/alice/moving/commits/branch/main/c.txt"
    page, _ = get(client, base)
    tip = re.search(r'class="summary" href="/alice/moving/commit/([0-9a-f]+)"', page.text)
    assert tip is not None
    for query in (
        "path=b.txt",  # no cursor to follow it from
        f"after={tip.group(1)}&path=../x",
        f"after={tip.group(1)}&path=%00",
        f"after={tip.group(1)}&path=/abs",
        f"after={tip.group(1)}&path=" + "x" * 5000,
    ):
        assert client.simulate_get(base, query_string=query).status_code == 400, query
    for query in ("path=%ff", "path=nothere", "skip=99999&path=b.txt"):  # no such history
        found = client.simulate_get(base, query_string=f"after={tip.group(1)}&{query}")
        assert found.status_code == 200 and 'class="summary"' not in found.text, query
    branch = f"/alice/moving/commits/branch/main?after={tip.group(1)}&path=b.txt"
    assert client.simulate_get(branch).status_code == 400
