"""What a list of issues or pull requests asks for, as one value: ``IssueFilter``.

The issue list, the pull request list, their URLs and the API's two lists all narrow the same
rows by the same things, so they share one value rather than four copies of a long signature:
the pages read it from their query (``from_query``) and write it back into their links
(``params``), ``Issues.page`` and ``Pulls.page`` page by a cursor along it, and
``Issues.listing`` and ``Pulls.listing`` page by an offset along it, for the API.

A reader types names (a label's, a milestone's title, a person's): those are matched by name
in the statement, so an unknown name matches nothing. The API names labels and milestones by
id, having looked them up (Forgejo leaves unknown ones out): those are the ``*_ids`` fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from floorless.core.errors import BadRequest

STATES = ("open", "closed")  # what a state narrows to; anything else (all) is both
QUERY_MAX = 200  # characters of a word search or a name typed in a list's query
NAME_MAX = 100  # characters of an author's name typed in a list's query


def _words(text: str | None, limit: int = QUERY_MAX) -> str:
    return " ".join((text or "").split())[:limit]


@dataclass(frozen=True)
class IssueFilter:
    """Which issues or pull requests a list shows (the cursor or offset of a page of it is
    no part of it)."""

    state: str = "open"  # open, closed or all
    pull: bool | None = False  # pull requests, issues, or (None) both
    q: str = ""  # words of the title
    author: str = ""  # the name of who opened them
    label: str = ""  # a label's name
    milestone: str = ""  # a milestone's title
    assignee: str = ""  # the name of someone assigned
    label_ids: tuple[int, ...] = ()  # labels by id: those with all of them
    milestone_ids: tuple[int, ...] = ()  # milestones by id: those in any of them
    author_id: int | None = None
    assignee_id: int | None = None
    since: float | None = None  # updated at or after
    before: float | None = None  # updated before
    sort: str = ""  # Forgejo's order of a list of pull requests ("": newest first)

    @classmethod
    def from_query(cls, get: Callable[[str], str | None], pull: bool) -> IssueFilter:
        """The filter of an issue (or, with ``pull``, pull request) list's page from its query
        parameters (``get`` reads one): ``state``, ``q``, ``author``, ``label``, ``milestone``
        and ``assignee``. ``BadRequest`` for a state that is none of open, closed, all."""
        state = get("state") or "open"
        if state not in (*STATES, "all"):
            raise BadRequest("state is open, closed or all")
        return cls(
            state=state,
            pull=pull,
            q=_words(get("q")),
            author=(get("author") or "").strip()[:NAME_MAX],
            label=_words(get("label")),
            milestone=_words(get("milestone")),
            assignee=_words(get("assignee")),
        )

    def params(self) -> dict[str, str | None]:
        """The query parameters of a list's page that ``from_query`` reads back as this
        filter, in the order its links write them (None: left out)."""
        return {
            "state": self.state if self.state != "open" else None,
            "q": self.q or None,
            "author": self.author or None,
            "label": self.label or None,
            "milestone": self.milestone or None,
            "assignee": self.assignee or None,
        }

    def but(self, **changes: Any) -> IssueFilter:
        """This filter with ``changes`` (a list's tabs: the same search in another state)."""
        return dataclasses.replace(self, **changes)

    def only(self, **changes: Any) -> IssueFilter:
        """The same kind and state narrowed by ``changes`` alone (a label's chip in a list
        links to that label's list, whatever else the list was searched for)."""
        return IssueFilter(state=self.state, pull=self.pull, **changes)

    @property
    def searched(self) -> bool:
        """Whether a reader narrowed the list by more than its state (its page then says
        that nothing *matches*, not that there is nothing)."""
        return bool(self.q or self.author or self.label or self.milestone or self.assignee)

    @property
    def plain(self) -> bool:
        """Whether only the kind and the state are asked for: what the kept totals count."""
        return not self.conditions()[0]

    def conditions(self) -> tuple[list[str], list[object]]:
        """What a statement over ``issues i`` adds to its WHERE for this filter besides the
        repository, the kind and the state, and its parameters: one condition per thing
        asked for, each read along an index of its own table."""
        where: list[str] = []
        params: list[object] = []
        if self.q:
            where.append("lower(i.title) LIKE ? ESCAPE '!'")
            params.append("%" + like(self.q.lower()) + "%")
        if self.author:
            where.append("i.author_id IN (SELECT id FROM accounts WHERE lower(name) = lower(?))")
            params.append(self.author)
        if self.label:
            where.append(
                "EXISTS (SELECT 1 FROM issue_labels il JOIN labels l ON l.id = il.label_id"
                " WHERE il.issue_id = i.id AND lower(l.label) = lower(?))"
            )
            params.append(self.label)
        if self.milestone:
            where.append(
                "i.milestone_id IN (SELECT m.id FROM milestones m WHERE m.owner = i.owner"
                " AND m.name = i.name AND lower(m.title) = lower(?))"
            )
            params.append(self.milestone)
        if self.assignee:
            where.append(
                "EXISTS (SELECT 1 FROM issue_assignees ia JOIN accounts p ON p.id = ia.account_id"
                " WHERE ia.issue_id = i.id AND lower(p.name) = lower(?))"
            )
            params.append(self.assignee)
        for label_id in self.label_ids:  # all of them, as Forgejo's filter
            where.append(
                "EXISTS (SELECT 1 FROM issue_labels il WHERE il.issue_id = i.id"
                " AND il.label_id = ?)"
            )
            params.append(label_id)
        if self.milestone_ids:
            where.append(f"i.milestone_id IN ({', '.join('?' * len(self.milestone_ids))})")
            params.extend(self.milestone_ids)
        if self.author_id is not None:
            where.append("i.author_id = ?")
            params.append(self.author_id)
        if self.assignee_id is not None:
            where.append(
                "EXISTS (SELECT 1 FROM issue_assignees ia WHERE ia.issue_id = i.id"
                " AND ia.account_id = ?)"
            )
            params.append(self.assignee_id)
        if self.since is not None:
            where.append("i.updated_at >= ?")
            params.append(self.since)
        if self.before is not None:
            where.append("i.updated_at < ?")
            params.append(self.before)
        return where, params


def like(text: str) -> str:
    """``text`` matched literally by LIKE ... ESCAPE '!'."""
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


OPEN_ISSUES = IssueFilter()  # what a list shows when its query asks for nothing
OPEN_PULLS = IssueFilter(pull=True)
