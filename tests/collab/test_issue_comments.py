"""Editing and deleting comments: their authors may, and whoever may push; an edited comment
says so; each change one transaction; another issue's comment, or none, is refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import start_forge
from support.issues import open_issue, person

from floorless.forge import Forge
from floorless.web.app import create_app


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    forge.policy.set_collaborator(plans, forge.accounts.require("ben"), "write")
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def change(browser: Browser, number: int, **fields: str) -> testing.Result:
    page = f"/ann/plans/issues/{number}"
    return browser.post(page, fields, csrf=csrf_of(browser.get(page).text))


def comment(browser: Browser, number: int, body: str) -> int:
    result = change(browser, number, action="comment", body=body)
    found = re.search(r"#issuecomment-(\d+)$", result.headers["location"])
    assert result.status_code == 303 and found
    return int(found.group(1))


def test_authors_and_writers_edit_and_delete_comments(
    client: testing.TestClient, forge: Forge
) -> None:
    ben, cat, dan = person(client, "ben"), person(client, "cat"), person(client, "dan")
    number = open_issue(cat, "ann/plans", "Question")
    other = open_issue(dan, "ann/plans", "Another")
    mine = comment(cat, number, "first words")
    page = cat.get(f"/ann/plans/issues/{number}").text
    assert 'value="edit_comment"' in page and "edited</span>" not in page
    assert 'value="edit_comment"' not in dan.get(f"/ann/plans/issues/{number}").text

    edited = change(cat, number, action="edit_comment", comment=str(mine), body="better words")
    assert edited.status_code == 303
    assert edited.headers["location"] == f"/ann/plans/issues/{number}#issuecomment-{mine}"
    page = dan.get(f"/ann/plans/issues/{number}").text
    assert "better words" in page and "first words" not in page and "edited</span>" in page

    # someone else, reading only: refused; a writer: allowed
    refused = change(dan, number, action="edit_comment", comment=str(mine), body="mine now")
    assert refused.status_code == 403
    assert change(dan, number, action="delete_comment", comment=str(mine)).status_code == 403
    tidied = change(ben, number, action="edit_comment", comment=str(mine), body="tidied, see #2")
    assert tidied.status_code == 303
    assert "tidied" in cat.get(f"/ann/plans/issues/{number}").text
    # an edit's references count as the comment's
    mentions = [e for e in forge.issues.timeline(forge.issues.get("ann", "plans", other))]
    assert [(e.kind, e.body) for e in mentions] == [("ref", f"ann/plans#{number}")]

    # another issue's comment, none, or nonsense
    assert change(ben, other, action="edit_comment", comment=str(mine), body="x").status_code == 404
    assert change(ben, number, action="edit_comment", comment="99999", body="x").status_code == 404
    assert change(ben, number, action="edit_comment", comment="x", body="x").status_code == 400
    empty = change(cat, number, action="edit_comment", comment=str(mine), body="  ")
    assert empty.status_code == 400

    second = comment(cat, number, "to go")
    assert forge.issues.get("ann", "plans", number).comments == 2
    assert change(cat, number, action="delete_comment", comment=str(second)).status_code == 303
    assert change(ben, number, action="delete_comment", comment=str(mine)).status_code == 303
    issue = forge.issues.get("ann", "plans", number)
    assert issue.comments == 0
    assert [e for e in forge.issues.timeline(issue) if e.kind == "comment"] == []
    assert "tidied" not in cat.get(f"/ann/plans/issues/{number}").text


def test_a_private_repositorys_comments_answer_as_missing_ones(
    client: testing.TestClient, forge: Forge
) -> None:
    ann, cat = person(client, "ann"), person(client, "cat")
    forge.registry.create("ann", "secret", private=True)
    number = open_issue(ann, "ann/secret", "Quiet")
    page = f"/ann/secret/issues/{number}"
    result = ann.post(page, {"action": "comment", "body": "hush"}, csrf=csrf_of(ann.get(page).text))
    found = re.search(r"issuecomment-(\d+)", result.headers["location"])
    assert found
    token = csrf_of(cat.get("/ann/plans/issues/new").text)
    fields = {"action": "delete_comment", "comment": found.group(1)}
    assert cat.post(page, fields, csrf=token).status_code == 404
    assert cat.post(page.replace("secret", "nothing"), fields, csrf=token).status_code == 404
    assert forge.issues.get("ann", "secret", number).comments == 1
