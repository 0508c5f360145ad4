"""Merging a pull request on the web: the box a pull request's page shows about it, and the
form's POST.

The box shows the head commit's statuses, and where a protection rule of the base branch
requires checks, how each stands: a merge waits until all succeed (``protections.py``), and
the form is offered only to an administrator who may force it, with a box to say so.

The box says what the last check found (``merging.py`` checks in the background after every
push to the base or the head, and keeps the answer for that pair of commits): a page only
reads it, and says "checking" while the pair it holds is not the pair now. The form carries
the base and head commits the page showed; merging refuses (409) when either moved since,
so nobody merges what they did not see.
"""

from __future__ import annotations

import re
from typing import Any

import falcon

from floorless.accounts.access import Viewer
from floorless.collab.merging import NAMES
from floorless.collab.protections import checks, passing
from floorless.collab.pulls import Pull
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forge import Forge
from floorless.forgejo import urls
from floorless.web import auth
from floorless.web.comparing import STATE_WORDS
from floorless.web.context import RepoView
from floorless.web.marks import mark
from floorless.web.views.account import FormView
from floorless.web.views.base import RepoPage
from floorless.web.views.issues import issue_number

_OID = re.compile(r"[0-9a-f]{40}")


def merge_box(forge: Forge, view: RepoView, pull: Pull, viewer: Viewer) -> dict[str, Any]:
    """What ``_merge_box.html`` needs, from the pull's row and the page's refs (one statement,
    the repository's merge settings; no git). A pair not checked yet is queued for the
    follower, which costs the page nothing."""
    tip = view.snapshot.branches.get(pull.base_branch.encode())
    base = "" if tip is None else tip.hex()
    if pull.merged:
        state = "merged"
    elif pull.issue.state != "open":
        state = "closed"
    elif not base:
        state = "base_gone"
    elif pull.check_state == "head_gone":
        state = "head_gone"
    elif pull.checked and (pull.checked_base, pull.checked_head) == (base, pull.head_oid):
        state = pull.check_state
    else:
        state = "checking"
        forge.merger.queue(view.repo)
    features = forge.pulls.features(view.repo.owner, view.repo.name)
    styles = list(features.merge_styles)
    if pull.merge_base != base and "fast-forward-only" in styles:
        styles.remove("fast-forward-only")  # the base has commits the head lacks
    default = features.default_merge if features.default_merge in styles else ""
    may_merge = forge.policy.may_merge(viewer, view.level)
    latest = forge.statuses.latest(view.repo, pull.head_oid)
    rule = forge.protections.for_branch(view.repo, pull.base_branch)
    required = checks(rule, latest) if rule is not None and rule.enable_status_check else []
    blocked = bool(required) and not passing(required)
    may_force = (
        blocked
        and rule is not None
        and forge.policy.may_force_merge(viewer, view.level, rule.apply_to_admins)
    )
    open_ = not pull.merged and pull.issue.state == "open"
    return {
        "head_mark": mark(latest),
        "head_statuses": latest,
        "required_checks": required if open_ else [],
        "checks_blocked": blocked and open_,
        "merge_force": may_force,
        "merge_state": state,
        "merge_words": STATE_WORDS.get(state, ""),
        "merge_conflicts": pull.conflicts if state == "conflict" else (),
        "merge_form": may_merge
        and state == "mergeable"
        and bool(styles)
        and (not blocked or may_force),
        "merge_styles": [(style, NAMES[style]) for style in styles],
        "merge_default": default or (styles[0] if styles else ""),
        "merge_base": base,
        "merge_head": pull.head_oid,
        "merge_action": urls.pull_merge(view.repo, pull.number),
        "merge_may_delete": may_merge and not pull.agit,
        "merged_commit": urls.commit(view.repo, pull.merged_oid) if pull.merged else "",
    }


def _oid_field(form: dict[str, str], name: str) -> str:
    value = form.get(name, "").strip().lower()
    if not _OID.fullmatch(value):
        raise BadRequest(f"{name} is the commit id the page showed")
    return value


class Merge(FormView, RepoPage):
    """POST ``/{owner}/{repo}/pulls/{number}/merge``: style, expected_base, expected_head,
    delete_branch; back to the pull request once merged."""

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, number: str
    ) -> None:
        features = self.forge.pulls.features(view.repo.owner, view.repo.name)
        if not features.pulls:
            raise NotFound("pull requests are turned off here")
        pull = self.forge.pulls.get(view.repo.owner, view.repo.name, issue_number(number))
        account = self.signed_in(req)
        form = self.form(req)
        if not self.forge.policy.may_merge(auth.viewer_of(req), view.level):
            raise Forbidden(f"only those who may push to {view.repo.full_name} may merge")
        style = form.get("style", "") or features.default_merge
        expected_base = _oid_field(form, "expected_base")
        expected_head = _oid_field(form, "expected_head")
        delete = form.get("delete_branch", "") in ("on", "1", "true")
        force = form.get("force", "") in ("on", "1", "true")
        self.forge.merger.merge(
            view.repo,
            pull,
            account,
            style,
            expected_base,
            expected_head,
            delete_branch=delete,
            url=self.public_url(req) + urls.pull(view.repo, pull.number),
            force=force,
        )
        raise falcon.HTTPSeeOther(urls.pull(view.repo, pull.number))
