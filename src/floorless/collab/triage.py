"""Labels, milestones and assignees: how a repository sorts its issues and pull requests.

Labels and milestones are kept by the repository's owner and name, as issues are, so that a
rename carries them and a deletion takes them away (``repos.py``). A label's colour is only
ever stored after ``clean_color`` accepted it as ``#rrggbb``: pages put it in a style
attribute, where anything else could be markup or script.

Each change to an issue's labels, assignees or milestone is one transaction with the
timeline event that records it (``Issues.event`` joins the caller's transaction), so the
timeline never tells of a change that did not happen nor misses one that did. Who may make
them is ``access.py``'s to say; who may be assigned, too (``Policy.assignable``).
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from floorless.accounts.accounts import Account
from floorless.collab.filters import like
from floorless.collab.issues import Issue, Issues
from floorless.core.errors import BadRequest, NotFound
from floorless.db import Database, Row

LABEL_MAX = 50  # characters of a label's name, as Forgejo allows
LABELS_PER_PAGE = 50  # labels on a page of the labels page
LOOKUP_CHUNK = 500  # ids or names looked up in one statement (databases bound their count)
TITLE_MAX = 255  # of a milestone's title
DESCRIPTION_MAX = 2000
_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class Label:
    id: int
    name: str
    color: str  # "#rrggbb", lower case, checked before it was stored
    description: str = ""
    open_issues: int = 0  # when counted (``Labels.listing``)

    @property
    def text_color(self) -> str:
        """Black or white, whichever reads better on the label's colour (by its relative
        luminance, as WCAG weighs the channels)."""
        red, green, blue = (int(self.color[i : i + 2], 16) / 255 for i in (1, 3, 5))
        lum = 0.2126 * _linear(red) + 0.7152 * _linear(green) + 0.0722 * _linear(blue)
        return "#000000" if lum > 0.179 else "#ffffff"


def _linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


@dataclass(frozen=True)
class Milestone:
    id: int
    title: str
    description: str
    due_at: float | None
    state: str  # open, closed
    open_issues: int = 0
    closed_issues: int = 0

    @property
    def progress(self) -> int:
        """How far along, in whole percent of its issues closed."""
        total = self.open_issues + self.closed_issues
        return 0 if not total else self.closed_issues * 100 // total

    @property
    def due(self) -> str:
        """The due date as YYYY-MM-DD (UTC), or ""."""
        if self.due_at is None:
            return ""
        return datetime.datetime.fromtimestamp(self.due_at, datetime.UTC).strftime("%Y-%m-%d")


def clean_color(color: str) -> str:
    color = color.strip()
    if not _COLOR.fullmatch(color):
        raise BadRequest("a colour is # and six hexadecimal digits, as #d73a4a")
    return color.lower()


def clean_label(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise BadRequest("a label needs a name")
    if len(name) > LABEL_MAX:
        raise BadRequest(f"a label's name is at most {LABEL_MAX} characters")
    return name


def clean_description(text: str) -> str:
    text = text.replace("\r\n", "\n").strip()
    if len(text) > DESCRIPTION_MAX:
        raise BadRequest(f"a description is at most {DESCRIPTION_MAX} characters")
    return text


def clean_due(text: str) -> float | None:
    """A due date from a form (YYYY-MM-DD, or nothing): midnight UTC of that day."""
    text = text.strip()
    if not text:
        return None
    try:
        if not _DATE.fullmatch(text):
            raise ValueError(text)
        day = datetime.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=datetime.UTC)
    except ValueError:
        raise BadRequest("a due date is written YYYY-MM-DD") from None
    return day.timestamp()


def _label(row: Row) -> Label:
    return Label(
        int(row["id"]),
        row["label"],
        row["color"],
        row["description"],
        int(row["open_issues"]) if "open_issues" in row.keys() else 0,  # noqa: SIM118
    )


def _milestone(row: Row) -> Milestone:
    return Milestone(
        int(row["id"]),
        row["title"],
        row["description"],
        row["due_at"],
        row["state"],
        int(row["open_issues"]),
        int(row["closed_issues"]),
    )


_MILESTONE = (
    "SELECT m.*,"
    " (SELECT COUNT(*) FROM issues i WHERE i.milestone_id = m.id AND i.state = 'open')"
    " AS open_issues,"
    " (SELECT COUNT(*) FROM issues i WHERE i.milestone_id = m.id AND i.state = 'closed')"
    " AS closed_issues FROM milestones m"
)


class Triage:
    def __init__(self, db: Database, issues: Issues) -> None:
        self.db = db
        self.issues = issues

    # -- labels -------------------------------------------------------------------------------

    def labels(self, owner: str, name: str) -> list[Label]:
        """The repository's labels by name (one statement): all of them, however many, so
        only for work that needs every one; a page shows ``listing``'s."""
        rows = self.db.query(
            "SELECT * FROM labels WHERE owner = ? AND name = ? ORDER BY lower(label), id",
            (owner, name),
        )
        return [_label(row) for row in rows]

    def listing(
        self,
        owner: str,
        name: str,
        offset: int = 0,
        limit: int = LABELS_PER_PAGE,
        q: str = "",
        counted: bool = False,
    ) -> tuple[list[Label], int]:
        """A page of the repository's labels by name, those whose name holds ``q`` (any case)
        when it is given, and how many there are in all; with ``counted``, how many open
        issues and pull requests carry each. Two statements, whatever the number."""
        where, params = "l.owner = ? AND l.name = ?", [owner, name]
        if q:
            where += " AND lower(l.label) LIKE ? ESCAPE '!'"
            params.append("%" + like(q.lower()) + "%")
        total = self.db.one(
            f"SELECT COUNT(*) AS total FROM labels l WHERE {where}",  # noqa: S608
            params,
        )
        count = (
            ", (SELECT COUNT(*) FROM issue_labels il JOIN issues i ON i.id = il.issue_id"
            " WHERE il.label_id = l.id AND i.state = 'open') AS open_issues"
            if counted
            else ""
        )
        rows = self.db.query(
            f"SELECT l.*{count} FROM labels l WHERE {where}"  # noqa: S608
            " ORDER BY lower(l.label), l.id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [_label(row) for row in rows], int(total["total"]) if total else 0

    def labels_named(
        self, owner: str, name: str, ids: Iterable[int] = (), names: Iterable[str] = ()
    ) -> list[Label]:
        """The repository's labels among ``ids`` or ``names`` (any case), by name: a
        statement for each ``LOOKUP_CHUNK`` of them, however many labels it has."""
        wanted_ids, wanted = sorted(set(ids)), sorted({n.lower() for n in names})
        found: dict[int, Label] = {}
        for column, values in (("id", wanted_ids), ("lower(label)", wanted)):
            for start in range(0, len(values), LOOKUP_CHUNK):
                chunk: list[object] = list(values[start : start + LOOKUP_CHUNK])
                marks = ", ".join("?" * len(chunk))
                rows = self.db.query(
                    f"SELECT * FROM labels WHERE owner = ? AND name = ?"  # noqa: S608
                    f" AND {column} IN ({marks})",
                    [owner, name, *chunk],
                )
                found.update((int(row["id"]), _label(row)) for row in rows)
        return sorted(found.values(), key=lambda label: (label.name.lower(), label.id))

    def label(self, owner: str, name: str, label_id: int) -> Label:
        row = self.db.one(
            "SELECT * FROM labels WHERE owner = ? AND name = ? AND id = ?", (owner, name, label_id)
        )
        if row is None:
            raise NotFound("no such label")
        return _label(row)

    def create_label(
        self, owner: str, name: str, label: str, color: str, description: str = ""
    ) -> Label:
        label, color = clean_label(label), clean_color(color)
        description = clean_description(description)
        with self.db.transaction():
            self._unique_label(owner, name, label, None)
            row = self.db.one(
                "INSERT INTO labels (owner, name, label, color, description)"
                " VALUES (?, ?, ?, ?, ?) RETURNING *",
                (owner, name, label, color, description),
            )
        assert row is not None
        return _label(row)

    def edit_label(
        self, owner: str, name: str, label_id: int, label: str, color: str, description: str
    ) -> None:
        label, color = clean_label(label), clean_color(color)
        description = clean_description(description)
        with self.db.transaction():
            self._unique_label(owner, name, label, label_id)
            changed = self.db.execute(
                "UPDATE labels SET label = ?, color = ?, description = ?"
                " WHERE owner = ? AND name = ? AND id = ?",
                (label, color, description, owner, name, label_id),
            )
            if not changed:
                raise NotFound("no such label")

    def delete_label(self, owner: str, name: str, label_id: int) -> None:
        """Delete a label; the issues that carried it lose it (by foreign key)."""
        changed = self.db.execute(
            "DELETE FROM labels WHERE owner = ? AND name = ? AND id = ?", (owner, name, label_id)
        )
        if not changed:
            raise NotFound("no such label")

    def _unique_label(self, owner: str, name: str, label: str, other_than: int | None) -> None:
        row = self.db.one(
            "SELECT id FROM labels WHERE owner = ? AND name = ? AND lower(label) = lower(?)",
            (owner, name, label),
        )
        if row is not None and int(row["id"]) != other_than:
            raise BadRequest(f"there is already a label {label!r}")

    def labels_around(self, issue: Issue, names: Iterable[str]) -> tuple[list[Label], list[Label]]:
        """The labels ``issue`` carries, and those of its repository named by ``names`` (any
        case; the labels its timeline's events name), each by name: one statement for them
        all (and one more for each further ``LOOKUP_CHUNK`` names)."""
        wanted = sorted({n.lower() for n in names})
        carried: dict[int, Label] = {}
        named: dict[int, Label] = {}
        start = 0
        while True:
            chunk: list[object] = list(wanted[start : start + LOOKUP_CHUNK])
            clauses = ["l.id IN (SELECT label_id FROM issue_labels WHERE issue_id = ?)"]
            params: list[object] = [issue.id, issue.owner, issue.name, issue.id]
            if start:
                clauses, params = [], [issue.id, issue.owner, issue.name]
            if chunk:
                clauses.append(f"lower(l.label) IN ({', '.join('?' * len(chunk))})")
                params += chunk
            rows = self.db.query(
                "SELECT l.*, EXISTS (SELECT 1 FROM issue_labels il WHERE il.issue_id = ?"  # noqa: S608
                " AND il.label_id = l.id) AS carried FROM labels l"
                f" WHERE l.owner = ? AND l.name = ? AND ({' OR '.join(clauses)})",
                params,
            )
            for row in rows:
                label = _label(row)
                (carried if row["carried"] else named)[label.id] = label
            start += LOOKUP_CHUNK
            if start >= len(wanted):
                break

        def by_name(found: dict[int, Label]) -> list[Label]:
            return sorted(found.values(), key=lambda label: (label.name.lower(), label.id))

        return by_name(carried), by_name(named)

    def labels_of(self, issue_ids: list[int]) -> dict[int, list[Label]]:
        """The labels of each of ``issue_ids``, by name, in one statement."""
        if not issue_ids:
            return {}
        marks = ", ".join("?" * len(issue_ids))
        sql = (
            "SELECT il.issue_id, l.* FROM issue_labels il"  # noqa: S608
            " JOIN labels l ON l.id = il.label_id"
            f" WHERE il.issue_id IN ({marks}) ORDER BY lower(l.label), l.id"
        )
        rows = self.db.query(sql, issue_ids)
        found: dict[int, list[Label]] = {}
        for row in rows:
            found.setdefault(int(row["issue_id"]), []).append(_label(row))
        return found

    def set_label(self, issue: Issue, actor: Account, label_id: int, on: bool) -> bool:
        """Put the label on ``issue`` or take it off, with a ``label`` event ("+name" or
        "-name"); whether anything changed (a second click changes nothing)."""
        label = self.label(issue.owner, issue.name, label_id)
        with self.db.transaction():
            if on:
                changed = self.db.execute(
                    "INSERT INTO issue_labels (issue_id, label_id) VALUES (?, ?)"
                    " ON CONFLICT (issue_id, label_id) DO NOTHING",
                    (issue.id, label.id),
                )
            else:
                changed = self.db.execute(
                    "DELETE FROM issue_labels WHERE issue_id = ? AND label_id = ?",
                    (issue.id, label.id),
                )
            if changed:
                self.issues.event(issue, actor, "label", "", ("+" if on else "-") + label.name)
        return bool(changed)

    # -- assignees ----------------------------------------------------------------------------

    def assignees_of(self, issue_ids: list[int]) -> dict[int, list[str]]:
        """The names of the people each of ``issue_ids`` is assigned to, in one statement."""
        if not issue_ids:
            return {}
        marks = ", ".join("?" * len(issue_ids))
        sql = (
            "SELECT ia.issue_id, a.name FROM issue_assignees ia"  # noqa: S608
            " JOIN accounts a ON a.id = ia.account_id"
            f" WHERE ia.issue_id IN ({marks}) ORDER BY lower(a.name)"
        )
        rows = self.db.query(sql, issue_ids)
        found: dict[int, list[str]] = {}
        for row in rows:
            found.setdefault(int(row["issue_id"]), []).append(row["name"])
        return found

    def set_assignee(self, issue: Issue, actor: Account, person: Account, on: bool) -> bool:
        """Assign ``person`` (whom the caller checked may be: ``Policy.assignable``) or
        unassign them, with an ``assigned`` or ``unassigned`` event naming them."""
        with self.db.transaction():
            if on:
                changed = self.db.execute(
                    "INSERT INTO issue_assignees (issue_id, account_id) VALUES (?, ?)"
                    " ON CONFLICT (issue_id, account_id) DO NOTHING",
                    (issue.id, person.id),
                )
            else:
                changed = self.db.execute(
                    "DELETE FROM issue_assignees WHERE issue_id = ? AND account_id = ?",
                    (issue.id, person.id),
                )
            if changed:
                kind = "assigned" if on else "unassigned"
                self.issues.event(issue, actor, kind, "", person.name)
        return bool(changed)

    # -- milestones ---------------------------------------------------------------------------

    def milestones(self, owner: str, name: str, state: str | None = None) -> list[Milestone]:
        """The repository's milestones (open or closed ones, or all), soonest due first, each
        with its counts of open and closed issues (along the (milestone_id, state) index)."""
        where, params = "m.owner = ? AND m.name = ?", [owner, name]
        if state is not None:
            where += " AND m.state = ?"
            params.append(state)
        rows = self.db.query(
            f"{_MILESTONE} WHERE {where}"
            " ORDER BY CASE WHEN m.due_at IS NULL THEN 1 ELSE 0 END, m.due_at, lower(m.title)",
            params,
        )
        return [_milestone(row) for row in rows]

    def milestone(self, owner: str, name: str, milestone_id: int) -> Milestone:
        row = self.db.one(
            f"{_MILESTONE} WHERE m.owner = ? AND m.name = ? AND m.id = ?",
            (owner, name, milestone_id),
        )
        if row is None:
            raise NotFound("no such milestone")
        return _milestone(row)

    def milestone_named(self, owner: str, name: str, title: str) -> Milestone | None:
        row = self.db.one(
            f"{_MILESTONE} WHERE m.owner = ? AND m.name = ? AND lower(m.title) = lower(?)",
            (owner, name, title),
        )
        return None if row is None else _milestone(row)

    def save_milestone(
        self,
        owner: str,
        name: str,
        milestone_id: int | None,
        title: str,
        description: str,
        due: str,
    ) -> int:
        """Create a milestone (``milestone_id`` None) or change one: its id."""
        title = " ".join(title.split())
        if not title:
            raise BadRequest("a milestone needs a title")
        if len(title) > TITLE_MAX:
            raise BadRequest(f"a milestone's title is at most {TITLE_MAX} characters")
        description, due_at = clean_description(description), clean_due(due)
        with self.db.transaction():
            row = self.db.one(
                "SELECT id FROM milestones WHERE owner = ? AND name = ?"
                " AND lower(title) = lower(?)",
                (owner, name, title),
            )
            if row is not None and int(row["id"]) != milestone_id:
                raise BadRequest(f"there is already a milestone {title!r}")
            if milestone_id is None:
                made = self.db.one(
                    "INSERT INTO milestones (owner, name, title, description, due_at)"
                    " VALUES (?, ?, ?, ?, ?) RETURNING id",
                    (owner, name, title, description, due_at),
                )
                assert made is not None
                return int(made["id"])
            changed = self.db.execute(
                "UPDATE milestones SET title = ?, description = ?, due_at = ?"
                " WHERE owner = ? AND name = ? AND id = ?",
                (title, description, due_at, owner, name, milestone_id),
            )
            if not changed:
                raise NotFound("no such milestone")
            return milestone_id

    def set_milestone_state(self, owner: str, name: str, milestone_id: int, state: str) -> None:
        if state not in ("open", "closed"):
            raise BadRequest("a milestone is open or closed")
        changed = self.db.execute(
            "UPDATE milestones SET state = ? WHERE owner = ? AND name = ? AND id = ?",
            (state, owner, name, milestone_id),
        )
        if not changed:
            raise NotFound("no such milestone")

    def delete_milestone(self, owner: str, name: str, milestone_id: int) -> None:
        """Delete a milestone; its issues keep going without one (by foreign key)."""
        changed = self.db.execute(
            "DELETE FROM milestones WHERE owner = ? AND name = ? AND id = ?",
            (owner, name, milestone_id),
        )
        if not changed:
            raise NotFound("no such milestone")

    def milestone_of(self, issue: Issue) -> Milestone | None:
        row = self.db.one(
            f"{_MILESTONE} JOIN issues x ON x.milestone_id = m.id WHERE x.id = ?",
            (issue.id,),
        )
        return None if row is None else _milestone(row)

    def milestones_of(self, issue_ids: list[int]) -> dict[int, Milestone]:
        """The milestone of each of ``issue_ids`` that is in one, with its counts, in one
        statement (for a page of issues: never one per issue)."""
        if not issue_ids:
            return {}
        marks = ", ".join("?" * len(issue_ids))
        select = _MILESTONE.replace("SELECT m.*,", "SELECT x.id AS issue_id, m.*,", 1)
        rows = self.db.query(
            f"{select} JOIN issues x ON x.milestone_id = m.id WHERE x.id IN ({marks})",
            issue_ids,
        )
        return {int(row["issue_id"]): _milestone(row) for row in rows}

    def set_milestone(self, issue: Issue, actor: Account, milestone_id: int | None) -> bool:
        """Put ``issue`` in a milestone of its repository (None: in none), with a
        ``milestone`` event from the old title to the new ("" for none)."""
        new = (
            None if milestone_id is None else self.milestone(issue.owner, issue.name, milestone_id)
        )
        with self.db.transaction():
            row = self.db.one(
                "SELECT m.title FROM issues i LEFT JOIN milestones m ON m.id = i.milestone_id"
                " WHERE i.id = ?",
                (issue.id,),
            )
            old = str(row["title"]) if row and row["title"] is not None else ""
            changed = self.db.execute(
                "UPDATE issues SET milestone_id = ?, updated_at = ? WHERE id = ?"
                " AND COALESCE(milestone_id, 0) <> ?",
                (new.id if new else None, time.time(), issue.id, new.id if new else 0),
            )
            if changed:
                self.issues.event(issue, actor, "milestone", old, new.title if new else "")
        return bool(changed)
