"""The issue side of ``/api/v1`` (issues, comments, labels, milestones) driven by pyforgejo,
whose models check that every answer is in Forgejo's shape."""

from __future__ import annotations

import dataclasses
import datetime
import json

import httpx
import pytest
import support.api
from pyforgejo import PyforgejoApi
from pyforgejo.core.api_error import ApiError
from pyforgejo.types import Comment as ForgejoComment
from pyforgejo.types import Issue as ForgejoIssue
from pyforgejo.types import Label as ForgejoLabel
from pyforgejo.types import Milestone as ForgejoMilestone
from support.api import BASE, api, basic, error_of, token_for
from support.spawns import counting

from floorless.accounts.access import Viewer
from floorless.collab.filters import IssueFilter
from floorless.core import timing
from floorless.forge import Forge
from floorless.forgejo import issues as shapes
from floorless.forgejo.issues import (
    IssueFacts,
    comment_json,
    issue_json,
    label_json,
    milestone_json,
)
from floorless.web.api.routes import API_ROUTES

# the shared fixtures this module's tests ask for
forge = support.api.forge
http = support.api.http

pytestmark = pytest.mark.usefixtures("forge")


def test_shapes_parse_into_forgejo_models_and_match_their_schemas(forge: Forge) -> None:
    ann = forge.accounts.require("ann")
    ben = forge.accounts.require("ben")
    repo = forge.registry.create("ann", "shapes")
    bug = forge.triage.create_label("ann", "shapes", "bug", "#D73A4A", "it breaks")
    soon = forge.triage.save_milestone("ann", "shapes", None, "1.0", "first", "2030-01-02")
    issue = forge.issues.create("ann", "shapes", ann, "It <b>breaks</b>", "body")
    forge.triage.set_label(issue, ann, bug.id, True)
    forge.triage.set_milestone(issue, ann, soon)
    forge.triage.set_assignee(issue, ann, ben, True)
    comment = forge.issues.comment(issue, ben, "me too")
    forge.issues.close(issue, ann, "completed")
    pull = forge.pulls.create(
        "ann", "shapes", ben, "WIP: a change", "", "main", ("ann", "shapes", "topic"), "0" * 40
    )
    issue = forge.issues.get("ann", "shapes", issue.number)
    facts = IssueFacts(forge, Viewer(ann), repo, BASE, [issue, pull.issue], ["ben"])
    shaped = issue_json(issue, facts)
    assert set(shaped) == set(shapes.Issue.__annotations__)
    parsed = ForgejoIssue.model_validate(shaped)
    assert parsed.number == issue.number and parsed.state == "closed" and parsed.closed_at
    assert parsed.user and parsed.user.login == "ann"
    assert [a.login for a in parsed.assignees or []] == ["ben"]
    assert parsed.assignee and parsed.assignee.login == "ben"
    assert parsed.milestone and parsed.milestone.title == "1.0"
    assert parsed.milestone.closed_issues == 1 and parsed.milestone.open_issues == 0
    assert parsed.milestone.due_on and parsed.milestone.due_on.year == 2030
    assert parsed.labels and parsed.labels[0].color == "d73a4a"
    assert parsed.labels[0].url == f"{BASE}/api/v1/repos/ann/shapes/labels/{bug.id}"
    assert parsed.pull_request is None
    assert parsed.html_url == f"{BASE}/ann/shapes/issues/{issue.number}"
    assert parsed.url == f"{BASE}/api/v1/repos/ann/shapes/issues/{issue.number}"
    assert parsed.repository and parsed.repository.full_name == "ann/shapes"

    as_issue = ForgejoIssue.model_validate(issue_json(pull.issue, facts))
    assert as_issue.pull_request is not None
    assert as_issue.pull_request.draft is True and as_issue.pull_request.merged is False
    assert as_issue.html_url == f"{BASE}/ann/shapes/pulls/{pull.number}"
    assert as_issue.labels == [] and as_issue.milestone is None and as_issue.assignee is None

    (found,) = forge.issues.comments("ann", "shapes", issue.number)
    assert found.id == comment
    shaped = comment_json(found, facts)
    assert set(shaped) == set(shapes.Comment.__annotations__)
    parsed_comment = ForgejoComment.model_validate(shaped)
    assert parsed_comment.html_url == (
        f"{BASE}/ann/shapes/issues/{issue.number}#issuecomment-{comment}"
    )
    assert parsed_comment.issue_url and not parsed_comment.pull_request_url
    assert parsed_comment.user and parsed_comment.user.login == "ben"

    label = label_json(bug, repo, BASE)
    assert set(label) == set(shapes.Label.__annotations__)
    assert ForgejoLabel.model_validate(label).name == "bug"
    milestone = milestone_json(forge.triage.milestone("ann", "shapes", soon))
    assert set(milestone) == set(shapes.Milestone.__annotations__)
    assert ForgejoMilestone.model_validate(milestone).state == "open"


def test_a_gone_author_is_forgejos_ghost(forge: Forge) -> None:
    ben = forge.accounts.require("ben")
    repo = forge.registry.create("ann", "ghosts")
    issue = forge.issues.create("ann", "ghosts", ben, "by ben", "")
    forge.db.execute("UPDATE issues SET author_id = NULL WHERE id = ?", (issue.id,))
    issue = forge.issues.get("ann", "ghosts", issue.number)
    facts = IssueFacts(forge, Viewer(None), repo, BASE, [issue])
    parsed = ForgejoIssue.model_validate(issue_json(issue, facts))
    assert parsed.user and parsed.user.login == "Ghost" and parsed.user.id == -1


def test_a_page_of_issues_is_read_in_the_same_statements_whatever_its_length(
    forge: Forge,
) -> None:
    ann = forge.accounts.require("ann")
    repo = forge.registry.create("ann", "many")
    label = forge.triage.create_label("ann", "many", "x", "#000000")
    milestone = forge.triage.save_milestone("ann", "many", None, "m", "", "")
    issues = []
    for n in range(12):
        issue = forge.issues.create("ann", "many", ann, f"issue {n}", "")
        forge.triage.set_label(issue, ann, label.id, True)
        forge.triage.set_milestone(issue, ann, milestone)
        forge.triage.set_assignee(issue, ann, ann, True)
        issues.append(issue)

    def statements(count: int) -> int:
        timer = timing.start_request()
        try:
            facts = IssueFacts(forge, Viewer(ann), repo, BASE, issues[:count])
            for issue in issues[:count]:
                issue_json(issue, facts)
        finally:
            timing.end_request()
        return timer.queries

    assert 0 < statements(2) == statements(12) <= 5


# -- through the API ------------------------------------------------------------------------


def _setup(forge: Forge, http: httpx.Client) -> tuple[PyforgejoApi, PyforgejoApi]:
    """ann's public repository ``work``; pyforgejo clients of ann (its owner) and ben (a
    reader who is not a collaborator)."""
    forge.registry.create("ann", "work")
    return api(http, token_for(http, "ann")), api(http, token_for(http, "ben"))


def test_open_list_filter_edit_close_and_reopen(forge: Forge, http: httpx.Client) -> None:
    ann, ben = _setup(forge, http)
    issues = ann.issue
    bug = issues.create_label("ann", "work", color="d73a4a", name="bug", description="broken")
    docs = issues.create_label("ann", "work", color="#0000ff", name="docs")
    assert bug.color == "d73a4a" and docs.color == "0000ff"
    first = issues.create_milestone("ann", "work", title="1.0", description="soon")
    assert first.state == "open" and first.open_issues == 0
    made = issues.create_issue(
        "ann",
        "work",
        title="It breaks",
        body="when it rains",
        labels=[bug.id, docs.id],
        milestone=first.id,
        assignees=["ann"],
    )
    assert made.number == 1 and made.state == "open" and made.user and made.user.login == "ann"
    assert {label.name for label in made.labels or []} == {"bug", "docs"}
    assert made.milestone and made.milestone.id == first.id and made.milestone.open_issues == 1
    assert [a.login for a in made.assignees or []] == ["ann"]
    second = ben.issue.create_issue("ann", "work", title="A question", body="how?")
    closed = ben.issue.create_issue("ann", "work", title="Done already", closed=True)
    assert closed.state == "closed" and closed.closed_at is not None
    pull = forge.pulls.create(
        "ann",
        "work",
        forge.accounts.require("ben"),
        "A change",
        "",
        "main",
        ("ann", "work", "topic"),
        "0" * 40,
    )

    def numbers(**query: object) -> list[int]:
        return [i.number for i in issues.list_issues("ann", "work", **query)]  # type: ignore[arg-type]

    assert numbers() == [pull.number, second.number, made.number]  # both kinds, as Forgejo
    assert numbers(type="issues") == [second.number, made.number]
    assert numbers(type="pulls") == [pull.number]
    assert numbers(state="closed") == [closed.number]
    assert numbers(state="all", type="issues") == [3, 2, 1]
    assert numbers(labels="bug") == [1] and numbers(labels="bug,docs") == [1]
    assert numbers(labels="nothing-like-it") == [4, 2, 1]  # unknown names are left out
    assert numbers(milestones="1.0") == [1] and numbers(milestones=str(first.id)) == [1]
    assert numbers(created_by="ben", state="all") == [4, 3, 2]
    assert numbers(assigned_by="ann") == [1]
    assert numbers(q="QUEST") == [2]
    as_issue = issues.get_issue("ann", "work", pull.number)
    assert as_issue.pull_request is not None and as_issue.pull_request.merged is False

    edited = issues.edit_issue(
        "ann", "work", 1, title="It breaks badly", state="closed", milestone=0, assignees=[]
    )
    assert edited.title == "It breaks badly" and edited.body == "when it rains"
    assert edited.state == "closed" and edited.milestone is None and edited.assignees == []
    reopened = issues.edit_issue("ann", "work", 1, state="open")
    assert reopened.state == "open" and reopened.closed_at is None
    kinds = [e.kind for e in forge.issues.timeline(forge.issues.get("ann", "work", 1))]
    assert kinds.count("closed") == kinds.count("reopened") == 1
    assert "title" in kinds and "milestone" in kinds and "unassigned" in kinds
    # the author may edit and close their own issue; a reader may not touch another's
    assert ben.issue.edit_issue("ann", "work", 2, state="closed").state == "closed"
    with pytest.raises(ApiError) as refused:
        ben.issue.edit_issue("ann", "work", 1, title="mine now")
    assert refused.value.status_code == 403
    assert forge.issues.get("ann", "work", 1).title == "It breaks badly"


def test_a_reader_takes_part_but_does_not_sort(forge: Forge, http: httpx.Client) -> None:
    ann, ben = _setup(forge, http)
    bug = ann.issue.create_label("ann", "work", color="d73a4a", name="bug")
    mine = ann.issue.create_issue("ann", "work", title="ann's")
    # labels, milestone and assignees from a reader are ignored, as Forgejo does
    theirs = ben.issue.create_issue(
        "ann", "work", title="ben's", labels=[bug.id], assignees=["ann"]
    )
    assert theirs.labels == [] and theirs.assignees == []
    comment = ben.issue.create_comment("ann", "work", mine.number, body="me too")
    assert comment.user and comment.user.login == "ben"
    for call in (
        lambda: ben.issue.add_label("ann", "work", theirs.number, labels=[bug.id]),  # type: ignore[list-item]
        lambda: ben.issue.create_label("ann", "work", color="000000", name="mine"),
        lambda: ben.issue.create_milestone("ann", "work", title="mine"),
        lambda: ben.issue.edit_issue("ann", "work", mine.number, state="closed"),
        lambda: ben.issue.delete_label("ann", "work", bug.id),
    ):
        with pytest.raises(ApiError) as refused:
            call()
        assert refused.value.status_code == 403
    assert ann.issue.get_issue("ann", "work", mine.number).state == "open"
    assert [label.name for label in ann.issue.list_labels("ann", "work")] == ["bug"]
    # a comment of ann's is not ben's to change; his own is
    owned = ann.issue.create_comment("ann", "work", mine.number, body="first")
    with pytest.raises(ApiError) as refused:
        ben.issue.edit_comment("ann", "work", owned.id, body="changed")
    assert refused.value.status_code == 403
    assert ben.issue.edit_comment("ann", "work", comment.id, body="me three").body == "me three"


def test_comments_round_trip(forge: Forge, http: httpx.Client) -> None:
    ann, ben = _setup(forge, http)
    one = ann.issue.create_issue("ann", "work", title="one")
    two = ann.issue.create_issue("ann", "work", title="two")
    made = [
        ben.issue.create_comment("ann", "work", one.number, body="first <script>x</script>"),
        ann.issue.create_comment("ann", "work", two.number, body="second"),
        ann.issue.create_comment("ann", "work", one.number, body="third"),
    ]
    assert made[0].body == "first <script>x</script>"  # text, kept as written
    assert made[0].html_url == f"{BASE}/ann/work/issues/1#issuecomment-{made[0].id}"
    listed = ann.issue.get_comments("ann", "work", one.number)
    assert [c.id for c in listed] == [made[0].id, made[2].id]
    assert ann.issue.get_issue("ann", "work", one.number).comments == 2
    everywhere = http.get("/api/v1/repos/ann/work/issues/comments", params={"limit": 2})
    assert everywhere.headers["x-total-count"] == "3" and 'rel="next"' in everywhere.headers["link"]
    assert [c["id"] for c in everywhere.json()] == [made[0].id, made[1].id]
    assert [c.id for c in ann.issue.get_repo_comments("ann", "work", page=2, limit=2)] == [
        made[2].id
    ]
    later = ann.issue.get_repo_comments(
        "ann", "work", since=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    )
    assert later == []
    got = ann.issue.get_comment("ann", "work", made[1].id)
    assert got is not None and got.body == "second" and got.issue_url
    edited = ann.issue.edit_comment("ann", "work", made[1].id, body="second, edited")
    assert edited is not None and edited.body == "second, edited"
    ann.issue.delete_comment("ann", "work", made[1].id)
    assert ann.issue.get_issue("ann", "work", two.number).comments == 0
    with pytest.raises(ApiError) as gone:
        ann.issue.get_comment("ann", "work", made[1].id)
    assert gone.value.status_code == 404
    # a comment of another repository is not found through this one
    forge.registry.create("ann", "other")
    with pytest.raises(ApiError) as elsewhere:
        ann.issue.get_comment("ann", "other", made[0].id)
    assert elsewhere.value.status_code == 404


def test_labels_round_trip(forge: Forge, http: httpx.Client) -> None:
    ann, _ = _setup(forge, http)
    issues = ann.issue
    bug = issues.create_label("ann", "work", color="d73a4a", name="bug")
    docs = issues.create_label("ann", "work", color="00ff00", name="docs")
    ui = issues.create_label("ann", "work", color="0000ff", name="ui")
    assert issues.get_label("ann", "work", bug.id).name == "bug"
    by_name = http.get("/api/v1/repos/ann/work/labels/docs").json()
    assert by_name["id"] == docs.id
    changed = issues.edit_label("ann", "work", ui.id, name="UI", color="#123456")
    assert changed.name == "UI" and changed.color == "123456" and changed.description == ""
    number = issues.create_issue("ann", "work", title="labelled").number
    added = issues.add_label("ann", "work", number, labels=[bug.id, "docs"])  # type: ignore[list-item]
    assert [label.name for label in added] == ["bug", "docs"]
    replaced = issues.replace_labels("ann", "work", number, labels=[ui.id, docs.id])  # type: ignore[list-item]
    assert [label.name for label in replaced] == ["docs", "UI"]
    issues.remove_label("ann", "work", number, str(docs.id))
    assert [label.name for label in issues.get_labels("ann", "work", number)] == ["UI"]
    issues.clear_labels("ann", "work", number)
    assert issues.get_labels("ann", "work", number) == []
    events = [e.body for e in forge.issues.timeline(forge.issues.get("ann", "work", number))]
    assert events == ["+bug", "+docs", "-bug", "+UI", "-docs", "-UI"]
    page = http.get("/api/v1/repos/ann/work/labels", params={"limit": 2})
    assert page.headers["x-total-count"] == "3" and len(page.json()) == 2
    issues.delete_label("ann", "work", docs.id)
    assert [label.name for label in issues.list_labels("ann", "work")] == ["bug", "UI"]
    # an unknown label: 422, and nothing of the request written
    issues.add_label("ann", "work", number, labels=[bug.id])  # type: ignore[list-item]
    for call in (
        lambda: issues.add_label("ann", "work", number, labels=[ui.id, 99999]),  # type: ignore[list-item]
        lambda: issues.replace_labels("ann", "work", number, labels=[ui.id, "nope"]),  # type: ignore[list-item]
        lambda: issues.remove_label("ann", "work", number, "99999"),
        lambda: issues.create_issue("ann", "work", title="x", labels=[bug.id, 99999]),
    ):
        with pytest.raises(ApiError) as refused:
            call()
        assert refused.value.status_code == 422
    assert [label.name for label in issues.get_labels("ann", "work", number)] == ["bug"]
    assert [i.number for i in issues.list_issues("ann", "work", state="all")] == [number]


def test_milestones_round_trip(forge: Forge, http: httpx.Client) -> None:
    ann, _ = _setup(forge, http)
    issues = ann.issue
    due = datetime.datetime(2031, 5, 6, 12, 0, tzinfo=datetime.UTC)
    first = issues.create_milestone("ann", "work", title="1.0", due_on=due)
    assert first.due_on == datetime.datetime(2031, 5, 6, tzinfo=datetime.UTC)  # the day kept
    second = issues.create_milestone("ann", "work", title="2.0", state="closed")
    assert second.state == "closed"
    assert [m.title for m in issues.get_milestones_list("ann", "work")] == ["1.0"]
    assert [m.title for m in issues.get_milestones_list("ann", "work", state="closed")] == ["2.0"]
    assert {m.title for m in issues.get_milestones_list("ann", "work", state="all")} == {
        "1.0",
        "2.0",
    }
    assert [m.id for m in issues.get_milestones_list("ann", "work", state="all", name="2.0")] == [
        second.id
    ]
    by_title = http.get("/api/v1/repos/ann/work/milestones/1.0").json()
    assert by_title["id"] == first.id
    changed = issues.edit_milestone("ann", "work", str(first.id), state="closed", title="1.0.0")
    assert changed.state == "closed" and changed.title == "1.0.0" and changed.due_on
    issue = issues.create_issue("ann", "work", title="in it", milestone=first.id)
    assert issue.milestone and issue.milestone.open_issues == 1
    issues.delete_milestone("ann", "work", str(first.id))
    assert issues.get_issue("ann", "work", issue.number).milestone is None
    with pytest.raises(ApiError) as gone:
        issues.get_milestone("ann", "work", str(first.id))
    assert gone.value.status_code == 404


# -- who may, and bad input -----------------------------------------------------------------

ROUTE_PARAMS = {"owner": "ann", "repo": "hidden", "index": "1", "id": "1"}


def _issue_routes() -> list[tuple[str, str, dict[str, object]]]:
    """Every (method, path template, a fine body) of this module's resources."""
    found = []
    for template, kind in API_ROUTES:
        if kind.__module__.rsplit(".", 1)[-1] not in ("issues", "triage"):
            continue
        for method, operation in kind.operations.items():
            body = {f: _fine(s.kind) for f, s in support.api.declared(operation.body).items()}
            found.append((method, template, body))
    return found


def _fine(kind: str) -> object:
    return {"string": "x", "integer": 1, "boolean": False, "array": [], "integers": []}.get(
        kind, []
    )


def test_a_private_repository_is_missing_on_every_route(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "hidden", private=True)
    ann = forge.accounts.require("ann")
    issue = forge.issues.create("ann", "hidden", ann, "secret", "")
    forge.issues.comment(issue, ann, "secret too")
    label = forge.triage.create_label("ann", "hidden", "secret", "#000000")
    forge.triage.save_milestone("ann", "hidden", None, "secret", "", "")
    ben = {"Authorization": f"token {token_for(http, 'ben')}"}
    routes = _issue_routes()
    assert len(routes) >= 20
    for method, template, body in routes:
        hidden = template.format(**{**ROUTE_PARAMS, "id": str(label.id)})
        missing = template.format(**{**ROUTE_PARAMS, "repo": "nothing"})
        for headers in ({}, ben):
            seen = http.request(method, hidden, headers=headers, json=body)
            unseen = http.request(method, missing, headers=headers, json=body)
            assert seen.status_code == unseen.status_code == 404, (method, hidden, seen.text)
            assert seen.json()["message"] == unseen.json()["message"]
    assert forge.issues.get("ann", "hidden", 1).title == "secret"
    assert [c.body for c in forge.issues.comments("ann", "hidden", 1)] == ["secret too"]
    assert [x.name for x in forge.triage.labels("ann", "hidden")] == ["secret"]
    assert len(forge.triage.milestones("ann", "hidden")) == 1


def test_a_read_token_and_anonymous_callers_may_not_write(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "hidden")  # public, despite its name: every route answers
    ann = forge.accounts.require("ann")
    issue = forge.issues.create("ann", "hidden", ann, "open", "")
    comment = forge.issues.comment(issue, ann, "a comment")
    label = forge.triage.create_label("ann", "hidden", "l", "#000000")
    milestone = forge.triage.save_milestone("ann", "hidden", None, "m", "", "")
    reader = {"Authorization": f"token {token_for(http, 'ann', ['read:repository', 'read:issue'])}"}
    writes = 0
    for method, template, body in _issue_routes():
        if method == "get":
            continue
        path = template.format(**ROUTE_PARAMS)
        if "/comments/" in template:
            path = path.rsplit("/", 1)[0] + f"/{comment}"
        elif "/milestones/" in template:
            path = path.rsplit("/", 1)[0] + f"/{milestone}"
        elif "/labels/" in template:
            path = path.rsplit("/", 1)[0] + f"/{label.id}"
        read_only = http.request(method, path, headers=reader, json=body)
        assert read_only.status_code == 403, (method, path, read_only.text)
        assert "scope" in error_of(read_only)
        anonymous = http.request(method, path, json=body)
        assert anonymous.status_code == 401, (method, path, anonymous.text)
        writes += 1
    assert writes >= 14
    assert forge.issues.get("ann", "hidden", 1).title == "open"
    assert [c.body for c in forge.issues.comments("ann", "hidden", 1)] == ["a comment"]
    assert [x.name for x in forge.triage.labels("ann", "hidden")] == ["l"]
    assert [m.title for m in forge.triage.milestones("ann", "hidden")] == ["m"]
    assert forge.triage.labels_of([issue.id]) == {}


def test_every_declared_field_of_a_wrong_type_is_a_422(forge: Forge, http: httpx.Client) -> None:
    forge.registry.create("ann", "box")
    ann = forge.accounts.require("ann")
    issue = forge.issues.create("ann", "box", ann, "kept", "")
    comment = forge.issues.comment(issue, ann, "kept")
    label = forge.triage.create_label("ann", "box", "kept", "#000000")
    milestone = forge.triage.save_milestone("ann", "box", None, "kept", "", "")
    token = {"Authorization": f"token {token_for(http, 'ann')}"}
    wrong = {
        "string": 5,
        "integer": "5",
        "boolean": "true",
        "array": [1],
        "integers": ["1"],
        "ids": [True],
    }
    checked = 0
    for method, template, fine in _issue_routes():
        path = template.format(**{**ROUTE_PARAMS, "repo": "box"})
        if "/comments/" in template:
            path = path.rsplit("/", 1)[0] + f"/{comment}"
        elif "/milestones/" in template:
            path = path.rsplit("/", 1)[0] + f"/{milestone}"
        elif "/labels/" in template:
            path = path.rsplit("/", 1)[0] + f"/{label.id}"
        kind = next(k for t, k in API_ROUTES if t == template)
        body = support.api.declared(kind.operations[method].body)
        required = {f: fine[f] for f, spec in body.items() if spec.required}
        for field, spec in body.items():
            answer = http.request(
                method, path, headers=token, json={**required, field: wrong[spec.kind]}
            )
            assert answer.status_code == 422, (method, path, field, answer.text)
            assert field in error_of(answer)
            checked += 1
        if required:  # each required field left out
            answer = http.request(method, path, headers=token, json={})
            assert answer.status_code == 422 and "Required" in error_of(answer), (method, path)
        for raw in (b"{not json", b"[1, 2]"):
            answer = http.request(method, path, headers=token, content=raw) if body else None
            assert answer is None or answer.status_code == 422, (method, path, raw)
    assert checked >= 25
    assert [
        i.title
        for i in forge.issues.listing("ann", "box", IssueFilter(state="all", pull=None), 0, 9)[0]
    ] == ["kept"]
    assert [c.body for c in forge.issues.comments("ann", "box")] == ["kept"]
    assert [x.name for x in forge.triage.labels("ann", "box")] == ["kept"]
    assert [m.title for m in forge.triage.milestones("ann", "box")] == ["kept"]


def test_bad_values_are_clear_4xx_and_write_nothing(forge: Forge, http: httpx.Client) -> None:
    ann, _ = _setup(forge, http)
    token = ann._client_wrapper.get_headers()
    url = "/api/v1/repos/ann/work"
    number = ann.issue.create_issue("ann", "work", title="kept", body="kept").number
    for method, path, body, status in (
        ("post", "/issues", {"title": "   "}, 400),
        ("post", "/issues", {"title": "x" * 300}, 400),
        ("post", "/issues", {"title": "x", "body": "y" * 60_000}, 400),
        ("post", "/issues", {"title": "x", "milestone": 99999}, 422),
        ("post", "/issues", {"title": "x", "assignees": ["nobody"]}, 422),
        ("post", "/issues", {"title": "x", "assignees": ["ben"]}, 422),  # not a collaborator
        ("patch", f"/issues/{number}", {"state": "sideways"}, 422),
        ("patch", f"/issues/{number}", {"title": ""}, 400),
        ("patch", f"/issues/{number}", {"milestone": 99999}, 422),
        ("patch", "/issues/99999", {"title": "y"}, 404),
        ("patch", "/issues/x1", {"title": "y"}, 404),
        ("post", f"/issues/{number}/comments", {"body": "  "}, 400),
        ("post", f"/issues/{number}/comments", {"body": "z" * 60_000}, 400),
        ("post", "/labels", {"name": "l", "color": "red"}, 400),
        ("post", "/labels", {"name": "", "color": "ff0000"}, 400),
        ("post", "/milestones", {"title": "m", "due_on": "tomorrow"}, 422),
        ("post", "/milestones", {"title": "m", "state": "done"}, 422),
        ("post", "/issues", {"title": "\ud800"}, 422),  # a lone surrogate is no UTF-8
        ("post", "/issues", {"title": "cut\u0000here"}, 422),
        ("post", "/issues", {"title": "x", "milestone": 10**20}, 422),  # beyond 64 bits
        ("post", f"/issues/{number}/comments", {"body": "\udfff"}, 422),
        ("post", "/milestones", {"title": "m", "due_on": "9999-12-31T23:59:59-05:00"}, 422),
        ("post", "/milestones", {"title": "m", "due_on": "0001-01-01T00:00:00+05:00"}, 422),
        ("get", "/issues?since=yesterday", None, 422),
        ("get", "/issues?created_by=nobody", None, 404),
    ):
        # written by json.dumps, which escapes what is not ASCII (a lone surrogate included)
        sent = None if body is None else json.dumps(body).encode()
        answer = http.request(
            method, url + path, headers={**token, "Content-Type": "application/json"}, content=sent
        )
        assert answer.status_code == status, (method, path, answer.text)
        assert error_of(answer)
    huge = http.post(
        url + "/issues", headers=token, content=b'{"title": "' + b"x" * (2 << 20) + b'"}'
    )
    assert huge.status_code == 413 and error_of(huge)
    kept = ann.issue.get_issue("ann", "work", number)
    assert (kept.title, kept.body, kept.state, kept.comments) == ("kept", "kept", "open", 0)
    assert [i.number for i in ann.issue.list_issues("ann", "work", state="all")] == [number]
    assert ann.issue.list_labels("ann", "work") == []
    assert ann.issue.get_milestones_list("ann", "work", state="all") == []


def test_reads_spawn_no_process_and_a_list_costs_the_same_whatever_its_length(
    forge: Forge,
    http: httpx.Client,
) -> None:
    ann, _ = _setup(forge, http)
    account = forge.accounts.require("ann")
    label = forge.triage.create_label("ann", "work", "x", "#000000")
    milestone = forge.triage.save_milestone("ann", "work", None, "m", "", "")
    for n in range(24):
        issue = forge.issues.create("ann", "work", account, f"issue {n}", "")
        forge.triage.set_label(issue, account, label.id, True)
        forge.triage.set_milestone(issue, account, milestone)
        forge.triage.set_assignee(issue, account, account, True)
        forge.issues.comment(issue, account, f"comment {n}")
    forge.pulls.create("ann", "work", account, "a pull", "", "main", ("ann", "work", "t"), "0" * 40)
    headers = ann._client_wrapper.get_headers()
    reads = (
        "/issues",
        "/issues?state=all&type=issues",
        "/issues/1",
        "/issues/25",
        "/issues/1/comments",
        "/issues/comments",
        "/issues/1/labels",
        "/labels",
        f"/labels/{label.id}",
        "/milestones",
        f"/milestones/{milestone}",
    )
    with counting() as events:
        for path in reads:
            answer = http.get("/api/v1/repos/ann/work" + path, headers=headers)
            assert answer.status_code == 200, path
    assert events == []

    def statements(path: str, limit: int) -> int:
        counts = set()
        for _ in range(2):
            answer = http.get(
                "/api/v1/repos/ann/work" + path, params={"limit": limit}, headers=headers
            )
            assert len(answer.json()) == limit, path
            timing_ = dict(
                (part.split(";")[0].strip(), part)
                for part in answer.headers["server-timing"].split(",")
            )
            counts.add(int(timing_["query"].rsplit("dur=", 1)[1]))
        return min(counts)

    for path in ("/issues", "/issues?labels=x", "/issues/comments"):
        assert statements(path, 2) == statements(path, 20), path
    # the kept totals, not a count, when only the state and the kind are asked for
    assert (
        http.get("/api/v1/repos/ann/work/issues", headers=headers).headers["x-total-count"] == "25"
    )
    assert (
        http.get("/api/v1/repos/ann/work/issues?type=issues&state=closed", headers=headers).headers[
            "x-total-count"
        ]
        == "0"
    )


def test_the_description_has_the_issue_routes_and_their_shapes(
    forge: Forge,
    http: httpx.Client,
) -> None:
    ann, _ = _setup(forge, http)
    headers = ann._client_wrapper.get_headers()
    url = "/api/v1/repos/ann/work"
    label = http.post(url + "/labels", headers=headers, json={"name": "l", "color": "ffffff"})
    milestone = http.post(url + "/milestones", headers=headers, json={"title": "m"})
    issue = http.post(
        url + "/issues",
        headers=headers,
        json={"title": "t", "labels": [label.json()["id"]], "milestone": milestone.json()["id"]},
    )
    comment = http.post(url + "/issues/1/comments", headers=headers, json={"body": "c"})
    answers = {
        "Label": label.json(),
        "Milestone": milestone.json(),
        "Issue": issue.json(),
        "Comment": comment.json(),
        "RepositoryMeta": issue.json()["repository"],
        "TimelineComment": http.get(url + "/issues/1/timeline").json()[0],
    }
    document = http.get("/swagger.v1.json").json()
    for name, answer in answers.items():
        assert set(document["definitions"][name]["properties"]) == set(answer), name
    assert "/repos/{owner}/{repo}/issues/{index}/labels/{id}" in document["paths"]
    body = document["paths"]["/repos/{owner}/{repo}/issues"]["post"]["parameters"][-1]
    assert body["schema"]["properties"]["labels"]["items"] == {"type": "integer"}


def test_the_timeline_in_forgejos_types_a_page_at_a_time(forge: Forge, http: httpx.Client) -> None:
    ann, _ = _setup(forge, http)
    issues = ann.issue
    bug = issues.create_label("ann", "work", color="d73a4a", name="bug")
    first = issues.create_milestone("ann", "work", title="1.0")
    number = issues.create_issue("ann", "work", title="old title", body="").number
    issues.create_comment("ann", "work", number, body="a comment")
    issues.add_label("ann", "work", number, labels=[bug.id])  # type: ignore[list-item]
    issues.remove_label("ann", "work", number, "bug")
    issues.edit_issue("ann", "work", number, title="new title", milestone=first.id)
    issues.edit_issue("ann", "work", number, assignees=["ann"], state="closed")
    issues.edit_issue("ann", "work", number, state="open")
    issues.create_issue("ann", "work", title="see #1", body=f"as #{number} says")
    timeline = issues.get_comments_and_timeline("ann", "work", number)
    types = [(t.type, t.user.login if t.user else None) for t in timeline]
    assert [t for t, _ in types] == [
        "comment",
        "label",
        "label",
        "change_title",
        "milestone",
        "assignees",
        "close",
        "reopen",
        "issue_ref",
    ]
    assert {who for _, who in types} == {"ann"}
    comment, added, removed, title, milestone, assigned = timeline[:6]
    assert comment.body == "a comment" and comment.html_url and "#issuecomment-" in comment.html_url
    assert added.label and added.label.name == "bug" and added.body == "1"
    assert removed.label and removed.label.id == bug.id and removed.body == ""
    assert (title.old_title, title.new_title) == ("old title", "new title")
    assert milestone.milestone and milestone.milestone.title == "1.0"
    assert milestone.old_milestone is None
    assert assigned.assignee and assigned.assignee.login == "ann"
    assert assigned.removed_assignee is False
    assert timeline[-1].body == "ann/work#2"
    page = http.get(
        f"/api/v1/repos/ann/work/issues/{number}/timeline",
        params={"limit": 3, "page": 2},
        headers=ann._client_wrapper.get_headers(),
    )
    assert page.headers["x-total-count"] == "9"
    assert [t["type"] for t in page.json()] == ["change_title", "milestone", "assignees"]
    # a page is a range of places: as many statements for a long page as for a short one
    account = forge.accounts.require("ann")
    issue = forge.issues.get("ann", "work", number)
    for n in range(20):
        forge.issues.comment(issue, account, f"more {n}")

    def statements(limit: int) -> int:
        answer = http.get(
            f"/api/v1/repos/ann/work/issues/{number}/timeline",
            params={"limit": limit},
            headers=ann._client_wrapper.get_headers(),
        )
        assert len(answer.json()) == limit
        return int(answer.headers["server-timing"].rsplit("dur=", 1)[1])

    assert statements(2) == statements(25)
    with counting() as events:
        second = issues.get_comments_and_timeline("ann", "work", number, page=2, limit=20)
    assert [t.body for t in second] == [f"more {n}" for n in range(11, 20)]
    assert events == []


def test_a_kind_turned_off_keeps_its_comments_to_itself(forge: Forge, http: httpx.Client) -> None:
    ann, ben = _setup(forge, http)
    issue = ann.issue.create_issue("ann", "work", title="an issue")
    ann.issue.create_comment("ann", "work", issue.number, body="said on an issue")
    listed = ben.issue.get_repo_comments("ann", "work")
    assert [c.body for c in listed] == ["said on an issue"]
    features = forge.pulls.features("ann", "work")
    forge.pulls.set_features("ann", "work", dataclasses.replace(features, issues=False))
    answer = http.get("/api/v1/repos/ann/work/issues/comments", headers=basic("ben"))
    assert answer.status_code == 200 and answer.json() == [], answer.text
    assert answer.headers["X-Total-Count"] == "0"
