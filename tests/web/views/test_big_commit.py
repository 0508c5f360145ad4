"""A commit of 300 files: its page lists every file and shows diffs within budgets of lines,
bytes and highlighting; the diff of each other file loads on its own from a fragment route,
as git shows it, with no process. Counts and bytes are asserted, never times."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from pygments.lexers import find_lexer_class_for_filename, get_all_lexers
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git
from support.pages import server_timing
from support.spawns import counting, get

from floorless.core import timing
from floorless.forge import Forge
from floorless.web import diffrows, markup
from floorless.web.app import create_app

FILES = 300
WHEN = 1_700_000_000
BUDGETS = {
    "max_diff_total_lines": 600,
    "max_diff_highlight_lines": 200,
    "max_diff_page_bytes": 48 * 1024,
}
LISTED_ENTRY_BYTES = 400  # an entry of the list of changed files, besides its path
CHROME_BYTES = 16 * 1024  # the page around the diffs


def _content(i: int, version: int) -> bytes:
    lines = [f"def function_{i}_{n}(value):  # line {n}" for n in range(40)]
    if version:
        for at in (3, 17 + i % 10, 33):
            lines[at] = f'    return "changed {i} at {at}"  # a string and a comment'
    return ("\n".join(lines) + "\n").encode()


def _path(i: int) -> str:
    return f"pkg{i // 50}/mod{i:03d}" + (".py", ".c", ".txt")[i % 3]


def build_big(path: Path) -> str:
    """A root commit of ``FILES`` files, then one commit changing each in three places."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)

    def tree(version: int) -> pygit2.Oid:
        index = pygit2.Index()
        for i in range(FILES):
            blob = repo.create_blob(_content(i, version))
            index.add(pygit2.IndexEntry(_path(i), blob, pygit2.enums.FileMode.BLOB))
        return index.write_tree(repo)

    first = repo.create_commit("refs/heads/main", sig, sig, "Add the files\n", tree(0), [])
    return str(repo.create_commit("refs/heads/main", sig, sig, "Change them\n", tree(1), [first]))


@pytest.fixture(scope="module")
def big(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Forge, testing.TestClient, Path, str]]:
    root = tmp_path_factory.mktemp("big")
    repo = root / "repos" / "alice" / "big.git"
    sha = build_big(repo)
    forge = start_forge(root / "repos", root / "data", **BUDGETS)
    wait_indexed(forge)
    yield forge, testing.TestClient(create_app(forge)), repo, sha
    forge.stop()


def _git_files(repo: Path, sha: str) -> dict[str, list[str]]:
    """Each file's hunks in ``git diff-tree -p``: ``@@ -a,b +c,d @@`` and each line."""
    out = git(repo, "diff-tree", "-p", "-M", f"{sha}^", sha).decode()
    files: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.splitlines():
        if line.startswith("diff --git "):
            current = files.setdefault(line.rsplit(" b/", 1)[1], [])
        elif line.startswith("@@"):
            current.append(line[: line.index("@@", 2) + 2])
        elif line[:1] in ("+", "-", " ") and not line.startswith(("+++ ", "--- ")):
            current.append(line)
    return files


_ROW = re.compile(r'<tr class="(hunk|add|del|ctx|meta)">.*?<pre>(.*?)</pre></td></tr>', re.S)


def _shown_lines(page: str) -> list[str]:
    """The rows of the diff tables of ``page``, as text (hunk headers cut after their ``@@``)."""
    rows = []
    for kind, cell in _ROW.findall(page):
        line = html.unescape(re.sub(r"<[^>]+>", "", cell))
        rows.append(line[: line.index("@@", 2) + 2] if kind == "hunk" else line)
    return rows


def _load_links(page: str) -> list[str]:
    return [html.unescape(u) for u in re.findall(r'<a class="load-diff" href="([^"]+)"', page)]


def test_the_page_lists_every_file_and_shows_diffs_within_its_budgets(big):
    _, client, _, sha = big
    before = markup.HIGHLIGHTED.lines
    result, spawns = get(client, f"/alice/big/commit/{sha}")
    lexed = markup.HIGHLIGHTED.lines - before
    page = result.text
    assert spawns == 0
    assert f"{FILES} files changed" in page
    assert page.count('<li><span class="status modified">') == FILES
    shown = page.count('<table class="diff">')
    rows = [r for r in _shown_lines(page) if not r.startswith("@@")]
    assert 0 < shown < FILES
    assert len(rows) <= BUDGETS["max_diff_total_lines"]
    assert len(_load_links(page)) == FILES - shown
    assert 0 < lexed <= BUDGETS["max_diff_highlight_lines"]
    paths = sum(len(_path(i)) for i in range(FILES))
    bound = BUDGETS["max_diff_page_bytes"] + FILES * LISTED_ENTRY_BYTES + paths + CHROME_BYTES
    assert len(result.content) <= bound
    # every file's counts are given, as git gives them
    stat = git(big[2], "diff-tree", "--numstat", f"{sha}^", sha).decode().splitlines()
    for line in stat:
        added, deleted, name = line.split("\t")
        assert re.search(
            rf">{re.escape(name)}</a> <span class=\"add\">\+{added}</span> "
            rf"<span class=\"del\">\u2212{deleted}</span>",
            page,
        ), name


def test_each_file_not_shown_loads_on_its_own_as_git_shows_it(big):
    _, client, repo, sha = big
    page = client.simulate_get(f"/alice/big/commit/{sha}").text
    expected = _git_files(repo, sha)
    links = _load_links(page)
    assert links
    shown_inline = _shown_lines(page)
    loaded: list[str] = []
    for url in links:
        path = url.split("/-/diff/", 1)[1]
        before = markup.HIGHLIGHTED.lines
        result, spawns = get(client, url)
        assert spawns == 0
        assert markup.HIGHLIGHTED.lines - before <= BUDGETS["max_diff_highlight_lines"]
        fragment = result.text
        assert fragment.count('<section class="file-diff"') == 1
        assert f'href="/alice/big/commit/{sha}"' in fragment  # its way back, without script
        assert _shown_lines(fragment) == expected[path], path
        loaded.append(path)
    # the files shown and the files loaded are the whole commit, each once
    assert len(loaded) == len(set(loaded)) == FILES - page.count('<table class="diff">')
    assert len(shown_inline) + sum(len(expected[p]) for p in loaded) == sum(
        len(lines) for lines in expected.values()
    )


def test_a_file_loads_on_its_own_only_when_the_commit_changes_it(big):
    forge, client, _, sha = big
    url = f"/alice/big/commit/{sha}/-/diff/{_path(7)}"
    assert client.simulate_get(url).status_code == 200
    with counting() as events:
        for missing in (
            f"/alice/big/commit/{sha}/-/diff/pkg0/nothing.py",
            f"/alice/big/commit/{sha}/-/diff/pkg0",
            f"/alice/big/commit/{sha}/-/diff/{_path(7)}/more",
        ):
            assert client.simulate_get(missing).status_code == 404, missing
    assert events == []
    forge.registry.set_private("alice", "big", True)
    try:
        hidden = client.simulate_get(url)
        absent = client.simulate_get(url.replace("/alice/big/", "/alice/nothing/"))
        assert hidden.status_code == absent.status_code == 404
        assert hidden.content == absent.content
    finally:
        forge.registry.set_private("alice", "big", False)


@pytest.mark.parametrize(
    "names",
    [
        ["a.py", "x.c", "x.h", "Makefile", "Makefile.am", "CMakeLists.txt", "notes.txt"],
        [".bashrc", "a.tar.gz", "A.PY", "man.1", "xSpec.hs", "k.php5", "README", ".py", "x."],
        sorted(
            {
                p.replace("*", "any").replace("?", "q").replace("[", "").replace("]", "")
                for _, _, patterns, _ in get_all_lexers()
                for p in patterns
            }
        ),
    ],
    ids=["common", "odd", "every-pattern"],
)
def test_the_lexer_for_a_name_is_pygments_choice(names):
    """The indexed lookup picks what Pygments' own search by file name picks."""
    for name in names:
        assert markup.lexer_class(name) is find_lexer_class_for_filename(name), name


def test_showing_the_diffs_is_the_pages_render_phase(big, monkeypatch):
    """Highlighting a commit's diff lines and making their rows is the page's ``render``
    phase in ``Server-Timing``, as its template is: what the page shows, apart from the git
    work that found it (the cold commit benchmark judges the page less that rendering)."""
    forge, _, _, sha = big
    phases: list[str | None] = []

    def highlight(name: str, text: str, enabled: bool = True) -> list[str]:
        timer = timing.current()
        phases.append(timer._open if timer is not None else None)
        return markup.highlight_lines(name, text, enabled)

    monkeypatch.setattr(diffrows, "highlight_lines", highlight)
    client = testing.TestClient(create_app(forge))  # its own caches: the diff is made anew
    result = client.simulate_get(f"/alice/big/commit/{sha}")
    assert result.status_code == 200
    assert phases and set(phases) == {"render"}
    timings = server_timing(result)
    assert timings["render"] > 0 and timings["git"] > 0
