"""Blame's tools: the age scale and its legend, "blame prior to this change" (at the group's
commit's parent, at the path the lines had there), ``.git-blame-ignore-revs`` passed over by
default and shown with ``?ignore_revs=0`` (``git blame --ignore-rev`` is the oracle, each way
kept apart), and a file's history that goes on past the commit that renamed it. A cold blame
starts one git; everything else spawns nothing."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.blame import LINES, build
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git
from support.spawns import counting, get

from floorless.forge import Forge
from floorless.git.blame import _unquote
from floorless.web.app import create_app


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Forge, testing.TestClient, Path, dict[str, str]]]:
    root = tmp_path_factory.mktemp("blame")
    repo = root / "repos" / "alice" / "tools.git"
    ids = build(repo)
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    yield forge, testing.TestClient(create_app(forge)), repo, ids
    forge.stop()


def _owners(page: str) -> list[str]:
    """Each line's commit as the page shows it (a group's commit on each of its lines)."""
    owners: list[str] = []
    for row in re.findall(r'<tr id="L\d+">(.*?)(?=<tr |</table>)', page, re.S):
        found = re.search(r'<a class="sha" href="[^"]*/commit/([0-9a-f]+)"', row)
        if found:
            current = found.group(1)
            span = re.search(r'rowspan="(\d+)"', row)
            owners += [current] * (int(span.group(1)) if span else 1)
    return owners


def _git_owners(repo: Path, *args: str) -> list[str]:
    out = git(repo, "blame", "--porcelain", *args, "main", "--", "new.py").decode()
    return [line.split()[0] for line in out.splitlines() if re.match(r"[0-9a-f]{40} \d+ \d+", line)]


def test_ignored_revisions_are_passed_over_by_default_and_shown_on_request(site):
    _, client, repo, ids = site
    url = "/alice/tools/blame/branch/main/new.py"
    with counting() as events:
        cold = client.simulate_get(url)
    assert cold.status_code == 200
    assert len(events) == 1  # git blame, once
    assert _owners(cold.text) == _git_owners(repo, f"--ignore-rev={ids['c']}")
    assert ids["c"] not in _owners(cold.text)
    assert "are passed over" in cold.text and "2 commits" not in cold.text  # the unknown id
    page, spawns = get(client, url)
    assert spawns == 0 and _owners(page.text) == _owners(cold.text)

    with counting() as events:
        shown = client.simulate_get(url, query_string="ignore_revs=0")
    assert len(events) == 1  # another answer, blamed once
    assert _owners(shown.text) == _git_owners(repo) == [ids["c"]] * len(LINES)
    assert "is not applied" in shown.text
    again, spawns = get(client, url, query_string="ignore_revs=0")
    assert spawns == 0 and _owners(again.text) == _owners(shown.text)
    # the default answer is still the one kept for it
    assert _owners(get(client, url)[0].text) == _owners(cold.text)


def test_blame_prior_goes_to_the_parent_at_the_old_path(site):
    _, client, _, ids = site
    page = get(client, "/alice/tools/blame/branch/main/new.py")[0].text
    priors = [html.unescape(u) for u in re.findall(r'<a class="prior" href="([^"]+)"', page)]
    # B's change to line 2: before it, the file was old.py at A, the line was line 2
    assert f"/alice/tools/blame/commit/{ids['a']}/old.py#L2" in priors
    # A added the file: nothing before it
    cells = re.findall(r'<td class="blame-commit[^"]*"[^>]*>(.*?)<td>', page, re.S)
    added = [c for c in cells if f'class="sha" href="/alice/tools/commit/{ids["a"]}"' in c]
    assert added and all('class="prior"' not in cell for cell in added)
    prior, _ = get(client, f"/alice/tools/blame/commit/{ids['a']}/old.py")
    assert _owners(prior.text) == [ids["a"]] * len(LINES)


def test_the_age_scale_has_a_legend_and_a_class_per_group(site):
    _, client, _, _ = site
    page = get(client, "/alice/tools/blame/branch/main/new.py")[0].text
    legend = re.search(r'<p class="blame-ages"[^>]*>(.*?)</p>', page, re.S).group(1)
    assert re.findall(r'class="age a(\d)"', legend) == ["0", "1", "2", "3", "4", "5"]
    # blamed at D (day 801): A's lines are 2 to 5 years old, B's (day 400) 1 to 2 years
    assert re.search(r'class="blame-commit a4"[^>]*><a [^>]*title="2 to 5 years old"', page)
    assert re.search(r'class="blame-commit a3"[^>]*><a [^>]*title="1 to 2 years old"', page)


def test_a_files_history_goes_on_past_its_rename(site):
    """The rename's commit, then a "renamed from" row, then the old path's history from its
    parent, on the one page (tests/test_history_follow.py follows two renames page by page)."""
    _, client, _, ids = site
    page, spawns = get(client, "/alice/tools/commits/branch/main/new.py")
    assert spawns == 0
    shown = re.findall(r'<a class="summary" href="/alice/tools/commit/([0-9a-f]+)"', page.text)
    assert shown == [ids["c"], ids["b"], ids["a"]]  # D leaves new.py as it was
    assert re.findall(r'<li class="renamed-from">Renamed from <code>([^<]+)</code>', page.text) == [
        "old.py"
    ]
    # a history that starts where its file was added has nothing to go on to
    before, spawns = get(client, f"/alice/tools/commits/commit/{ids['a']}/old.py")
    assert spawns == 0 and "renamed-from" not in before.text
    assert "renamed-from" not in get(client, "/alice/tools/commits/branch/main")[0].text


def test_git_quoted_paths_come_back_as_their_bytes():
    assert _unquote(b"plain/name.py") == "plain/name.py"
    assert _unquote(b'"tab\\there"').encode("utf-8", "surrogateescape") == b"tab\there"
    assert _unquote(b'"caf\\303\\251 \\"q\\""').encode("utf-8", "surrogateescape") == (
        'café "q"'.encode()
    )
    assert _unquote(b'"\\377x"').encode("utf-8", "surrogateescape") == b"\xffx"
