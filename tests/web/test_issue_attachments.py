"""Files attached to issues and comments on the web: uploaded ahead (a dropped file, at
``/issues/attachments``) and claimed by the comment or issue that names it, or sent with the
form itself (no script); only the uploader's own uploads are claimed; the page lists each
comment's files; a posted file downloads for every reader, an unclaimed one only for its
uploader and the writers; a comment deleted takes its files (and their bytes) along."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.accounts import PASSWORD, csrf_of
from support.forges import start_forge

from floorless.files.attachments import Attachment
from floorless.forge import Forge
from floorless.web.app import create_app
from floorless.web.gateway import Limits

BASE = "http://forge.test"
ISSUE = "/ann/plans/issues/1"
UPLOAD = "/ann/plans/issues/attachments"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    people = {
        name: forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
        for name in ("ann", "ben", "cat")
    }
    forge.registry.create("ann", "plans")
    forge.registry.create("ann", "other")
    forge.registry.create("ann", "secret", private=True)
    forge.issues.create("ann", "plans", people["ann"], "Plans", "The plans")
    forge.issues.create("ann", "other", people["ann"], "Elsewhere", "")
    yield forge
    forge.stop()


def _client(forge: Forge, name: str | None) -> httpx.Client:
    """A browser over the app: its cookie jar, signed in as ``name`` (None: nobody)."""
    client = httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE)
    if name is not None:
        csrf = csrf_of(client.get("/-/login").text)
        signed = client.post("/-/login", data={"csrf": csrf, "name": name, "password": PASSWORD})
        assert signed.status_code == 303
    return client


@pytest.fixture
def ann(forge: Forge) -> Iterator[httpx.Client]:
    client = _client(forge, "ann")
    yield client
    client.close()


@pytest.fixture
def ben(forge: Forge) -> Iterator[httpx.Client]:
    client = _client(forge, "ben")
    yield client
    client.close()


@pytest.fixture
def cat(forge: Forge) -> Iterator[httpx.Client]:
    client = _client(forge, "cat")
    yield client
    client.close()


def _csrf(client: httpx.Client, page: str = ISSUE) -> str:
    return csrf_of(client.get(page).text)


def _upload(
    client: httpx.Client, name: str, data: bytes, kind: str = "application/octet-stream"
) -> httpx.Response:
    return client.post(UPLOAD, data={"csrf": _csrf(client)}, files={"file": (name, data, kind)})


def _found(forge: Forge, uuid: str) -> Attachment:
    found = forge.attachments.by_uuid(uuid)
    assert found is not None
    return found


def _rows(forge: Forge) -> int:
    row = forge.db.one("SELECT COUNT(*) AS n FROM attachments")
    assert row is not None
    return int(row["n"])


def _comment_of(answer: httpx.Response) -> int:
    assert answer.status_code == 303, answer.text[:300]
    found = re.search(r"#issuecomment-(\d+)$", answer.headers["location"])
    assert found
    return int(found.group(1))


def test_a_dropped_file_is_claimed_by_the_comment_that_names_it(
    forge: Forge, ann: httpx.Client, ben: httpx.Client, cat: httpx.Client
) -> None:
    sent = _upload(ben, "screen shot.png", PNG, "image/png")
    assert sent.status_code == 200, sent.text
    assert sent.headers["content-type"].startswith("application/json")
    uuid = sent.json()["uuid"]
    held = _found(forge, uuid)
    assert (held.name, held.size, held.issue_id, held.comment_id) == (
        "screen shot.png",
        len(PNG),
        None,
        None,
    )
    download = f"/attachments/{uuid}"
    # not yet posted: its uploader's and the writers' alone
    assert ben.get(download).content == PNG
    assert ann.get(download).status_code == 200
    assert cat.get(download).status_code == 404
    with _client(forge, None) as anonymous:
        assert anonymous.get(download).status_code == 404
        assert anonymous.get(download).text == anonymous.get("/attachments/nothing").text
    body = f"See ![screen shot.png]({download})"
    posted = ben.post(
        ISSUE, data={"csrf": _csrf(ben), "action": "comment", "body": body, "files": uuid}
    )
    comment = _comment_of(posted)
    claimed = _found(forge, uuid)
    issue = forge.issues.get("ann", "plans", 1)
    assert (claimed.issue_id, claimed.comment_id) == (issue.id, comment)
    # the page lists the comment's file under it, and every reader downloads it
    page = cat.get(ISSUE).text
    listed = page.split(f'id="issuecomment-{comment}"')[1].split("</li>\n</ul>")[0]
    assert f'<a href="{download}">screen shot.png</a>' in listed
    assert f'<img src="{download}"' in page
    assert cat.get(download).content == PNG
    with _client(forge, None) as anonymous:
        assert anonymous.get(download).content == PNG
    assert _found(forge, uuid).download_count == 4  # each whole download: two before, two after


def test_only_the_posters_own_uploads_in_this_repository_are_claimed(
    forge: Forge, ben: httpx.Client, cat: httpx.Client
) -> None:
    theirs = _upload(cat, "cat.txt", b"cat's").json()["uuid"]
    mine = _upload(ben, "ben.txt", b"ben's").json()["uuid"]
    elsewhere = ben.post(
        "/ann/other/issues/attachments",
        data={"csrf": _csrf(ben, "/ann/other/issues/1")},
        files={"file": ("other.txt", b"other")},
    ).json()["uuid"]
    fields = [
        ("csrf", _csrf(ben)),
        ("action", "comment"),
        ("body", "three files"),
        ("files", theirs),
        ("files", mine),
        ("files", elsewhere),
        ("files", "not-a-uuid"),
    ]
    comment = _comment_of(
        ben.post(
            ISSUE,
            content=httpx.QueryParams(fields).__str__().encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    )
    assert _found(forge, mine).comment_id == comment
    for unclaimed in (theirs, elsewhere):
        found = _found(forge, unclaimed)
        assert (found.issue_id, found.comment_id) == (None, None)
    assert cat.get(f"/attachments/{theirs}").status_code == 200  # still its uploader's
    assert ben.get(f"/attachments/{theirs}").status_code == 404


def test_a_comment_posted_without_script_carries_its_files(
    forge: Forge, ben: httpx.Client, cat: httpx.Client
) -> None:
    files = [
        ("file", ("notes.txt", b"some notes", "text/plain")),
        ("file", ("", b"", "application/octet-stream")),  # a file input left empty
        ("file", ("data.csv", b"a,b\n1,2\n", "text/csv")),
    ]
    fields = {"csrf": _csrf(ben), "action": "comment", "body": "Two files"}
    comment = _comment_of(ben.post(ISSUE, data=fields, files=files))
    attached = forge.attachments.of_issues((), [comment])[1][comment]
    assert [(a.name, a.size) for a in attached] == [("notes.txt", 10), ("data.csv", 8)]
    page = cat.get(ISSUE).text
    for found in attached:
        assert f'<a href="/attachments/{found.uuid}">{found.name}</a>' in page
        assert cat.get(f"/attachments/{found.uuid}").status_code == 200
    # a comment refused (no text) keeps none of the files it carried
    refused = ben.post(
        ISSUE,
        data={"csrf": _csrf(ben), "action": "comment", "body": " "},
        files=[("file", ("lost.txt", b"lost bytes"))],
    )
    assert refused.status_code == 400
    assert _rows(forge) == 2
    # nor does a form sent without its CSRF token: refused before the file is kept
    forged = ben.post(
        ISSUE,
        data={"csrf": "forged", "action": "comment", "body": "x"},
        files=[("file", ("forged.txt", b"forged bytes"))],
    )
    assert forged.status_code == 403
    assert _rows(forge) == 2
    assert len(list(forge.store.every())) == 2
    assert list(forge.store.tmp.iterdir()) == []


def test_a_new_issue_carries_its_files(forge: Forge, ben: httpx.Client) -> None:
    form = _csrf(ben, "/ann/plans/issues/new")
    dropped = ben.post(UPLOAD, data={"csrf": form}, files={"file": ("drop.txt", b"dropped")})
    opened = ben.post(
        "/ann/plans/issues/new",
        data={"csrf": form, "title": "With files", "body": "", "files": dropped.json()["uuid"]},
        files={"file": ("sent.txt", b"sent along")},
    )
    assert opened.status_code == 303, opened.text[:300]
    number = re.fullmatch(r"/ann/plans/issues/(\d+)", opened.headers["location"])
    assert number
    issue = forge.issues.get("ann", "plans", int(number.group(1)))
    own, _ = forge.attachments.of_issues([issue.id])
    assert sorted(a.name for a in own[issue.id]) == ["drop.txt", "sent.txt"]
    assert all(a.comment_id is None for a in own[issue.id])
    page = ben.get(opened.headers["location"]).text
    body = page.split('id="issue-body"')[1].split("</article>")[0]
    assert "drop.txt</a>" in body and "sent.txt</a>" in body


def test_deleting_a_comment_deletes_its_files(forge: Forge, ann: httpx.Client) -> None:
    shared = b"the same bytes twice"
    comment = _comment_of(
        ann.post(
            ISSUE,
            data={"csrf": _csrf(ann), "action": "comment", "body": "files"},
            files=[("file", ("a.txt", shared)), ("file", ("b.txt", b"only here"))],
        )
    )
    kept = _comment_of(
        ann.post(
            ISSUE,
            data={"csrf": _csrf(ann), "action": "comment", "body": "same"},
            files=[("file", ("c.txt", shared))],
        )
    )
    assert len(list(forge.store.every())) == 2
    deleted = ann.post(
        ISSUE, data={"csrf": _csrf(ann), "action": "delete_comment", "comment": str(comment)}
    )
    assert deleted.status_code == 303
    assert forge.attachments.of_issues((), [comment])[1][comment] == []
    left = forge.attachments.of_issues((), [kept])[1][kept]
    assert [a.name for a in left] == ["c.txt"]
    assert list(forge.store.every()) == [left[0].oid]  # the bytes only the deleted one had: gone
    assert ann.get(f"/attachments/{left[0].uuid}").content == shared


def test_the_upload_refuses_what_it_may_not_keep(
    forge: Forge, ben: httpx.Client, cat: httpx.Client
) -> None:
    csrf = _csrf(ben)
    no_token = ben.post(UPLOAD, files={"file": ("a.txt", b"x")})
    assert no_token.status_code == 403
    wrong = ben.post(UPLOAD, data={"csrf": "wrong"}, files={"file": ("a.txt", b"x")})
    assert wrong.status_code == 403
    plain = ben.post(UPLOAD, data={"csrf": csrf, "file": "not a file"})
    assert plain.status_code == 400
    two = ben.post(
        UPLOAD, data={"csrf": csrf}, files=[("file", ("a", b"1")), ("file", ("b", b"2"))]
    )
    assert two.status_code == 400
    none = ben.post(UPLOAD, data={"csrf": csrf}, files={"other": ("a", b"1")})
    assert none.status_code == 400
    forge.attachments.max_bytes = 10
    try:
        big = ben.post(UPLOAD, data={"csrf": csrf}, files={"file": ("big.bin", b"x" * 100)})
        assert big.status_code == 413
    finally:
        forge.attachments.max_bytes = forge.settings.attachment_max_bytes
    forge.attachments.types = ("image/*",)
    try:
        kind = ben.post(UPLOAD, data={"csrf": csrf}, files={"file": ("tool.exe", b"MZ")})
        assert kind.status_code == 415
    finally:
        forge.attachments.types = forge.settings.attachment_types
    assert _rows(forge) == 0
    assert list(forge.store.every()) == []
    # who may not read the repository finds none; who is not signed in is asked to
    secret = cat.post(
        "/ann/secret/issues/attachments", data={"csrf": csrf}, files={"file": ("a", b"x")}
    )
    missing = cat.post(
        "/ann/secrex/issues/attachments", data={"csrf": csrf}, files={"file": ("a", b"x")}
    )
    assert secret.status_code == missing.status_code == 404
    with _client(forge, None) as anonymous:
        answer = anonymous.post(UPLOAD, files={"file": ("a.txt", b"x")})
        assert answer.status_code == 303 and "/-/login" in answer.headers["location"]
    assert _rows(forge) == 0


def test_the_issue_pages_offer_files_to_those_who_may_comment(
    ben: httpx.Client, cat: httpx.Client
) -> None:
    for page in (ISSUE, "/ann/plans/issues/new"):
        html = ben.get(page).text
        assert 'enctype="multipart/form-data"' in html
        assert '<input type="file" name="file" multiple>' in html
        assert f'data-upload="{UPLOAD}"' in html
        # the form's token comes before its files, so that it is checked before they are kept
        assert html.index('name="csrf"') < html.index('type="file"')
    script = cat.get("/-/static/app.js").text
    assert "textarea[data-upload]" in script and '"files"' in script


def test_the_gateway_lets_files_through_where_they_are_posted() -> None:
    limits = Limits(client_timeout=30, push_bytes=3, fetch_bytes=2, form_bytes=1, upload_bytes=9)
    for path in (
        UPLOAD,
        "/ann/plans/issues/new",
        ISSUE,
        "/api/v1/repos/ann/plans/issues/1/assets",
        "/api/v1/repos/ann/plans/issues/comments/7/assets",
    ):
        assert limits.body_limit(path) == 9, path
    for path in ("/ann/plans/issues/1/triage", "/ann/plans/labels", "/api/v1/repos/ann/plans"):
        assert limits.body_limit(path) == 1, path
