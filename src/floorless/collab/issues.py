"""Issues: numbered per repository, with a Markdown body, comments and a timeline of events.

An issue is kept by its repository's owner and name (as visibility and collaborators are), so
that a rename carries it along and a deletion takes it away (``repos.py``). Issues and pull
requests will share one sequence of numbers per repository (``is_pull``); a number is the
repository's highest plus one, taken inside a write transaction, which both databases
serialize (``Database.transaction``), so creators at the same moment get distinct,
consecutive numbers.

Every change is one transaction with the timeline entry that records it: a comment, or an
event (closed with its reason, reopened, the title changed). Each entry takes the issue's next
``seq``, so the timeline's order is the order of the writes, never the clock's.

Who may do what is not decided here but in ``access.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from floorless.accounts.accounts import Account
from floorless.collab.filters import OPEN_ISSUES, STATES, IssueFilter
from floorless.core.errors import BadRequest, FloorlessError, NotFound
from floorless.db import Database, Row
from floorless.files.attachments import Attachments

log = logging.getLogger(__name__)

TITLE_MAX = 255  # characters, as Forgejo allows
BODY_MAX = 50_000  # characters of a body or a comment (a form is at most 64 KiB)
REASONS = ("completed", "not_planned")
PER_PAGE = 25

_ISSUE = "SELECT i.*, a.name AS author FROM issues i LEFT JOIN accounts a ON a.id = i.author_id"


@dataclass(frozen=True)
class Issue:
    id: int
    number: int
    title: str
    body: str
    author: str  # "" when the account is gone
    author_id: int | None
    state: str
    close_reason: str
    created_at: float
    updated_at: float
    closed_at: float | None
    comments: int
    is_pull: bool = False
    entries: int = 0  # comments and events on the timeline
    owner: str = ""
    name: str = ""

    @property
    def closed(self) -> bool:
        return self.state == "closed"


@dataclass(frozen=True)
class Entry:
    """One entry of an issue's timeline: a comment (``kind`` "comment") or an event."""

    id: int
    seq: int
    kind: str  # comment, closed, reopened, title
    who: str
    body: str  # a comment's text; an event's new value (a reason, a title)
    old_value: str
    created_at: float
    edited: bool = False  # a comment changed since it was written
    author_id: int | None = None  # a comment's author, for who may edit it
    updated_at: float | None = None  # a comment's last change (None for an event)


@dataclass(frozen=True)
class Comment:
    """A comment with what names it outside its issue's page (the API's comments)."""

    id: int
    issue_id: int
    number: int  # of its issue or pull request
    is_pull: bool
    author: str  # "" when the account is gone
    author_id: int | None
    body: str
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class IssuePage:
    issues: list[Issue]
    counts: dict[str, int]  # open, closed: of the issues the search matches
    newer: int | None  # the cursor (an issue number) of the previous page, if any
    older: int | None  # and of the next


def clean_title(title: str) -> str:
    title = " ".join(title.split())
    if not title:
        raise BadRequest("an issue needs a title")
    if len(title) > TITLE_MAX:
        raise BadRequest(f"a title is at most {TITLE_MAX} characters")
    return title


def clean_body(body: str, what: str = "the text") -> str:
    body = body.replace("\r\n", "\n")
    if len(body) > BODY_MAX:
        raise BadRequest(f"{what} is at most {BODY_MAX} characters")
    return body


@dataclass(frozen=True)
class Change:
    """What happened to an issue or pull request, for ``Issues.on_change``."""

    issue: Issue
    actor: Account | None
    action: str
    comment_id: int | None = None
    review_id: int | None = None  # the review submitted (action "reviewed")


class Issues:
    def __init__(self, db: Database, files: Attachments | None = None) -> None:
        self.db = db
        # The files attached to comments, deleted with them (a git hook's process, which
        # deletes no comment, has none).
        self.files = files
        # Called with (issue, author, text) once a description or a comment is written (and
        # committed): references to other issues are recorded from here (``references.py``).
        self.on_text: list[Callable[[Issue, Account | None, str], object]] = []
        # Called with each ``Change`` to an issue or pull request once it is committed, by
        # whichever way it came (a page, the API, a push): webhooks' events are sent from
        # here (``forge.py``), so that no caller has to remember them.
        self.on_change: list[Callable[[Change], object]] = []

    def changed(
        self,
        issue: Issue,
        actor: Account | None,
        action: str,
        comment_id: int | None = None,
        review_id: int | None = None,
    ) -> None:
        """Tell ``on_change`` that ``issue`` was ``action`` (opened, edited, closed, reopened,
        created (a comment, ``comment_id``), merged, synchronized, reviewed (``review_id``));
        a listener's failure is logged, never the writer's."""
        change = Change(issue, actor, action, comment_id, review_id)
        for listener in self.on_change:
            try:
                listener(change)
            except FloorlessError as exc:
                log.warning("#%d of %s/%s: %s", issue.number, issue.owner, issue.name, exc)

    def wrote(self, issue: Issue, author: Account | None, text: str) -> None:
        """Tell ``on_text`` that ``text`` was written on ``issue``; a listener's failure is
        logged, never the writer's."""
        for listener in self.on_text:
            try:
                listener(issue, author, text)
            except FloorlessError as exc:
                log.warning("#%d of %s/%s: %s", issue.number, issue.owner, issue.name, exc)

    # -- reading ------------------------------------------------------------------------------

    def activity(self, owner: str, name: str) -> int:
        """The repository's activity version: it moves with every write to its issues, pull
        requests and all they show (the database's triggers keep it, schema version 17), so
        a page rendered at one version is still right while the version stays."""
        rows = self.db.remembered(
            "SELECT version FROM repo_activity WHERE owner = ? AND name = ?",
            (owner, name),
            ("repo_activity",),
        )
        return int(rows[0]["version"]) if rows else 0

    def get(self, owner: str, name: str, number: int, pull: bool = False) -> Issue:
        """Issue (or, with ``pull``, pull request) ``number`` of the repository."""
        row = self.db.one(
            f"{_ISSUE} WHERE i.owner = ? AND i.name = ? AND i.number = ? AND i.is_pull = ?",
            (owner, name, number, int(pull)),
        )
        if row is None:
            raise NotFound(f"no {'pull request' if pull else 'issue'} #{number}")
        return issue_row(row)

    def kind_of(self, owner: str, name: str, number: int) -> bool | None:
        """Whether ``number`` is a pull request (True), an issue (False) or neither (None)."""
        row = self.db.one(
            "SELECT is_pull FROM issues WHERE owner = ? AND name = ? AND number = ?",
            (owner, name, number),
        )
        return None if row is None else bool(row["is_pull"])

    def page(
        self,
        owner: str,
        name: str,
        search: IssueFilter = OPEN_ISSUES,
        before: int | None = None,
        after: int | None = None,
        per_page: int = PER_PAGE,
    ) -> IssuePage:
        """Issues (or pull requests: ``search.pull``) newest first, ``per_page`` at a time,
        after the cursor: those numbered below ``before`` (the next page) or above ``after``
        (the previous one). One statement for the page, read along the (owner, name,
        is_pull, state, number) index, and one for the counts of open and closed ones: the
        kept totals, or, for a search, what it matches."""
        where = ["i.owner = ?", "i.name = ?", "i.is_pull = ?"]
        params: list[object] = [owner, name, int(bool(search.pull))]
        narrowed, more_params = search.conditions()
        where += narrowed
        params += more_params
        joined = " FROM issues i LEFT JOIN accounts a ON a.id = i.author_id WHERE "
        if not narrowed:  # no search: the totals the database keeps (schema version 11)
            totals = self.db.query(
                "SELECT state, total FROM issue_totals WHERE owner = ? AND name = ?"
                " AND is_pull = ?",
                params,
            )
            counts = {"open": 0, "closed": 0} | {r["state"]: int(r["total"]) for r in totals}
        else:  # a search counts what it matches
            counted = self.db.one(
                "SELECT COALESCE(SUM(CASE WHEN i.state = 'open' THEN 1 ELSE 0 END), 0) AS opened,"
                " COALESCE(SUM(CASE WHEN i.state = 'closed' THEN 1 ELSE 0 END), 0) AS closed"
                + joined
                + " AND ".join(where),
                params,
            )
            counts = {
                "open": int(counted["opened"]) if counted else 0,
                "closed": int(counted["closed"]) if counted else 0,
            }
        if search.state in STATES:
            where.append("i.state = ?")
            params.append(search.state)
        order = "DESC"
        if after is not None:
            where.append("i.number > ?")
            params.append(after)
            order = "ASC"
        elif before is not None:
            where.append("i.number < ?")
            params.append(before)
        rows = self.db.query(
            "SELECT i.*, a.name AS author"
            + joined
            + " AND ".join(where)
            + f" ORDER BY i.number {order} LIMIT ?",
            [*params, per_page + 1],
        )
        more = len(rows) > per_page
        issues = [issue_row(row) for row in rows[:per_page]]
        if after is not None:
            issues.reverse()
            newer = issues[0].number if more and issues else None
            older = issues[-1].number if issues else None
        else:
            newer = issues[0].number if before is not None and issues else None
            older = issues[-1].number if more else None
        return IssuePage(issues, counts, newer, older)

    def find(self, owner: str, name: str, number: int) -> Issue:
        """Issue or pull request ``number`` of the repository, whichever it is."""
        row = self.db.one(
            f"{_ISSUE} WHERE i.owner = ? AND i.name = ? AND i.number = ?", (owner, name, number)
        )
        if row is None:
            raise NotFound(f"no issue #{number}")
        return issue_row(row)

    def listing(
        self, owner: str, name: str, search: IssueFilter, offset: int, limit: int
    ) -> tuple[list[Issue], int]:
        """A page of issues and pull requests (or of one kind, ``search.pull``) newest first,
        by offset, as the API pages them, and how many there are in all: the kept totals
        when nothing but the state and the kind is asked for, a count of the matches
        otherwise."""
        where = ["i.owner = ?", "i.name = ?"]
        params: list[object] = [owner, name]
        if search.pull is not None:
            where.append("i.is_pull = ?")
            params.append(int(search.pull))
        if search.state in STATES:
            where.append("i.state = ?")
            params.append(search.state)
        narrowed, more_params = search.conditions()
        clause = " AND ".join(where + narrowed)
        params += more_params
        if not narrowed:  # the totals the database keeps (schema version 11)
            kept = ["owner = ?", "name = ?"]
            kept_params: list[object] = [owner, name]
            if search.pull is not None:
                kept.append("is_pull = ?")
                kept_params.append(int(search.pull))
            if search.state in STATES:
                kept.append("state = ?")
                kept_params.append(search.state)
            row = self.db.one(
                "SELECT COALESCE(SUM(total), 0) AS total FROM issue_totals"  # noqa: S608
                f" WHERE {' AND '.join(kept)}",
                kept_params,
            )
        else:
            row = self.db.one(
                f"SELECT COUNT(*) AS total FROM issues i WHERE {clause}",  # noqa: S608
                params,
            )
        total = int(row["total"]) if row else 0
        rows = self.db.query(
            f"{_ISSUE} WHERE {clause} ORDER BY i.number DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [issue_row(row) for row in rows], total

    def timeline(self, issue: Issue, first: int | None = None, last: int = 0) -> list[Entry]:
        """The comments and events of ``issue``, in the order they were written: all of them,
        or the ``first`` and the ``last`` (read along the (issue_id, seq) index, so that an
        issue with thousands of comments costs what one with a few does)."""
        # a window of seq <= first or seq > entries - last; all of them when it covers all
        head = issue.entries if first is None else min(first, issue.entries)
        tail = max(head, issue.entries - last)
        # two ranges of the (issue_id, seq) index each (an OR of the two had SQLite read
        # every entry of the issue: 6 ms for one with 10,000)
        params = (issue.id, head, issue.id, tail)
        comments = self.db.query(
            "SELECT c.id, c.seq, c.body, c.created_at, c.updated_at, c.author_id, a.name AS who"
            " FROM issue_comments c LEFT JOIN accounts a ON a.id = c.author_id"
            " WHERE c.issue_id = ? AND c.seq <= ?"
            " UNION ALL"
            " SELECT c.id, c.seq, c.body, c.created_at, c.updated_at, c.author_id, a.name AS who"
            " FROM issue_comments c LEFT JOIN accounts a ON a.id = c.author_id"
            " WHERE c.issue_id = ? AND c.seq > ?",
            params,
        )
        events = self.db.query(
            "SELECT e.id, e.seq, e.kind, e.old_value, e.value, e.created_at, a.name AS who"
            " FROM issue_events e LEFT JOIN accounts a ON a.id = e.actor_id"
            " WHERE e.issue_id = ? AND e.seq <= ?"
            " UNION ALL"
            " SELECT e.id, e.seq, e.kind, e.old_value, e.value, e.created_at, a.name AS who"
            " FROM issue_events e LEFT JOIN accounts a ON a.id = e.actor_id"
            " WHERE e.issue_id = ? AND e.seq > ?",
            params,
        )
        return _entries(comments, events)

    def window(self, issue: Issue, after: int, upto: int) -> list[Entry]:
        """The entries of ``issue``'s timeline from place ``after`` (excluded) to ``upto``,
        in order: a page of it, read as one range of the (issue_id, seq) index of comments
        and one of events, whatever the issue's length. A deleted comment's place stays
        empty, so a page may hold fewer entries than places."""
        comments = self.db.query(
            "SELECT c.id, c.seq, c.body, c.created_at, c.updated_at, c.author_id, a.name AS who"
            " FROM issue_comments c LEFT JOIN accounts a ON a.id = c.author_id"
            " WHERE c.issue_id = ? AND c.seq > ? AND c.seq <= ?",
            (issue.id, after, upto),
        )
        events = self.db.query(
            "SELECT e.id, e.seq, e.kind, e.old_value, e.value, e.created_at, a.name AS who"
            " FROM issue_events e LEFT JOIN accounts a ON a.id = e.actor_id"
            " WHERE e.issue_id = ? AND e.seq > ? AND e.seq <= ?",
            (issue.id, after, upto),
        )
        return _entries(comments, events)

    def existing(self, owner: str, name: str, numbers: set[int]) -> dict[int, bool]:
        """Which of ``numbers`` are issues or pull requests of the repository: each one's
        number, and whether it is a pull request."""
        if not numbers:
            return {}
        marks = ", ".join("?" * len(numbers))
        where = f"owner = ? AND name = ? AND number IN ({marks})"
        rows = self.db.query(
            f"SELECT number, is_pull FROM issues WHERE {where}",  # noqa: S608
            [owner, name, *sorted(numbers)],
        )
        return {int(row["number"]): bool(row["is_pull"]) for row in rows}

    def comments(
        self,
        owner: str,
        name: str,
        number: int | None = None,
        since: float | None = None,
        before: float | None = None,
        offset: int = 0,
        limit: int | None = None,
        pulls: bool | None = None,
    ) -> list[Comment]:
        """Comments of issue (or pull request) ``number``, or of the whole repository, oldest
        first: those updated at or after ``since`` and before ``before``, ``limit`` of them
        from ``offset``; with ``pulls``, only those of pull requests (True) or of issues
        (False). One statement."""
        where = ["i.owner = ?", "i.name = ?"]
        params: list[object] = [owner, name]
        if pulls is not None:
            where.append("i.is_pull = ?")
            params.append(int(pulls))
        if number is not None:
            where.append("i.number = ?")
            params.append(number)
        if since is not None:
            where.append("c.updated_at >= ?")
            params.append(since)
        if before is not None:
            where.append("c.updated_at < ?")
            params.append(before)
        page = ""
        if limit is not None:
            page = " LIMIT ? OFFSET ?"
            params += [limit, offset]
        rows = self.db.query(
            f"{_COMMENT} WHERE {' AND '.join(where)} ORDER BY c.created_at, c.id{page}",
            params,
        )
        return [comment_row(row) for row in rows]

    def count_comments(
        self,
        owner: str,
        name: str,
        since: float | None = None,
        before: float | None = None,
        pulls: bool | None = None,
    ) -> int:
        """How many comments ``comments`` would list for the whole repository (no total is
        kept of them: the API's list of a repository's comments counts them)."""
        where = "i.owner = ? AND i.name = ?"
        params: list[object] = [owner, name]
        if pulls is not None:
            where += " AND i.is_pull = ?"
            params.append(int(pulls))
        if since is not None:
            where += " AND c.updated_at >= ?"
            params.append(since)
        if before is not None:
            where += " AND c.updated_at < ?"
            params.append(before)
        row = self.db.one(
            "SELECT COUNT(*) AS total FROM issue_comments c"  # noqa: S608
            f" JOIN issues i ON i.id = c.issue_id WHERE {where}",
            params,
        )
        return int(row["total"]) if row else 0

    def comment_by_id(self, owner: str, name: str, comment_id: int) -> Comment:
        """Comment ``comment_id``, if it is on an issue or pull request of the repository."""
        row = self.db.one(
            f"{_COMMENT} WHERE c.id = ? AND i.owner = ? AND i.name = ?",
            (comment_id, owner, name),
        )
        if row is None:
            raise NotFound("no such comment")
        return comment_row(row)

    # -- writing ------------------------------------------------------------------------------

    def create(self, owner: str, name: str, author: Account, title: str, body: str) -> Issue:
        title, body = clean_title(title), clean_body(body, "a description")
        with self.db.transaction():
            number = self.insert(owner, name, author, title, body, pull=False)
        issue = self.get(owner, name, number)
        self.wrote(issue, author, body)
        self.changed(issue, author, "opened")
        return issue

    def insert(
        self, owner: str, name: str, author: Account, title: str, body: str, pull: bool
    ) -> int:
        """A new issue or pull request's row, in the caller's transaction: its number."""
        row = self.db.one(
            "SELECT COALESCE(MAX(number), 0) + 1 AS next FROM issues WHERE owner = ? AND name = ?",
            (owner, name),
        )
        number = int(row["next"]) if row else 1
        now = time.time()
        self.db.execute(
            "INSERT INTO issues (owner, name, number, is_pull, title, body, author_id,"
            " state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)",
            (owner, name, number, int(pull), title, body, author.id, now, now),
        )
        return number

    def comment(self, issue: Issue, author: Account, body: str) -> int:
        """Add a comment (a closed issue takes comments too); its id, for its anchor."""
        body = clean_body(body, "a comment")
        if not body.strip():
            raise BadRequest("a comment needs some text")
        now = time.time()
        with self.db.transaction():
            seq = self._next_entry(issue, now, comments=1)
            row = self.db.one(
                "INSERT INTO issue_comments (issue_id, seq, author_id, body, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (issue.id, seq, author.id, body, now, now),
            )
        assert row is not None
        self.wrote(issue, author, body)
        self.changed(issue, author, "created", int(row["id"]))
        return int(row["id"])

    def comment_author(self, issue: Issue, comment_id: int) -> int | None:
        """The author of comment ``comment_id`` on ``issue`` (None: a deleted account)."""
        row = self.db.one(
            "SELECT author_id FROM issue_comments WHERE id = ? AND issue_id = ?",
            (comment_id, issue.id),
        )
        if row is None:
            raise NotFound("no such comment")
        return None if row["author_id"] is None else int(row["author_id"])

    def edit_comment(self, issue: Issue, comment_id: int, actor: Account, body: str) -> None:
        """Change a comment's text (the caller asked the policy who may); it shows as
        edited from then on."""
        body = clean_body(body, "a comment")
        if not body.strip():
            raise BadRequest("a comment needs some text")
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE issue_comments SET body = ?, updated_at = ? WHERE id = ? AND issue_id = ?",
                (body, now, comment_id, issue.id),
            )
            if not changed:
                raise NotFound("no such comment")
            self.db.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now, issue.id))
        self.wrote(issue, actor, body)

    def delete_comment(self, issue: Issue, comment_id: int) -> None:
        """Delete a comment, and count it no more. Its files' records go with it; their
        bytes, once nothing else refers to them (a crash between the two leaves bytes that
        ``Attachments.collect`` removes later, never a record without its bytes)."""
        held = self.files.held_by_comment(comment_id) if self.files is not None else set()
        with self.db.transaction():
            changed = self.db.execute(
                "DELETE FROM issue_comments WHERE id = ? AND issue_id = ?", (comment_id, issue.id)
            )
            if not changed:
                raise NotFound("no such comment")
            self.db.execute(
                "UPDATE issues SET comments = comments - 1 WHERE id = ? AND comments > 0",
                (issue.id,),
            )
        for oid in held:
            assert self.files is not None
            self.files.collect(oid)

    def close(self, issue: Issue, actor: Account | None, reason: str, source: str = "") -> bool:
        """Close ``issue`` with ``reason``, by ``source`` if a commit or a pull request closed
        it (the ``closed`` event's old value); whether it was open."""
        if reason not in REASONS:
            raise BadRequest("close as completed or as not planned")
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE issues SET state = 'closed', close_reason = ?, closed_at = ?"
                " WHERE id = ? AND state = 'open'",
                (reason, now, issue.id),
            )
            if changed:  # closing a closed issue (a second tab, a double click) does nothing
                self._event(issue, actor, "closed", source, reason, now)
        if changed:
            self.changed(issue, actor, "closed")
        return bool(changed)

    def reopen(self, issue: Issue, actor: Account) -> None:
        now = time.time()
        with self.db.transaction():
            changed = self.db.execute(
                "UPDATE issues SET state = 'open', close_reason = '', closed_at = NULL"
                " WHERE id = ? AND state = 'closed'",
                (issue.id,),
            )
            if changed:
                self._event(issue, actor, "reopened", "", "", now)
        if changed:
            self.changed(issue, actor, "reopened")

    def edit(self, issue: Issue, actor: Account, title: str, body: str) -> None:
        title, body = clean_title(title), clean_body(body, "a description")
        now = time.time()
        with self.db.transaction():
            row = self.db.one("SELECT title FROM issues WHERE id = ?", (issue.id,))
            old_title = str(row["title"]) if row else issue.title
            self.db.execute(
                "UPDATE issues SET title = ?, body = ?, updated_at = ? WHERE id = ?",
                (title, body, now, issue.id),
            )
            if title != old_title:
                self._event(issue, actor, "title", old_title, title, now)
        self.wrote(issue, actor, body)
        self.changed(issue, actor, "edited")

    def event(
        self,
        issue: Issue,
        actor: Account | None,
        kind: str,
        old_value: str = "",
        value: str = "",
        now: float | None = None,
    ) -> None:
        """A timeline event (``kind``: closed, reopened, title, and those of pull requests:
        pushed, force_pushed, merged, review, ...), in the caller's transaction if any."""
        with self.db.transaction():
            self._event(issue, actor, kind, old_value, value, time.time() if now is None else now)

    def _event(
        self,
        issue: Issue,
        actor: Account | None,
        kind: str,
        old_value: str,
        value: str,
        now: float,
    ) -> None:
        seq = self._next_entry(issue, now)
        self.db.execute(
            "INSERT INTO issue_events (issue_id, seq, actor_id, kind, old_value, value,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (issue.id, seq, actor.id if actor else None, kind, old_value, value, now),
        )

    def _next_entry(self, issue: Issue, now: float, comments: int = 0) -> int:
        """The next place on the issue's timeline, taken in the caller's transaction."""
        row = self.db.one(
            "UPDATE issues SET entries = entries + 1, comments = comments + ?, updated_at = ?"
            " WHERE id = ? RETURNING entries",
            (comments, now, issue.id),
        )
        if row is None:
            raise NotFound(f"no issue #{issue.number}")
        return int(row["entries"])


_COMMENT = (
    "SELECT c.id, c.issue_id, i.number, i.is_pull, a.name AS author, c.author_id, c.body,"
    " c.created_at, c.updated_at FROM issue_comments c JOIN issues i ON i.id = c.issue_id"
    " LEFT JOIN accounts a ON a.id = c.author_id"
)


def comment_row(row: Row) -> Comment:
    return Comment(
        id=int(row["id"]),
        issue_id=int(row["issue_id"]),
        number=int(row["number"]),
        is_pull=bool(row["is_pull"]),
        author=row["author"] or "",
        author_id=row["author_id"],
        body=row["body"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


def issue_row(row: Row) -> Issue:
    return Issue(
        id=int(row["id"]),
        number=int(row["number"]),
        title=row["title"],
        body=row["body"],
        author=row["author"] or "",
        author_id=row["author_id"],
        state=row["state"],
        close_reason=row["close_reason"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        closed_at=row["closed_at"],
        comments=int(row["comments"]),
        is_pull=bool(row["is_pull"]),
        entries=int(row["entries"]),
        owner=row["owner"],
        name=row["name"],
    )


def _entries(comments: list[Row], events: list[Row]) -> list[Entry]:
    """A timeline's entries from its comments' and its events' rows, in order."""
    entries = [
        Entry(
            r["id"],
            r["seq"],
            "comment",
            r["who"] or "",
            r["body"],
            "",
            r["created_at"],
            edited=float(r["updated_at"]) > float(r["created_at"]),
            author_id=r["author_id"],
            updated_at=float(r["updated_at"]),
        )
        for r in comments
    ] + [
        Entry(
            r["id"],
            r["seq"],
            r["kind"],
            r["who"] or "",
            r["value"],
            r["old_value"],
            r["created_at"],
        )
        for r in events
    ]
    return sorted(entries, key=lambda entry: entry.seq)
