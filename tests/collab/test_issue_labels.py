"""Labels, assignees and milestones as people use them in the browser, and the repository's
switches for issues, pull requests and ways to merge: who may change what, each change one
timeline event, the lists filtered by each, colours checked before they reach a page, a
private repository's pages answering as missing ones, and an issue page's statements and
processes the same whatever it carries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from falcon import testing
from support.accounts import Browser, csrf_of
from support.forges import start_forge
from support.issues import open_issue, person
from support.queries import statements
from support.spawns import counting

from floorless.collab.pulls import Features
from floorless.collab.triage import Label
from floorless.forge import Forge
from floorless.web.app import create_app


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    from support.accounts import PASSWORD

    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    public = forge.registry.create("ann", "plans")
    secret = forge.registry.create("ann", "secret", private=True)
    ben, dan = forge.accounts.get("ben"), forge.accounts.get("dan")
    assert ben is not None and dan is not None
    forge.policy.set_collaborator(public, ben, "write")
    forge.policy.set_collaborator(public, dan, "read")
    forge.policy.set_collaborator(secret, dan, "read")
    yield forge
    forge.stop()


@pytest.fixture
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def post(browser: Browser, path: str, page: str, **fields: str) -> testing.Result:
    """Post ``fields`` (encoded as a browser would) with the CSRF token of ``page``."""
    token = csrf_of(browser.get(page).text)
    encoded = {key: quote(value, safe="") for key, value in fields.items()}
    return browser.post(path, encoded, csrf=token)


def triage(browser: Browser, repo: str, number: int, **fields: str) -> testing.Result:
    return post(browser, f"/{repo}/issues/{number}/triage", f"/{repo}/issues/{number}", **fields)


def label_ids(forge: Forge, repo: str = "ann/plans") -> dict[str, int]:
    owner, name = repo.split("/")
    return {label.name: label.id for label in forge.triage.labels(owner, name)}


def events(forge: Forge, number: int, repo: str = "ann/plans") -> list[tuple[str, str, str]]:
    owner, name = repo.split("/")
    issue = forge.issues.get(owner, name, number)
    return [
        (e.kind, e.old_value, e.body) for e in forge.issues.timeline(issue) if e.kind != "comment"
    ]


def test_labels_are_managed_by_writers_and_put_on_issues(
    client: testing.TestClient, forge: Forge
) -> None:
    ben, cat = person(client, "ben"), person(client, "cat")
    made = post(ben, "/ann/plans/labels", "/ann/plans/labels", action="create", name="bug",
                color="#B60205", description="Something is wrong")  # fmt: skip
    assert made.status_code == 303 and made.headers["location"] == "/ann/plans/labels"
    assert post(ben, "/ann/plans/labels", "/ann/plans/labels", action="create", name="docs",
                color="#0075ca").status_code == 303  # fmt: skip
    # the colour is stored lower case; names are unique whatever their case
    assert forge.triage.labels("ann", "plans")[0].color == "#b60205"
    again = post(ben, "/ann/plans/labels", "/ann/plans/labels", action="create", name="BUG",
                 color="#000000")  # fmt: skip
    assert again.status_code == 400 and "already a label" in again.text
    # a signed-in reader may see the labels but not change them
    assert cat.get("/ann/plans/labels").status_code == 200
    refused = post(cat, "/ann/plans/labels", "/ann/plans/labels", action="create", name="x",
                   color="#000000")  # fmt: skip
    assert refused.status_code == 403
    assert sorted(label_ids(forge)) == ["bug", "docs"]

    number = open_issue(cat, "ann/plans", "It crashes")
    bug = label_ids(forge)["bug"]
    assert triage(cat, "ann/plans", number, action="label", label=str(bug)).status_code == 403
    done = triage(ben, "ann/plans", number, action="label", label=str(bug))
    assert done.status_code == 303 and done.headers["location"] == f"/ann/plans/issues/{number}"
    assert triage(ben, "ann/plans", number, action="label", label=str(bug)).status_code == 303
    assert events(forge, number) == [("label", "", "+bug")]  # the second click changed nothing
    page = cat.get(f"/ann/plans/issues/{number}")
    assert 'data-color="#b60205"' in page.text and 'data-text="#ffffff"' in page.text
    assert "added the" in page.text and "Something is wrong" in page.text

    # the list shows the label, filters by it, and the labels page counts open issues
    other = open_issue(cat, "ann/plans", "Typo in the guide")
    listed = cat.get("/ann/plans/issues")
    assert listed.text.count('data-color="#b60205"') == 1
    filtered = cat.get("/ann/plans/issues?label=BUG")
    assert "It crashes" in filtered.text and "Typo in the guide" not in filtered.text
    assert "1 open issue" in cat.get("/ann/plans/labels").text
    assert "No issues match" in cat.get("/ann/plans/issues?label=nothing").text

    # edit, take off, delete: the label leaves the issues that carried it
    edited = post(ben, "/ann/plans/labels", "/ann/plans/labels", action="edit", id=str(bug),
                  name="defect", color="#ffff00", description="")  # fmt: skip
    assert edited.status_code == 303
    assert 'data-text="#000000"' in cat.get(f"/ann/plans/issues/{number}").text  # on yellow
    triage(ben, "ann/plans", number, action="label", label=str(bug), on="0")
    assert events(forge, number)[-1] == ("label", "", "-defect")
    triage(ben, "ann/plans", other, action="label", label=str(bug))
    gone = post(ben, "/ann/plans/labels", "/ann/plans/labels", action="delete", id=str(bug))
    assert gone.status_code == 303
    assert forge.triage.labels_of([forge.issues.get("ann", "plans", other).id]) == {}
    assert "defect" in cat.get(f"/ann/plans/issues/{other}").text  # the event stays


@pytest.mark.parametrize(
    "color", ["red", "#12345", "#1234567", "#12345g", '#000000"><script>', "", "javascript:x"]
)
def test_a_colour_is_six_hex_digits_or_refused(
    client: testing.TestClient, forge: Forge, color: str
) -> None:
    ben = person(client, "ben")
    result = post(ben, "/ann/plans/labels", "/ann/plans/labels", action="create", name="x",
                  color=color)  # fmt: skip
    assert result.status_code == 400 and "six hexadecimal digits" in result.text
    assert forge.triage.labels("ann", "plans") == []


def test_label_names_and_descriptions_render_inert(
    client: testing.TestClient, forge: Forge
) -> None:
    ben = person(client, "ben")
    nasty = '<script>alert(1)</script>"'
    made = post(ben, "/ann/plans/labels", "/ann/plans/labels", action="create", name=nasty,
                color="#123456", description='"><img src=x onerror=alert(1)>')  # fmt: skip
    assert made.status_code == 303
    number = open_issue(ben, "ann/plans", "Hello")
    triage(ben, "ann/plans", number, action="label", label=str(label_ids(forge)[nasty]))
    for url in ("/ann/plans/labels", "/ann/plans/issues", f"/ann/plans/issues/{number}"):
        text = ben.get(url).text
        assert "<script>alert" not in text and "<img src=x" not in text, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, url
    assert Label(1, "x", "#555555").text_color == "#ffffff"
    assert Label(1, "x", "#aaaaaa").text_color == "#000000"


def test_assignees_are_people_who_may_read_by_more_than_publicity(
    client: testing.TestClient, forge: Forge
) -> None:
    ben, cat = person(client, "ben"), person(client, "cat")
    number = open_issue(cat, "ann/plans", "Please look")
    assert forge.policy.assignable(forge.registry.get("ann", "plans")) == ["ann", "ben", "dan"]
    assert triage(cat, "ann/plans", number, action="assign", user="ben").status_code == 403
    refused = triage(ben, "ann/plans", number, action="assign", user="cat")
    assert refused.status_code == 400 and "may not be assigned" in refused.text
    assert triage(ben, "ann/plans", number, action="assign", user="nobody").status_code == 400
    assert triage(ben, "ann/plans", number, action="assign", user="DAN").status_code == 303
    assert triage(ben, "ann/plans", number, action="assign", user="ben").status_code == 303
    assert triage(ben, "ann/plans", number, action="assign", user="ben", on="0").status_code == 303
    assert events(forge, number) == [
        ("assigned", "", "dan"),
        ("assigned", "", "ben"),
        ("unassigned", "", "ben"),
    ]
    page = cat.get(f"/ann/plans/issues/{number}").text
    assert "assigned this to" in page and "self-assigned this" in page
    assert "removed their assignment" in page
    open_issue(cat, "ann/plans", "Nobody's")
    mine = cat.get("/ann/plans/issues?assignee=dan").text
    assert "Please look" in mine and "Nobody&#39;s" not in mine and "Nobody's" not in mine
    assert "assigned to" in cat.get("/ann/plans/issues").text


def test_milestones_count_progress_and_filter(client: testing.TestClient, forge: Forge) -> None:
    ben, cat = person(client, "ben"), person(client, "cat")
    bad = post(ben, "/ann/plans/milestones", "/ann/plans/milestones", title="v1", due="31/12/2030")
    assert bad.status_code == 400 and "YYYY-MM-DD" in bad.text
    assert (
        post(cat, "/ann/plans/milestones", "/ann/plans/milestones", title="v1").status_code == 403
    )
    made = post(ben, "/ann/plans/milestones", "/ann/plans/milestones", title="v1",
                description="First", due="2030-12-31")  # fmt: skip
    assert made.status_code == 303
    found = re.fullmatch(r"/ann/plans/milestone/(\d+)", made.headers["location"])
    assert found
    milestone = found.group(1)
    first = open_issue(cat, "ann/plans", "One")
    second = open_issue(cat, "ann/plans", "Two")
    open_issue(cat, "ann/plans", "Three")
    for number in (first, second):
        result = triage(ben, "ann/plans", number, action="milestone", milestone=milestone)
        assert result.status_code == 303
    assert triage(cat, "ann/plans", first, action="milestone", milestone="").status_code == 403
    assert triage(ben, "ann/plans", first, action="milestone", milestone="999").status_code == 404
    assert triage(ben, "ann/plans", first, action="milestone", milestone="x").status_code == 400
    forge.issues.close(forge.issues.get("ann", "plans", first), forge.accounts.require("ben"),
                       "completed")  # fmt: skip
    listing = cat.get("/ann/plans/milestones").text
    assert "v1" in listing and "50%" in listing and "Due 2030-12-31" in listing
    page = cat.get(f"/ann/plans/milestone/{milestone}").text
    assert "Two" in page and "One" not in page  # its open issues
    assert "One" in cat.get(f"/ann/plans/milestone/{milestone}?state=closed").text
    filtered = cat.get("/ann/plans/issues?state=all&milestone=V1").text
    assert "One" in filtered and "Two" in filtered and "Three" not in filtered
    # closing it moves it to the closed tab; deleting it leaves its issues without one
    path = f"/ann/plans/milestone/{milestone}"
    assert post(ben, path, path, action="close").status_code == 303
    assert "No open milestones" in cat.get("/ann/plans/milestones").text
    assert post(ben, path, path, action="delete").status_code == 303
    assert cat.get(path).status_code == 404
    issue = forge.issues.get("ann", "plans", second)
    assert forge.triage.milestone_of(issue) is None
    assert events(forge, second) == [("milestone", "", "v1")]
    timeline = cat.get(f"/ann/plans/issues/{second}").text
    # the actor a link, a space before what they did
    assert re.search(r'<a href="/(\w+)">\1</a> added this to the v1 milestone', timeline)


def test_private_repositories_answer_as_missing_ones(
    client: testing.TestClient, forge: Forge
) -> None:
    forge.triage.create_label("ann", "secret", "hidden", "#123456")
    ann, cat, dan = person(client, "ann"), person(client, "cat"), person(client, "dan")
    number = open_issue(ann, "ann/secret", "Quiet")
    for path in ("/ann/secret/labels", "/ann/secret/milestones", "/ann/secret/issues?label=x"):
        assert cat.get(path).status_code == 404, path
        assert cat.get(path.replace("secret", "nothing")).status_code == 404, path
        assert dan.get(path).status_code == 200, path
    token = csrf_of(cat.get("/ann/plans/labels").text)
    label = str(label_ids(forge, "ann/secret")["hidden"])
    blind = cat.post(f"/ann/secret/issues/{number}/triage", {"action": "label", "label": label},
                     csrf=token)  # fmt: skip
    assert blind.status_code == 404
    assert triage(dan, "ann/secret", number, action="label", label=label).status_code == 403
    # a label of another repository is no label here
    forge.triage.create_label("ann", "plans", "public", "#654321")
    elsewhere = str(label_ids(forge)["public"])
    assert triage(ann, "ann/secret", number, action="label", label=elsewhere).status_code == 404


def test_settings_turn_issues_and_pull_requests_off_and_choose_merge_styles(
    client: testing.TestClient, forge: Forge
) -> None:
    ann, ben = person(client, "ann"), person(client, "ben")
    number = open_issue(ben, "ann/plans", "Before")
    assert 'href="/ann/plans/issues"' in ben.get("/ann/plans").text
    assert 'name="issues" checked' in ann.get("/ann/plans/settings").text
    saved = post(ann, "/ann/plans/settings", "/ann/plans/settings", action="features",
                 pulls="on", **{"merge-squash": "on", "merge-rebase": "on"},
                 default_merge="squash")  # fmt: skip
    assert saved.status_code == 303
    assert forge.pulls.features("ann", "plans") == Features(
        issues=False, pulls=True, merge_styles=("rebase", "squash"), default_merge="squash"
    )
    assert 'href="/ann/plans/issues"' not in ben.get("/ann/plans").text
    for path in ("/ann/plans/issues", "/ann/plans/issues/new", f"/ann/plans/issues/{number}"):
        assert ben.get(path).status_code == 404, path
    token = csrf_of(ben.get("/ann/plans/labels").text)  # labels stay while pull requests do
    assert ben.post(f"/ann/plans/issues/{number}", {"action": "comment", "body": "x"},
                    csrf=token).status_code == 404  # fmt: skip
    assert triage_blind(ben, number, token).status_code == 404
    # a default not among those allowed, or none allowed: refused, nothing changed
    wrong = post(ann, "/ann/plans/settings", "/ann/plans/settings", action="features",
                 issues="on", **{"merge-merge": "on"}, default_merge="squash")  # fmt: skip
    assert wrong.status_code == 400 and "default way to merge" in wrong.text
    none = post(ann, "/ann/plans/settings", "/ann/plans/settings", action="features",
                issues="on", default_merge="merge")  # fmt: skip
    assert none.status_code == 400 and "at least one" in none.text
    assert not forge.pulls.features("ann", "plans").issues
    # only administrators reach the settings
    assert post(ben, "/ann/plans/settings", "/ann/plans/labels", action="features",
                issues="on", pulls="on").status_code == 403  # fmt: skip
    both_off = post(ann, "/ann/plans/settings", "/ann/plans/settings", action="features",
                    **{"merge-merge": "on"}, default_merge="merge")  # fmt: skip
    assert both_off.status_code == 303
    assert ben.get("/ann/plans/labels").status_code == 404
    assert ben.get("/ann/plans/milestones").status_code == 404
    everything = {"issues": "on", "pulls": "on", "merge-merge": "on", "default_merge": "merge"}
    back = post(ann, "/ann/plans/settings", "/ann/plans/settings", action="features", **everything)
    assert back.status_code == 303
    assert ben.get(f"/ann/plans/issues/{number}").status_code == 200


def triage_blind(browser: Browser, number: int, token: str) -> testing.Result:
    return browser.post(f"/ann/plans/issues/{number}/triage", {"action": "assign", "user": "ben"},
                        csrf=token)  # fmt: skip


def test_an_issue_page_costs_the_same_whatever_it_carries(
    client: testing.TestClient, forge: Forge
) -> None:
    ben = person(client, "ben")
    bare = open_issue(ben, "ann/plans", "Bare")
    full = open_issue(ben, "ann/plans", "Full")
    plain = forge.issues.get("ann", "plans", bare)
    loaded = forge.issues.get("ann", "plans", full)
    actor = forge.accounts.require("ben")
    for n in range(20):
        label = forge.triage.create_label("ann", "plans", f"label {n}", f"#{n:02d}{n:02d}{n:02d}")
        forge.triage.set_label(loaded, actor, label.id, True)
    milestone = forge.triage.save_milestone("ann", "plans", None, "v2", "", "")
    forge.triage.set_milestone(loaded, actor, milestone)
    for name in ("ann", "ben", "dan"):
        forge.triage.set_assignee(loaded, actor, forge.accounts.require(name), True)
    counts = []
    for number in (bare, full):
        url = f"/ann/plans/issues/{number}"
        for _ in range(2):  # warm
            ben.get(url)
        with counting() as spawned:
            result = ben.get(url)
        assert result.status_code == 200 and not spawned
        counts.append(statements(result))
    assert counts[0] == counts[1]
    for url in ("/ann/plans/labels", "/ann/plans/milestones", f"/ann/plans/milestone/{milestone}"):
        with counting() as spawned:
            assert ben.get(url).status_code == 200
        assert not spawned, url
    assert ben.get(f"/ann/plans/issues/{full}").text.count('class="label"') >= 40
    lists = [statements(ben.get(f"/ann/plans/issues?label={quote(x)}")) for x in ("", "label 1")]
    assert lists[1] - lists[0] <= 1  # a filter counts what it matches: one statement more
    del plain


def test_ten_thousand_labels_are_paged_on_the_page_in_the_api_and_in_the_picker(
    client: testing.TestClient, forge: Forge
) -> None:
    """A repository with 10,000 labels served a 13.8 MB labels page, and every issue page
    offered each label: now the labels page shows 50 a page (and searches them by name), the
    API a page of them from the database, and the sidebar's picker 30 with a search."""
    forge.db.executemany(
        "INSERT INTO labels (owner, name, label, color, description) VALUES (?, ?, ?, ?, ?)",
        [("ann", "plans", f"label {n:05d}", "#ededed", f"number {n}") for n in range(10_000)],
    )
    ben, cat = person(client, "ben"), person(client, "cat")

    page = ben.get("/ann/plans/labels")
    assert page.status_code == 200 and len(page.content) < 200_000
    assert page.text.count('<li id="label-') == 50 and "10000 labels" in page.text
    assert "label 00000" in page.text and "label 00050" not in page.text
    assert "Page 1 of 200" in page.text and 'href="/ann/plans/labels?page=2"' in page.text
    last = cat.get("/ann/plans/labels?page=200").text
    assert last.count('<li id="label-') == 50 and "label 09999" in last and 'rel="next"' not in last
    assert "No labels on this page" in cat.get("/ann/plans/labels?page=201").text
    found = cat.get("/ann/plans/labels", query_string="q=label+0999")
    assert found.text.count('<li id="label-') == 10 and "10 labels matching" in found.text
    assert 'href="/ann/plans/labels?q=label%200999&amp;page=2"' not in found.text
    many = cat.get("/ann/plans/labels", query_string="q=label+09&page=2").text
    assert "label 09050" in many and 'href="/ann/plans/labels?q=label%2009&amp;page=3"' in many
    for bad in ("0", "-1", "abc", "9" * 30):
        assert cat.get("/ann/plans/labels", query_string=f"page={bad}").status_code == 400

    answer = client.simulate_get("/api/v1/repos/ann/plans/labels")
    assert answer.status_code == 200 and answer.headers["x-total-count"] == "10000"
    assert [label["name"] for label in answer.json] == [f"label {n:05d}" for n in range(30)]
    assert 'page=334>; rel="last"' in answer.headers["link"]
    answer = client.simulate_get(
        "/api/v1/repos/ann/plans/labels", params={"page": 200, "limit": 50}
    )
    assert [label["name"] for label in answer.json][-1] == "label 09999"
    assert 'rel="next"' not in answer.headers["link"] and 'rel="prev"' in answer.headers["link"]
    beyond = client.simulate_get(
        "/api/v1/repos/ann/plans/labels", params={"page": 201, "limit": 50}
    )
    assert beyond.json == [] and beyond.headers["x-total-count"] == "10000"
    named = client.simulate_get("/api/v1/repos/ann/plans/labels/LABEL%2009999")
    assert named.status_code == 200 and named.json["description"] == "number 9999"

    # the picker: 30 labels and a search; what it finds is put on, and shown as carried
    number = open_issue(ben, "ann/plans", "Which label?")
    issue = ben.get(f"/ann/plans/issues/{number}")
    assert issue.status_code == 200 and len(issue.content) < 200_000
    assert issue.text.count('name="action" value="label"') == 30
    assert 'name="find_label"' in issue.text and "30 of 10000 labels" in issue.text
    assert 'name="find_label"' not in cat.get(f"/ann/plans/issues/{number}").text  # a reader
    searched = ben.get(f"/ann/plans/issues/{number}", query_string="find_label=label+09999")
    assert searched.text.count('name="action" value="label"') == 1
    assert "1 of 1 label matching" in searched.text
    wanted = re.search(r'name="label" value="(\d+)"', searched.text)
    assert wanted is not None
    done = triage(ben, "ann/plans", number, action="label", label=wanted.group(1))
    assert done.status_code == 303
    after = ben.get(f"/ann/plans/issues/{number}").text
    # carried: a chip in the sidebar and in the event, and offered to take off beside the 30
    assert after.count('name="action" value="label"') == 31
    assert 'aria-pressed="true">✓ label 09999' in after
    assert after.count('data-color="#ededed"') == 2 and "added the" in after
    timeline = client.simulate_get(f"/api/v1/repos/ann/plans/issues/{number}/timeline").json
    (event,) = [entry for entry in timeline if entry["type"] == "label"]
    assert event["label"]["id"] == int(wanted.group(1)) and event["label"]["name"] == "label 09999"
