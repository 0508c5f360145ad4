"""Scheduled merges (``merge_when_checks_succeed``), driven by pyforgejo as Renovate drives
Forgejo: scheduled while the base's required checks fail, merged once a ``success`` arrives
(also by a forge started anew on the same data, and by one that starts after the status came
in), cancelled with ``DELETE``, kept across a push to the head, dropped with a timeline event
when the merge itself fails; the timeline's events in Forgejo's types and on the page, and
the merge's webhook."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyforgejo import PyforgejoApi
from pyforgejo.core.api_error import ApiError
from pyforgejo.types import TimelineComment
from support.accounts import PASSWORD
from support.api import BASE, api, error_of, token_for
from support.forges import start_forge, wait_for
from support.gitfixtures import git, git_text
from support.mergeweb import fill, open_pull, tip
from support.merging import commit, settle

from floorless.core.config import Settings
from floorless.forge import Forge
from floorless.web.app import create_app

PULL = "/api/v1/repos/ann/plans/pulls/1/merge"


class Site:
    """A forge over ``tmp_path``'s repositories and data, which a test may stop and start
    anew on the same data (as a restart, or another node, would)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.running = False
        self.begin()

    def begin(self) -> None:
        self.forge = start_forge(self.tmp_path / "repos", self.tmp_path / "data")
        # one sweep, at start: whatever merges later was let through by what was heard
        self.forge.automerge.sweep_seconds = math.inf
        app = httpx.WSGITransport(app=create_app(self.forge))
        self.http = httpx.Client(transport=app, base_url=BASE)
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.http.close()
            self.forge.stop()
            self.running = False

    def again(self) -> None:
        self.stop()
        self.begin()

    def api(self, token: str) -> PyforgejoApi:
        return api(self.http, token)

    def settle(self) -> None:
        """Wait for the follower and the scheduled merges' thread, after its first sweep."""
        wait_for(lambda: self.forge.automerge.last_sweep > 0)
        settle(self.forge)
        wait_for(self.forge.automerge.idle)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = Site(tmp_path)
    forge = site.forge
    for name in ("ann", "ben", "cat", "dan"):
        forge.accounts.create_user(name, f"{name}@example.org", PASSWORD)
    plans = forge.registry.create("ann", "plans")
    forge.policy.set_collaborator(plans, forge.accounts.require("ben"), "write")
    forge.policy.set_collaborator(plans, forge.accounts.require("dan"), "write")
    forge.policy.set_collaborator(plans, forge.accounts.require("cat"), "read")
    fill(forge, tmp_path)
    open_pull(forge)
    yield site
    site.stop()


def protect(site: Site, owner_token: str, contexts: list[str]) -> None:
    site.api(owner_token).repository.repo_create_branch_protection(
        "ann", "plans", rule_name="main", enable_status_check=True, status_check_contexts=contexts
    )


def schedule(site: Site, token: str, **more: object) -> httpx.Response:
    return site.http.post(
        PULL,
        headers={"Authorization": f"token {token}"},
        json={"Do": "merge", "merge_when_checks_succeed": True, **more},
    )


def timeline(site: Site, token: str) -> list[TimelineComment]:
    return site.api(token).issue.get_comments_and_timeline("ann", "plans", 1)


def kinds(site: Site, token: str) -> list[str]:
    wanted = {"pull_scheduled_merge", "pull_cancel_scheduled_merge", "merge_pull"}
    return [c.type for c in timeline(site, token) if c.type in wanted]


def merged(site: Site) -> bool:
    return site.forge.pulls.get("ann", "plans", 1).merged


def scheduled(site: Site) -> int:
    row = site.forge.db.one("SELECT COUNT(*) AS n FROM pull_automerges")
    assert row is not None
    return int(row["n"])


def test_merged_only_once_a_success_arrives_even_across_a_restart(site: Site) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    protect(site, ann, ["ci/build"])
    repo = site.forge.registry.get("ann", "plans")
    hook = site.forge.webhooks.create(
        repo.id, None, url="http://127.0.0.1:9/in", events=("pull_request",)
    )
    head, base = site.forge.pulls.get("ann", "plans", 1).head_oid, tip(site.forge)
    ci = site.api(ben).repository
    ci.repo_create_status("ann", "plans", head, state="pending", context="ci/build")

    # pyforgejo (Renovate's call): the answer parses; Forgejo's 201 says it was scheduled
    ci.repo_merge_pull_request(
        "ann", "plans", 1, do="squash", merge_when_checks_succeed=True,
        delete_branch_after_merge=True,
    )  # fmt: skip
    site.settle()
    assert not merged(site) and tip(site.forge) == base and scheduled(site) == 1
    again = schedule(site, ann)
    assert again.status_code == 409 and "scheduled" in error_of(again)
    assert kinds(site, ann) == ["pull_scheduled_merge"]
    said = next(c for c in timeline(site, ann) if c.type == "pull_scheduled_merge")
    assert said.user is not None and said.user.login == "ben"

    # a failure, then a success of another commit, let nothing through
    ci.repo_create_status("ann", "plans", head, state="failure", context="ci/build")
    ci.repo_create_status("ann", "plans", base, state="success", context="ci/build")
    site.settle()
    assert not merged(site) and scheduled(site) == 1

    site.again()  # the schedule is the database's: a new forge on the same data has it
    site.settle()
    assert not merged(site) and scheduled(site) == 1  # its first sweep finds it still held
    site.api(ben).repository.repo_create_status(
        "ann", "plans", head, state="success", context="ci/build"
    )
    wait_for(lambda: merged(site))
    site.settle()
    pull = site.forge.pulls.get("ann", "plans", 1)
    assert (pull.merged_by, pull.merge_style) == ("ben", "squash")
    after = tip(site.forge)
    bare = site.forge.registry.get("ann", "plans").path
    assert git_text(bare, "log", "-1", "--format=%P", after) == base  # a squash commit
    assert git_text(bare, "log", "-1", "--format=%s", after) == "Merge topic (#1)"
    assert git_text(bare, "branch", "--list", "topic") == ""  # deleted, as asked
    assert scheduled(site) == 0 and kinds(site, ann) == ["pull_scheduled_merge", "merge_pull"]
    # the merge's webhook is the one any merge sends
    wait_for(lambda: any(d.event == "pull_request" for d in site.forge.webhooks.deliveries(hook)))
    sent = [d for d in site.forge.webhooks.deliveries(hook) if d.event == "pull_request"]
    assert [d.action for d in sent] == ["closed"]
    assert json.loads(sent[0].payload)["pull_request"]["merged"] is True


def test_a_forge_starting_merges_what_passed_while_none_ran(site: Site) -> None:
    ann = token_for(site.http, "ann")
    protect(site, ann, ["ci/*"])
    head = site.forge.pulls.get("ann", "plans", 1).head_oid
    assert schedule(site, ann).status_code == 201
    site.stop()
    # no forge runs: the command line's forge (prepared, no background work) records it
    data, repos = site.tmp_path / "data", site.tmp_path / "repos"
    quiet = Forge(Settings.load(environ={}, data=data, repos=repos))
    quiet.prepare()
    repo = quiet.registry.get("ann", "plans")
    quiet.statuses.post(repo, head, "success", "ci/test", "", "", quiet.accounts.get("ben"))
    assert not quiet.pulls.get("ann", "plans", 1).merged
    quiet.stop()
    site.begin()  # its first sweep, at start, merges it
    wait_for(lambda: merged(site))
    assert site.forge.pulls.get("ann", "plans", 1).merged_by == "ann"


def test_merges_at_once_when_nothing_waits(site: Site) -> None:
    ann = token_for(site.http, "ann")
    head = site.forge.pulls.get("ann", "plans", 1).head_oid
    protect(site, ann, ["ci/build"])
    site.api(ann).repository.repo_create_status(
        "ann", "plans", head, state="success", context="ci/build"
    )
    answer = schedule(site, ann)
    assert answer.status_code == 200 and answer.text == ""
    assert merged(site) and scheduled(site) == 0
    assert kinds(site, ann) == ["merge_pull"]  # nothing scheduled, nothing to cancel


def test_what_is_refused_before_anything_is_scheduled(site: Site) -> None:
    ann, cat = token_for(site.http, "ann"), token_for(site.http, "cat")
    protect(site, ann, ["ci/build"])
    assert schedule(site, cat).status_code == 403  # a reader may not merge
    anonymous = site.http.post(PULL, json={"Do": "merge", "merge_when_checks_succeed": True})
    assert anonymous.status_code == 401
    read = token_for(site.http, "ann", ["read:repository"])
    assert schedule(site, read).status_code == 403
    assert schedule(site, ann, Do="rebase-merge").status_code == 405  # a way floorless has not
    site.forge.issues.close(site.forge.pulls.get("ann", "plans", 1).issue, None, "completed")
    assert schedule(site, ann).status_code == 405
    assert scheduled(site) == 0 and kinds(site, ann) == []


def test_cancelled_by_its_scheduler_or_a_writer_and_no_one_else(site: Site) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    cat, dan = token_for(site.http, "cat"), token_for(site.http, "dan")
    protect(site, ann, ["ci/build"])
    head = site.forge.pulls.get("ann", "plans", 1).head_oid

    def cancel(token: str) -> httpx.Response:
        headers = {"Authorization": f"token {token}"} if token else {}
        return site.http.delete(PULL, headers=headers)

    assert cancel(ben).status_code == 404  # nothing scheduled
    assert schedule(site, ben).status_code == 201
    assert cancel("").status_code == 401
    assert cancel(cat).status_code == 403  # a reader, who did not schedule it
    assert scheduled(site) == 1
    site.api(dan).repository.repo_cancel_scheduled_auto_merge("ann", "plans", 1)  # a writer
    assert scheduled(site) == 0
    with pytest.raises(ApiError) as none:
        site.api(ben).repository.repo_cancel_scheduled_auto_merge("ann", "plans", 1)
    assert none.value.status_code == 404
    assert kinds(site, ann) == ["pull_scheduled_merge", "pull_cancel_scheduled_merge"]
    cancelled = next(c for c in timeline(site, ann) if c.type == "pull_cancel_scheduled_merge")
    assert cancelled.user is not None and cancelled.user.login == "dan"
    # cancelled: a success merges nothing
    site.api(ben).repository.repo_create_status(
        "ann", "plans", head, state="success", context="ci/build"
    )
    site.settle()
    assert not merged(site)
    # scheduled again, the scheduler cancels it themselves
    assert schedule(site, cat).status_code == 403
    site.forge.policy.set_collaborator(
        site.forge.registry.get("ann", "plans"), site.forge.accounts.require("cat"), "write"
    )
    site.api(ann).repository.repo_create_status(
        "ann", "plans", head, state="failure", context="ci/build"
    )
    assert schedule(site, cat).status_code == 201
    site.forge.policy.set_collaborator(
        site.forge.registry.get("ann", "plans"), site.forge.accounts.require("cat"), "read"
    )
    assert cancel(cat).status_code == 204
    page = site.http.get("/ann/plans/pulls/1")
    assert "scheduled this pull request to auto merge when all checks succeed" in page.text
    assert "canceled auto merging this pull request when all checks succeed" in page.text


def test_a_push_keeps_the_schedule_and_the_new_head_waits_for_its_own_checks(
    site: Site,
) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    protect(site, ann, ["ci/build"])
    ci = site.api(ben).repository
    old = site.forge.pulls.get("ann", "plans", 1).head_oid
    assert schedule(site, ben).status_code == 201
    work = site.tmp_path / "work-plans"
    git(work, "checkout", "-q", "topic")
    new = commit(work, "More topic", t="t, more\n")
    git(work, "push", "-q", "origin", "topic")
    site.forge.maintenance.check_refs()
    wait_for(lambda: site.forge.pulls.get("ann", "plans", 1).head_oid == new)
    site.settle()
    assert scheduled(site) == 1  # as on Forgejo, a push does not cancel it
    ci.repo_create_status("ann", "plans", old, state="success", context="ci/build")
    site.settle()
    assert not merged(site)  # the old head's success is not the new head's
    ci.repo_create_status("ann", "plans", new, state="success", context="ci/build")
    wait_for(lambda: merged(site))
    bare = site.forge.registry.get("ann", "plans").path
    assert git_text(bare, "merge-base", "--is-ancestor", new, "main") == ""


def test_a_merge_that_fails_drops_the_schedule_with_a_timeline_event(site: Site) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    protect(site, ann, ["ci/build"])
    forge = site.forge
    repo = forge.registry.get("ann", "plans")
    work = site.tmp_path / "work-plans"
    git(work, "checkout", "-q", "topic")
    git(work, "reset", "-q", "--hard", "main")  # the head on top of the base: fast-forward
    head = commit(work, "On top of main", f="f\n")
    git(work, "push", "-q", "-f", "origin", "topic")
    forge.maintenance.check_refs()
    wait_for(lambda: forge.pulls.get("ann", "plans", 1).head_oid == head)
    site.settle()
    assert schedule(site, ben, Do="fast-forward-only").status_code == 201
    git(work, "checkout", "-q", "main")  # the base moves on: fast-forward is no longer possible
    commit(work, "Main again", m="m, again\n")
    git(work, "push", "-q", "origin", "main")
    forge.maintenance.check_refs()
    site.settle()
    assert scheduled(site) == 1
    before = tip(forge)
    site.api(ben).repository.repo_create_status(
        "ann", "plans", head, state="success", context="ci/build"
    )
    wait_for(lambda: scheduled(site) == 0)
    site.settle()
    assert not merged(site) and tip(forge) == before
    assert kinds(site, ann) == ["pull_scheduled_merge", "pull_cancel_scheduled_merge"]
    page = site.http.get(f"/{repo.full_name}/pulls/1")
    assert "had the scheduled auto merge of this pull request fail" in page.text


def test_an_approval_lets_a_scheduled_merge_through(site: Site) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    site.api(ann).repository.repo_create_branch_protection(
        "ann", "plans", rule_name="main", required_approvals=1
    )
    assert schedule(site, ann).status_code == 201  # ann opened it: another must approve
    site.settle()
    assert not merged(site)
    site.api(ben).repository.repo_create_pull_review(
        "ann", "plans", 1, event="APPROVED", body="Fine by me."
    )
    wait_for(lambda: merged(site))
    assert site.forge.pulls.get("ann", "plans", 1).merged_by == "ann"


def test_someone_the_rule_does_not_let_merge_is_refused_not_scheduled(site: Site) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    site.api(ann).repository.repo_create_branch_protection(
        "ann", "plans", rule_name="main", enable_status_check=True,
        status_check_contexts=["ci/build"], enable_merge_whitelist=True,
        merge_whitelist_usernames=["ann"],
    )  # fmt: skip
    refused = schedule(site, ben)
    assert refused.status_code == 405 and "who may merge" in error_of(refused)
    assert scheduled(site) == 0
    assert schedule(site, ann).status_code == 201


def test_a_merge_by_hand_ends_the_schedule_without_an_event(site: Site) -> None:
    ann, ben = token_for(site.http, "ann"), token_for(site.http, "ben")
    protect(site, ann, ["ci/build"])
    assert schedule(site, ben).status_code == 201
    # the owner, an administrator the rule does not bind, forces the merge now
    site.api(ann).repository.repo_merge_pull_request(
        "ann", "plans", 1, do="merge", force_merge=True
    )
    assert merged(site) and scheduled(site) == 0
    assert kinds(site, ann) == ["pull_scheduled_merge", "merge_pull"]
    assert site.http.delete(PULL, headers={"Authorization": f"token {ben}"}).status_code == 404
