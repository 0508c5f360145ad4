"""Hostile history renders: any date git can store, any ``encoding`` header, empty authors and
trees nested past Python's recursion limit. Every page answers 200 with sane text, the
repository's ``updated_at`` stays in range, and indexing completes.

The commits are written as raw objects (``odb.write``) with fixed bytes: git's porcelain
refuses most of these dates and headers, but a push delivers whatever objects a client built.
Each repository ``mallory/<case>`` is a sane root commit followed by one hostile commit on
``main`` (also tagged ``v1``), so every page of it shows that commit.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from xml.etree import ElementTree

import pygit2
import pytest
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import EPOCH_START

from floorless.core import dates
from floorless.forge import Forge
from floorless.git.objects import decode_text
from floorless.web.app import create_app

SANE_STAMP = f"{EPOCH_START} +0000".encode()
SANE_SHOWN = "2023-11-14 22:13:20 +0000"
NAME = "H\u00e9lo\u00efse Author"
PERSON = f"{NAME} <heloise@example.org>".encode()
SUMMARY = "R\u00e9sum\u00e9 of the change"
DEEP_LEVELS = 1200
MARK = "(out of range in the commit)"


@dataclass(frozen=True)
class Case:
    """One hostile commit and what its commit page must show for it."""

    stamp: bytes = SANE_STAMP
    person: bytes = PERSON
    encoding: bytes | None = None
    shown: str = SANE_SHOWN  # the author date as the commit page prints it
    clamped: bool = False  # and marked as out of range
    author_line: bool = True  # False: the commit has no author line at all
    name: str = NAME
    summary: str = SUMMARY


LATEST = "9999-12-30 23:59:59 +0000"
EARLIEST = "0001-01-02 00:00:00 +0000"

CASES = {
    # dates: past datetime's year 9999, or before year 1, or past the platform's time_t
    "year-10000": Case(stamp=b"253402300800 +0000", shown=LATEST, clamped=True),
    "far-future": Case(stamp=b"99999999999999 +0000", shown=LATEST, clamped=True),
    "int64-max": Case(stamp=b"9223372036854775807 +0000", shown=LATEST, clamped=True),
    # in range in UTC, out of range once the +14:00 offset is applied
    "last-second-east": Case(
        stamp=b"253402300799 +1400", shown="9999-12-31 13:59:59 +1400", clamped=True
    ),
    "year-0": Case(stamp=b"-62135596801 +0000", shown=EARLIEST, clamped=True),
    "int64-min": Case(stamp=b"-9223372036854775808 +0000", shown=EARLIEST, clamped=True),
    # in range, and must stay exactly as git says
    "before-epoch": Case(stamp=b"-1 -1200", shown="1969-12-31 11:59:59 -1200"),
    # offsets libgit2 cannot use: git stores any four digits (or anything at all)
    "offset-9959": Case(stamp=f"{EPOCH_START} +9959".encode()),
    "offset-garbage": Case(stamp=f"{EPOCH_START} +zz".encode()),
    "no-date": Case(stamp=b"", shown="1970-01-01 00:00:00 +0000"),
    # commits libgit2 will not parse at all, read from their bytes as git reads them
    "past-64-bits": Case(stamp=b"18446744073709551616 +0000", shown="1970-01-01 00:00:00 +0000"),
    "no-author-line": Case(author_line=False, name="", shown="1970-01-01 00:00:00 +0000"),
    # authors without a name or an e-mail
    "empty-author": Case(person=b"<>", name=""),
    "blank-author": Case(person=b" <> ", name=""),
    # encoding headers naming a codec Python has but cannot decode a message with
    "idna": Case(encoding=b"idna"),
    "punycode": Case(encoding=b"punycode"),
    "no-such-codec": Case(encoding=b"no-such-codec"),
    "undefined": Case(encoding=b"undefined"),
    "rot13": Case(encoding=b"rot13"),
    "non-ascii-codec": Case(encoding=b"\xff\xfe"),
    # a real charset: decoded as git would (the bytes are UTF-8, so they read as mojibake)
    "latin1": Case(
        encoding=b"ISO-8859-1",
        name=PERSON.decode("latin-1").split(" <")[0],
        summary=SUMMARY.encode().decode("latin-1"),
    ),
}


# ------------------------------------------------------------------------------ building


def _blob_tree(repo: pygit2.Repository, files: dict[str, bytes]) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, content in sorted(files.items()):
        builder.insert(name, repo.create_blob(content), pygit2.enums.FileMode.BLOB)
    return builder.write()


def raw_commit(
    repo: pygit2.Repository,
    tree: pygit2.Oid,
    parents: list[pygit2.Oid],
    person: bytes,
    message: bytes,
    encoding: bytes | None = None,
    author: bool = True,
) -> pygit2.Oid:
    """Write a commit object with exactly these header bytes (``person`` is the author and
    committer line after the role) and return its id."""
    lines = [b"tree " + str(tree).encode()]
    lines += [b"parent " + str(p).encode() for p in parents]
    lines += [b"author " + person] if author else []
    lines += [b"committer " + person]
    if encoding is not None:
        lines.append(b"encoding " + encoding)
    body = b"\n".join(lines) + b"\n\n" + message
    return repo.odb.write(pygit2.enums.ObjectType.COMMIT, body)


def build_case(path: Path, case: Case) -> str:
    """A sane root commit, then the hostile one on main (and as tag v1); its id."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    sane = PERSON + b" " + SANE_STAMP
    root = raw_commit(
        repo, _blob_tree(repo, {"README.md": b"# Hostile\n"}), [], sane, b"Initial commit\n"
    )
    files = {"README.md": b"# Hostile\n\nChanged.\n", "notes.txt": b"notes\n"}
    person = case.person + (b" " + case.stamp if case.stamp else b"")
    message = f"{SUMMARY}\n\nThe body.\n".encode()
    tree = _blob_tree(repo, files)
    tip = raw_commit(repo, tree, [root], person, message, case.encoding, case.author_line)
    repo.references.create("refs/heads/main", tip)
    repo.references.create("refs/tags/v1", tip)
    return str(tip)


def deep_path() -> str:
    return "/".join(["d"] * DEEP_LEVELS) + "/deep.txt"


def _deep_tree(repo: pygit2.Repository, content: bytes) -> pygit2.Oid:
    """A tree holding ``d/d/.../d/deep.txt`` (DEEP_LEVELS directories) and README.md, built
    from the inside out."""
    inner = _blob_tree(repo, {"deep.txt": content})
    for _ in range(DEEP_LEVELS):
        builder = repo.TreeBuilder()
        builder.insert("d", inner, pygit2.enums.FileMode.TREE)
        inner = builder.write()
    builder = repo.TreeBuilder(repo.get(inner))
    builder.insert("README.md", repo.create_blob(b"# Deep\n"), pygit2.enums.FileMode.BLOB)
    return builder.write()


def build_deep(path: Path) -> list[str]:
    """Three commits: add the deep file, change it, change only README.md (ids, oldest first)."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    ids: list[pygit2.Oid] = []
    for i, content in enumerate((b"deep down\n", b"deeper still\n")):
        stamp = f"{EPOCH_START + 60 * i} +0000".encode()
        tree = _deep_tree(repo, content)
        message = f"Deep change {i + 1}\n".encode()
        ids.append(raw_commit(repo, tree, ids[-1:], PERSON + b" " + stamp, message))
    builder = repo.TreeBuilder(repo.get(ids[-1]).tree)
    builder.insert("README.md", repo.create_blob(b"# Deep\n\nMore.\n"), pygit2.enums.FileMode.BLOB)
    stamp = f"{EPOCH_START + 120} +0000".encode()
    ids.append(raw_commit(repo, builder.write(), ids[-1:], PERSON + b" " + stamp, b"Readme\n"))
    repo.references.create("refs/heads/main", ids[-1])
    return [str(i) for i in ids]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], list[str]]:
    root = tmp_path_factory.mktemp("hostile")
    tips = {name: build_case(root / "mallory" / f"{name}.git", c) for name, c in CASES.items()}
    deep = build_deep(root / "mallory" / "deep.git")
    return root, tips, deep


@pytest.fixture(scope="module")
def forge(
    hostile: tuple[Path, dict[str, str], list[str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Forge]:
    forge = start_forge(hostile[0], tmp_path_factory.mktemp("data"))
    wait_indexed(forge)
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


@pytest.fixture(scope="module")
def tips(hostile: tuple[Path, dict[str, str], list[str]]) -> dict[str, str]:
    return hostile[1]


def ok(client: testing.TestClient, url: str) -> testing.Result:
    result = client.simulate_get(url)
    assert result.status_code == 200, (url, result.status_code, result.text[:300])
    return result


def shown_time(page: str) -> list[datetime]:
    """Every ``<time datetime=...>`` of a page, parsed (so each is a valid ISO 8601 date)."""
    return [datetime.fromisoformat(v) for v in re.findall(r'<time datetime="([^"]+)"', page)]


# ---------------------------------------------------------------- the safe functions alone


@pytest.mark.parametrize(
    ("seconds", "offset", "iso", "clamped"),
    [
        (EPOCH_START, 0, "2023-11-14T22:13:20+00:00", False),
        (EPOCH_START, 90, "2023-11-14T23:43:20+01:30", False),
        (-1, -720, "1969-12-31T11:59:59-12:00", False),
        (EPOCH_START, 99 * 60 + 59, "2023-11-14T22:13:20+00:00", True),  # "+9959"
        (EPOCH_START, -(99 * 60 + 59), "2023-11-14T22:13:20+00:00", True),
        (253402300800, 0, "9999-12-30T23:59:59+00:00", True),
        (2**63 - 1, 0, "9999-12-30T23:59:59+00:00", True),
        (2**64 + 5, 0, "9999-12-30T23:59:59+00:00", True),
        (-62135596801, 0, "0001-01-02T00:00:00+00:00", True),
        (-(2**63), 1439, "0001-01-02T23:59:00+23:59", True),
        (float("inf"), 0, "9999-12-30T23:59:59+00:00", True),
        (float("-inf"), 0, "0001-01-02T00:00:00+00:00", True),
        (float("nan"), 0, "1970-01-01T00:00:00+00:00", True),
    ],
)
def test_moment_takes_any_timestamp(seconds, offset, iso, clamped):
    found = dates.moment(seconds, offset)
    assert found.when.isoformat() == iso
    assert found.clamped is clamped
    assert dates.display(found.when)[:4].isdigit()  # four-digit years, even the year 1
    assert dates.rfc2822(found.when).endswith(rfc2822_tail(found.when))


def rfc2822_tail(when: datetime) -> str:
    """``02 Jan 0001 00:00:00 +0000``: what an RFC 2822 date must end with (the e-mail parser
    reads a year below 100 as 20xx, so the text is compared)."""
    return f"{when:%d %b} {when.year:04d} {when:%H:%M:%S %z}"


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        (None, "r\u00e9sum\u00e9 \ufffd"),
        ("utf-8", "r\u00e9sum\u00e9 \ufffd"),
        ("ISO-8859-1", "r\u00c3\u00a9sum\u00c3\u00a9 \u00ff"),
        ("idna", "r\u00e9sum\u00e9 \ufffd"),
        ("punycode", "r\u00e9sum\u00e9 \ufffd"),
        ("undefined", "r\u00e9sum\u00e9 \ufffd"),
        ("unicode_escape", "r\u00e9sum\u00e9 \ufffd"),
        ("rot13", "r\u00e9sum\u00e9 \ufffd"),
        ("base64", "r\u00e9sum\u00e9 \ufffd"),
        ("no-such-codec", "r\u00e9sum\u00e9 \ufffd"),
        ("a\0b", "r\u00e9sum\u00e9 \ufffd"),
        ("", "r\u00e9sum\u00e9 \ufffd"),
    ],
)
def test_decode_text_takes_any_encoding(encoding, text):
    assert decode_text("r\u00e9sum\u00e9 ".encode() + b"\xff", encoding) == text


# --------------------------------------------------------------------------------- pages


def test_commit_page_shows_clamped_dates_and_decoded_text(client, tips):
    for name, case in CASES.items():
        page = ok(client, f"/mallory/{name}/commit/{tips[name]}").text
        author = page.split("<dt>Author</dt><dd>", 1)[1].split("</dd>", 1)[0]
        assert author.startswith(f"{case.name} &lt;"), (name, author)
        assert f">{case.shown}</time>" in author, (name, author)
        assert (MARK in author) is case.clamped, (name, author)
        assert f'<h1 class="commit-summary">{case.summary}</h1>' in page, name
        assert shown_time(page), name


@pytest.mark.parametrize(
    "page", ["", "/src/branch/main", "/src/tag/v1", "/src/branch/main/notes.txt"]
)
def test_source_pages_answer(client, tips, page):
    for name, case in CASES.items():
        text = ok(client, f"/mallory/{name}{page}").text
        if page.endswith("notes.txt"):  # a file's page names no commit
            assert "notes" in text, (name, page)
        else:  # a directory's page shows its latest commit
            assert case.summary in text and shown_time(text), (name, page)


@pytest.mark.parametrize(
    "page", ["/commits/branch/main", "/commits/tag/v1", "/commits/branch/main/notes.txt"]
)
def test_history_pages_answer(client, tips, page):
    for name, case in CASES.items():
        text = ok(client, f"/mallory/{name}{page}").text
        assert tips[name] in text, (name, page)
        assert f"{case.name} committed" in text, (name, page)


@pytest.mark.parametrize("page", ["/branches", "/tags"])
def test_ref_pages_answer(client, tips, page):
    for name in CASES:
        text = ok(client, f"/mallory/{name}{page}").text
        assert len(shown_time(text)) == 1, (name, page)


def test_last_commit_answers(client, tips):
    for name, case in CASES.items():
        body = json.loads(ok(client, f"/mallory/{name}/-/last/{tips[name]}").text)
        assert body["ready"], name
        entry = body["entries"][b"notes.txt".hex()]
        assert entry["summary"] == case.summary, name
        datetime.fromisoformat(entry["when"])


def test_blame_answers(client, tips):
    for name in CASES:
        text = ok(client, f"/mallory/{name}/blame/branch/main/notes.txt").text
        assert tips[name][:10] in text, name


def test_patch_and_diff_answer(client, tips):
    for name, case in CASES.items():
        patch = ok(client, f"/mallory/{name}/commit/{tips[name]}.patch").text
        head = dict(line.split(": ", 1) for line in patch.split("\n\n", 1)[0].splitlines()[1:])
        assert head["From"] == f"{case.name} <{'' if not case.name else 'heloise@example.org'}>"
        assert head["Subject"] == f"[PATCH] {case.summary}", name
        expected = datetime.strptime(case.shown, "%Y-%m-%d %H:%M:%S %z")
        assert head["Date"].endswith(rfc2822_tail(expected)), (name, head["Date"])
        assert "+notes\n" in ok(client, f"/mallory/{name}/commit/{tips[name]}.diff").text


def test_feeds_answer(client, tips):
    atom_ns = "{http://www.w3.org/2005/Atom}"
    for name, case in CASES.items():
        atom = ElementTree.fromstring(ok(client, f"/mallory/{name}/atom/branch/main").content)
        entry = atom.findall(f"{atom_ns}entry")[0]
        assert entry.findtext(f"{atom_ns}title") == case.summary, name
        assert entry.findtext(f"{atom_ns}author/{atom_ns}name") == case.name, name
        datetime.fromisoformat(entry.findtext(f"{atom_ns}updated") or "")
        rss = ElementTree.fromstring(ok(client, f"/mallory/{name}/rss/branch/main").content)
        item = rss.findall("channel/item")[0]
        assert item.findtext("title") == case.summary, name
        parsedate_to_datetime(item.findtext("pubDate") or "")


@pytest.mark.parametrize("url", ["/", "/?q=year", "/?q=int64&sort=oldest", "/mallory"])
def test_listings_keep_updated_in_range(client, forge, url):
    page = ok(client, url).text
    now = datetime.now(UTC)
    times = shown_time(page)
    assert times
    assert all(t <= now for t in times), url  # a commit from the future does not pin a repo
    for repo in forge.registry.all():
        assert repo.updated_at is not None
        assert dates.EARLIEST_SECONDS <= repo.updated_at <= now.timestamp(), repo.full_name


def test_listings_survive_a_stored_date_out_of_range(client, forge):
    """A database written before the clamp holds any float: every listing still answers."""
    repo = next(r for r in forge.registry.all() if r.name == "year-0")
    try:
        for stored in (1e300, -1e300, 2.0**63, -62135596801.0):
            forge.db.execute("UPDATE repos SET updated_at = ? WHERE id = ?", (stored, repo.id))
            for url in ("/", "/?q=year-0", "/?sort=oldest", "/mallory"):
                assert "year-0" in ok(client, url).text, (url, stored)
    finally:
        forge.registry.set_updated(repo.id, repo.updated_at)


# ------------------------------------------------------------------------------ deep tree


def test_deep_tree_is_indexed_and_its_history_answers(client, forge, hostile):
    first, second, readme = hostile[2]
    repo = next(r for r in forge.registry.all() if r.name == "deep")
    assert repo.id not in forge.indexer.failures, forge.indexer.failures[repo.id]
    assert forge.indexer.ready(repo.id, bytes.fromhex(readme)) is not None

    history = ok(client, f"/mallory/deep/commits/branch/main/{deep_path()}").text
    # the list's links (the header's permalink for `y` names the branch's own commit)
    shown = re.findall(r'href="/mallory/deep/commit/([0-9a-f]{40})"', history)
    assert shown and shown[0] == second, shown
    assert first in shown and readme not in shown

    directory = deep_path().rsplit("/", 1)[0]
    listing = ok(client, f"/mallory/deep/src/branch/main/{directory}").text
    assert "deep.txt" in listing
    last = json.loads(ok(client, f"/mallory/deep/-/last/{readme}/{directory}").text)
    assert last["entries"][b"deep.txt".hex()]["id"] == second
    last = json.loads(ok(client, f"/mallory/deep/-/last/{readme}").text)
    assert last["entries"][b"d".hex()]["id"] == second

    assert "deeper still" in ok(client, f"/mallory/deep/src/branch/main/{deep_path()}").text
    assert "deeper still" in ok(client, f"/mallory/deep/commit/{second}").text
    assert "+deeper still" in ok(client, f"/mallory/deep/commit/{second}.patch").text
    ok(client, f"/mallory/deep/blame/branch/main/{deep_path()}")
    with tarfile.open(
        fileobj=io.BytesIO(ok(client, "/mallory/deep/archive/main.tar").content)
    ) as tar:
        member = tar.extractfile(f"deep-main/{deep_path()}")
        assert member is not None and member.read() == b"deeper still\n"
