"""``/compare/{base}...{head}``: what a branch has that another has not, and the form that
opens a pull request of it; ``/compare`` alone: a form to choose the two branches.

``head`` may name a branch of this repository (``branch``), or of a fork of it
(``user:branch``, ``user/repo:branch``). A fork's objects include its parent's (alternates),
so a compare across forks is computed in the fork's handle; a pull request from a fork has
its head's objects copied into this repository (``copy_objects``), so that
``refs/pull/{n}/head`` holds it whatever happens to the fork.

The commits and the diff are kept by the pair of commit ids (the merge base and the head), as
the commit page keeps its diff by the commit's: a page shown again walks nothing and diffs
nothing, and nothing here starts a process (a ``.diff`` or ``.patch`` past the in-process
budget is git's, as the commit page's is).
"""

from __future__ import annotations

from typing import cast

import falcon
import pygit2

from floorless.core.config import Settings
from floorless.core.errors import BadRequest, Forbidden, NotFound
from floorless.forgejo import urls
from floorless.git import diff as gitdiff
from floorless.web import auth, diffrows
from floorless.web.comparing import (
    VARIANTS,
    Caching,
    Sides,
    branch_name,
    cached_range,
    commit_of,
    diff_limits,
    open_pull,
    parse_spec,
    refusal,
    resolve_sides,
    send_diff,
)
from floorless.web.context import RepoView
from floorless.web.diffrows import Options
from floorless.web.render import text
from floorless.web.views.commit import Shown, diff_budget, diff_options, shown_diff
from floorless.web.views.issues import IssueView


def cached_diff(
    renderer: Caching,
    handle: pygit2.Repository,
    settings: Settings,
    old: str,
    new: str,
    options: Options | None = None,
) -> Shown:
    """The diff of ``old`` to ``new`` (a merge base and a head) as a page shows it, kept by
    the pair of commit ids, the budgets and how it is shown."""
    options = options or Options()
    limits, budget = diff_limits(settings, options), diff_budget(settings)

    def make() -> Shown:
        changes = gitdiff.range_diff(handle, commit_of(handle, old), commit_of(handle, new), limits)
        return shown_diff(changes, budget, split=options.split)

    key = ("range-diff", old, new, limits, budget, options.style)
    return cast(Shown, renderer.caches["diff"].get_or_make(key, make))


class CompareChoose(IssueView):
    """``/compare``: two branches to choose (``?base=&head=`` goes to their compare)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView) -> None:
        base = req.get_param("base") or ""
        head = req.get_param("head") or ""
        if base and head:
            branch_name(base)
            if ":" not in head:
                branch_name(head)
            raise falcon.HTTPSeeOther(urls.compare(view.repo, base, head))
        default = view.snapshot.default_branch
        self.page(
            resp,
            view,
            "compare_choose.html",
            default=text(default) if default else "",
            names=[text(name) for name in view.snapshot.sorted_branches],
        )


class Compare(IssueView):
    """``/compare/{base}...{head}`` (and its ``.diff`` and ``.patch``): the commits and the
    diff, and for whoever may, the form that opens a pull request of them."""

    query = ("style", "w")

    def variant(self, req: falcon.Request) -> object:
        return diff_options(req)

    def on_get(self, req: falcon.Request, resp: falcon.Response, view: RepoView, spec: str) -> None:
        sides, variant = self.sides(req, view)
        if variant:
            found = cached_range(
                self.renderer, sides.head_view.handle, sides.base_oid, sides.head_oid
            )
            if found.unrelated:
                raise BadRequest("these branches have no history in common")
            send_diff(
                self.forge,
                req,
                resp,
                sides.head_view.repo,
                sides.head_view.handle,
                found.merge_base,
                sides.head_oid,
                variant,
                self.renderer,
            )
            return
        diff_options(req, resp)  # remembers a style chosen
        if sides.same_repo:  # what it shows is the repository's refs and pull requests
            self.kept_page(req, resp, view, lambda: self.show(req, resp, sides, {}, ""))
        else:  # and the fork's refs too, which the page cache does not watch
            self.show(req, resp, sides, {}, "")

    def on_post(
        self, req: falcon.Request, resp: falcon.Response, view: RepoView, spec: str
    ) -> None:
        if not view.repo.has_pulls:
            raise NotFound("pull requests are turned off here")
        account = self.signed_in(req)
        form = self.form(req)
        if not self.forge.policy.may_take_part(auth.viewer_of(req), view.level):
            raise Forbidden("you may not open pull requests here")
        sides, variant = self.sides(req, view)
        if variant:
            raise NotFound("open a pull request from the compare page")
        found = cached_range(self.renderer, sides.head_view.handle, sides.base_oid, sides.head_oid)
        refused = refusal(self.forge, sides, found)
        if refused is not None:
            raise BadRequest(refused[0])
        try:
            pull = open_pull(
                self.forge, account, form.get("title", ""), form.get("body", ""), sides, found
            )
        except BadRequest as exc:
            resp.status = exc.status
            self.show(req, resp, sides, form, str(exc))
            return
        raise falcon.HTTPSeeOther(urls.pull(view.repo, pull.number))

    def sides(self, req: falcon.Request, view: RepoView) -> tuple[Sides, str]:
        """The compare the URL names, and its variant ("", diff, patch); a head branch whose
        own name ends in ``.diff`` is that branch's compare."""
        raw = urls.exact_tail(req, "spec")
        for suffix in VARIANTS:
            if raw.endswith(suffix.encode()):
                try:
                    return self.resolve(req, view, raw), ""
                except (NotFound, BadRequest):
                    return self.resolve(req, view, raw[: -len(suffix)]), suffix[1:]
        return self.resolve(req, view, raw), ""

    def resolve(self, req: falcon.Request, view: RepoView, raw: bytes) -> Sides:
        default = view.snapshot.default_branch
        return resolve_sides(
            self.forge, req, view, parse_spec(raw, text(default) if default else "")
        )

    def show(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        sides: Sides,
        form: dict[str, str],
        error: str,
    ) -> bool:
        """Render the compare; whether the page is final (kept, for a compare within the
        repository)."""
        view = sides.base_view
        handle = sides.head_view.handle
        found = cached_range(self.renderer, handle, sides.base_oid, sides.head_oid)
        refused = refusal(self.forge, sides, found)
        shown = None
        options = diff_options(req)
        if not found.unrelated and found.commits:
            shown = cached_diff(
                self.renderer, handle, self.settings, found.merge_base, sides.head_oid, options
            )
        viewer = auth.viewer_of(req)
        title = found.commits[0].summary if len(found.commits) == 1 else sides.spec.head
        compare_url = urls.compare(view.repo, sides.spec.base_branch, sides.head_spec)
        self.page(
            resp,
            view,
            "compare.html",
            sides=sides,
            found=found,
            refusal=refused,
            diff=shown.diff if shown else None,
            rows=shown.rows if shown else {},
            head_repo=sides.head_view.repo,
            head_commit=sides.head_oid,
            merge_base=found.merge_base,
            options=options,
            with_file_url=diffrows.with_file_url,
            full_diff=urls.compare(view.repo, sides.spec.base_branch, sides.head_spec, "diff"),
            full_patch=urls.compare(view.repo, sides.spec.base_branch, sides.head_spec, "patch"),
            compare_url=compare_url,
            may_open=view.repo.has_pulls
            and self.forge.policy.may_take_part(viewer, view.level)
            and viewer.session is not None,
            pulls_on=view.repo.has_pulls,
            form=form,
            title=form.get("title", title),
            error=error,
            here=urls.exact_path(req),
            names=[text(name) for name in view.snapshot.sorted_branches],
        )
        return True
