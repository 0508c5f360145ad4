"""Webhooks of releases and tags, delivered to a real receiver on loopback as Forgejo sends
them: ``release`` (published, updated, deleted; nothing for a draft), ``create`` and
``delete`` of tags made through the API, by publishing a release and by a real ``git push``,
a private repository's hook, and the event chosen in the API and the settings form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import support.webhooks
from falcon import testing
from support.accounts import Browser
from support.api import token_for
from support.forges import wait_for
from support.webhooks import FAST, Receiver, Site, _commit, _site, git

from floorless.core.errors import BadRequest
from floorless.web.app import create_app
from floorless.webhooks.hooks import check_events

receiver = support.webhooks.receiver  # the shared fixture

pytestmark = pytest.mark.network

ZERO = "0" * 40


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    yield from _site(tmp_path, webhook_allowed_hosts=("loopback",), **FAST)


def _pushed(site: Site, tmp_path: Path, repo: str = "ann/plans") -> tuple[Path, str, str]:
    """A checkout whose main is pushed to ``repo`` over HTTP: its path, remote and commit."""
    work = tmp_path / "work"
    if not work.exists():
        git(tmp_path, "init", "-q", "-b", "main", str(work))
        (work / "a.txt").write_text("a\n")
        _commit(work, "First", 1_700_000_000)
    remote = site.url.replace("http://", f"http://ann:{site.token}@") + f"/{repo}.git"
    git(work, "push", "-q", remote, "main")
    return work, remote, git(work, "rev-parse", "HEAD")


def _settled(site: Site) -> None:
    """Every event worked out and every delivery sent."""
    wait_for(site.forge.hook_events.idle)
    wait_for(site.forge.webhooks.idle)


def _events(got: list[Any]) -> list[tuple[str, str]]:
    return sorted(
        (r.headers["X-Forgejo-Event"], r.json.get("action") or r.json["ref"]) for r in got
    )


def test_release_events_as_forgejo_sends_them(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/rel", "content_type": "json"},
        events=["release"],
    )
    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/refs", "content_type": "json"},
        events=["create", "delete"],
    )
    _, _, head = _pushed(site, tmp_path)
    wait_for(lambda: len(receiver.got) == 1)  # the branch main's create
    _settled(site)
    receiver.got.clear()
    ben = site.forge.accounts.require("ben")
    site.forge.policy.set_collaborator(site.forge.registry.get("ann", "plans"), ben, "write")
    ann_headers = {"Authorization": f"token {site.token}"}
    ben_headers = {"Authorization": f"token {token_for(site.http, 'ben')}"}
    releases = "/api/v1/repos/ann/plans/releases"

    # a draft made and edited sends nothing, and makes no tag
    draft = site.http.post(
        releases, headers=ann_headers, json={"tag_name": "v0.9", "name": "Soon", "draft": True}
    )
    assert draft.status_code == 201, draft.text
    edited = site.http.patch(
        f"{releases}/{draft.json()['id']}", headers=ann_headers, json={"body": "notes"}
    )
    assert edited.status_code == 200, edited.text
    # a release made (not a draft): published, and its new tag made
    made = site.http.post(
        releases,
        headers=ann_headers,
        json={"tag_name": "v1.0", "target_commitish": "main", "name": "One", "body": "First"},
    )
    assert made.status_code == 201, made.text
    release_id = made.json()["id"]
    wait_for(lambda: len(receiver.got) == 2)
    _settled(site)
    assert len(receiver.got) == 2  # (the draft's changes came first: none was sent)
    (published,) = receiver.at("/rel")
    for prefix in ("X-Forgejo", "X-Gitea", "X-Gogs"):
        assert published.headers[f"{prefix}-Event"] == "release"
        assert published.headers[f"{prefix}-Event-Type"] == "release"
    payload = published.json
    assert sorted(payload) == ["action", "release", "repository", "sender"]
    assert payload["action"] == "published"
    shown = payload["release"]
    assert (shown["id"], shown["tag_name"], shown["name"], shown["body"]) == (
        release_id, "v1.0", "One", "First"
    )  # fmt: skip
    assert (shown["draft"], shown["prerelease"], shown["assets"]) == (False, False, [])
    assert shown["target_commitish"] == "main" and shown["author"]["login"] == "ann"
    # the release as the API returns it (its links named by the forge's own address)
    api = site.http.get(f"{releases}/{release_id}", headers=ann_headers).json()
    assert sorted(shown) == sorted(api)
    assert {k: v for k, v in shown.items() if not k.endswith("url") and k != "author"} == {
        k: v for k, v in api.items() if not k.endswith("url") and k != "author"
    }
    assert shown["html_url"] == _public(site) + "/ann/plans/releases/tag/v1.0"
    assert shown["assets"] == api["assets"] == []
    assert payload["repository"]["full_name"] == "ann/plans"
    assert payload["repository"]["id"] == site.forge.registry.get("ann", "plans").id
    assert payload["sender"]["login"] == "ann"
    (created,) = receiver.at("/refs")
    assert created.headers["X-Forgejo-Event"] == "create"
    assert {k: created.json[k] for k in ("sha", "ref", "ref_type")} == {
        "sha": head, "ref": "v1.0", "ref_type": "tag"
    }  # fmt: skip
    assert created.json["sender"]["login"] == "ann"
    assert created.json["repository"]["full_name"] == "ann/plans"

    # a file attached, then the release edited by another writer: updated, with the file
    asset = site.http.post(
        f"{releases}/{release_id}/assets?name=tool.bin",
        headers={**ben_headers, "Content-Type": "application/octet-stream"},
        content=b"\x7fELF tool",
    )
    assert asset.status_code == 201, asset.text
    renamed = site.http.patch(
        f"{releases}/{release_id}", headers=ben_headers, json={"name": "One, renamed"}
    )
    assert renamed.status_code == 200, renamed.text
    wait_for(lambda: len(receiver.at("/rel")) == 2)
    updated = receiver.at("/rel")[1].json
    assert updated["action"] == "updated"
    assert updated["release"]["name"] == "One, renamed"
    assert [(a["name"], a["size"], a["id"]) for a in updated["release"]["assets"]] == [
        ("tool.bin", 9, asset.json()["id"])
    ]
    assert updated["release"]["assets"][0]["browser_download_url"].endswith(
        "/ann/plans/releases/download/v1.0/tool.bin"
    )
    assert updated["sender"]["login"] == "ben"  # who edited it
    assert updated["release"]["author"]["login"] == "ann"  # who published it

    # the draft published: published, and its tag made at the default branch
    out = site.http.patch(
        f"{releases}/{draft.json()['id']}", headers=ann_headers, json={"draft": False}
    )
    assert out.status_code == 200, out.text
    wait_for(lambda: len(receiver.at("/rel")) == 3 and len(receiver.at("/refs")) == 2)
    again = receiver.at("/rel")[2].json
    assert (again["action"], again["release"]["tag_name"]) == ("published", "v0.9")
    assert again["release"]["body"] == "notes" and again["release"]["draft"] is False
    tagged = receiver.at("/refs")[1].json
    assert (tagged["ref"], tagged["ref_type"], tagged["sha"]) == ("v0.9", "tag", head)

    # deleted: the release as it was, its file included; its tag stays (no delete event)
    gone = site.http.delete(f"{releases}/{release_id}", headers=ben_headers)
    assert gone.status_code == 204, gone.text
    wait_for(lambda: len(receiver.at("/rel")) == 4)
    deleted = receiver.at("/rel")[3].json
    assert deleted["action"] == "deleted" and deleted["sender"]["login"] == "ben"
    assert deleted["release"]["id"] == release_id
    assert deleted["release"]["name"] == "One, renamed"
    assert [a["name"] for a in deleted["release"]["assets"]] == ["tool.bin"]

    # a draft deleted sends nothing; nor does a release made a draft again, or edited so
    later = site.http.post(releases, headers=ann_headers, json={"tag_name": "v2", "draft": True})
    assert later.status_code == 201, later.text
    assert (
        site.http.delete(f"{releases}/{later.json()['id']}", headers=ann_headers).status_code == 204
    )
    back = site.http.patch(
        f"{releases}/{draft.json()['id']}", headers=ann_headers, json={"draft": True}
    )
    assert back.status_code == 200, back.text
    hidden = site.http.patch(
        f"{releases}/{draft.json()['id']}", headers=ann_headers, json={"name": "hidden"}
    )
    assert hidden.status_code == 200, hidden.text
    # ... as the next published change shows: it is the only one sent after them
    assert site.http.post(releases, headers=ann_headers, json={"tag_name": "v3"}).status_code == 201
    wait_for(lambda: len(receiver.at("/rel")) == 5)
    _settled(site)
    assert [r.json["action"] for r in receiver.at("/rel")] == [
        "published", "updated", "published", "deleted", "published"
    ]  # fmt: skip
    assert receiver.at("/rel")[4].json["release"]["tag_name"] == "v3"
    assert _events(receiver.at("/refs")) == [
        ("create", "v0.9"),
        ("create", "v1.0"),
        ("create", "v3"),
    ]
    logged = [
        d.state
        for hook in site.forge.webhooks.hooks(_repo_id(site))
        for d in site.forge.webhooks.deliveries(hook)
    ]
    assert logged == ["delivered"] * 9  # main's create, four releases' and three tags' events


def _public(site: Site) -> str:
    """The forge's address as events name it, with no request to go by."""
    settings = site.forge.settings
    return settings.base_url.rstrip("/") or f"http://{settings.host}:{settings.port}"


def _repo_id(site: Site, name: str = "plans") -> int:
    return site.forge.registry.get("ann", name).id


def test_tags_made_and_deleted_through_the_api_and_by_git(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    site.hook(
        "ann/plans",
        config={"url": receiver.url + "/refs", "content_type": "json"},
        events=["create", "delete", "push", "release"],
    )
    work, remote, head = _pushed(site, tmp_path)
    wait_for(lambda: len(receiver.got) == 2)  # main: create, push
    _settled(site)
    receiver.got.clear()
    headers = {"Authorization": f"token {site.token}"}
    tags = "/api/v1/repos/ann/plans/tags"

    # through the API: a lightweight tag and an annotated one, then both deleted
    light = site.http.post(tags, headers=headers, json={"tag_name": "v1", "target": "main"})
    assert light.status_code == 201, light.text
    signed = site.http.post(tags, headers=headers, json={"tag_name": "v2", "message": "Two"})
    assert signed.status_code == 201, signed.text
    wait_for(lambda: len(receiver.got) == 4)
    _settled(site)
    assert _events(receiver.got) == [
        ("create", "v1"), ("create", "v2"), ("push", "refs/tags/v1"), ("push", "refs/tags/v2")
    ]  # fmt: skip
    made = {r.json["ref"]: r.json for r in receiver.got if r.headers["X-Forgejo-Event"] == "create"}
    for name in ("v1", "v2"):
        assert {k: made[name][k] for k in ("sha", "ref", "ref_type")} == {
            "sha": head, "ref": name, "ref_type": "tag"
        }  # fmt: skip
        assert made[name]["sender"]["login"] == "ann"
        assert made[name]["repository"]["full_name"] == "ann/plans"
    pushes = {r.json["ref"]: r.json for r in receiver.got if r.headers["X-Forgejo-Event"] == "push"}
    annotated = (
        site.forge.live.open(site.forge.registry.get("ann", "plans"))
        .references["refs/tags/v2"]
        .target
    )
    assert (pushes["refs/tags/v2"]["before"], pushes["refs/tags/v2"]["after"]) == (
        ZERO, str(annotated)
    )  # fmt: skip
    assert pushes["refs/tags/v1"]["after"] == head
    assert pushes["refs/tags/v1"]["head_commit"]["id"] == head
    receiver.got.clear()
    for name in ("v1", "v2"):
        assert site.http.delete(f"{tags}/{name}", headers=headers).status_code == 204
    wait_for(lambda: len(receiver.got) == 2)
    _settled(site)
    assert _events(receiver.got) == [("delete", "v1"), ("delete", "v2")]
    for got in receiver.got:
        assert {k: got.json[k] for k in ("ref_type", "pusher_type")} == {
            "ref_type": "tag", "pusher_type": "user"
        }  # fmt: skip
        assert sorted(got.json) == ["pusher_type", "ref", "ref_type", "repository", "sender"]
        assert got.json["sender"]["login"] == "ann"
    receiver.got.clear()

    # by a real git push, and git push --delete
    git(work, "tag", "-a", "v3", "-m", "Three")
    git(work, "push", "-q", remote, "v3")
    wait_for(lambda: len(receiver.got) == 2)
    _settled(site)
    assert _events(receiver.got) == [("create", "v3"), ("push", "refs/tags/v3")]
    (pushed,) = [r.json for r in receiver.got if r.headers["X-Forgejo-Event"] == "create"]
    assert (pushed["sha"], pushed["ref_type"], pushed["sender"]["login"]) == (head, "tag", "ann")
    receiver.got.clear()
    git(work, "push", "-q", "--delete", remote, "v3")
    wait_for(lambda: len(receiver.got) == 1)
    _settled(site)
    (dropped,) = receiver.got
    assert dropped.headers["X-Forgejo-Event"] == "delete"
    assert {k: dropped.json[k] for k in ("ref", "ref_type", "pusher_type")} == {
        "ref": "v3", "ref_type": "tag", "pusher_type": "user"
    }  # fmt: skip
    assert dropped.json["sender"]["login"] == "ann"
    # a tag a release belongs to is refused (409) and sends nothing
    release = site.http.post(
        "/api/v1/repos/ann/plans/releases", headers=headers, json={"tag_name": "v4"}
    )
    assert release.status_code == 201, release.text
    wait_for(lambda: len(receiver.got) == 4)  # v4: create, push, release published
    assert site.http.delete(f"{tags}/v4", headers=headers).status_code == 409
    git(work, "fetch", "-q", remote, "refs/tags/v4:refs/tags/v4")
    git(work, "push", "-q", remote, ":refs/tags/v4")  # over git it is the pusher's call
    wait_for(lambda: len(receiver.got) == 5)
    _settled(site)
    assert _events(receiver.got[1:]) == [
        ("create", "v4"), ("delete", "v4"), ("push", "refs/tags/v4"), ("release", "published")
    ]  # fmt: skip


def test_a_private_repositorys_hook_hears_its_releases(
    site: Site, receiver: Receiver, tmp_path: Path
) -> None:
    site.forge.registry.create("ann", "secret", private=True)
    site.hook(
        "ann/secret",
        config={"url": receiver.url + "/secret", "content_type": "json"},
        events=["release", "create"],
    )
    _, _, head = _pushed(site, tmp_path, "ann/secret")
    wait_for(lambda: len(receiver.got) == 1)  # main's create
    receiver.got.clear()
    headers = {"Authorization": f"token {site.token}"}
    made = site.http.post(
        "/api/v1/repos/ann/secret/releases",
        headers=headers,
        json={"tag_name": "v1", "name": "Hidden", "prerelease": True},
    )
    assert made.status_code == 201, made.text
    wait_for(lambda: len(receiver.got) == 2)
    _settled(site)
    release = next(r.json for r in receiver.got if r.headers["X-Forgejo-Event"] == "release")
    assert (release["action"], release["release"]["name"]) == ("published", "Hidden")
    assert release["release"]["prerelease"] is True
    assert release["repository"]["full_name"] == "ann/secret"
    assert release["repository"]["private"] is True
    tag = next(r.json for r in receiver.got if r.headers["X-Forgejo-Event"] == "create")
    assert (tag["ref"], tag["sha"]) == ("v1", head)


def test_the_events_are_chosen_in_the_api_and_the_settings_form(
    site: Site, receiver: Receiver
) -> None:
    assert check_events(["release", "create", "delete"]) == ("release", "create", "delete")
    with pytest.raises(BadRequest):
        check_events(["releases"])
    made = site.hook(
        "ann/plans",
        config={"url": receiver.url + "/x", "content_type": "json"},
        events=["release", "create", "delete"],
    )
    assert made["events"] == ["release", "create", "delete"]
    shown = site.http.get(
        f"/api/v1/repos/ann/plans/hooks/{made['id']}",
        headers={"Authorization": f"token {site.token}"},
    )
    assert shown.json()["events"] == ["release", "create", "delete"]

    browser = Browser(testing.TestClient(create_app(site.forge)))
    browser.sign_in("ann")
    page = browser.get("/ann/plans/settings/hooks").text
    for event in ("release", "create", "delete"):
        assert f'name="event-{event}"' in page
    fields = {
        "action": "add",
        "url": receiver.url + "/form",
        "content_type": "json",
        "http_method": "POST",
        "secret": "",
        "branch_filter": "",
        "event-release": "on",
        "event-delete": "on",
        "active": "on",
    }
    assert browser.post("/ann/plans/settings/hooks", fields).status_code == 303
    added = [h for h in site.forge.webhooks.hooks(_repo_id(site)) if h.url.endswith("/form")]
    assert [sorted(h.events) for h in added] == [["delete", "release"]]
