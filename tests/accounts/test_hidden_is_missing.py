"""A repository someone may not read answers them exactly as one that does not exist: for every
route with a repository in its path (read from the app's own route table, so that a new route
is covered the day it is added), every method, every kind of caller who may not read it
(anonymous, signed in by session, a token, a read-only token, HTTP Basic) and hostile input
(``..``, encoded slashes, NUL, bytes that are not UTF-8, numbers past any id, unknown refs,
malformed JSON, wrong types). Status, headers and body must be the same, once the names are
swapped; and no input, hidden or not, is a 500.

The repositories are real: alice/demo (private), reader/cpyq (its fork, private by birth),
alice/pub (public) and reader/hdnz (pub's fork, made private), over the real app."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import asyncssh
import pytest
from falcon import testing
from support.accounts import PASSWORD, Browser, csrf_of
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git_text

from floorless.forge import Forge
from floorless.web.app import create_app

# A URL for every route template with a repository in its path: the part after
# /{owner}/{repo} (or /api/v1/repos/{owner}/{repo}), naming things the hidden repository has,
# so that a leak past the repository's check would have something to show. {main} is main's
# commit id, {tree} its tree's.
PAGES = {
    "": ["", "?go-get=1"],
    "/src": ["/src"],
    "/src/{kind}": ["/src/main"],
    "/src/{kind}/{tail:path}": ["/src/branch/main/README.md", "/src/tag/v1.0/docs"],
    "/raw/{kind}": ["/raw/main"],
    "/raw/{kind}/{tail:path}": ["/raw/branch/main/README.md", "/raw/commit/{main}/README.md"],
    "/media/{kind}": ["/media/main"],
    "/media/{kind}/{tail:path}": ["/media/branch/main/README.md"],
    "/commits": ["/commits"],
    "/commits/{kind}": ["/commits/main"],
    "/commits/{kind}/{tail:path}": ["/commits/branch/main", "/commits/branch/main/docs"],
    "/commit/{sha}": ["/commit/{main}", "/commit/{main}.diff", "/commit/main"],
    "/commit/{sha}/-/diff/{tail:path}": ["/commit/{main}/-/diff/README.md"],
    "/commit/{sha}/-/lines/{tail:path}": ["/commit/{main}/-/lines/README.md?start=1&end=3"],
    "/commit/{sha}/{tail:path}": ["/commit/feature/x"],
    "/find/{kind}": ["/find/main?q=read"],
    "/find/{kind}/{tail:path}": ["/find/branch/main?q=read"],
    "/tree/{ref}": ["/tree/main"],
    "/tree/{ref}/{tail:path}": ["/tree/main/docs"],
    "/blob/{ref}": ["/blob/main"],
    "/blob/{ref}/{tail:path}": ["/blob/main/README.md"],
    "/blame/{kind}": ["/blame/main"],
    "/blame/{kind}/{tail:path}": ["/blame/branch/main/README.md"],
    "/settings": ["/settings"],
    "/settings/hooks": ["/settings/hooks"],
    "/settings/hooks/{hook}": ["/settings/hooks/1"],
    "/settings/keys": ["/settings/keys"],
    "/fork": ["/fork"],
    "/issues": ["/issues?state=all"],
    "/issues/new": ["/issues/new"],
    "/issues/attachments": ["/issues/attachments"],
    "/issues/{number}": ["/issues/1"],
    "/issues/{number}/triage": ["/issues/1/triage"],
    "/labels": ["/labels"],
    "/milestones": ["/milestones"],
    "/milestone/{milestone}": ["/milestone/1"],
    "/pulls/{number}/merge": ["/pulls/2/merge"],
    "/pulls": ["/pulls?state=all"],
    "/pulls/{number}": ["/pulls/2", "/pulls/2.diff", "/pulls/2.patch"],
    "/pulls/{number}/commits": ["/pulls/2/commits"],
    "/pulls/{number}/files": ["/pulls/2/files"],
    "/compare": ["/compare"],
    "/compare/{spec:path}": ["/compare/release...main", "/compare/release...main.patch"],
    "/pulls/{number}/files/reviews/comments": ["/pulls/2/files/reviews/comments"],
    "/pulls/{number}/files/reviews/comments/{comment}": ["/pulls/2/files/reviews/comments/1"],
    "/pulls/{number}/files/reviews/submit": ["/pulls/2/files/reviews/submit"],
    "/search": ["/search?q=README"],
    "/branches": ["/branches"],
    "/tags": ["/tags"],
    "/tags.atom": ["/tags.atom"],
    "/tags.rss": ["/tags.rss"],
    "/releases": ["/releases", "/releases?page=2"],
    "/releases.atom": ["/releases.atom"],
    "/releases.rss": ["/releases.rss"],
    "/releases/latest": ["/releases/latest"],
    "/releases/tag/{tail:path}": ["/releases/tag/v1.0", "/releases/tag/release"],
    "/releases/new": ["/releases/new"],
    "/releases/edit/{tail:path}": ["/releases/edit/v1.0"],
    "/releases/download/{tail:path}": ["/releases/download/v1.0/notes.txt"],
    "/archive/{tail:path}": ["/archive/main.tar.gz", "/archive/main.zip"],
    "/atom/branch/{tail:path}": ["/atom/branch/main"],
    "/rss/branch/{tail:path}": ["/rss/branch/main"],
    "/-/last/{sha}": ["/-/last/{main}"],
    "/-/last/{sha}/{tail:path}": ["/-/last/{main}/docs"],
    "/-/refs": ["/-/refs?for=blame&at=README.md"],
    "/-/paths/{tree}": ["/-/paths/{tree}"],
    "/info/refs": [".git/info/refs?service=git-upload-pack", "/info/refs?service=git-receive-pack"],
    "/git-upload-pack": [".git/git-upload-pack"],
    "/git-receive-pack": [".git/git-receive-pack"],
    "/info/lfs/objects/batch": [".git/info/lfs/objects/batch"],
    "/info/lfs/objects/{oid}": [".git/info/lfs/objects/{lfs}"],
    "/info/lfs/verify": [".git/info/lfs/verify"],
    "/info/lfs/locks": [".git/info/lfs/locks", ".git/info/lfs/locks?path=model.bin"],
    "/info/lfs/locks/verify": [".git/info/lfs/locks/verify"],
    "/info/lfs/locks/{id}/unlock": [".git/info/lfs/locks/1/unlock"],
}
LFS_OID = hashlib.sha256(b"a model").hexdigest()
LFS_BATCH = {"oid": LFS_OID, "size": 7}
API = {
    "": [""],
    "/branches": ["/branches"],
    "/branches/{tail:path}": ["/branches/main", "/branches/feature/x"],
    "/tags": ["/tags"],
    "/tags/{tail:path}": ["/tags/v1.0"],
    "/commits": ["/commits?sha=main&path=README.md"],
    "/commits/{tail:path}": ["/commits/main/status", "/commits/main/statuses"],
    "/git/commits/{sha}": ["/git/commits/{main}"],
    "/git/refs": ["/git/refs"],
    "/git/refs/{tail:path}": ["/git/refs/heads/main"],
    "/git/trees/{sha}": ["/git/trees/{tree}?recursive=true"],
    "/git/blobs/{sha}": ["/git/blobs/{blob}"],
    "/contents": ["/contents?ref=main"],
    "/contents/{tail:path}": ["/contents/README.md?ref=main"],
    "/raw/{tail:path}": ["/raw/README.md?ref=main", "/raw/main/README.md"],
    "/media/{tail:path}": ["/media/README.md"],
    "/archive/{tail:path}": ["/archive/main.tar.gz"],
    "/compare/{tail:path}": ["/compare/release...main"],
    "/collaborators": ["/collaborators"],
    "/collaborators/{user}": ["/collaborators/reader"],
    "/collaborators/{user}/permission": ["/collaborators/reader/permission"],
    "/assignees": ["/assignees"],
    "/forks": ["/forks"],
    "/pulls": ["/pulls?state=all"],
    "/pulls/{index}": ["/pulls/2"],
    "/pulls/{index}.{diff_type}": ["/pulls/2.diff", "/pulls/2.patch"],
    "/pulls/{index}/commits": ["/pulls/2/commits"],
    "/pulls/{index}/files": ["/pulls/2/files"],
    "/pulls/{index}/merge": ["/pulls/2/merge"],
    "/pulls/{index}/reviews": ["/pulls/2/reviews"],
    "/pulls/{index}/reviews/{review}": ["/pulls/2/reviews/1"],
    "/pulls/{index}/reviews/{review}/comments": ["/pulls/2/reviews/1/comments"],
    "/pulls/{index}/{head}": ["/pulls/release/main"],
    "/issues": ["/issues?state=all"],
    "/issues/comments": ["/issues/comments"],
    "/issues/comments/{id}": ["/issues/comments/1"],
    "/issues/comments/{id}/assets": ["/issues/comments/1/assets"],
    "/issues/comments/{id}/assets/{asset}": ["/issues/comments/1/assets/3"],
    "/issues/{index}": ["/issues/1"],
    "/issues/{index}/assets": ["/issues/1/assets"],
    "/issues/{index}/assets/{asset}": ["/issues/1/assets/2"],
    "/issues/{index}/comments": ["/issues/1/comments"],
    "/issues/{index}/labels": ["/issues/1/labels"],
    "/issues/{index}/labels/{id}": ["/issues/1/labels/1"],
    "/issues/{index}/timeline": ["/issues/1/timeline"],
    "/labels": ["/labels"],
    "/labels/{id}": ["/labels/1"],
    "/milestones": ["/milestones"],
    "/milestones/{id}": ["/milestones/1"],
    "/hooks": ["/hooks"],
    "/hooks/{id}": ["/hooks/1"],
    "/hooks/{id}/tests": ["/hooks/1/tests"],
    "/keys": ["/keys"],
    "/keys/{id}": ["/keys/1"],
    "/statuses/{sha}": ["/statuses/{main}"],
    "/branch_protections": ["/branch_protections"],
    "/branch_protections/{name:path}": ["/branch_protections/main"],
    "/releases": ["/releases", "/releases?draft=true"],
    "/releases/latest": ["/releases/latest"],
    "/releases/tags/{tag}": ["/releases/tags/v1.0"],
    "/releases/{id}": ["/releases/1"],
    "/releases/{id}/assets": ["/releases/1/assets"],
    "/releases/{id}/assets/{asset}": ["/releases/1/assets/1"],
}
PAGE_PREFIX = "/{owner}/{repo}"
API_PREFIX = "/api/v1/repos/{owner}/{repo}"

# Hostile values for a route's own parameters (the part after the repository).
HOSTILE_PATHS = [
    "..%2f..%2f..%2fetc%2fpasswd",
    "%2e%2e/%2e%2e/README.md",
    "main/%00",
    "%ff%fe/x",
    "nope/README.md",
    "99999999999999999999999999",
    "main/README.md.patch",
]
HOSTILE_IDS = ["99999999999999999999999999", "-1", "0", "abc", "%00", "%ff", "..%2f.."]
HOSTILE_QUERY = (
    "page=abc&limit=-1&state=bogus&q=%00&type=x&ref=nope&start=x&end=99999999999999999999"
    "&sha=zz&path=..%2f&since=nope&before=x&for=blame&at=%ff&w=1&style=x&labels=%ff"
    "&milestone=abc&poster=%00&draft=maybe&recursive=maybe&stat=x&verification=%ff&files=no"
)
JSON_BODIES = [
    b"{}",
    b"{",
    b"[]",
    b"\xff\xfe",
    json.dumps(
        {
            "title": 5,
            "body": [],
            "name": 1,
            "state": 7,
            "labels": "x",
            "content": 5,
            "new_branch_name": 1,
            "config": "x",
            "active": "yes",
            "events": 5,
            "permission": 3,
            "Do": 1,
            "branch": 7,
            "message": [],
            "sha": 1,
            "context": 5,
            "target_url": 1,
            "head": 1,
            "base": [],
            "due_on": 5,
        }
    ).encode(),
    json.dumps(
        {
            "title": "t",
            "body": "b",
            "name": "x",
            "content": "aGk=",
            "state": "success",
            "Do": "merge",
            "new_branch_name": "z",
            "head": "main",
            "base": "release",
            "type": "gitea",
            "config": {"url": "http://x.example.org", "content_type": "json"},
            "labels": [1],
            "color": "#ff0000",
            "event": "COMMENT",
        }
    ).encode(),
]
GIT = "application/x-git-upload-pack-request"


@dataclass
class Site:
    forge: Forge
    client: testing.TestClient
    main: str
    tree: str
    blob: str
    callers: dict[str, dict[str, str]]  # who may not read the hidden repositories
    owner: dict[str, dict[str, str]]  # alice, who may: by token and by session
    csrf: dict[str, str]  # each session's form token, by caller
    unreached: list[str] = field(default_factory=list)  # examples the owner gets 404 for

    def url(self, template: str, repo: str) -> str:
        return (
            template.replace("{owner}/{repo}", repo)
            .replace("{main}", self.main)
            .replace("{tree}", self.tree)
            .replace("{blob}", self.blob)
            .replace("{lfs}", LFS_OID)
        )

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None = None,
        kind: str | None = None,
    ) -> testing.Result:
        path, _, query = url.partition("?")
        sent = dict(headers)
        if kind:
            sent["Content-Type"] = kind
        if "/git-" in path or "/info/refs" in path:
            sent["Git-Protocol"] = "version=2"
        return self.client.simulate_request(
            method, path, query_string=query, headers=sent, body=body
        )


def _session(client: testing.TestClient, name: str) -> tuple[dict[str, str], str]:
    browser = Browser(client)
    assert browser.sign_in(name).status_code == 303
    csrf = csrf_of(browser.get("/-/new").text)
    jar = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    return {"Cookie": jar, "X-Csrf-Token": csrf}, csrf


@pytest.fixture(scope="module")
def site(fixture_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("hidden")
    shutil.copytree(fixture_root / "alice" / "demo.git", root / "repos" / "alice" / "demo.git")
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    accounts = forge.accounts
    people = {
        name: accounts.create_user(name, f"{name}@example.org", PASSWORD)
        for name in ("alice", "reader", "other")
    }
    forge.registry.set_private("alice", "demo", True)
    demo = forge.registry.get("alice", "demo")
    forge.policy.set_collaborator(demo, people["reader"], "read")
    issue = forge.issues.create("alice", "demo", people["alice"], "A question", "")
    answer = forge.issues.comment(issue, people["alice"], "An answer")
    forge.protections.create(demo, "main", {})
    forge.webhooks.create(demo.id, None, url="https://hooks.example.org/in", active=False)
    deploy_key = asyncssh.generate_private_key("ssh-ed25519").export_public_key()
    forge.keys.add_deploy_key(demo.id, deploy_key.decode(), "ci", True, people["alice"])
    forge.triage.save_milestone("alice", "demo", None, "v1", "", "")
    forge.triage.create_label("alice", "demo", "bug", "#ff0000")
    main = git_text(demo.path, "rev-parse", "main")
    pull = forge.pulls.create(
        "alice", "demo", people["alice"], "Bring release up", "", "release",
        ("alice", "demo", "main"), main,
    )  # fmt: skip
    forge.moves.set_pull_ref(demo, pull.number, main)
    forge.reviews.submit(forge.pulls.get("alice", "demo", 2), people["reader"], "comment", "Fine")
    model = iter([b"a model", b""])
    forge.lfs.upload(demo.id, LFS_OID, 7, lambda _: next(model))
    forge.locks.create(demo.id, people["alice"].id, "model.bin")
    release = forge.releases.create(demo, people["alice"].id, "v1.0", title="One", note="Notes")
    notes = iter([b"the notes", b""])
    forge.attachments.upload(
        demo.id, people["alice"].id, "notes.txt", lambda _: next(notes), release_id=release.id
    )
    # attachment 2, the issue's own, and 3, its comment's
    for name, comment_id in (("screen.png", None), ("log.txt", answer)):
        sent = iter([b"what it shows", b""])
        forge.attachments.upload(
            demo.id,
            people["alice"].id,
            name,
            lambda _, sent=sent: next(sent),
            issue_id=issue.id,
            comment_id=comment_id,
        )
    # a public repository with the same history, its fork made private
    pub = forge.registry.create("alice", "pub", private=False)
    subprocess.run(
        ["git", "--git-dir", str(pub.path), "fetch", "-q", str(demo.path),
         "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        check=True,
    )  # fmt: skip
    forge.moves.after_push(pub)
    client = testing.TestClient(create_app(forge))
    reader = Browser(client)
    assert reader.sign_in("reader").status_code == 303
    for parent, name in (("alice/demo", "cpyq"), ("alice/pub", "hdnz")):
        made = reader.post(f"/{parent}/fork", {"owner": "reader", "name": name})
        assert made.status_code == 303, made.text[:300]
    forge.lifecycle.set_private(forge.registry.get("reader", "hdnz"), True)
    assert forge.registry.get("reader", "cpyq").private
    wait_indexed(forge)
    session, csrf = _session(client, "other")
    owner_session, owner_csrf = _session(client, "alice")
    basic = base64.b64encode(f"other:{PASSWORD}".encode()).decode()
    callers = {
        "anonymous": {},
        "session": session,
        "token": {"Authorization": "token " + accounts.create_token(people["other"], "write")[0]},
        "read-token": {
            "Authorization": "token " + accounts.create_token(people["other"], "read")[0]
        },
        "basic": {"Authorization": "Basic " + basic},
    }
    owner = {
        "token": {"Authorization": "token " + accounts.create_token(people["alice"], "write")[0]},
        "session": owner_session,
    }
    tree = str(forge.live.open(demo)[main].tree_id)
    blob = git_text(demo.path, "rev-parse", "main:README.md")
    made = Site(
        forge, client, main, tree, blob, callers, owner, {"session": csrf, "owner": owner_csrf}
    )
    made.unreached = _unreached(made)  # before any test writes
    yield made
    forge.stop()


def _routes(site: Site) -> list[tuple[str, list[str]]]:
    """Every route template with a repository in it, and the methods it answers."""
    from falcon import inspect

    app = site.client.app
    return [
        (r.path, sorted({m.method for m in r.methods if not m.internal}))
        for r in inspect.inspect_routes(app)
        if "{repo}" in r.path
    ]


# (hidden, missing) pairs: names of the same length, so that only the name differs
PAIRS = [
    ("alice/demo", "alice/demx"),  # a private repository; one of its owner that is not
    ("alice/demo", "nobod/demo"),  # an owner who does not exist
    ("reader/cpyq", "reader/cpyx"),  # a private repository's fork
    ("reader/hdnz", "reader/hdnx"),  # a public repository's fork, made private
]
_SKIPPED = {"content-length", "server-timing", "date"}


def _shape(result: testing.Result, name: str, instead: str) -> tuple[object, ...]:
    """What a caller sees, with ``name`` (``owner/repo``) spelled as ``instead``, in whole and
    in parts, as the URL-encoded ``next=`` of a sign-in redirect spells it too."""
    swaps = list(zip(name.split("/"), instead.split("/"), strict=True))

    encoded = (quote(name, safe=""), quote(instead, safe=""))

    def swap(text: str) -> str:
        text = text.replace(*encoded)  # %2Falice%2Fdemo, where \b finds no word
        for old, new in swaps:
            text = re.sub(rf"\b{old}\b", new, text)
        return text

    headers = {
        k.lower(): swap(v)
        for k, v in result.headers.items()
        if k.lower() not in _SKIPPED and k.lower() != "set-cookie"
    }
    cookies = sorted(name for name in result.cookies)  # a fresh CSRF cookie's value is random
    body = result.content.replace(encoded[0].encode(), encoded[1].encode())
    for old, new in swaps:
        body = re.sub(rb"\b" + old.encode() + rb"\b", new.encode(), body)
    return result.status_code, headers, cookies, body


def _bodies(template: str, method: str, csrf: str) -> list[tuple[bytes | None, str | None]]:
    if method not in ("POST", "PUT", "PATCH", "DELETE"):
        return [(None, None)]
    if "/git-" in template:
        return [(b"0000", GIT), (b"garbage\xff", GIT)]
    if template.startswith("/api/"):
        return [(body, "application/json") for body in JSON_BODIES]
    if "/info/lfs/" in template:
        lfs = [*JSON_BODIES, json.dumps({"operation": "download", "objects": [LFS_BATCH]}).encode()]
        return [(body, "application/vnd.git-lfs+json") for body in lfs]
    form = "application/x-www-form-urlencoded"
    return [
        (f"csrf={csrf}&title=t&body=b&name=x&owner=other&action=close".encode(), form),
        (f"csrf={csrf}&%ff=%00&title=%ff&action=delete&confirm=alice/demo".encode(), form),
    ]


def _examples(template: str) -> list[str]:
    if template.startswith(API_PREFIX):
        return [API_PREFIX + tail for tail in API[template.removeprefix(API_PREFIX)]]
    return [PAGE_PREFIX + tail for tail in PAGES[template.removeprefix(PAGE_PREFIX)]]


def _hostile(template: str) -> list[str]:
    """URLs of ``template`` with each of its own parameters, in turn, made hostile."""
    found: list[str] = []
    for param in re.findall(r"\{(\w+)(?::path)?\}", template):
        if param in ("owner", "repo"):
            continue
        example = _examples(template)[0].partition("?")[0]
        values = (
            HOSTILE_PATHS
            if ":path" in template and param in ("tail", "spec", "name")
            else (HOSTILE_IDS)
        )
        # the example's segment(s) that stand for the parameter: its place in the template
        before, _, _ = template.partition("{" + param)
        depth = before.count("/")
        parts = example.split("/")
        for value in values:
            changed = [*parts[:depth], value]
            if ":path" not in template or not template.endswith(param + ":path}"):
                changed += parts[depth + 1 :]
            found.append("/".join(changed))
    return found


def test_every_repository_route_has_examples(site: Site) -> None:
    templates = {t for t, _ in _routes(site)}
    named = {PAGE_PREFIX + t for t in PAGES} | {API_PREFIX + t for t in API}
    # the API's /commits/{ref}/status(es) are served by /commits/{tail:path}
    assert templates == named


def _compare(
    site: Site,
    template: str,
    method: str,
    urls: list[str],
    queries: list[str],
    callers: tuple[str, ...] = (),
    pairs: list[tuple[str, str]] = PAIRS,
    bodies: int = 99,
) -> int:
    """Assert every hidden repository's answer is its missing twin's; how many pairs asked."""
    differences = []
    asked = 0
    for url in urls:
        for query in queries:
            u = url if not query else url + ("&" if "?" in url else "?") + query
            for caller in callers or tuple(site.callers):
                headers = site.callers[caller]
                csrf = site.csrf["session"] if caller == "session" else "x"
                for body, kind in _bodies(template, method, csrf)[: 1 if query else bodies]:
                    for hidden, missing in pairs:
                        a = site.request(method, site.url(u, hidden), headers, body, kind)
                        b = site.request(method, site.url(u, missing), headers, body, kind)
                        asked += 1
                        for result in (a, b):
                            assert result.status_code < 500, (method, u, caller, result.text[:300])
                        if _shape(a, hidden, missing) != _shape(b, missing, missing):
                            differences.append(
                                (method, site.url(u, hidden), caller, body, a.status_code,
                                 b.status_code, a.text[:200], b.text[:200])
                            )  # fmt: skip
    assert not differences, differences[:5]
    return asked


ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
TEMPLATES = sorted(
    {PAGE_PREFIX + t for t in PAGES}
    | {API_PREFIX + t for t in API}
    - {API_PREFIX + "/commits/{ref}/statuses", API_PREFIX + "/commits/{ref}/status"}
)


@pytest.mark.parametrize("template", TEMPLATES)
def test_hidden_answers_as_missing(site: Site, template: str) -> None:
    """Every method (those the route has and those it has not), every caller who may not
    read, the route's examples with and without a query of wrong types."""
    answered = dict(_routes(site))[template]
    for method in ALL_METHODS:
        if method in answered:
            _compare(site, template, method, _examples(template), [""])
            _compare(
                site, template, method, _examples(template)[:1], [HOSTILE_QUERY],
                ("anonymous", "token"), PAIRS[:2],
            )  # fmt: skip
        else:  # falcon's 405 (or OPTIONS's 200), which looks nothing up
            _compare(site, template, method, _examples(template)[:1], [""], ("token",), bodies=1)


@pytest.mark.parametrize("template", TEMPLATES)
def test_hostile_parameters_answer_hidden_as_missing(site: Site, template: str) -> None:
    methods = dict(_routes(site))[template]
    for method in methods:
        _compare(
            site, template, method, _hostile(template), [""], ("token", "session"),
            PAIRS[::2], bodies=2,
        )  # fmt: skip


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_owner_gets_no_500_from_hostile_input(site: Site, template: str) -> None:
    """Past the repository's check, for the one who may read and write it: hostile paths,
    queries and bodies are 4xx, never 5xx (a repository's deletion and rename left out)."""
    methods = dict(_routes(site))[template]
    failures = []
    for method in methods:
        if template in (API_PREFIX, PAGE_PREFIX + "/settings") and method != "GET":
            continue  # deleting or renaming the repository would end the test
        urls = _hostile(template)
        if method != "DELETE":  # the examples' records stay for the other tests to hide
            urls += _examples(template)
            urls += [u + ("&" if "?" in u else "?") + HOSTILE_QUERY for u in _examples(template)]
        for url in urls:
            for caller, headers in site.owner.items():
                if caller == "session" and template.startswith("/api/"):
                    continue
                for body, kind in _bodies(template, method, site.csrf["owner"]):
                    result = site.request(method, site.url(url, "alice/demo"), headers, body, kind)
                    if result.status_code >= 500 and result.status_code != 503:
                        failures.append((method, url, caller, body, result.text[:300]))
    assert not failures, failures[:5]


def test_the_examples_reach_what_they_name(site: Site) -> None:
    """The owner's answer to each example read, before any test wrote: not a 404, so that the
    hidden repository's answer is compared where it has something to give away."""
    assert not site.unreached, " ".join(site.unreached)


def _unreached(site: Site) -> list[str]:
    missing = []
    for template in TEMPLATES:
        for url in _examples(template):
            result = site.request("GET", site.url(url, "alice/demo"), site.owner["token"])
            if result.status_code == 404 and not url.endswith("/pulls/2/merge"):  # not merged
                missing.append(url)
    return missing


# -- through another repository: a private fork named by its public parent's routes ------------

# (hidden head, missing head, the names to swap when comparing their answers)
FORK_HEADS = [
    ("reader:main", "nobod:main", ("reader/main", "nobod/main")),
    ("reader/hdnz:main", "nobod/hdnx:main", ("reader/hdnz", "nobod/hdnx")),
]


def test_a_private_fork_is_missing_through_its_parents_compare_and_pulls(site: Site) -> None:
    # (method, url, content type, body): each with the hidden head and the missing one
    asked = [
        ("GET", "/alice/pub/compare/release...{head}", None, None),
        ("GET", "/alice/pub/compare/release...{head}.diff", None, None),
        ("GET", "/api/v1/repos/alice/pub/compare/release...{head}", None, None),
        ("POST", "/api/v1/repos/alice/pub/pulls", "application/json",
         "{{\"head\": \"{head}\", \"base\": \"release\", \"title\": \"x\"}}"),
        ("POST", "/alice/pub/compare/release...{head}", "application/x-www-form-urlencoded",
         "csrf=" + site.csrf["session"] + "&title=x&body=y"),
    ]  # fmt: skip
    differences = []
    for caller, headers in site.callers.items():
        for hidden, missing, (named, twin) in FORK_HEADS:
            for method, url, kind, body in asked:
                a, b = (
                    site.request(
                        method,
                        url.format(head=head),
                        headers,
                        None if body is None else body.format(head=head).encode(),
                        kind,
                    )
                    for head in (hidden, missing)
                )
                if _shape(a, named, twin) != _shape(b, twin, twin):
                    differences.append(
                        (
                            caller,
                            method,
                            url,
                            a.status_code,
                            b.status_code,
                            a.headers.get("location"),
                            b.headers.get("location"),
                            a.text[:200],
                        )
                    )
    assert not differences, differences


def test_a_private_fork_is_not_counted_or_listed_by_its_public_parent(site: Site) -> None:
    for caller, headers in site.callers.items():
        if caller == "basic":
            continue
        repo = site.request("GET", "/api/v1/repos/alice/pub", headers)
        assert repo.status_code == 200 and repo.json["forks_count"] == 0, caller
        forks = site.request("GET", "/api/v1/repos/alice/pub/forks", headers)
        assert forks.status_code == 200 and forks.json == [], caller
        for url in (
            "/alice/pub",
            "/reader",
            "/api/v1/users/reader/repos",
            "/?q=hdnz",
            "/-/search?q=hdnz",
        ):
            page = site.request("GET", url, headers)
            assert page.status_code == 200
            assert "reader/hdnz" not in page.text and "reader/cpyq" not in page.text, (caller, url)
