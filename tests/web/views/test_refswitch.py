"""The ref switcher: a repository page carries the switcher's button alone, so a page of a
repository with 1,000 tags and 50 branches weighs what the same page of a 1-tag repository
weighs; opening it fetches ``/-/refs``, a bounded, newest-first list with a filter whose links
keep the page and the path shown, access-checked and cached like any page of the repository."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import build_many_refs, git, git_text, many_refs_branch, many_refs_tag
from support.spawns import counting

from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.repos.registry import Repo
from floorless.web.app import create_app
from floorless.web.views.refswitch import SHOWN

TAGS = 1000
BRANCHES = 50
MANY = "alice/many"  # 1,000 tags, 50 branches besides main
LONE = "alice/lone"  # the same main, one tag (names of the same length: same page sizes)


@dataclass
class Site:
    forge: Forge
    client: testing.TestClient
    repos: Path
    token: str
    head: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("refswitch")
    build_many_refs(root / "repos" / f"{MANY}.git", TAGS, BRANCHES)
    build_many_refs(root / "repos" / f"{LONE}.git", 1, 0)
    forge = start_forge(root / "repos", root / "data")
    wait_indexed(forge)
    alice = forge.accounts.create_user("alice", "alice@example.org", "long enough")
    token = forge.accounts.create_token(alice, "read")[0]
    head = git_text(root / "repos" / f"{MANY}.git", "rev-parse", "main")
    assert head == git_text(root / "repos" / f"{LONE}.git", "rev-parse", "main")
    yield Site(forge, testing.TestClient(create_app(forge)), root / "repos", token, head)
    forge.stop()


def repo_of(site: Site, name: str) -> Repo:
    owner, _, repo = name.partition("/")
    return site.forge.registry.get(owner, repo)


def pages(name: str, head: str) -> dict[str, str]:
    """The pages of a repository the switcher sat in (and the commit page), by kind."""
    return {
        "home": f"/{name}",
        "directory": f"/{name}/src/branch/main/src",
        "file": f"/{name}/src/branch/main/src/app.py",
        "commits": f"/{name}/commits/branch/main",
        "commit": f"/{name}/commit/{head}",
        "blame": f"/{name}/blame/branch/main/src/app.py",
    }


def fetch(client: testing.TestClient, url: str, **kwargs) -> testing.Result:
    path, _, query = url.partition("?")
    return client.simulate_get(path, query_string=query, **kwargs)


def switch(client: testing.TestClient, name: str, **params: str | bytes) -> testing.Result:
    owner, _, repo = name.partition("/")
    url = f"/{owner}/{repo}/-/refs" + urls.query(params)
    result = fetch(client, url)
    assert result.status_code == 200, (url, result.status_code, result.text[:300])
    return result


def listed(fragment: str, kind: str) -> list[str]:
    """The hrefs of the links of the fragment's ``kind`` group, in order."""
    title = {"branch": "Branches", "tag": "Tags"}[kind]
    group = re.search(rf"<h3>{title}\b.*?</div>", fragment, re.S)
    return re.findall(r'<a href="([^"]*)">', group.group(0)) if group else []


def newest_first(repo: Path, kind: str) -> list[bytes]:
    """The ``kind`` refs of ``repo``, as git reports them, newest first by creation date (an
    annotated tag's tagger date, else its commit's; ties by name), the default branch first."""
    prefix = {"branch": "refs/heads/", "tag": "refs/tags/"}[kind]
    out = git(repo, "for-each-ref", "--format=%(refname:lstrip=2) %(creatordate:unix)", prefix)
    dated = []
    for line in out.splitlines():
        name, created = line.split(b" ")
        dated.append((name != b"main", -int(created), name))
    return [name for _, _, name in sorted(dated)]


# --------------------------------------------------------------------- the pages themselves


def test_a_page_does_not_carry_the_refs(site: Site) -> None:
    lone_pages = pages(LONE, site.head)
    for kind, url in pages(MANY, site.head).items():
        many, lone = fetch(site.client, url), fetch(site.client, lone_pages[kind])
        assert many.status_code == lone.status_code == 200, kind
        for number in (1, 10, 500, TAGS):  # every tenth is annotated
            assert many_refs_tag(number) not in many.text, (kind, number)
        assert "rel-" not in many.text and "topic/" not in many.text, kind
        # the same page, whatever the repository holds: the tabs' counts alone differ
        sizes = (len(many.content), len(lone.content))
        assert abs(sizes[0] - sizes[1]) <= 300, (kind, sizes)


@pytest.mark.parametrize(
    ("kind", "page", "at"),
    [
        ("home", "src", b""),
        ("directory", "src", b"src"),
        ("file", "src", b"src/app.py"),
        ("commits", "commits", b""),
        ("blame", "blame", b"src/app.py"),
    ],
)
def test_a_page_names_the_list_for_its_kind_and_path(
    site: Site, kind: str, page: str, at: bytes
) -> None:
    text = fetch(site.client, pages(MANY, site.head)[kind]).text
    button = re.search(
        r'<details class="refswitch" data-refs="([^"]*)">(.*?)</details>', text, re.S
    )
    assert button is not None, kind
    expected = urls.ref_switch(repo_of(site, MANY), page, at)
    assert button.group(1).replace("&amp;", "&") == expected
    assert "<strong>main</strong>" in button.group(2)
    # without JavaScript, the switcher leads to the branches and tags pages
    assert f'href="/{MANY}/branches"' in button.group(2)
    assert f'href="/{MANY}/tags"' in button.group(2)


# -------------------------------------------------------------------------------- the list


def test_the_list_is_newest_first_and_bounded(site: Site) -> None:
    repo = site.repos / f"{MANY}.git"
    text = switch(site.client, MANY, **{"for": "src"}).text
    named = repo_of(site, MANY)
    branches = [urls.src(named, "branch", b) for b in newest_first(repo, "branch")]
    tags = [urls.src(named, "tag", t) for t in newest_first(repo, "tag")]
    assert len(tags) == TAGS and len(branches) == BRANCHES + 1
    assert listed(text, "branch") == branches[:SHOWN]
    assert listed(text, "tag") == tags[:SHOWN]
    assert listed(text, "tag")[0] == urls.src(named, "tag", many_refs_tag(TAGS))
    assert text.count("<a ") <= 100 and len(text) < 12_000
    assert f"{SHOWN} newest of {TAGS}" in text and f"{SHOWN} newest of {BRANCHES + 1}" in text


def test_the_list_filters_by_name(site: Site) -> None:
    repo = site.repos / f"{MANY}.git"
    named = repo_of(site, MANY)
    for q in ("rel-99", "REL-99"):
        text = switch(site.client, MANY, **{"for": "src", "q": q}).text
        expected = [t for t in newest_first(repo, "tag") if b"rel-99" in t]
        assert len(expected) == 11  # rel-99 and rel-990 to rel-999
        assert listed(text, "tag") == [urls.src(named, "tag", t) for t in expected]
        assert listed(text, "branch") == [] and "No branches match" in text
    text = switch(site.client, MANY, **{"for": "src", "q": "b4"}).text
    expected = [b for b in newest_first(repo, "branch") if b"b4" in b]
    assert listed(text, "branch") == [urls.src(named, "branch", b) for b in expected]
    assert many_refs_branch(4).encode() in expected and len(expected) == 11


@pytest.mark.parametrize(
    ("page", "at"),
    [("src", b""), ("src", b"src/app.py"), ("blame", b"src/util.py"), ("commits", b"src")],
)
def test_the_links_keep_the_page_and_the_path(site: Site, page: str, at: bytes) -> None:
    text = switch(site.client, MANY, **{"for": page, "at": at}).text
    links = listed(text, "branch") + listed(text, "tag")
    assert len(links) == 2 * SHOWN
    named = repo_of(site, MANY)
    for link in links:
        kind = "branch" if "/branch/" in link else "tag"
        ref = link.split(f"/{page}/{kind}/", 1)[1]
        ref = ref[: -len(at) - 1] if at else ref
        assert link == urls.ref_page(page, named, kind, ref, at), link
    # a follow answers (the path is in every ref of this repository)
    assert fetch(site.client, links[-1]).status_code == 200


def test_a_path_keeps_its_exact_bytes(site: Site) -> None:
    text = switch(site.client, LONE, **{"for": "src", "at": b"bad\xffname.txt"}).text
    assert f'href="/{LONE}/src/branch/main/bad%FFname.txt"' in text


def test_the_list_answers_only_what_can_be_named(site: Site) -> None:
    for params in ("for=raw2", "for=src&at=a/../b", "for=src&at=%00"):
        assert fetch(site.client, f"/{MANY}/-/refs?{params}").status_code == 400, params
    assert fetch(site.client, "/alice/nothing/-/refs?for=src").status_code == 404


def test_a_private_repository_s_list_is_missing_to_others(site: Site) -> None:
    site.forge.registry.set_private("alice", "lone", True)
    try:
        url = f"/{LONE}/-/refs?for=src"
        anonymous = fetch(site.client, url)
        assert anonymous.status_code == 404
        assert many_refs_tag(1) not in anonymous.text
        assert fetch(site.client, "/alice/nothing/-/refs?for=src").status_code == 404
        owner = fetch(site.client, url, headers={"Authorization": f"token {site.token}"})
        assert owner.status_code == 200 and many_refs_tag(1) in owner.text
    finally:
        site.forge.registry.set_private("alice", "lone", False)


def test_the_list_starts_no_process_and_is_cached(site: Site) -> None:
    url = f"/{MANY}/-/refs?for=commits&at=counter.txt"
    with counting() as spawned:
        first = fetch(site.client, url)
        again = fetch(site.client, url, headers={"If-None-Match": first.headers["etag"]})
    assert spawned == []
    assert first.status_code == 200 and first.headers["etag"]
    assert again.status_code == 304 and again.content == b""
    assert "text/html" in first.headers["content-type"]
    assert "content-security-policy" in first.headers


def test_a_moved_ref_makes_a_new_list(tmp_path: Path) -> None:
    """The order is kept with the ref snapshot: a new tag on an old commit stays in its place by
    date, a new lightweight tag of the newest commit comes before every older commit's tag (the
    annotated tags, dated when they were made, after every commit, still before it), and the
    ETag changes with them."""
    repo = build_many_refs(tmp_path / "repos" / "alice" / "moving.git", 20, 2, commits=30)
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        client = testing.TestClient(create_app(forge))
        named = forge.registry.get("alice", "moving")
        before = switch(client, "alice/moving", **{"for": "src"})
        assert listed(before.text, "tag")[0] == urls.src(named, "tag", many_refs_tag(20))
        git(repo, "tag", "old-one", git_text(repo, "rev-parse", "main~25"))
        git(repo, "tag", "newest", "main")
        forge.moves.refs_moved(named)
        after = switch(client, "alice/moving", **{"for": "src"})
        tags = listed(after.text, "tag")
        assert tags[:3] == [
            urls.src(named, "tag", name)
            for name in (many_refs_tag(20), many_refs_tag(10), "newest")
        ]
        assert [t.encode() for t in tags] == [
            urls.src(named, "tag", n).encode() for n in newest_first(repo, "tag")
        ]
        assert tags.index(urls.src(named, "tag", "old-one")) == 16  # dated as main~25 is
        assert after.headers["etag"] != before.headers["etag"]
        stale = fetch(
            client,
            "/alice/moving/-/refs?for=src",
            headers={"If-None-Match": before.headers["etag"]},
        )
        assert stale.status_code == 200
    finally:
        forge.stop()


def test_the_tags_page_is_in_the_switchers_order(site: Site) -> None:
    """Newest first, as the switcher lists them: annotated tags by their tagger's date (here
    after every commit), the others by their commit's; not by name."""
    repo = site.repos / f"{MANY}.git"
    named = repo_of(site, MANY)
    page = fetch(site.client, f"/{MANY}/tags")
    assert page.status_code == 200
    prefix = urls.src(named, "tag", "")
    shown = re.findall(rf'<td[^>]*><a href="{re.escape(prefix)}/([^"]*)">', page.text)
    assert [name.encode() for name in shown] == newest_first(repo, "tag")
    assert shown[0] == many_refs_tag(TAGS)


def test_the_tags_page_shows_each_tags_creation_date(site: Site) -> None:
    """Each row is dated as it is sorted: an annotated tag by its tagger's date, a lightweight
    one by its commit's (``git for-each-ref``'s ``creatordate``), not by the commit alone."""
    from datetime import datetime

    repo = site.repos / f"{MANY}.git"
    prefix = urls.src(repo_of(site, MANY), "tag", "")
    page = fetch(site.client, f"/{MANY}/tags")
    rows = re.findall(
        rf'<td class="refname"><a href="{re.escape(prefix)}/([^"]*)">.*?'
        r'<td class="muted date"><time datetime="([^"]+)"',
        page.text,
        re.S,
    )
    out = git(
        repo, "for-each-ref", "--format=%(refname:lstrip=2) %(creatordate:unix)", "refs/tags/"
    )
    created = {
        name.decode(): int(when) for name, when in (line.split(b" ") for line in out.splitlines())
    }
    committed = git(
        repo, "for-each-ref", "--format=%(refname:lstrip=2) %(*committerdate:unix)", "refs/tags/"
    )
    annotated_later = {
        name.decode()
        for name, when in (line.split(b" ") for line in committed.splitlines())
        if when and int(when) != created[name.decode()]
    }
    assert len(rows) == len(created) and annotated_later  # some tags made after their commit
    for name, shown in rows:
        assert int(datetime.fromisoformat(shown).timestamp()) == created[name], name
