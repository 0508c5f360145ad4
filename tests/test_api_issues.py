"""The issue side of ``/api/v1`` (issues, comments, labels, milestones) driven by pyforgejo,
whose models check that every answer is in Forgejo's shape."""

from __future__ import annotations

import pytest
from pyforgejo.types import Comment as ForgejoComment
from pyforgejo.types import Issue as ForgejoIssue
from pyforgejo.types import Label as ForgejoLabel
from pyforgejo.types import Milestone as ForgejoMilestone
from test_api_core import BASE, forge, http  # noqa: F401

from floorless import timing
from floorless.access import Viewer
from floorless.forge import Forge
from floorless.web.api.issueshapes import (
    SCHEMAS,
    IssueFacts,
    comment_json,
    issue_json,
    label_json,
    milestone_json,
)

pytestmark = pytest.mark.usefixtures("forge")


def test_shapes_parse_into_forgejo_models_and_match_their_schemas(forge: Forge) -> None:  # noqa: F811
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
    assert set(shaped) == set(SCHEMAS["Issue"])
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
    assert set(shaped) == set(SCHEMAS["Comment"])
    parsed_comment = ForgejoComment.model_validate(shaped)
    assert parsed_comment.html_url == (
        f"{BASE}/ann/shapes/issues/{issue.number}#issuecomment-{comment}"
    )
    assert parsed_comment.issue_url and not parsed_comment.pull_request_url
    assert parsed_comment.user and parsed_comment.user.login == "ben"

    label = label_json(bug, repo, BASE)
    assert set(label) == set(SCHEMAS["Label"])
    assert ForgejoLabel.model_validate(label).name == "bug"
    milestone = milestone_json(forge.triage.milestone("ann", "shapes", soon))
    assert set(milestone) == set(SCHEMAS["Milestone"])
    assert ForgejoMilestone.model_validate(milestone).state == "open"


def test_a_gone_author_is_forgejos_ghost(forge: Forge) -> None:  # noqa: F811
    ben = forge.accounts.require("ben")
    repo = forge.registry.create("ann", "ghosts")
    issue = forge.issues.create("ann", "ghosts", ben, "by ben", "")
    forge.db.execute("UPDATE issues SET author_id = NULL WHERE id = ?", (issue.id,))
    issue = forge.issues.get("ann", "ghosts", issue.number)
    facts = IssueFacts(forge, Viewer(None), repo, BASE, [issue])
    parsed = ForgejoIssue.model_validate(issue_json(issue, facts))
    assert parsed.user and parsed.user.login == "Ghost" and parsed.user.id == -1


def test_a_page_of_issues_is_read_in_the_same_statements_whatever_its_length(
    forge: Forge,  # noqa: F811
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
