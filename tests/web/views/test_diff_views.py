"""Diffs as the commit and compare pages show them: unified and split views (chosen by the
query, remembered by a cookie, kept apart in the page cache), changed words marked, changes
in whitespace alone left out with ``?w=1`` as ``git diff -w`` leaves them out, context hidden
between hunks loaded from the blob, files collapsible without script, and a file past the
budgets loaded on its own against a compare's merge base. git is the oracle; every page
spawns nothing."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.diffs import build
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git
from support.spawns import counting, get

from floorless.forge import Forge
from floorless.git import diff as gitdiff
from floorless.web import diffrows, markup
from floorless.web.app import create_app


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Forge, testing.TestClient, Path, dict[str, str]]]:
    root = tmp_path_factory.mktemp("diffs")
    repo = root / "repos" / "alice" / "diffs.git"
    ids = build(repo)
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    yield forge, testing.TestClient(create_app(forge)), repo, ids
    forge.stop()


def _rows(page: str, kind: str) -> list[str]:
    return re.findall(rf'<tr class="{kind}">(.*?)</tr>', page, re.S)


def _plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_unified_and_split_views_are_chosen_remembered_and_kept_apart(site):
    _, client, _, ids = site
    url = f"/alice/diffs/commit/{ids['change']}"
    unified, spawns = get(client, url)
    assert spawns == 0
    assert '<table class="diff">' in unified.text and 'class="diff split"' not in unified.text
    assert "set-cookie" not in unified.headers
    split, spawns = get(client, url, params={"style": "split"})
    assert spawns == 0
    assert '<table class="diff split">' in split.text
    assert "diff_style=split" in split.headers["set-cookie"]
    # a removed line and the added line that replaces it share one row, side by side
    rows = _rows(split.text, "chg")
    assert any('data-side="old">10<' in row and 'data-side="new">10<' in row for row in rows), rows
    # the cookie chooses the style when the URL does not; the page cache keeps both
    for _ in range(2):
        remembered, spawns = get(client, url, headers={"Cookie": "diff_style=split"})
        assert spawns == 0
        assert '<table class="diff split">' in remembered.text
        again, _ = get(client, url)
        assert 'class="diff split"' not in again.text
    back, _ = get(client, url, params={"style": "unified"}, headers={"Cookie": "diff_style=split"})
    assert 'class="diff split"' not in back.text
    assert "diff_style=unified" in back.headers["set-cookie"]
    # anything else is the default, never an error
    odd, _ = get(client, url, params={"style": "sideways\x00"}, headers={"Cookie": "diff_style=x"})
    assert 'class="diff split"' not in odd.text
    # each file collapses on its own, without script
    assert unified.text.count('<details class="file-toggle" open>') == 2


def test_changed_words_are_marked_in_both_views(site):
    _, client, _, ids = site
    for style in ("unified", "split"):
        page = get(client, f"/alice/diffs/commit/{ids['change']}", params={"style": style})[0].text
        removed = [_plain(m) for m in re.findall(r'<del class="wd">(.*?)</del>', page, re.S)]
        added = [_plain(m) for m in re.findall(r'<ins class="wd">(.*?)</ins>', page, re.S)]
        assert "".join(removed).strip() == ""  # no word of line 10 or 60 was removed
        assert "changed" in "".join(added) and "renamed" in "".join(added), added
        # the marks hide nothing: each line reads as git has it
        lines = [_plain(r) for r in re.findall(r"<pre>(.*?)</pre>", page, re.S)]
        assert any("line 10 of the changed module" in line for line in lines)


def test_word_marks_are_bounded_and_balanced():
    assert diffrows.changed_spans("a b c", "a x c") == ([(2, 3)], [(2, 3)])
    assert diffrows.changed_spans("x" * 500, "y" * 500) is None  # too long to compare
    assert diffrows.changed_spans("alpha beta", "gamma delta") is None  # all of it changed
    marked = diffrows.mark_spans('<span class="n">ab</span>&amp;cd', [(1, 4)], "ins")
    assert marked == (
        '<span class="n">a<ins class="wd">b</ins></span><ins class="wd">&amp;c</ins>d'
    )


def test_whitespace_changes_are_left_out_as_git_diff_w_does(site):
    _, client, repo, ids = site
    url = f"/alice/diffs/commit/{ids['change']}"
    page, spawns = get(client, url, params={"w": "1"})
    assert spawns == 0
    numstat = git(repo, "diff", "-w", "--numstat", f"{ids['change']}^", ids["change"]).decode()
    counts = {line.split("\t")[2]: line.split("\t")[:2] for line in numstat.splitlines()}
    assert "spaces.txt" not in counts  # git -w sees no change in it
    assert counts["code.txt"] == ["2", "2"]
    assert '>code.txt</a> <span class="add">+2</span>' in page.text
    assert '>spaces.txt</a> <span class="add">+0</span>' in page.text
    assert "Changes in whitespace alone are not shown." in page.text
    whole, _ = get(client, url)
    assert '>spaces.txt</a> <span class="add">+2</span>' in whole.text
    # the style links keep the choice
    assert 'href="?style=split&amp;w=1"' in page.text


def test_hidden_context_loads_from_the_blob_as_git_has_it(site):
    _, client, repo, ids = site
    sha = ids["change"]
    page = get(client, f"/alice/diffs/commit/{sha}")[0].text
    links = re.findall(
        r'<a class="expand" href="([^"]+)" data-start="(\d+)" data-end="(\d+)" '
        r'data-delta="(-?\d+)" data-where="(\w+)"',
        page,
    )
    above = [link for link in links if link[4] == "above" and "code.txt" in link[0]]
    assert above, links
    # without script the link opens the file at that commit, at those lines
    assert html.unescape(above[0][0]).startswith(f"/alice/diffs/src/commit/{sha}/code.txt#L")
    new = git(repo, "show", f"{sha}:code.txt").decode().splitlines()
    old = git(repo, "show", f"{sha}^:code.txt").decode().splitlines()
    for _, first, last, delta, _ in above:
        url = f"/alice/diffs/commit/{sha}/-/lines/code.txt"
        result, spawns = get(client, url, params={"start": first, "end": last, "delta": delta})
        assert spawns == 0
        rows = _rows(result.text, "ctx")
        assert len(rows) == int(last) - int(first) + 1
        for row in rows:
            old_n, new_n = (int(n) for n in re.findall(r'<td class="ln">(\d+)</td>', row))
            text = _plain(re.search(r"<pre>(.*?)</pre>", row, re.S).group(1))[1:]
            assert text == new[new_n - 1] == old[old_n - 1]
    # after the last hunk: the rest of the file, as many lines as asked at most
    tail = [link for link in links if link[4] == "below" and "code.txt" in link[0]]
    assert len(tail) == 1
    result, _ = get(
        client,
        f"/alice/diffs/commit/{sha}/-/lines/code.txt",
        params={"start": tail[0][1], "end": "0", "delta": tail[0][3], "style": "split"},
    )
    assert len(_rows(result.text, "ctx")) == len(new) - int(tail[0][1]) + 1
    assert 'data-side="old"' in result.text


@pytest.mark.parametrize(
    "query",
    ["start=0&end=3", "start=x", "start=3&end=2", "start=1&end=99999999999", "delta=1e3"],
)
def test_bad_line_ranges_are_refused(site, query):
    _, client, _, ids = site
    with counting() as events:
        result = client.simulate_get(
            f"/alice/diffs/commit/{ids['change']}/-/lines/code.txt", query_string=query
        )
    assert result.status_code == 400
    assert events == []


def test_lines_of_what_is_not_a_file_are_not_found_and_private_is_missing(site):
    forge, client, _, ids = site
    base = f"/alice/diffs/commit/{ids['change']}/-/lines"
    for path in ("nothing.txt", "code.txt/more", "spaces.txt/.."):
        assert client.simulate_get(f"{base}/{path}", query_string="start=1").status_code == 404
    for path in ("..", "%00", "%ff"):
        assert client.simulate_get(f"{base}/{path}", query_string="start=1").status_code in (
            400,
            404,
        )
    forge.registry.set_private("alice", "diffs", True)
    try:
        hidden = client.simulate_get(f"{base}/code.txt", query_string="start=1")
        absent = client.simulate_get(
            f"{base.replace('/alice/diffs/', '/alice/nothing/')}/code.txt",
            query_string="start=1",
        )
        assert hidden.status_code == absent.status_code == 404
        assert hidden.content == absent.content
    finally:
        forge.registry.set_private("alice", "diffs", False)


def test_compare_shows_the_same_views_and_loads_hidden_files_against_the_merge_base(
    tmp_path: Path,
):
    repo = tmp_path / "repos" / "alice" / "diffs.git"
    ids = build(repo)
    forge = start_forge(tmp_path / "repos", tmp_path / "data", max_diff_files=1)
    try:
        wait_indexed(forge)
        client = testing.TestClient(create_app(forge))
        page, spawns = get(client, "/alice/diffs/compare/main...feature", params={"style": "split"})
        assert spawns == 0
        assert '<table class="diff split">' in page.text
        assert '<nav class="diff-tree" aria-label="Changed files">' in page.text
        links = [
            html.unescape(u) for u in re.findall(r'<a class="load-diff" href="([^"]+)"', page.text)
        ]
        assert links == [
            f"/alice/diffs/commit/{ids['feature']}/-/diff/other.txt?style=split&base={ids['base']}"
        ]
        path, _, query = links[0].partition("?")
        loaded, spawns = get(client, path, query_string=query)
        assert spawns == 0
        assert "new" in _plain("".join(_rows(loaded.text, "chg")))
        assert f'href="/alice/diffs/commit/{ids["base"]}"' in loaded.text  # what it is against
        # against another base, what changed is another diff (main's tip has no other.txt)
        wrong = client.simulate_get(path, query_string=f"base={ids['change']}")
        assert wrong.status_code == 200
        assert client.simulate_get(path, query_string="base=main").status_code == 400
        assert client.simulate_get(path, query_string="base=" + "0" * 40).status_code == 404
    finally:
        forge.stop()


def _file(*hunks: list[tuple[str, str]]) -> gitdiff.FileDiff:
    """A modified ``f.py`` with ``hunks`` of (kind, text) lines, numbered as git numbers them."""
    f = gitdiff.FileDiff(b"f.py", b"f.py", "modified", 0, 0, False, 0)
    old = new = 1
    for lines in hunks:
        h = gitdiff.Hunk("@@", old_start=old, new_start=new)
        for kind, text in lines:
            h.lines.append(
                gitdiff.Line(kind, old if kind != "+" else None, new if kind != "-" else None, text)
            )
            old += kind != "+"
            new += kind != "-"
        h.old_lines, h.new_lines = old - h.old_start, new - h.new_start
        old, new = old + 10, new + 10
        f.hunks.append(h)
    return f


def test_the_old_side_is_lexed_only_up_to_its_last_removed_line():
    """Only removed lines are shown from the old side (context comes from the new): it is
    lexed up to its last removal, and not at all when nothing was removed; what is shown is
    the same."""
    context = [(" ", f"x{n} = {n}  # context") for n in range(3)]
    added = [("+", 'y = "added"')]
    removed = [("-", 'y = "removed"')]
    cases = [
        (_file(context + added + context), 0, 7),  # nothing removed: the new side alone
        (_file(context + removed + added + context), 4, 7),  # up to the removal
        (_file(context + removed + context, context + added + context), 4, 13),
    ]
    for f, old_lines, new_lines in cases:
        before = markup.HIGHLIGHTED.lines
        rows, lexed = diffrows.rows(f, 1000)
        html = re.sub(r'</?(del|ins)( class="wd")?>', "", rows)  # changed words' marks
        assert (lexed, markup.HIGHLIGHTED.lines - before) == (old_lines + new_lines,) * 2
        assert '<span class="s2">"removed"</span>' in html or old_lines == 0
        assert html.count('<tr class="ctx">') == sum(
            line.kind == " " for h in f.hunks for line in h.lines
        )
        assert '<span class="n">x2</span>' in html and '<span class="s2">"added"</span>' in html
