"""A repository's labels and milestones through ``/api/v1``, in Forgejo's paths and shapes:
the triage an issue's resources (``issues.py``) put on issues and pull requests, by the same
rules (only those who may push may make, change or delete them)."""

from __future__ import annotations

import datetime
import re
from typing import Annotated, ClassVar, Required, TypedDict

import falcon

from floorless.collab.triage import Label, Milestone
from floorless.core.errors import NotFound
from floorless.forgejo import issues as shapes
from floorless.forgejo.issues import label_json, milestone_json
from floorless.forgejo.schema import Doc
from floorless.repos.registry import Repo
from floorless.web.api.base import Operation, Paged, Unprocessable
from floorless.web.api.issues import NUMBER, IssueResource, number_of, parse_time
from floorless.web.api.repository import Target

_HEX = re.compile(r"[0-9a-fA-F]{6}")


class CreateLabelOption(TypedDict, total=False):
    """What ``POST`` of ``Labels`` takes (Forgejo's ``CreateLabelOption``)."""

    name: Required[Annotated[str, Doc("the label's name")]]
    color: Required[Annotated[str, Doc("its colour, rrggbb or #rrggbb")]]
    description: Annotated[str, Doc("what it means")]
    exclusive: Annotated[bool, Doc("not kept by floorless: ignored")]
    is_archived: Annotated[bool, Doc("not kept by floorless: ignored")]


class EditLabelOption(TypedDict, total=False):
    """What ``PATCH`` of ``OneLabel`` takes (Forgejo's ``EditLabelOption``)."""

    name: Annotated[str, Doc("the label's name")]
    color: Annotated[str, Doc("its colour, rrggbb or #rrggbb")]
    description: Annotated[str, Doc("what it means")]
    exclusive: Annotated[bool, Doc("not kept by floorless: ignored")]
    is_archived: Annotated[bool, Doc("not kept by floorless: ignored")]


class MilestoneListQuery(Paged, total=False):
    """What ``GET`` of ``Milestones`` reads from its query."""

    state: Annotated[str, Doc("open (the default), closed or all")]
    name: Annotated[str, Doc("only the one of this title")]


class CreateMilestoneOption(TypedDict, total=False):
    """What ``POST`` of ``Milestones`` takes (Forgejo's ``CreateMilestoneOption``)."""

    title: Required[Annotated[str, Doc("its title")]]
    description: Annotated[str, Doc("what it is about")]
    due_on: Annotated[str, Doc("when it is due (RFC 3339; floorless keeps the day, in UTC)")]
    state: Annotated[str, Doc("open or closed")]


class EditMilestoneOption(TypedDict, total=False):
    """What ``PATCH`` of ``OneMilestone`` takes (Forgejo's ``EditMilestoneOption``)."""

    title: Annotated[str, Doc("the milestone's title")]
    description: Annotated[str, Doc("what it is about")]
    due_on: Annotated[str, Doc("when it is due (RFC 3339; floorless keeps the day, in UTC)")]
    state: Annotated[str, Doc("open or closed")]


def _day(text: str) -> str:
    """A due time sent as RFC 3339 (or a bare date) as the day, in UTC, floorless keeps."""
    if not text.strip():
        return ""
    seconds = parse_time(text, "due_on")
    try:
        return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d")
    except (ValueError, OverflowError, OSError):  # a moment whose day in UTC has no year
        raise Unprocessable("due_on is out of range") from None


def _color(text: str) -> str:
    """Forgejo takes a colour with or without its ``#``."""
    text = text.strip()
    return "#" + text if _HEX.fullmatch(text) else text


class Labels(IssueResource):
    """``/repos/{owner}/{repo}/labels``: list them, make one."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a repository's labels",
            list[shapes.Label],
            query=Paged,
            paged=True,
            operation_id="issueListLabels",
            tag="issue",
        ),
        "post": Operation(
            "create a label",
            shapes.Label,
            status=201,
            body=CreateLabelOption,
            operation_id="issueCreateLabel",
            tag="issue",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, _ = self.sorting(target)
        paging = self.paging(req)
        chosen, total = self.forge.triage.listing(
            found.owner, found.name, paging.offset, paging.limit
        )
        public = self.public(req)
        self.paged(req, resp, self.forge, paging, total)
        self.send(resp, [label_json(label, found, public) for label in chosen])

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, level = self.sorting(target)
        self.writer(req)
        data = self.body(req)
        self.must_sort(req, level)
        label = self.forge.triage.create_label(
            found.owner,
            found.name,
            data["name"],
            _color(data["color"]),
            data.get("description", ""),
        )
        self.send(resp, label_json(label, found, self.public(req)), 201)


class OneLabel(IssueResource):
    """``/repos/{owner}/{repo}/labels/{id}``: one label (by id, or by name as Forgejo also
    takes it), edited or deleted."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation("get a label", shapes.Label, operation_id="issueGetLabel", tag="issue"),
        "patch": Operation(
            "edit a label",
            shapes.Label,
            body=EditLabelOption,
            operation_id="issueEditLabel",
            tag="issue",
        ),
        "delete": Operation(
            "delete a label", None, status=204, operation_id="issueDeleteLabel", tag="issue"
        ),
    }

    def find(self, repo: Repo, id: str) -> Label:
        triage = self.forge.triage
        if NUMBER.fullmatch(id):
            return triage.label(repo.owner, repo.name, int(id))
        for label in triage.labels_named(repo.owner, repo.name, names=[id]):
            return label
        raise NotFound("label does not exist")

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        found, _ = self.sorting(target)
        self.send(resp, label_json(self.find(found, id), found, self.public(req)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        found, level = self.sorting(target)
        self.writer(req)
        data = self.body(req)
        self.must_sort(req, level)
        label = self.forge.triage.label(found.owner, found.name, number_of(id, "label"))
        self.forge.triage.edit_label(
            found.owner,
            found.name,
            label.id,
            data.get("name", label.name),
            _color(data.get("color", label.color)),
            data.get("description", label.description),
        )
        changed = self.forge.triage.label(found.owner, found.name, label.id)
        self.send(resp, label_json(changed, found, self.public(req)))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str
    ) -> None:
        found, level = self.sorting(target)
        self.writer(req)
        self.must_sort(req, level)
        self.forge.triage.delete_label(found.owner, found.name, number_of(id, "label"))
        self.nothing(resp)


# -- milestones -----------------------------------------------------------------------------


class Milestones(IssueResource):
    """``/repos/{owner}/{repo}/milestones``: list them (open ones unless asked), make one."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "list a repository's milestones",
            list[shapes.Milestone],
            query=MilestoneListQuery,
            paged=True,
            operation_id="issueGetMilestonesList",
            tag="issue",
        ),
        "post": Operation(
            "create a milestone",
            shapes.Milestone,
            status=201,
            body=CreateMilestoneOption,
            operation_id="issueCreateMilestone",
            tag="issue",
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, _ = self.sorting(target)
        state = req.get_param("state") or "open"
        milestones = self.forge.triage.milestones(
            found.owner,
            found.name,
            None if state == "all" else state if state == "closed" else "open",
        )
        name = (req.get_param("name") or "").strip().lower()
        if name:
            milestones = [m for m in milestones if m.title.lower() == name]
        paging = self.paging(req)
        self.paged(req, resp, self.forge, paging, len(milestones))
        chosen = milestones[paging.offset : paging.offset + paging.limit]
        self.send(resp, [milestone_json(m) for m in chosen])

    def on_post(self, req: falcon.Request, resp: falcon.Response, target: Target) -> None:
        found, level = self.sorting(target)
        self.writer(req)
        data = self.body(req)
        self.must_sort(req, level)
        state = data.get("state", "open")
        if state not in ("open", "closed"):
            raise Unprocessable("state is open or closed")
        due = _day(data.get("due_on", ""))
        triage = self.forge.triage
        with self.forge.db.transaction():
            made = triage.save_milestone(
                found.owner, found.name, None, data["title"], data.get("description", ""), due
            )
            if state == "closed":
                triage.set_milestone_state(found.owner, found.name, made, state)
        self.send(resp, milestone_json(triage.milestone(found.owner, found.name, made)), 201)


class OneMilestone(IssueResource):
    """``/repos/{owner}/{repo}/milestones/{id}``: one milestone (by id, or by title as
    Forgejo also takes it), edited or deleted."""

    operations: ClassVar[dict[str, Operation]] = {
        "get": Operation(
            "get a milestone", shapes.Milestone, operation_id="issueGetMilestone", tag="issue"
        ),
        "patch": Operation(
            "edit a milestone",
            shapes.Milestone,
            body=EditMilestoneOption,
            operation_id="issueEditMilestone",
            tag="issue",
        ),
        "delete": Operation(
            "delete a milestone", None, status=204, operation_id="issueDeleteMilestone", tag="issue"
        ),
    }

    def find(self, repo: Repo, id: str) -> Milestone:
        triage = self.forge.triage
        if NUMBER.fullmatch(id):
            return triage.milestone(repo.owner, repo.name, int(id))
        found = triage.milestone_named(repo.owner, repo.name, id)
        if found is None:
            raise NotFound("milestone does not exist")
        return found

    def on_get(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        found, _ = self.sorting(target)
        self.send(resp, milestone_json(self.find(found, id)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, target: Target, id: str) -> None:
        found, level = self.sorting(target)
        self.writer(req)
        data = self.body(req)
        self.must_sort(req, level)
        milestone = self.find(found, id)
        state = data.get("state", milestone.state)
        if state not in ("open", "closed"):
            raise Unprocessable("state is open or closed")
        due = _day(data["due_on"]) if "due_on" in data else milestone.due
        triage = self.forge.triage
        with self.forge.db.transaction():
            triage.save_milestone(
                found.owner,
                found.name,
                milestone.id,
                data.get("title", milestone.title),
                data.get("description", milestone.description),
                due,
            )
            if state != milestone.state:
                triage.set_milestone_state(found.owner, found.name, milestone.id, state)
        self.send(resp, milestone_json(triage.milestone(found.owner, found.name, milestone.id)))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, target: Target, id: str
    ) -> None:
        found, level = self.sorting(target)
        self.writer(req)
        self.must_sort(req, level)
        self.forge.triage.delete_milestone(found.owner, found.name, self.find(found, id).id)
        self.nothing(resp)
