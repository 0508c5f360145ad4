"""Pull requests: an issue (``is_pull``) that asks for a head to be merged into a base branch.

A pull request is its issue's row (number, title, body, state, comments and timeline, all as
``issues.py`` keeps them) and a row of ``pulls``: the base branch of the repository it lives
in, the head (a branch of this repository or of a fork, or, for one opened by an AGit push,
a topic and its pusher with no branch at all), the head as last seen, what the last
mergeability check found for the pair of commits it checked, and the merge once there is one.

Every pull request's head is also kept in the base repository as ``refs/pull/{n}/head``, so
that it can be fetched, and so that its commits stay whatever happens to the head branch.

What is written here is written in one transaction with the timeline entry that records it.
The git side (the ref, the merge itself, the checks) is ``merging.py``'s and the forge's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from floorless.accounts.accounts import Account
from floorless.collab.filters import OPEN_PULLS, STATES, IssueFilter
from floorless.collab.issues import Issue, IssuePage, Issues, clean_body, clean_title, issue_row
from floorless.core.errors import BadRequest, Conflict, NotFound
from floorless.db import Database, Row

# What the last check of (checked_base, checked_head) found.
CHECK_STATES = ("checking", "mergeable", "conflict", "empty", "unrelated", "head_gone")
MERGE_STYLES = ("merge", "rebase", "squash", "fast-forward-only")
BRANCH_MAX = 250  # bytes of a branch name a pull request may name


@dataclass(frozen=True)
class Pull:
    issue: Issue
    base_branch: str
    head_owner: str
    head_name: str
    head_branch: str  # "" for an AGit pull request: its head is refs/pull/{n}/head alone
    agit_topic: str
    agit_pusher_id: int | None
    head_oid: str  # hex
    merge_base: str
    check_state: str
    checked_base: str
    checked_head: str
    conflicts: tuple[str, ...]
    merged: bool
    merged_oid: str
    merged_by: str
    merged_at: float | None
    merge_style: str

    @property
    def number(self) -> int:
        return self.issue.number

    @property
    def title(self) -> str:
        return self.issue.title

    @property
    def owner(self) -> str:
        return self.issue.owner

    @property
    def name(self) -> str:
        return self.issue.name

    @property
    def ref(self) -> str:
        """Where the base repository keeps the head: fetchable, and kept after a merge."""
        return f"refs/pull/{self.issue.number}/head"

    @property
    def same_repo(self) -> bool:
        return (self.head_owner, self.head_name) == (self.issue.owner, self.issue.name)

    @property
    def agit(self) -> bool:
        return not self.head_branch

    @property
    def head_label(self) -> str:
        """The head as a reader names it: ``branch``, ``user:branch`` for a fork's, or the
        AGit topic."""
        if self.agit:
            return self.agit_topic
        if self.same_repo:
            return self.head_branch
        return f"{self.head_owner}:{self.head_branch}"

    @property
    def checked(self) -> bool:
        """Whether ``check_state`` is about the current head (the base is compared by the
        caller, which knows the base branch's tip)."""
        return self.checked_head == self.head_oid and self.check_state != "checking"


@dataclass(frozen=True)
class PullPage:
    page: IssuePage
    pulls: dict[int, Pull] = field(default_factory=dict)  # by number, for the page's issues


@dataclass(frozen=True)
class Features:
    """What a repository offers besides its code (``repo_features``; all on by default)."""

    issues: bool = True
    pulls: bool = True
    merge_styles: tuple[str, ...] = MERGE_STYLES
    default_merge: str = "merge"


_PULL = (
    "SELECT i.*, a.name AS author, p.*, m.name AS merger FROM issues i"
    " JOIN pulls p ON p.issue_id = i.id"
    " LEFT JOIN accounts a ON a.id = i.author_id"
    " LEFT JOIN accounts m ON m.id = p.merged_by"
)


# Forgejo's ``sort`` of a list of pull requests (newest first when it names none of them)
_ORDERS = {
    "oldest": "i.number ASC",
    "recentupdate": "i.updated_at DESC, i.number DESC",
    "leastupdate": "i.updated_at ASC, i.number ASC",
    "mostcomment": "i.comments DESC, i.number DESC",
    "leastcomment": "i.comments ASC, i.number DESC",
}


def clean_branch(branch: str) -> str:
    if not branch or len(branch.encode()) > BRANCH_MAX or "\0" in branch:
        raise BadRequest("name a branch")
    return branch


class Pulls:
    def __init__(self, db: Database, issues: Issues) -> None:
        self.db = db
        self.issues = issues
        # Called after a merge is recorded (committed): what follows from it, such as the
        # issues its description closes.
        self.on_merged: list[Callable[[Pull, Account | None], None]] = []
        # Called after a head move is recorded (committed), with the pull request as it was
        # before: each only queues its work (reviews follow their comments to the new head).
        self.on_head_moved: list[Callable[[Pull], None]] = []

    # -- reading ------------------------------------------------------------------------------

    def get(self, owner: str, name: str, number: int) -> Pull:
        row = self.db.one(
            f"{_PULL} WHERE i.owner = ? AND i.name = ? AND i.number = ? AND i.is_pull = 1",
            (owner, name, number),
        )
        if row is None:
            raise NotFound(f"no pull request #{number}")
        return _pull(row)

    def of_issue(self, issue: Issue) -> Pull:
        return self.get(issue.owner, issue.name, issue.number)

    def merges_of(self, issue_ids: list[int]) -> dict[int, float | None]:
        """Of the pull requests among ``issue_ids``, when each was merged (None: not yet), in
        one statement: what a list of issues shows of the pull requests in it."""
        if not issue_ids:
            return {}
        marks = ", ".join("?" * len(issue_ids))
        rows = self.db.query(
            "SELECT issue_id, merged, merged_at FROM pulls"  # noqa: S608
            f" WHERE issue_id IN ({marks})",
            issue_ids,
        )
        return {
            int(row["issue_id"]): float(row["merged_at"] or 0) if row["merged"] else None
            for row in rows
        }

    def page(
        self,
        owner: str,
        name: str,
        search: IssueFilter = OPEN_PULLS,
        before: int | None = None,
        after: int | None = None,
    ) -> PullPage:
        """A page of pull requests, as ``Issues.page`` pages issues (whatever kind ``search``
        names), with their heads and bases (one statement more, for the page's rows alone)."""
        found = self.issues.page(owner, name, search.but(pull=True), before, after)
        ids = [issue.id for issue in found.issues]
        if not ids:
            return PullPage(found)
        marks = ", ".join("?" * len(ids))
        rows = self.db.query(f"{_PULL} WHERE i.id IN ({marks})", ids)
        pulls = {pull.number: pull for pull in map(_pull, rows)}
        return PullPage(found, pulls)

    def listing(
        self, owner: str, name: str, search: IssueFilter, offset: int = 0, limit: int = 30
    ) -> tuple[list[Pull], int]:
        """A page of pull requests by offset, as Forgejo's API lists them (whatever kind
        ``search`` names; its ``sort`` as Forgejo's, newest first when it names none), and
        how many match: two statements along the (owner, name, is_pull, state, number)
        index."""
        where = ["i.owner = ?", "i.name = ?", "i.is_pull = 1"]
        params: list[object] = [owner, name]
        if search.state in STATES:
            where.append("i.state = ?")
            params.append(search.state)
        narrowed, more_params = search.conditions()
        clause = " AND ".join(where + narrowed)
        params += more_params
        counted = self.db.one(
            f"SELECT COUNT(*) AS n FROM issues i WHERE {clause}",  # noqa: S608
            params,
        )
        order = _ORDERS.get(search.sort, "i.number DESC")
        rows = self.db.query(
            f"{_PULL} WHERE {clause} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_pull(row) for row in rows], int(counted["n"]) if counted else 0

    def open_with_head(self, owner: str, name: str) -> list[Pull]:
        """The open pull requests whose head is in repository ``owner/name`` (a branch of it,
        or, when it is a base too, an AGit head)."""
        rows = self.db.query(
            f"{_PULL} WHERE i.state = 'open' AND p.head_owner = ? AND p.head_name = ?",
            (owner, name),
        )
        return [_pull(row) for row in rows]

    def open_between(self, base: tuple[str, str, str], head: tuple[str, str, str]) -> Pull | None:
        """The open pull request of head (owner, name, branch) into base (owner, name,
        branch), if there is one: read along the head's index, whatever else is open."""
        row = self.db.one(
            f"{_PULL} WHERE p.head_owner = ? AND p.head_name = ? AND p.head_branch = ?"
            " AND i.owner = ? AND i.name = ? AND p.base_branch = ? AND i.state = 'open'"
            " ORDER BY i.number LIMIT 1",
            (*head, *base),
        )
        return None if row is None else _pull(row)

    def open_with_base(self, owner: str, name: str) -> list[Pull]:
        rows = self.db.query(
            f"{_PULL} WHERE i.state = 'open' AND i.owner = ? AND i.name = ?", (owner, name)
        )
        return [_pull(row) for row in rows]

    def agit(self, owner: str, name: str, topic: str, pusher: Account) -> Pull | None:
        """The open AGit pull request of ``pusher`` on ``topic``, if any."""
        row = self.db.one(
            f"{_PULL} WHERE i.owner = ? AND i.name = ? AND i.state = 'open'"
            " AND p.head_branch = '' AND p.agit_topic = ? AND p.agit_pusher_id = ?",
            (owner, name, topic, pusher.id),
        )
        return None if row is None else _pull(row)

    def fork_of(
        self, parent_owner: str, parent_name: str, owner: str, name: str = ""
    ) -> tuple[str, str] | None:
        """The fork of ``parent_owner/parent_name`` that ``owner`` has (named ``name``, or,
        without a name, the first of theirs by name), for a compare's ``user:branch``."""
        where = "parent_owner = ? AND parent_name = ? AND lower(owner) = lower(?)"
        params: list[str] = [parent_owner, parent_name, owner]
        if name:
            where += " AND lower(name) = lower(?)"
            params.append(name)
        row = self.db.one(
            f"SELECT owner, name FROM forks WHERE {where} ORDER BY name LIMIT 1",  # noqa: S608
            params,
        )
        return None if row is None else (str(row["owner"]), str(row["name"]))

    def features(self, owner: str, name: str) -> Features:
        row = self.db.one("SELECT * FROM repo_features WHERE owner = ? AND name = ?", (owner, name))
        if row is None:
            return Features()
        styles = tuple(s for s in str(row["merge_styles"]).split(",") if s in MERGE_STYLES)
        return Features(bool(row["issues"]), bool(row["pulls"]), styles, row["default_merge"])

    # -- writing ------------------------------------------------------------------------------

    def create(
        self,
        owner: str,
        name: str,
        author: Account,
        title: str,
        body: str,
        base_branch: str,
        head: tuple[str, str, str],
        head_oid: str,
        agit_topic: str = "",
    ) -> Pull:
        """A new pull request of ``head`` (owner, name, branch; the branch "" for an AGit
        pull request, named by ``agit_topic`` and its author) into ``base_branch``: the issue
        and its ``pulls`` row in one transaction. The caller writes ``refs/pull/{n}/head``."""
        title, body = clean_title(title), clean_body(body, "a description")
        base_branch = clean_branch(base_branch)
        head_owner, head_name, head_branch = head
        if head_branch:
            clean_branch(head_branch)
        elif not agit_topic:
            raise BadRequest("a pull request needs a head branch or a topic")
        with self.db.transaction():
            number = self.issues.insert(owner, name, author, title, body, pull=True)
            issue = self.issues.get(owner, name, number, pull=True)
            self.db.execute(
                "INSERT INTO pulls (issue_id, base_branch, head_owner, head_name, head_branch,"
                " agit_topic, agit_pusher_id, head_oid) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    issue.id,
                    base_branch,
                    head_owner,
                    head_name,
                    head_branch,
                    agit_topic,
                    author.id if agit_topic else None,
                    head_oid,
                ),
            )
        pull = self.get(owner, name, number)
        self.issues.wrote(pull.issue, author, body)  # its description's references
        self.issues.changed(pull.issue, author, "opened")
        return pull

    def moved_head(self, pull: Pull, new_oid: str, forced: bool, actor: Account | None) -> bool:
        """The head moved from ``pull.head_oid`` to ``new_oid``: record it (a ``pushed`` or
        ``force_pushed`` event, ``old..new``) unless another node or thread did already.
        Whether this call recorded it."""
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE pulls SET head_oid = ?, check_state = 'checking'"
                " WHERE issue_id = ? AND head_oid = ?",
                (new_oid, pull.issue.id, pull.head_oid),
            )
            if changed:
                kind = "force_pushed" if forced else "pushed"
                self.issues.event(pull.issue, actor, kind, pull.head_oid, new_oid, now)
        if changed:
            for callback in self.on_head_moved:
                callback(pull)
            self.issues.changed(pull.issue, actor, "synchronized")
        return bool(changed)

    def record_check(
        self,
        pull: Pull,
        base_oid: str,
        head_oid: str,
        state: str,
        merge_base: str = "",
        conflicts: tuple[str, ...] = (),
    ) -> None:
        """What checking ``head_oid`` against the base at ``base_oid`` found; dropped if the
        head has moved since (a newer check follows)."""
        if state not in CHECK_STATES:
            raise ValueError(state)
        self.db.execute(
            "UPDATE pulls SET check_state = ?, checked_base = ?, checked_head = ?,"
            " merge_base = ?, conflicts = ? WHERE issue_id = ? AND head_oid = ?",
            (state, base_oid, head_oid, merge_base, "\n".join(conflicts), pull.issue.id, head_oid),
        )

    def mark_merged(self, pull: Pull, actor: Account | None, merged_oid: str, style: str) -> bool:
        """The pull request is merged (by floorless as ``merged_oid``, or found merged by a
        push, ``style`` "push"): closed, with a ``merged`` event. False if it was already
        merged or closed meanwhile."""
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE pulls SET merged = 1, merged_oid = ?, merged_by = ?, merged_at = ?,"
                " merge_style = ? WHERE issue_id = ? AND merged = 0",
                (merged_oid, actor.id if actor else None, now, style, pull.issue.id),
            )
            if not changed:
                return False
            closed = self.db.execute(
                "UPDATE issues SET state = 'closed', close_reason = 'completed', closed_at = ?,"
                " updated_at = ? WHERE id = ? AND state = 'open'",
                (now, now, pull.issue.id),
            )
            if not closed:  # closed in between: the merge is refused as a whole
                raise BadRequest(f"pull request #{pull.number} was closed meanwhile")
            self.issues.event(pull.issue, actor, "merged", style, merged_oid, now)
        merged = self.get(pull.owner, pull.name, pull.number)
        for callback in self.on_merged:
            callback(merged, actor)
        self.issues.changed(merged.issue, actor, "merged")
        return True

    def intend_merge(self, pull: Pull, actor: Account | None, merged_oid: str, style: str) -> None:
        """Write down the merge about to move the base branch to ``merged_oid``, before it
        moves: should the process die between the move and ``mark_merged``, whoever next
        sees the base reach ``merged_oid`` finishes the merge as intended (``merging.py``).
        The row stays unmerged (``merged`` 0) until then."""
        self.db.execute(
            "UPDATE pulls SET merged_oid = ?, merge_style = ?, merged_by = ?"
            " WHERE issue_id = ? AND merged = 0",
            (merged_oid, style, actor.id if actor else None, pull.issue.id),
        )

    def drop_intent(self, pull: Pull, merged_oid: str) -> None:
        """The merge to ``merged_oid`` did not happen (the base moved first)."""
        self.db.execute(
            "UPDATE pulls SET merged_oid = '', merge_style = '', merged_by = NULL"
            " WHERE issue_id = ? AND merged = 0 AND merged_oid = ?",
            (pull.issue.id, merged_oid),
        )

    def retarget(self, pull: Pull, actor: Account, base_branch: str) -> None:
        """Point the open, unmerged pull request at another base branch of its repository,
        with a ``base_changed`` event (old base, new base); what the last check found was
        about the old base, so it is checked again (the caller queues that). ``Conflict``
        when an open pull request of the same head into that base exists, or the pull
        request was merged or closed meanwhile."""
        base_branch = clean_branch(base_branch)
        if not pull.agit:
            other = self.open_between(
                (pull.owner, pull.name, base_branch),
                (pull.head_owner, pull.head_name, pull.head_branch),
            )
            if other is not None and other.number != pull.number:
                raise Conflict(f"pull request #{other.number} already asks for this")
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE pulls SET base_branch = ?, check_state = 'checking', merge_base = '',"
                " checked_base = '' WHERE issue_id = ? AND base_branch = ? AND merged = 0"
                " AND issue_id IN (SELECT id FROM issues WHERE state = 'open')",
                (base_branch, pull.issue.id, pull.base_branch),
            )
            if not changed:
                raise Conflict(f"pull request #{pull.number} changed meanwhile: look again")
            self.db.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now, pull.issue.id))
            self.issues.event(pull.issue, actor, "base_changed", pull.base_branch, base_branch, now)
        self.issues.changed(pull.issue, actor, "edited")  # as Forgejo tells of a new base

    def head_gone(self, pull: Pull, actor: Account | None = None) -> bool:
        """The head branch was deleted: state ``head_gone`` and a ``head_deleted`` event,
        once however many threads or nodes see it. Whether this call recorded it."""
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE pulls SET check_state = 'head_gone'"
                " WHERE issue_id = ? AND check_state <> 'head_gone'",
                (pull.issue.id,),
            )
            if changed:
                self.issues.event(pull.issue, actor, "head_deleted", "", pull.head_branch, now)
        return bool(changed)

    def set_features(self, owner: str, name: str, features: Features) -> None:
        styles = [s for s in features.merge_styles if s in MERGE_STYLES]
        if not styles:
            raise BadRequest("allow at least one way to merge")
        if features.default_merge not in styles:
            raise BadRequest("the default way to merge must be one of those allowed")
        self.db.execute(
            "INSERT INTO repo_features (owner, name, issues, pulls, merge_styles, default_merge)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner, name) DO UPDATE SET"
            " issues = excluded.issues, pulls = excluded.pulls,"
            " merge_styles = excluded.merge_styles, default_merge = excluded.default_merge",
            (
                owner,
                name,
                int(features.issues),
                int(features.pulls),
                ",".join(styles),
                features.default_merge,
            ),
        )


def _pull(row: Row) -> Pull:
    return Pull(
        issue=issue_row(row),
        base_branch=row["base_branch"],
        head_owner=row["head_owner"],
        head_name=row["head_name"],
        head_branch=row["head_branch"],
        agit_topic=row["agit_topic"],
        agit_pusher_id=row["agit_pusher_id"],
        head_oid=row["head_oid"],
        merge_base=row["merge_base"],
        check_state=row["check_state"],
        checked_base=row["checked_base"],
        checked_head=row["checked_head"],
        conflicts=tuple(c for c in str(row["conflicts"]).split("\n") if c),
        merged=bool(row["merged"]),
        merged_oid=row["merged_oid"],
        merged_by=row["merger"] or "",
        merged_at=row["merged_at"],
        merge_style=row["merge_style"],
    )
