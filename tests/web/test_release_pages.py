"""The release pages: the list (records and annotated tags merged, newest first, paged), one
release, the latest, the new and edit forms with files uploaded as a real multipart body,
the tags page's links, the feeds; drafts kept from readers and bad input refused."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import start_forge

from floorless.forge import Forge
from floorless.web.app import create_app
from floorless.web.gateway import UPLOADS
from floorless.web.views.releases import PER_PAGE

WHEN = 1_700_000_000
MAX_BYTES = 256 * 1024
ATOM = "{http://www.w3.org/2005/Atom}"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data", attachment_max_bytes=MAX_BYTES)
    for name in ("ann", "ben", "cat"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    forge.registry.create("ann", "secret", private=True)
    forge.policy.set_collaborator(plans, forge.accounts.require("ben"), "read")
    handle = forge.live.open(plans)
    tree = handle.TreeBuilder()
    tree.insert("a.txt", handle.create_blob(b"a\n"), pygit2.GIT_FILEMODE_BLOB)
    who = pygit2.Signature("Ann", "ann@example.org", WHEN, 0)
    first = handle.create_commit("refs/heads/main", who, who, "one", tree.write(), [])
    handle.set_head("refs/heads/main")
    # an annotated tag older than every release, and a lightweight one
    tagger = pygit2.Signature("Ann", "ann@example.org", WHEN + 10, 0)
    handle.create_tag(
        "v0.1", first, pygit2.enums.ObjectType.COMMIT, tagger, "Early days\n\nThe *first* cut."
    )
    handle.references.create("refs/tags/light", first)
    forge.moves.refs_moved(plans)
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def _signed_in(client: testing.TestClient, name: str) -> Browser:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    return browser


def _titles(html: str) -> list[str]:
    """The entries of a releases page, in order: a record's title, or a tag's name."""
    return re.findall(
        r'<article class="release"[^>]*>\s*<h3><a href="[^"]+/(?:releases/tag|src/tag)/[^"]+">'
        r"([^<]+)</a>",
        html,
    )


def _rows(forge: Forge, table: str) -> int:
    found = forge.db.one(f"SELECT COUNT(*) AS n FROM {table}")
    assert found is not None
    return int(found["n"])


def test_a_release_made_edited_and_deleted_by_form(
    forge: Forge, client: testing.TestClient
) -> None:
    ann = _signed_in(client, "ann")
    form = ann.get("/ann/plans/releases/new")
    assert form.status_code == 200
    assert 'enctype="multipart/form-data"' in form.text
    assert 'name="target" value="main"' in form.text  # the default branch by default
    tool, notes = b"\x7fELF" + bytes(range(256)) * 300, b"read me\n"
    made = ann.post_files(
        "/ann/plans/releases/new",
        {
            "action": "save",
            "tag_name": "v1.0",
            "target": "main",
            "title": "First",
            "note": "Fixes #1 and **more**.\n\n<script>alert(1)</script>",
        },
        [("tool-linux", tool), ("NOTES.txt", notes)],
    )
    assert made.status_code == 303, made.text
    assert made.headers["location"].endswith("/ann/plans/releases/tag/v1.0")
    assert forge.live.open(forge.registry.get("ann", "plans")).references.get("refs/tags/v1.0")
    page = client.simulate_get("/ann/plans/releases/tag/v1.0")
    assert page.status_code == 200
    assert "<strong>more</strong>" in page.text and "<script>alert" not in page.text
    assert "tool-linux" in page.text and "NOTES.txt" in page.text
    assert "0 downloads" in page.text
    assert 'href="/ann/plans/archive/v1.0.zip"' in page.text
    download = client.simulate_get("/ann/plans/releases/download/v1.0/tool-linux")
    assert download.content == tool
    again = client.simulate_get("/ann/plans/releases/tag/v1.0")
    assert "1 download<" in again.text  # the download moved the page's version
    # the list: the new release above the older annotated tag; the lightweight one is not in it
    listed = client.simulate_get("/ann/plans/releases")
    assert _titles(listed.text) == ["First", "v0.1"]
    assert "Early days" in listed.text and "<em>first</em>" in listed.text
    assert "New release" not in listed.text  # an anonymous visitor's page
    assert "New release" in ann.get("/ann/plans/releases").text

    # edit: a new title, a pre-release, one file deleted and one more added
    edit = ann.get("/ann/plans/releases/edit/v1.0")
    assert edit.status_code == 200
    release = forge.releases.by_tag(forge.registry.get("ann", "plans").id, "v1.0")
    assert release is not None
    files = forge.attachments.of_releases([release.id])[release.id]
    gone = next(a for a in files if a.name == "NOTES.txt")
    changed = ann.post_files(
        "/ann/plans/releases/edit/v1.0",
        {
            "action": "save",
            "tag_name": "v1.0",
            "target": "main",
            "title": "First, again",
            "note": "Now with more.",
            "prerelease": "on",
            "delete_file": [gone.uuid],
        },
        [("tool-mac", b"mac"), ("tool-win.exe", b"win")],
    )
    assert changed.status_code == 303, changed.text
    page = client.simulate_get("/ann/plans/releases/tag/v1.0").text
    assert "First, again" in page and "Pre-release" in page
    names = re.findall(r'/releases/download/v1\.0/([^"]+)"', page)
    assert names == ["tool-linux", "tool-mac", "tool-win.exe"]
    assert _rows(forge, "attachments") == 3
    # a pre-release is not the latest
    assert client.simulate_get("/ann/plans/releases/latest").status_code == 404

    # delete: refused without the confirmation, then done; the tag stays
    kept = ann.post("/ann/plans/releases/edit/v1.0", {"action": "delete"})
    assert kept.status_code == 400
    assert "confirm" in kept.text
    assert forge.releases.by_tag(release.repo_id, "v1.0") is not None
    deleted = ann.post("/ann/plans/releases/edit/v1.0", {"action": "delete", "confirm": "on"})
    assert deleted.status_code == 303
    assert deleted.headers["location"].endswith("/ann/plans/releases")
    assert forge.releases.by_tag(release.repo_id, "v1.0") is None
    assert _rows(forge, "attachments") == 0
    # the tag is still there, and now shows as a tag
    assert client.simulate_get("/ann/plans/releases/tag/v1.0").status_code == 200
    assert client.simulate_get("/ann/plans/releases/download/v1.0/tool-mac").status_code == 404


def test_drafts_are_the_writers_alone(forge: Forge, client: testing.TestClient) -> None:
    ann = _signed_in(client, "ann")
    ben = _signed_in(client, "ben")
    made = ann.post_files(
        "/ann/plans/releases/new",
        {"tag_name": "v2.0", "title": "Secret plan", "draft": "on"},
        [("../plän.txt", b"the plan")],  # its name kept, non-ASCII too, but no directory
    )
    assert made.status_code == 303, made.text
    repo = forge.registry.get("ann", "plans")
    assert forge.live.open(repo).references.get("refs/tags/v2.0") is None  # not yet tagged
    assert "Secret plan" in ann.get("/ann/plans/releases").text
    assert "Draft" in ann.get("/ann/plans/releases/tag/v2.0").text
    for reader in (ben, Browser(client)):
        assert "Secret plan" not in reader.get("/ann/plans/releases").text
        assert reader.get("/ann/plans/releases/tag/v2.0").status_code == 404
        assert reader.get("/ann/plans/releases/download/v2.0/plän.txt").status_code == 404
        assert "Secret plan" not in reader.get("/ann/plans/releases.atom").text
    assert client.simulate_get("/ann/plans/releases/latest").status_code == 404
    # published: the tag is made, and everyone sees it
    published = ann.post_files(
        "/ann/plans/releases/edit/v2.0",
        {"tag_name": "v2.0", "title": "Open plan", "target": "main"},
        [],
    )
    assert published.status_code == 303, published.text
    assert forge.live.open(repo).references.get("refs/tags/v2.0") is not None
    assert "Open plan" in ben.get("/ann/plans/releases").text
    assert ben.get("/ann/plans/releases/download/v2.0/plän.txt").content == b"the plan"
    latest = client.simulate_get("/ann/plans/releases/latest")
    assert latest.status_code == 302
    assert latest.headers["location"].endswith("/ann/plans/releases/tag/v2.0")


def test_only_writers_reach_the_forms(forge: Forge, client: testing.TestClient) -> None:
    ben = _signed_in(client, "ben")
    cat = _signed_in(client, "cat")
    anonymous = Browser(client)
    for path in ("/ann/plans/releases/new", "/ann/plans/releases/edit/v0.1"):
        assert ben.get(path).status_code == 403
        assert cat.get(path).status_code == 403
        sent = anonymous.get(path)
        assert sent.status_code == 303 and "/-/login" in sent.headers["location"]
    # a reader's post, even with a token of their own, makes nothing
    token = csrf_of(ben.get("/ann/plans").text)
    posted = ben.post_files(
        "/ann/plans/releases/new", {"tag_name": "v9"}, [("x.bin", b"x")], csrf=token
    )
    assert posted.status_code == 403
    assert _rows(forge, "releases") == 0 and _rows(forge, "attachments") == 0
    # a private repository is missing to whoever may not read it, as one that does not exist
    missing = cat.get("/ann/nothing/releases/new")
    for path in ("/ann/secret/releases/new", "/ann/secret/releases", "/ann/secret/releases.rss"):
        hidden = cat.get(path)
        assert (hidden.status_code, hidden.text) == (missing.status_code, missing.text)


def test_bad_input_is_refused_and_leaves_nothing(forge: Forge, client: testing.TestClient) -> None:
    ann = _signed_in(client, "ann")
    # no CSRF token: refused before any file is stored
    refused = ann.post_files(
        "/ann/plans/releases/new", {"tag_name": "v1"}, [("a.bin", b"a")], csrf=None
    )
    assert refused.status_code == 403
    wrong = ann.post_files(
        "/ann/plans/releases/new", {"tag_name": "v1"}, [("a.bin", b"a")], csrf="forged"
    )
    assert wrong.status_code == 403
    # a file over the limit: 413, and the files before it are gone too
    big = ann.post_files(
        "/ann/plans/releases/new",
        {"tag_name": "v1"},
        [("small.bin", b"small"), ("big.bin", b"x" * (MAX_BYTES + 1))],
    )
    assert big.status_code == 413
    # a tag that is no ref name, a target that names nothing, a tag with a release already
    bad_tag = ann.post_files("/ann/plans/releases/new", {"tag_name": "a..b"}, [("a", b"a")])
    assert bad_tag.status_code == 400
    assert "not a valid tag name" in bad_tag.text
    bad_target = ann.post_files(
        "/ann/plans/releases/new", {"tag_name": "v1", "target": "nowhere"}, [("a", b"a")]
    )
    assert bad_target.status_code == 422
    assert _rows(forge, "releases") == 0 and _rows(forge, "attachments") == 0
    assert list(forge.store.every()) == []  # the stored bytes went with their records
    assert ann.post_files("/ann/plans/releases/new", {"tag_name": "v1"}, []).status_code == 303
    twice = ann.post_files("/ann/plans/releases/new", {"tag_name": "v1"}, [])
    assert twice.status_code == 409
    # unknown releases and tags, bad pages, a malformed body, an unknown action
    assert ann.get("/ann/plans/releases/edit/nothing").status_code == 404
    assert client.simulate_get("/ann/plans/releases/tag/nothing").status_code == 404
    assert client.simulate_get("/ann/plans/releases/tag/%FF").status_code == 404
    for page in ("0", "x", "-1", "99999999999"):
        assert client.simulate_get(f"/ann/plans/releases?page={page}").status_code == 400
    assert "No releases on this page" in client.simulate_get("/ann/plans/releases?page=9").text
    malformed = ann.client.simulate_post(
        "/ann/plans/releases/new",
        body=b"--x\r\nnot a part",
        headers={**ann._cookie_header(), "Content-Type": "multipart/form-data; boundary=x"},
    )
    assert malformed.status_code == 400
    unknown = ann.post_files("/ann/plans/releases/edit/v1", {"action": "nothing"}, [])
    assert unknown.status_code == 400


def test_the_list_is_paged_newest_first(forge: Forge, client: testing.TestClient) -> None:
    repo = forge.registry.get("ann", "plans")
    ann = forge.accounts.require("ann")
    for n in range(PER_PAGE + 2):
        forge.releases.create(repo, ann.id, f"r{n}", title=f"Release {n}")
    first = _titles(client.simulate_get("/ann/plans/releases").text)
    second = _titles(client.simulate_get("/ann/plans/releases?page=2").text)
    expected = [f"Release {n}" for n in reversed(range(PER_PAGE + 2))] + ["v0.1"]
    assert first + second == expected
    assert len(first) == PER_PAGE
    assert (
        'rel="next" href="/ann/plans/releases?page=2"'
        in client.simulate_get("/ann/plans/releases").text
    )


def test_the_tags_page_links_releases(forge: Forge, client: testing.TestClient) -> None:
    repo = forge.registry.get("ann", "plans")
    forge.releases.create(repo, forge.accounts.require("ann").id, "v0.1", title="Early")
    tags = client.simulate_get("/ann/plans/tags").text
    assert tags.count('class="release-link"') == 1
    assert 'href="/ann/plans/releases/tag/v0.1">Release</a>' in tags
    # the one release now stands for the tag in the list: no entry of the tag beside it
    assert _titles(client.simulate_get("/ann/plans/releases").text) == ["Early"]
    # a lightweight tag without a release has a page of its own all the same
    light = client.simulate_get("/ann/plans/releases/tag/light")
    assert light.status_code == 200 and "light" in light.text


def test_the_feeds_are_valid_and_hold_the_releases(
    forge: Forge, client: testing.TestClient
) -> None:
    repo = forge.registry.get("ann", "plans")
    ann = forge.accounts.require("ann")
    forge.releases.create(repo, ann.id, "v1.0", title="One", note="The *notes*")
    forge.releases.create(repo, ann.id, "v2.0", title="Hidden", draft=True)
    atom = client.simulate_get("/ann/plans/releases.atom")
    assert atom.status_code == 200
    assert atom.headers["content-type"].startswith("application/atom+xml")
    entries = ET.fromstring(atom.content).findall(f"{ATOM}entry")
    assert [e.findtext(f"{ATOM}title") for e in entries] == ["One"]
    assert "<em>notes</em>" in (entries[0].findtext(f"{ATOM}content") or "")
    link = entries[0].find(f"{ATOM}link")
    assert link is not None and link.get("href", "").endswith("/ann/plans/releases/tag/v1.0")
    rss = client.simulate_get("/ann/plans/releases.rss")
    assert rss.headers["content-type"].startswith("application/rss+xml")
    assert [i.findtext("title") for i in ET.fromstring(rss.content).iter("item")] == ["One"]
    tags = ET.fromstring(client.simulate_get("/ann/plans/tags.atom").content)
    names = [e.findtext(f"{ATOM}title") for e in tags.findall(f"{ATOM}entry")]
    assert sorted(names) == ["light", "v0.1", "v1.0"]
    tag_rss = ET.fromstring(client.simulate_get("/ann/plans/tags.rss").content)
    assert sorted(i.findtext("title") or "" for i in tag_rss.iter("item")) == sorted(names)
    # the branch feed still is what it was
    branch = ET.fromstring(client.simulate_get("/ann/plans/atom/branch/main").content)
    assert [e.findtext(f"{ATOM}title") for e in branch.findall(f"{ATOM}entry")] == ["one"]


def test_a_release_written_shows_at_once(forge: Forge, client: testing.TestClient) -> None:
    """The pages are kept while the repository's activity version stays: every write to a
    release or its files moves it, whoever writes (here the domain, not a form)."""
    repo = forge.registry.get("ann", "plans")
    ann = forge.accounts.require("ann")
    forge.issues.create("ann", "plans", ann, "A bug", "")
    assert _titles(client.simulate_get("/ann/plans/releases").text) == ["v0.1"]
    release = forge.releases.create(repo, ann.id, "v1.0", title="One", note="Fixes #1")
    page = client.simulate_get("/ann/plans/releases").text
    assert _titles(page) == ["One", "v0.1"]
    assert 'href="/ann/plans/issues/1"' in page  # cross-referenced as issue text is
    shown = client.simulate_get("/ann/plans/releases/tag/v1.0").text
    forge.releases.edit(repo, release, title="One, renamed")
    assert "One, renamed" in client.simulate_get("/ann/plans/releases").text
    assert "One, renamed" not in shown
    assert "One, renamed" in client.simulate_get("/ann/plans/releases/tag/v1.0").text
    data = iter([b"bytes", b""])
    forge.attachments.upload(
        repo.id, ann.id, "late.bin", lambda _: next(data), release_id=release.id
    )
    assert "late.bin" in client.simulate_get("/ann/plans/releases").text
    forge.releases.delete(release)
    assert _titles(client.simulate_get("/ann/plans/releases").text) == ["v0.1"]


def test_the_gateway_lets_the_forms_bodies_through() -> None:
    for path in ("/ann/plans/releases/new", "/ann/plans/releases/edit/v1.0"):
        assert UPLOADS.search(path)
    assert UPLOADS.search("/ann/plans/releases/edit/release/1.0")  # a tag with a slash
    assert not UPLOADS.search("/ann/plans/releases")
