"""What a protection rule holds a merge to, beside its status checks, set and read through
pyforgejo as a Forgejo client sets it: approvals (whose count, and whether an approval of an
earlier head still does), requests for changes, a head behind its base, who may merge, and
protected files; an administrator the rule does not bind may force the merge."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import support.statuses
from falcon import testing
from pyforgejo import BranchProtection
from pyforgejo.core.api_error import ApiError
from support.accounts import csrf_of
from support.api import api, token_for
from support.gitfixtures import git
from support.mergeweb import fill, open_pull, person, tip
from support.merging import commit, settle

from floorless.forge import Forge

# the shared fixtures this module's tests ask for
client = support.statuses.client
forge = support.statuses.forge
http = support.statuses.http


def clients(http: httpx.Client) -> dict[str, object]:
    return {name: api(http, token_for(http, name)).repository for name in ("ann", "ben", "cat")}


def refused(who: object, reason: str) -> None:
    with pytest.raises(ApiError) as error:
        who.repo_merge_pull_request("ann", "plans", 1, do="merge")  # type: ignore[attr-defined]
    assert error.value.status_code == 405, error.value.body
    assert reason in str(error.value.body)


def review(who: object, event: str) -> None:
    who.repo_create_pull_review("ann", "plans", 1, event=event, body="seen")  # type: ignore[attr-defined]


def test_a_rule_set_by_pyforgejo_reads_back_in_its_model(
    forge: Forge,
    http: httpx.Client,
) -> None:
    ann = clients(http)["ann"]
    made = ann.repo_create_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", rule_name="main", enable_push=True, enable_push_whitelist=True,
        push_whitelist_usernames=["ben"], required_approvals=2, dismiss_stale_approvals=True,
        block_on_rejected_reviews=True, block_on_outdated_branch=True,
        enable_merge_whitelist=True, merge_whitelist_usernames=["ann"],
        protected_file_patterns="*.lock", unprotected_file_patterns="docs/**",
        apply_to_admins=True,
    )  # fmt: skip
    assert isinstance(made, BranchProtection)
    assert made.push_whitelist_usernames == ["ben"] and made.required_approvals == 2
    assert made.enable_push and made.enable_push_whitelist and made.dismiss_stale_approvals
    assert made.merge_whitelist_usernames == ["ann"] and made.unprotected_file_patterns == "docs/**"
    edited = ann.repo_edit_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", "main", required_approvals=0, enable_push=False
    )
    assert edited.required_approvals == 0 and edited.enable_push is False
    assert edited.push_whitelist_usernames == ["ben"]  # what was not given stays
    rule = forge.protections.get(forge.registry.get("ann", "plans"), "main")
    assert rule.block_on_outdated_branch and rule.apply_to_admins and not rule.enable_push


def test_approvals_hold_a_merge_and_count_only_those_who_may_write(
    forge: Forge,
    http: httpx.Client,
    tmp_path: Path,
) -> None:
    fill(forge, tmp_path)
    open_pull(forge)  # by ann
    people = clients(http)
    people["ann"].repo_create_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", rule_name="main", required_approvals=1
    )
    refused(people["ben"], "Does not have enough approvals: 0 of 1")
    review(people["cat"], "APPROVED")  # cat may only read: not counted
    refused(people["ben"], "0 of 1")
    review(people["ben"], "APPROVED")
    people["ben"].repo_merge_pull_request("ann", "plans", 1, do="merge")  # type: ignore[attr-defined]
    assert forge.pulls.get("ann", "plans", 1).merged


def test_an_approval_of_an_earlier_head_and_a_request_for_changes(
    forge: Forge,
    http: httpx.Client,
    tmp_path: Path,
) -> None:
    work = fill(forge, tmp_path)
    open_pull(forge)
    people = clients(http)
    people["ann"].repo_create_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", rule_name="main", required_approvals=1, dismiss_stale_approvals=True,
        block_on_rejected_reviews=True,
    )  # fmt: skip
    review(people["ben"], "APPROVED")
    git(work, "checkout", "-q", "topic")
    commit(work, "More topic", t="t2\n")
    git(work, "push", "-q", "origin", "topic")
    forge.maintenance.check_refs()
    settle(forge)
    assert forge.pulls.get("ann", "plans", 1).head_oid == tip(forge, "topic")
    refused(people["ben"], "Does not have enough approvals: 0 of 1")  # the approval is stale
    people["ann"].repo_edit_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", "main", dismiss_stale_approvals=False
    )
    review(people["cat"], "REQUEST_CHANGES")  # a reader's verdict: not counted either way
    # ben asks for changes now: his latest verdict holds the merge
    review(people["ben"], "REQUEST_CHANGES")
    refused(people["ben"], "There are requested changes")
    review(people["ben"], "APPROVED")
    people["ben"].repo_merge_pull_request("ann", "plans", 1, do="merge")  # type: ignore[attr-defined]
    assert forge.pulls.get("ann", "plans", 1).merged


def test_an_outdated_head_who_may_merge_and_protected_files(
    forge: Forge,
    http: httpx.Client,
    tmp_path: Path,
) -> None:
    work = fill(forge, tmp_path)  # main has a commit topic lacks: topic is behind
    git(work, "checkout", "-q", "topic")
    commit(work, "A lock file", **{"deps.lock": "pinned\n"})
    git(work, "push", "-q", "origin", "topic")
    forge.maintenance.check_refs()
    open_pull(forge)
    people = clients(http)
    people["ann"].repo_create_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", rule_name="main", block_on_outdated_branch=True
    )
    refused(people["ben"], "The head branch is behind the base branch")
    people["ann"].repo_edit_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", "main", block_on_outdated_branch=False, enable_merge_whitelist=True,
        merge_whitelist_usernames=["ann"],
    )  # fmt: skip
    refused(people["ben"], "not on the list of who may merge")
    people["ann"].repo_edit_branch_protection(  # type: ignore[attr-defined]
        "ann", "plans", "main", enable_merge_whitelist=False, protected_file_patterns="*.lock"
    )
    refused(people["ben"], "It changes protected files: deps.lock")
    before = tip(forge)
    # the owner, not bound by the rule (apply_to_admins off), forces it past
    people["ann"].repo_merge_pull_request(  # type: ignore[attr-defined]
        "ann", "plans", 1, do="merge", force_merge=True
    )
    assert forge.pulls.get("ann", "plans", 1).merged and tip(forge) != before


def test_the_settings_page_sets_who_may_push_and_what_a_merge_needs(
    forge: Forge,
    client: testing.TestClient,
) -> None:
    ann = person(client, "ann")
    page = ann.get("/ann/plans/settings")
    made = ann.post(
        "/ann/plans/settings",
        {"action": "protect", "rule": "release/*", "push": "listed", "push_users": "ben\r\n",
         "force_push": "none", "required_approvals": "2", "approvers": "ben\r\ncat",
         "dismiss_stale_approvals": "on", "block_on_rejected_reviews": "on",
         "protected_file_patterns": "*.lock", "unprotected_file_patterns": "docs/**",
         "apply_to_admins": "on"},
        csrf_of(page.text),
    )  # fmt: skip
    assert made.status_code == 303, made.text[:300]
    rule = forge.protections.get(forge.registry.get("ann", "plans"), "release/*")
    assert rule.enable_push and rule.enable_push_whitelist
    assert rule.push_whitelist_usernames == ("ben",) and not rule.enable_force_push
    assert rule.required_approvals == 2 and rule.approvals_whitelist_username == ("ben", "cat")
    assert rule.enable_approvals_whitelist and rule.dismiss_stale_approvals
    assert rule.block_on_rejected_reviews and not rule.block_on_outdated_branch
    assert rule.protected_file_patterns == "*.lock" and rule.apply_to_admins
    page = ann.get("/ann/plans/settings")
    assert 'name="push" value="listed" checked' in page.text
    assert 'value="*.lock"' in page.text and 'name="required_approvals"' in page.text
    unknown = ann.post(
        "/ann/plans/settings",
        {"action": "protect", "rule": "release/*", "push": "listed", "push_users": "nobody"},
        csrf_of(page.text),
    )  # fmt: skip
    assert unknown.status_code == 400 and "nobody" in unknown.text
