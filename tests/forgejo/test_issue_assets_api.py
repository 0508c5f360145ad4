"""An issue's and a comment's files through the API, driven by pyforgejo (whose models check
every answer): uploaded, listed, read, renamed, downloaded and deleted; shown in the issue's
and the comment's JSON; changed only by their author or a writer; hidden with a private
repository; and bad input refused with nothing left behind."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyforgejo.core.api_error import ApiError
from pyforgejo.types import Attachment
from support.accounts import PASSWORD
from support.api import BASE, api, token_for
from support.forges import start_forge

from floorless.forge import Forge
from floorless.web.app import create_app

ISSUES = "/api/v1/repos/ann/plans/issues"


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    people = {
        name: forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
        for name in ("ann", "ben", "cat")
    }
    plans = forge.registry.create("ann", "plans")
    secret = forge.registry.create("ann", "secret", private=True)
    forge.policy.set_collaborator(plans, people["ben"], "read")
    forge.policy.set_collaborator(secret, people["ben"], "read")
    issue = forge.issues.create("ann", "plans", people["ann"], "Plans", "The plans")
    forge.issues.comment(issue, people["ann"], "A first word")
    forge.issues.create("ann", "plans", people["ben"], "Ben's question", "")  # #2
    hidden = forge.issues.create("ann", "secret", people["ann"], "Hidden", "")
    forge.issues.comment(hidden, people["ann"], "Hidden words")
    yield forge
    forge.stop()


@pytest.fixture
def http(forge: Forge) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.WSGITransport(app=create_app(forge)), base_url=BASE) as c:
        yield c


def _rows(forge: Forge) -> int:
    found = forge.db.one("SELECT COUNT(*) AS n FROM attachments")
    assert found is not None
    return int(found["n"])


def _comment_id(forge: Forge, owner: str, name: str, number: int) -> int:
    row = forge.db.one(
        "SELECT c.id FROM issue_comments c JOIN issues i ON i.id = c.issue_id"
        " WHERE i.owner = ? AND i.name = ? AND i.number = ? ORDER BY c.id LIMIT 1",
        (owner, name, number),
    )
    assert row is not None
    return int(row["id"])


def _status(call: object) -> int:
    with pytest.raises(ApiError) as refused:
        call()  # type: ignore[operator]
    return int(refused.value.status_code or 0)


def test_an_issues_files_in_forgejo_shapes(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann")).issue
    data = b"\x89PNG\r\n" + bytes(range(256)) * 512
    made = ann.create_issue_attachment(
        "ann", "plans", 1, attachment=("screen.png", data, "image/png")
    )
    assert isinstance(made, Attachment)
    assert (made.name, made.size, made.download_count) == ("screen.png", len(data), 0)
    assert made.browser_download_url is not None
    uuid = made.browser_download_url.removeprefix(f"{BASE}/attachments/")
    assert forge.attachments.by_uuid(uuid) is not None
    named = ann.create_issue_attachment(
        "ann", "plans", 1, attachment=("x.txt", b"some notes"), name="../notes.txt"
    )
    assert named.name == "notes.txt"
    listed = ann.list_issue_attachments("ann", "plans", 1)
    assert [a.name for a in listed] == ["screen.png", "notes.txt"]
    issue = ann.get_issue("ann", "plans", 1)
    assert issue.assets is not None and [a.id for a in issue.assets] == [made.id, named.id]
    assert [i.assets for i in ann.list_issues("ann", "plans", state="all")] == [[], issue.assets]
    downloaded = http.get(made.browser_download_url)
    assert downloaded.status_code == 200
    assert hashlib.sha256(downloaded.content).digest() == hashlib.sha256(data).digest()
    assert ann.get_issue_attachment("ann", "plans", 1, made.id).download_count == 1
    renamed = ann.edit_issue_attachment("ann", "plans", 1, made.id, name="shot.png")
    assert renamed.name == "shot.png"
    assert ann.get_issue_attachment("ann", "plans", 1, made.id).name == "shot.png"
    ann.delete_issue_attachment("ann", "plans", 1, made.id)
    ann.delete_issue_attachment("ann", "plans", 1, named.id)
    assert ann.list_issue_attachments("ann", "plans", 1) == []
    assert _rows(forge) == 0
    assert list(forge.store.every()) == []


def test_a_comments_files_and_its_deletion(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann")).issue
    comment = _comment_id(forge, "ann", "plans", 1)
    made = ann.create_issue_comment_attachment(
        "ann", "plans", comment, attachment=("log.txt", b"a log\n")
    )
    assert (made.name, made.size) == ("log.txt", 6)
    assert [a.id for a in ann.list_issue_comment_attachments("ann", "plans", comment)] == [made.id]
    got = ann.get_comment("ann", "plans", comment)
    assert got is not None and got.assets is not None and [a.id for a in got.assets] == [made.id]
    listed = ann.get_comments("ann", "plans", 1)
    assert [[a.id for a in c.assets or []] for c in listed] == [[made.id]]
    # a comment's file is not the issue's own, and is reached by its comment's path alone
    assert ann.list_issue_attachments("ann", "plans", 1) == []
    assert ann.get_issue("ann", "plans", 1).assets == []
    assert _status(lambda: ann.get_issue_attachment("ann", "plans", 1, made.id)) == 404
    renamed = ann.edit_issue_comment_attachment("ann", "plans", comment, made.id, name="a.log")
    assert renamed.name == "a.log"
    assert ann.get_issue_comment_attachment("ann", "plans", comment, made.id).name == "a.log"
    # deleting the comment deletes its files, and their bytes once nothing refers to them
    ann.delete_comment("ann", "plans", comment)
    assert _rows(forge) == 0
    assert list(forge.store.every()) == []


def test_who_may_change_an_issues_files(forge: Forge, http: httpx.Client) -> None:
    ann = api(http, token_for(http, "ann")).issue
    ben = api(http, token_for(http, "ben")).issue  # reads plans
    cat = api(http, token_for(http, "cat")).issue  # reads it as the public may
    made = ann.create_issue_attachment("ann", "plans", 1, attachment=("a.txt", b"ann's"))
    comment = _comment_id(forge, "ann", "plans", 1)
    # readers list and read
    assert [a.id for a in ben.list_issue_attachments("ann", "plans", 1)] == [made.id]
    assert cat.get_issue_attachment("ann", "plans", 1, made.id).id == made.id
    # a reader may not attach to, rename or delete another's issue's files, or a comment's
    upload = lambda: ben.create_issue_attachment("ann", "plans", 1, attachment=("b", b"x"))  # noqa: E731
    assert _status(upload) == 403
    assert _status(lambda: ben.edit_issue_attachment("ann", "plans", 1, made.id, name="z")) == 403
    assert _status(lambda: ben.delete_issue_attachment("ann", "plans", 1, made.id)) == 403
    on_comment = lambda: ben.create_issue_comment_attachment(  # noqa: E731
        "ann", "plans", comment, attachment=("b", b"x")
    )
    assert _status(on_comment) == 403
    # but may to an issue they opened
    own = ben.create_issue_attachment("ann", "plans", 2, attachment=("mine.txt", b"ben's"))
    assert own.name == "mine.txt"
    # a read token writes nothing; nobody signed in is asked to be
    reading = api(http, token_for(http, "ann", ["read:repository", "read:issue"])).issue
    read_only = lambda: reading.create_issue_attachment("ann", "plans", 1, attachment=("r", b"x"))  # noqa: E731
    assert _status(read_only) == 403
    anonymous = http.post(f"{ISSUES}/1/assets", files={"attachment": ("n.txt", b"x")})
    assert anonymous.status_code == 401
    assert _rows(forge) == 2


def test_a_private_repositorys_files_are_missing_to_outsiders(
    forge: Forge, http: httpx.Client
) -> None:
    ann = api(http, token_for(http, "ann")).issue
    made = ann.create_issue_attachment("ann", "secret", 1, attachment=("s.txt", b"secret"))
    comment = _comment_id(forge, "ann", "secret", 1)
    on_comment = ann.create_issue_comment_attachment(
        "ann", "secret", comment, attachment=("t.txt", b"also secret")
    )
    outsider = {"Authorization": f"token {token_for(http, 'cat')}"}
    asked = [
        (method, path)
        for paths, methods in (
            (["/1/assets", f"/comments/{comment}/assets"], ("GET", "POST")),
            (
                [f"/1/assets/{made.id}", f"/comments/{comment}/assets/{on_comment.id}"],
                ("GET", "PATCH", "DELETE"),
            ),
        )
        for path in paths
        for method in methods
    ]
    for method, path in asked:
        hidden = http.request(method, f"/api/v1/repos/ann/secret/issues{path}", headers=outsider)
        missing = http.request(method, f"/api/v1/repos/ann/secrex/issues{path}", headers=outsider)
        assert hidden.status_code == missing.status_code == 404, (method, path)
        assert hidden.content == missing.content.replace(b"secrex", b"secret")
    download = str(made.browser_download_url)
    assert http.get(download, headers=outsider).status_code == 404
    ben = {"Authorization": f"token {token_for(http, 'ben')}"}  # a reader of it
    assert http.get(download, headers=ben).content == b"secret"
    assert _rows(forge) == 2


def test_bad_uploads_and_ids_leave_nothing(forge: Forge, http: httpx.Client) -> None:
    auth = {"Authorization": f"token {token_for(http, 'ann')}"}
    url = f"{ISSUES}/1/assets"
    nameless = http.post(
        url, content=b"x", headers={**auth, "Content-Type": "application/octet-stream"}
    )
    assert nameless.status_code == 422
    assert http.post(url, files={"other": ("a.bin", b"x")}, headers=auth).status_code == 422
    assert http.post(url, json={"name": "x"}, headers=auth).status_code == 422
    forge.attachments.max_bytes = 10
    try:
        big = http.post(url, files={"attachment": ("big.bin", b"x" * 100)}, headers=auth)
        assert big.status_code == 413
    finally:
        forge.attachments.max_bytes = forge.settings.attachment_max_bytes
    forge.attachments.types = (".png", "text/plain")
    try:
        refused = http.post(url, files={"attachment": ("tool.exe", b"MZ")}, headers=auth)
        assert refused.status_code == 415
        fine = http.post(url, files={"attachment": ("ok.txt", b"fine")}, headers=auth)
        assert fine.status_code == 201, fine.text
    finally:
        forge.attachments.types = forge.settings.attachment_types
    made = fine.json()
    elsewhere = http.post(
        "/api/v1/repos/ann/secret/issues/1/assets",
        files={"attachment": ("e.txt", b"elsewhere")},
        headers=auth,
    ).json()
    comment = _comment_id(forge, "ann", "plans", 1)
    for bad in (
        f"{ISSUES}/999/assets",
        f"{ISSUES}/abc/assets",
        f"{ISSUES}/1/assets/999",
        f"{ISSUES}/1/assets/abc",
        f"{ISSUES}/1/assets/99999999999999999999",
        f"{ISSUES}/2/assets/{made['id']}",  # another issue's file
        f"{ISSUES}/comments/{comment}/assets/{made['id']}",  # the issue's, not the comment's
        f"{ISSUES}/comments/999/assets",
        f"{ISSUES}/1/assets/{elsewhere['id']}",  # another repository's issue #1's
    ):
        assert http.get(bad, headers=auth).status_code == 404, bad
    gone = http.post(f"{ISSUES}/999/assets", files={"attachment": ("a", b"x")}, headers=auth)
    assert gone.status_code == 404
    assert _rows(forge) == 2
    assert len(list(forge.store.every())) == 2
    assert list(forge.store.tmp.iterdir()) == []
