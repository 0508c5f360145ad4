"""The first blame of a large file: one ``git blame --incremental`` whose reports are parsed as
they come, a compact page (one row a line, a group's commit once, an age class per group) that
is streamed in line order, and the answer kept for every later visit."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest
from falcon import testing
from support.forges import patience, start_forge, wait_indexed
from support.gitfixtures import git, git_text
from support.serving import serving
from support.spawns import counting, get, spawn_timing

from bench.cold import BLAME_FILE, build_blame_repo
from floorless.git.blame import BlameGroup, IncrementalParser
from floorless.web.app import create_app
from floorless.web.views.blame import AGES

LINES = 7_000
URL = f"/alice/seq/blame/branch/main/{BLAME_FILE}"
BYTES_PER_LINE = 150  # the bound for a 7,000-line file: about 1 MB, whatever its groups
_DAY = 86_400


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository whose 7,000-line C file was written by six authors over six years, in
    120 commits that rewrite, add, remove and move runs of lines."""
    root = tmp_path_factory.mktemp("blame-repos")
    build_blame_repo(root / "alice" / "seq.git", lines=LINES, commits=120)
    return root


@pytest.fixture(scope="module")
def seq(repos: Path) -> Path:
    return repos / "alice" / "seq.git"


@pytest.fixture(scope="module")
def forge(repos: Path, tmp_path_factory: pytest.TempPathFactory):
    forge = start_forge(repos, tmp_path_factory.mktemp("blame-data"))
    wait_indexed(forge)
    yield forge
    forge.stop()


def fresh_client(forge) -> testing.TestClient:
    """A new app (an empty page cache) over the module's forge."""
    return testing.TestClient(create_app(forge))


def porcelain(repo: Path) -> tuple[list[str], dict[str, int]]:
    """git's answer: the commit of each line, and each commit's author time."""
    out = git(repo, "blame", "--porcelain", "main", "--", BLAME_FILE).decode()
    per_line: list[str] = []
    times: dict[str, int] = {}
    current = ""
    for line in out.splitlines():
        head = re.match(r"([0-9a-f]{40}) \d+ \d+", line)
        if head:
            current = head[1]
            per_line.append(current)
        elif line.startswith("author-time "):
            times[current] = int(line.split()[1])
    return per_line, times


def shown_rows(page: str) -> list[tuple[int, str | None, str | None]]:
    """Each row of the page: its line, and the commit and age class its commit cell shows
    (None for a row without one)."""
    rows = re.findall(
        r'<tr id="L(\d+)">(?:<td class="blame-commit a(\d)"(?: rowspan="\d+")?>'
        r'<a class="sha" href="/alice/seq/commit/([0-9a-f]{40})")?',
        page,
    )
    return [(int(n), commit or None, age or None) for n, age, commit in rows]


def expected_age(at: int, when: int) -> str:
    return str(sum(at - when >= limit for limit in AGES))


def test_rows_follow_git_blame_line_by_line_with_an_age_a_group(forge, seq):
    per_line, times = porcelain(seq)
    assert len(per_line) == int(git_text(seq, "show", f"main:{BLAME_FILE}").count("\n") + 1)
    assert len(set(per_line)) >= 20  # many commits, most of them in several groups
    page = fresh_client(forge).simulate_get(URL).text
    rows = shown_rows(page)
    # one row a line, in order
    assert [n for n, _, _ in rows] == list(range(1, len(per_line) + 1))
    # a commit cell on the first line of each run of lines git gives one commit, and only there
    starts = [i for i, c in enumerate(per_line) if i == 0 or per_line[i - 1] != c]
    assert [i for i, (_, commit, _) in enumerate(rows) if commit] == starts
    assert page.count('class="blame-commit') == len(starts)
    # each row's commit is git's
    owner = None
    for (n, commit, _), expected in zip(rows, per_line, strict=True):
        owner = commit or owner
        assert owner == expected, n
    # the age class: how old the commit was at the commit blamed, from a fixed palette
    at = int(git_text(seq, "log", "-1", "--format=%ct", "main"))
    for _, commit, age in rows:
        if commit:
            assert age == expected_age(at, times[commit]), commit
    assert {age for _, _, age in rows if age} >= {"0", "5"}  # the newest and the oldest


def test_a_7000_line_file_is_a_page_a_phone_can_hold(forge, seq):
    page = fresh_client(forge).simulate_get(URL).content
    lines = page.count(b'<tr id="L')
    assert lines >= LINES
    assert len(page) < BYTES_PER_LINE * lines, len(page) / lines
    assert b"style=" not in page.split(b'<table class="blame code">', 1)[1]


def test_one_process_cold_none_warm_and_the_answer_kept_is_small(forge, seq):
    commit = git_text(seq, "rev-parse", "main~3")
    url = f"/alice/seq/blame/commit/{commit}/{BLAME_FILE}"
    repo = forge.registry.get("alice", "seq")
    key = bytes.fromhex(commit) + b"\0" + BLAME_FILE.encode()
    assert forge.answers.cache.get(repo.id, "blame", key) is None
    client = fresh_client(forge)
    cold, spawns = get(client, url)
    assert spawns == 1 == spawn_timing(cold)
    kept = forge.answers.cache.get(repo.id, "blame", key)
    assert kept is not None
    # groups and commits, not the file's text again (that is in the blob)
    assert len(kept) < len(git(seq, "show", f"{commit}:{BLAME_FILE}")) / 4
    # the page made again from the kept answer, by another app, is the same page
    for again in (fresh_client(forge), client):  # from the answer, then from the page cache
        warm, spawns = get(again, url)
        assert spawns == 0 == spawn_timing(warm)
        assert warm.text == cold.text


def test_the_cold_page_is_streamed_and_closing_it_stops_git(forge, seq):
    commit = git_text(seq, "rev-parse", "main~5")
    environ = testing.create_environ(path=f"/alice/seq/blame/commit/{commit}/{BLAME_FILE}")
    app = create_app(forge)
    statuses: list[str] = []
    body = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    pieces = iter(body)
    head = next(pieces)
    assert statuses == ["200 OK"]
    assert b"<table" in head and b'<tr id="L' not in head  # the page's head comes first
    body.close()  # the client went away
    slots = forge.git_slots
    taken = [slots.acquire(blocking=False) for _ in range(forge.settings.threads)]
    assert taken.count(True) == max(1, forge.settings.threads // 2)  # git's slot is back
    for ok in taken:
        if ok:
            slots.release()
    assert not forge.answers.cache.get(
        forge.registry.get("alice", "seq").id,
        "blame",
        bytes.fromhex(commit) + b"\0" + BLAME_FILE.encode(),
    )  # an answer cut short is not kept


def test_no_git_for_a_head_nor_when_every_git_slot_is_taken(forge, seq):
    commit = git_text(seq, "rev-parse", "main~7")
    url = f"/alice/seq/blame/commit/{commit}/{BLAME_FILE}"
    client = fresh_client(forge)
    with counting() as events:
        head = client.simulate_head(url)
    assert head.status_code == 200 and not events
    slots = forge.git_slots
    taken = 0
    while slots.acquire(blocking=False):
        taken += 1
    try:
        with counting() as events:
            busy = client.simulate_get(url)
        assert busy.status_code == 503 and busy.headers["Retry-After"] and not events
    finally:
        for _ in range(taken):
            slots.release()
    result, spawns = get(client, url)
    assert spawns == 1 and result.text.count('<tr id="L') >= LINES


# -- the parser -------------------------------------------------------------------------------

A = "a" * 40
B = "b" * 40
C = "c" * 64  # a SHA-256 id


def _entry(commit: str, first: int, count: int, summary: str | None = None) -> bytes:
    lines = [f"{commit} {first} {first} {count}"]
    if summary is not None:
        lines += ["author Ada", "author-time 1700000000", f"summary {summary}"]
    lines += [f"previous {B} f.c", "filename f.c"]
    return "".join(line + "\n" for line in lines).encode()


# git reports the newest commit's lines first, wherever they are
REPORTS = (
    _entry(B, 3, 2, "newer")
    + _entry(C, 6, 1, "middle")
    + _entry(A, 1, 2, "oldest")
    + _entry(A, 5, 1)
    + _entry(A, 7, 3)
    + _entry(B, 10, 1)
)
GROUPS = [  # the reports give each line's number in its commit as its number now
    BlameGroup(A, 1, 2, 1),
    BlameGroup(B, 3, 2, 3),
    BlameGroup(A, 5, 1, 5),
    BlameGroup(C, 6, 1, 6),
    BlameGroup(A, 7, 3, 7),
    BlameGroup(B, 10, 1, 10),
]


@pytest.mark.parametrize("size", [1, 7, 64, len(REPORTS)])
def test_the_parser_hands_out_groups_in_line_order_as_they_complete(size):
    parser = IncrementalParser(10)
    batches = [parser.feed(REPORTS[i : i + size]) for i in range(0, len(REPORTS), size)]
    batches.append(parser.finish())
    assert [group for batch in batches for group in batch] == GROUPS
    assert {c.id: c.summary for c in parser.commits.values()} == {
        A: "oldest",
        B: "newer",
        C: "middle",
    }
    assert {(c.previous, c.previous_path) for c in parser.commits.values()} == {(B, "f.c")}
    if size == 1:  # byte by byte: lines 1-2 are complete once A's first report is read, and
        # line 3's group once its end is known (line 5, A's) and no sooner
        handed = [(i, group) for i, batch in enumerate(batches) for group in batch]
        assert handed[0][1] == GROUPS[0]
        assert handed[0][0] < REPORTS.index(_entry(A, 5, 1)) + len(_entry(A, 5, 1))
        assert handed[1][0] == REPORTS.index(_entry(A, 5, 1)) + len(_entry(A, 5, 1)) - 1


def test_lines_git_never_reports_are_a_group_of_their_own():
    parser = IncrementalParser(4)
    assert parser.feed(_entry(A, 1, 1, "one") + _entry(A, 4, 1)) == []
    assert parser.finish() == [
        BlameGroup(A, 1, 1, 1),
        BlameGroup("", 2, 2),
        BlameGroup(A, 4, 1, 4),
    ]


# -- through a real server --------------------------------------------------------------------

_WRAPPER = """#!{python}
# git, except that blame --incremental's reports come in line order, and stop halfway until
# {fifo} is opened and closed: the page must show the first half's rows before git has ended.
import os, subprocess, sys
real = {git!r}
if "--incremental" not in sys.argv:
    os.execv(real, [real, *sys.argv[1:]])
out = subprocess.run([real, *sys.argv[1:]], stdout=subprocess.PIPE, check=True).stdout
entries, current, headers = [], [], {{}}
for line in out.splitlines(keepends=True):
    if not current:
        commit, _, final, _ = line.split()
        entry = [int(final), commit, line, []]
    elif not line.startswith((b"previous ", b"filename ")):
        headers.setdefault(entry[1], []).append(line)
    else:
        entry[3].append(line)
    current.append(line)
    if line.startswith(b"filename "):
        entries.append(entry)
        current = []
entries.sort()
lines = max(final for final, *_ in entries)
shown = set()
for final, commit, line, tail in entries:
    if final > lines // 2 and "halfway" not in shown:
        shown.add("halfway")
        sys.stdout.buffer.flush()
        open({fifo!r}).read()
    sys.stdout.buffer.write(line)
    if commit not in shown:
        shown.add(commit)
        sys.stdout.buffer.write(b"".join(headers.get(commit, [])))
    sys.stdout.buffer.write(b"".join(tail))
sys.stdout.buffer.flush()
"""


def _read_until(response: http.client.HTTPResponse, seen: bytearray, marker: bytes) -> None:
    while marker not in seen:
        piece = response.read1(65536)
        if not piece:
            raise AssertionError(f"the page ended without {marker!r}")
        seen += piece


@pytest.mark.timeout(300)
def test_the_first_rows_arrive_while_git_still_works(repos, tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    fifo = tmp_path / "halfway"
    os.mkfifo(fifo)
    wrapper = tools / "git"
    real = shutil.which("git")
    wrapper.write_text(_WRAPPER.format(python=sys.executable, git=real, fifo=str(fifo)))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    lines = git(repos / "alice" / "seq.git", "show", f"main:{BLAME_FILE}").count(b"\n")
    with serving(repos, tmp_path / "data") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=patience(60))
        try:
            conn.request("GET", URL)
            response = conn.getresponse()
            assert response.status == 200
            seen = bytearray()
            _read_until(response, seen, b'<tr id="L1">')
            _read_until(response, seen, f'<tr id="L{lines // 3}">'.encode())
            # git is held halfway: the rows of the second half and the page's end are to come
            assert f'<tr id="L{lines}">'.encode() not in seen and b"</table>" not in seen
            with open(fifo, "w"):
                pass
            seen += response.read()
            assert seen.count(b'<tr id="L') == lines and seen.rstrip().endswith(b"</html>")
        finally:
            conn.close()
            with contextlib.suppress(OSError):  # no reader left: git is not waiting
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
