"""Reviews of pull requests: comments on lines of the diff, gathered and submitted with a
verdict; comments outdated when their lines change; what is new since a person last looked.

A comment names lines of one side of the diff of the merge base to the head: of the head's
file (``new``) or of the merge base's (``old``), and is kept with the commit it names them in
(``commit_oid``) and their text (``line_text``). It goes into its author's pending review,
which only they see, until they submit it as a comment, an approval or a request for changes:
one transaction with the ``review`` event on the pull request's timeline (its value the
verdict, its old value the review's id).

When the head (or the merge base) moves, a background thread follows each comment into the
new version of its file (``git/lines.py``): one whose lines are unchanged moves to where they
are now; one whose lines changed, whose file is gone or no longer changed by the pull request,
is marked outdated, keeping the commit and lines it was written on, and is no longer anchored
on the files tab. Each update is a compare-and-swap on the comment's commit, so that two
threads or nodes doing the same work write it once. The thread is woken by the pull request
records (``Pulls.on_head_moved``), by any move of a repository's refs (``Moves.listeners``), and
by a page that finds a comment behind (it shows it unanchored meanwhile).

"New since you last looked": the head each person last saw the files at is kept
(``review_views``, one upsert per visit of the files tab or review submitted); the commits
between it and the current head are walked in the background, bounded by the merge base and
``NEW_LIMIT``, and kept in memory by (seen head, head, merge base): a page shows them once
known and never waits for them.

Who may review, and who may give a verdict, is ``access.py``'s to say.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pygit2
from pygit2.enums import SortMode

from floorless.accounts.accounts import Account
from floorless.collab.issues import Issues, clean_body
from floorless.collab.pulls import Pull, Pulls
from floorless.core.background import Jobs
from floorless.core.caches import Cache, approximate_size
from floorless.core.errors import BadRequest, Conflict, FloorlessError, NotFound
from floorless.db import Database, Row
from floorless.git import lines
from floorless.git.refs import RefSnapshot

log = logging.getLogger(__name__)

SIDES = ("old", "new")
VERDICTS = ("comment", "approve", "request_changes")
NEW_LIMIT = 250  # commits listed as new since a person's last look
RANGE_MAX = 500  # lines one comment may span
PATH_MAX = 4096  # characters of a path (git's own limit is the file system's)
NEW_COMMITS_BYTES = 8 * 1024 * 1024  # the commits new to each reader, kept in memory
CHANGED_PATHS_BYTES = 8 * 1024 * 1024  # the paths of diffs a review page reads, kept in memory

_REVIEW = "SELECT r.*, a.name AS author FROM reviews r LEFT JOIN accounts a ON a.id = r.author_id"
_COMMENT = (
    "SELECT c.*, a.name AS author, r.state AS review_state FROM review_comments c"
    " JOIN reviews r ON r.id = c.review_id LEFT JOIN accounts a ON a.id = c.author_id"
)


@dataclass(frozen=True)
class Review:
    id: int
    author: str
    author_id: int | None
    state: str  # pending, comment, approve, request_changes
    body: str
    commit_oid: str
    created_at: float
    submitted_at: float | None

    @property
    def pending(self) -> bool:
        return self.state == "pending"


@dataclass(frozen=True)
class ReviewComment:
    id: int
    review_id: int
    author: str
    author_id: int | None
    path: str
    side: str
    start_line: int
    line: int
    commit_oid: str
    line_text: str
    body: str
    outdated: bool
    pending: bool
    created_at: float
    updated_at: float

    @property
    def numbered_lines(self) -> list[tuple[int, str]]:
        """The commented lines as they read when written (or last followed), numbered."""
        return list(enumerate(self.line_text.split("\n"), self.start_line))


@dataclass(frozen=True)
class Anchors:
    """The two commits a pull request's diff is shown between now."""

    merge_base: str
    head: str

    def commit(self, side: str) -> str:
        return self.merge_base if side == "old" else self.head


@dataclass(frozen=True)
class NewCommits:
    commits: list[tuple[str, str]]  # (id, subject), newest first
    more: bool  # more than NEW_LIMIT
    forced: bool  # the head seen is not below the head now (a force push)


COUNTING = NewCommits([], False, False)  # asked for, not known yet


@dataclass
class PullReviews:
    """What a page shows of a pull request's reviews: submitted ones, and the viewer's own
    pending one; two statements, however many comments."""

    reviews: dict[int, Review] = field(default_factory=dict)
    comments: list[ReviewComment] = field(default_factory=list)

    def of_review(self, review_id: int) -> list[ReviewComment]:
        return [c for c in self.comments if c.review_id == review_id]

    def threads(self, review_id: int) -> list[tuple[str, list[ReviewComment]]]:
        """A review's comments grouped by file, in the order of their files and lines."""
        by_path: dict[str, list[ReviewComment]] = {}
        for comment in sorted(self.of_review(review_id), key=lambda c: (c.path, c.line, c.id)):
            by_path.setdefault(comment.path, []).append(comment)
        return list(by_path.items())

    def anchored(self, anchors: Anchors) -> dict[tuple[str, str, int], list[ReviewComment]]:
        """The comments to show under their lines on the files tab, by (path, side, line):
        those not outdated that are followed to the commits shown."""
        found: dict[tuple[str, str, int], list[ReviewComment]] = {}
        for comment in self.comments:
            if not comment.outdated and comment.commit_oid == anchors.commit(comment.side):
                found.setdefault((comment.path, comment.side, comment.line), []).append(comment)
        return found

    def behind(self, anchors: Anchors) -> bool:
        """Whether some comment is not followed to the commits shown yet."""
        return any(not c.outdated and c.commit_oid != anchors.commit(c.side) for c in self.comments)

    def pending(self, account_id: int | None) -> Review | None:
        for review in self.reviews.values():
            if review.pending and review.author_id == account_id and account_id is not None:
                return review
        return None

    def verdicts(self) -> dict[str, str]:
        """Each reviewer's latest approval or request for changes (a later review that only
        comments leaves it standing), by name."""
        found: dict[str, str] = {}
        for review in sorted(self.reviews.values(), key=lambda r: r.id):
            if review.state in ("approve", "request_changes") and review.author:
                found[review.author] = review.state
        return found


class Reviews:
    def __init__(self, db: Database, issues: Issues, pulls: Pulls) -> None:
        self.db = db
        self.issues = issues
        self.pulls = pulls
        # Set by the forge: the handle and refs of repository (owner, name), for the
        # background thread.
        self.locate: Callable[[str, str], tuple[pygit2.Repository, RefSnapshot]] | None = None
        self.merge_bases: Cache[tuple[str, str], str] = Cache.lru(4096)
        # a diff's paths: as many as a commit changes, so bounded in bytes
        self.changed: Cache[tuple[str, str], lines.ChangedPaths] = Cache.lru(
            CHANGED_PATHS_BYTES, getsizeof=approximate_size
        )
        # up to NEW_LIMIT commits' ids and subjects each: bounded in bytes
        self.news: Cache[tuple[str, str, str], NewCommits] = Cache.lru(
            NEW_COMMITS_BYTES, getsizeof=approximate_size
        )
        self._jobs = Jobs(
            "reviews", log, (FloorlessError, pygit2.GitError, KeyError, ValueError, OSError)
        )
        pulls.on_head_moved.append(lambda pull: self.follow_soon(pull.owner, pull.name))

    # -- where the diff is --------------------------------------------------------------------

    def anchors(self, handle: pygit2.Repository, pull: Pull, base_tip: str | None) -> Anchors:
        """The merge base and head the pull request's diff is shown between, with the base
        branch at ``base_tip`` (None if it is gone): the merge base the last check found
        when it checked these two, else computed (and kept by the pair of commits)."""
        head = pull.head_oid
        if pull.merge_base and (
            pull.merged or base_tip is None or (pull.checked, pull.checked_base) == (True, base_tip)
        ):
            return Anchors(pull.merge_base, head)
        if base_tip is None:
            raise BadRequest(f"the base branch {pull.base_branch} is gone")

        def compute() -> str:
            try:
                found = handle.merge_base(pygit2.Oid(hex=base_tip), pygit2.Oid(hex=head))
            except (ValueError, KeyError, pygit2.GitError) as exc:
                raise BadRequest("the head of this pull request cannot be read") from exc
            if found is None:
                raise BadRequest("the base and the head have no history in common")
            return str(found)

        return Anchors(self.merge_bases.get_or_make((base_tip, head), compute), head)

    def _changed(self, handle: pygit2.Repository, anchors: Anchors) -> lines.ChangedPaths:
        return self.changed.get_or_make(
            (anchors.merge_base, anchors.head),
            lambda: lines.changed_paths(handle, anchors.merge_base, anchors.head),
        )

    # -- reading ------------------------------------------------------------------------------

    def of_pull(self, pull: Pull, viewer: Account | None) -> PullReviews:
        """The submitted reviews and their comments, and ``viewer``'s own pending ones."""
        viewer_id = viewer.id if viewer is not None else -1
        shown = "(r.state <> 'pending' OR r.author_id = ?)"
        reviews = self.db.query(
            f"{_REVIEW} WHERE r.issue_id = ? AND {shown} ORDER BY r.id", (pull.issue.id, viewer_id)
        )
        comments = self.db.query(
            f"{_COMMENT} WHERE c.issue_id = ? AND {shown} ORDER BY c.id",
            (pull.issue.id, viewer_id),
        )
        return PullReviews(
            {int(row["id"]): _review(row) for row in reviews}, [_comment(row) for row in comments]
        )

    def last_seen(self, pull: Pull, account: Account) -> str | None:
        row = self.db.one(
            "SELECT head_oid FROM review_views WHERE issue_id = ? AND account_id = ?",
            (pull.issue.id, account.id),
        )
        return None if row is None else str(row["head_oid"])

    def new_since(
        self, handle: pygit2.Repository, pull: Pull, anchors: Anchors, seen: str | None
    ) -> NewCommits | None:
        """The commits new since the head ``seen`` (None: never looked, or nothing new);
        ``COUNTING`` while the background thread walks them."""
        if seen is None or seen == anchors.head:
            return None
        key = (seen, anchors.head, anchors.merge_base)
        found = self.news.get(key)
        if found is not None:
            return found
        self._queue(("new", key), lambda: self._count(pull.owner, pull.name, key))
        return COUNTING

    # -- writing ------------------------------------------------------------------------------

    def add_comment(
        self,
        handle: pygit2.Repository,
        pull: Pull,
        anchors: Anchors,
        author: Account,
        path: str,
        side: str,
        start_line: int,
        line: int,
        body: str,
    ) -> ReviewComment:
        """A comment on lines ``start_line`` to ``line`` of ``side`` of ``path``, into the
        author's pending review (made if there is none). The lines must be in the file as
        the diff shows it: the path changed on that side, the file text, and the lines in it."""
        body = clean_body(body, "a comment")
        if not body.strip():
            raise BadRequest("a comment needs some text")
        if side not in SIDES:
            raise BadRequest("side is old or new")
        if not path or len(path) > PATH_MAX or "\0" in path:
            raise BadRequest("name a file of the pull request's diff")
        if line < 1 or not 1 <= start_line <= line:
            raise BadRequest(f"no line {line} in {path}" if line < 1 else "a range runs downwards")
        if line - start_line >= RANGE_MAX:
            raise BadRequest(f"a comment spans at most {RANGE_MAX} lines")
        if path not in self._changed(handle, anchors).side(side):
            raise BadRequest(f"{path} is not changed on the {side} side of this pull request")
        text = lines.file_text(handle, anchors.commit(side), path)
        if text is None:
            raise BadRequest(f"{path} is binary or too large to comment on")
        if line > len(text.lines):
            raise BadRequest(f"no line {line} in {path}")
        now = time.time()
        with self.db.transaction():
            review_id = self._pending_id(pull, author, now)
            row = self.db.one(
                "INSERT INTO review_comments (review_id, issue_id, author_id, path, side,"
                " start_line, line, commit_oid, line_text, body, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    review_id,
                    pull.issue.id,
                    author.id,
                    path,
                    side,
                    start_line,
                    line,
                    anchors.commit(side),
                    "\n".join(text.lines[start_line - 1 : line]),
                    body,
                    now,
                    now,
                ),
            )
        assert row is not None
        return self.comment(pull, int(row["id"]))

    def comment(self, pull: Pull, comment_id: int) -> ReviewComment:
        row = self.db.one(
            f"{_COMMENT} WHERE c.id = ? AND c.issue_id = ?", (comment_id, pull.issue.id)
        )
        if row is None:
            raise NotFound(f"no review comment {comment_id}")
        return _comment(row)

    def edit_comment(self, pull: Pull, author: Account, comment_id: int, body: str) -> None:
        """Change the text of one's own comment while its review is pending."""
        body = clean_body(body, "a comment")
        if not body.strip():
            raise BadRequest("a comment needs some text")
        changed = self.db.execute(
            "UPDATE review_comments SET body = ?, updated_at = ? WHERE id = ? AND issue_id = ?"
            " AND author_id = ? AND review_id IN (SELECT id FROM reviews WHERE state = 'pending')",
            (body, time.time(), comment_id, pull.issue.id, author.id),
        )
        if not changed:
            raise NotFound("no pending comment of yours with that id")

    def delete_comment(self, pull: Pull, author: Account, comment_id: int) -> None:
        changed = self.db.execute(
            "DELETE FROM review_comments WHERE id = ? AND issue_id = ? AND author_id = ?"
            " AND review_id IN (SELECT id FROM reviews WHERE state = 'pending')",
            (comment_id, pull.issue.id, author.id),
        )
        if not changed:
            raise NotFound("no pending comment of yours with that id")

    def submit(self, pull: Pull, author: Account, verdict: str, body: str) -> Review:
        """Submit the author's pending review (or a review with no line comments) as
        ``verdict``, with ``body``: the review and its timeline event in one transaction.
        Whether the author may give that verdict is the caller's (``access.may_judge``)."""
        if verdict not in VERDICTS:
            raise BadRequest("a review is a comment, an approval or a request for changes")
        body = clean_body(body, "a review")
        now = time.time()
        with self.db.transaction():
            pending = self.db.query(
                "SELECT id FROM reviews WHERE issue_id = ? AND author_id = ? AND state = 'pending'"
                " ORDER BY id",
                (pull.issue.id, author.id),
            )
            ids = [int(row["id"]) for row in pending]
            for extra in ids[1:]:  # two made at once (two tabs): one review of all comments
                self.db.execute(
                    "UPDATE review_comments SET review_id = ? WHERE review_id = ?", (ids[0], extra)
                )
                self.db.execute("DELETE FROM reviews WHERE id = ?", (extra,))
            comments = 0
            if ids:
                row = self.db.one(
                    "SELECT COUNT(*) AS n FROM review_comments WHERE review_id = ?", (ids[0],)
                )
                comments = int(row["n"]) if row else 0
            if verdict == "comment" and not comments and not body.strip():
                raise BadRequest("a review that only comments needs a comment")
            if ids:
                review_id = ids[0]
                changed = self.db.execute(
                    "UPDATE reviews SET state = ?, body = ?, commit_oid = ?, submitted_at = ?"
                    " WHERE id = ? AND state = 'pending'",
                    (verdict, body, pull.head_oid, now, review_id),
                )
                if not changed:
                    raise Conflict("this review was submitted meanwhile")
            else:
                row = self.db.one(
                    "INSERT INTO reviews (issue_id, author_id, state, body, commit_oid,"
                    " created_at, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (pull.issue.id, author.id, verdict, body, pull.head_oid, now, now),
                )
                assert row is not None
                review_id = int(row["id"])
            self.issues.event(pull.issue, author, "review", str(review_id), verdict, now)
            self.saw(pull, author, pull.head_oid)
        found = self.db.one(f"{_REVIEW} WHERE r.id = ?", (review_id,))
        assert found is not None
        self.issues.changed(pull.issue, author, "reviewed", review_id=review_id)
        return _review(found)

    def discard(self, pull: Pull, author: Account, review_id: int) -> None:
        """Delete ``author``'s pending review ``review_id`` with its comments: no one else
        has seen it, and it left nothing on the timeline. A submitted review stays."""
        with self.db.transaction():
            self.db.execute(
                "DELETE FROM review_comments WHERE review_id IN (SELECT id FROM reviews"
                " WHERE id = ? AND issue_id = ? AND author_id = ? AND state = 'pending')",
                (review_id, pull.issue.id, author.id),
            )
            deleted = self.db.execute(
                "DELETE FROM reviews WHERE id = ? AND issue_id = ? AND author_id = ?"
                " AND state = 'pending'",
                (review_id, pull.issue.id, author.id),
            )
            if not deleted:  # the comments' deletion goes with the transaction
                raise NotFound("no pending review of yours with that id")

    def saw(self, pull: Pull, account: Account, head: str) -> None:
        """``account`` looked at the pull request's files at ``head``."""
        self.db.execute(
            "INSERT INTO review_views (issue_id, account_id, head_oid, seen_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (issue_id, account_id) DO UPDATE SET"
            " head_oid = excluded.head_oid, seen_at = excluded.seen_at",
            (pull.issue.id, account.id, head, time.time()),
        )

    def _pending_id(self, pull: Pull, author: Account, now: float) -> int:
        row = self.db.one(
            "SELECT MIN(id) AS id FROM reviews WHERE issue_id = ? AND author_id = ?"
            " AND state = 'pending'",
            (pull.issue.id, author.id),
        )
        if row is not None and row["id"] is not None:
            return int(row["id"])
        made = self.db.one(
            "INSERT INTO reviews (issue_id, author_id, state, commit_oid, created_at)"
            " VALUES (?, ?, 'pending', ?, ?) RETURNING id",
            (pull.issue.id, author.id, pull.head_oid, now),
        )
        assert made is not None
        return int(made["id"])

    # -- following heads (background) ---------------------------------------------------------

    def follow_soon(self, owner: str, name: str) -> None:
        """Queue following the comments of the open pull requests whose base or head is the
        repository ``owner/name`` (cheap: for ``Moves.listeners`` and the pull records)."""
        self._queue(("repo", owner, name), lambda: self._follow_repo(owner, name))

    def follow_pull_soon(self, pull: Pull) -> None:
        key = ("pull", pull.owner, pull.name, pull.number)
        self._queue(key, lambda: self._follow_number(pull.owner, pull.name, pull.number))

    def _follow_repo(self, owner: str, name: str) -> None:
        seen: set[tuple[str, str, int]] = set()
        pulls = self.pulls.open_with_base(owner, name) + self.pulls.open_with_head(owner, name)
        for pull in pulls:
            key = (pull.owner, pull.name, pull.number)
            if key not in seen:
                seen.add(key)
                self._follow_number(*key)

    def _follow_number(self, owner: str, name: str, number: int) -> None:
        if self.locate is None:
            return
        pull = self.pulls.get(owner, name, number)
        handle, snapshot = self.locate(owner, name)
        tip = snapshot.branches.get(pull.base_branch.encode())
        anchors = self.anchors(handle, pull, None if tip is None else tip.hex())
        self.follow(handle, pull, anchors)
        # what is new for each person who looked before, ready for their next page
        seen = self.db.query(
            "SELECT DISTINCT head_oid FROM review_views WHERE issue_id = ? AND head_oid <> ?",
            (pull.issue.id, anchors.head),
        )
        for row in seen:
            key = (str(row["head_oid"]), anchors.head, anchors.merge_base)
            if self.news.get(key) is None:
                self.news.put(key, new_commits(handle, *key))

    def follow(self, handle: pygit2.Repository, pull: Pull, anchors: Anchors) -> int:
        """Follow every comment of ``pull`` not yet at ``anchors`` into them: moved, or marked
        outdated. How many comments changed."""
        rows = self.db.query(
            "SELECT * FROM review_comments WHERE issue_id = ? AND outdated = 0", (pull.issue.id,)
        )
        changed = 0
        texts: dict[tuple[str, str], lines.FileText | None] = {}

        def text(commit: str, path: str) -> lines.FileText | None:
            if (commit, path) not in texts:
                texts[commit, path] = lines.file_text(handle, commit, path)
            return texts[commit, path]

        for row in rows:
            side, path, old_commit = row["side"], row["path"], row["commit_oid"]
            new_commit = anchors.commit(side)
            if old_commit == new_commit:
                continue
            start, end = int(row["start_line"]), int(row["line"])
            moved: tuple[int, int] | None = None
            if path in self._changed(handle, anchors).side(side):
                before, after = text(old_commit, path), text(new_commit, path)
                if before is not None and after is not None and end <= len(before.lines):
                    moved = lines.follow(before, after, start, end)
            if moved is None:
                changed += self.db.execute(
                    "UPDATE review_comments SET outdated = 1 WHERE id = ? AND commit_oid = ?"
                    " AND outdated = 0",
                    (row["id"], old_commit),
                )
            else:
                changed += self.db.execute(
                    "UPDATE review_comments SET start_line = ?, line = ?, commit_oid = ?"
                    " WHERE id = ? AND commit_oid = ? AND outdated = 0",
                    (moved[0], moved[1], new_commit, row["id"], old_commit),
                )
        return changed

    def _count(self, owner: str, name: str, key: tuple[str, str, str]) -> None:
        if self.locate is None:
            return
        handle, _ = self.locate(owner, name)
        self.news.put(key, new_commits(handle, *key))

    # -- the thread ---------------------------------------------------------------------------

    def _queue(self, key: Hashable, job: Callable[[], None]) -> None:
        self._jobs.queue(key, job)

    def start(self) -> None:
        self._jobs.start()

    def stop(self) -> None:
        self._jobs.stop()

    def idle(self) -> bool:
        """Whether no work is queued or running (for tests)."""
        return self._jobs.idle()


def new_commits(handle: pygit2.Repository, seen: str, head: str, merge_base: str) -> NewCommits:
    """The commits of ``head`` that neither ``seen`` nor ``merge_base`` has, newest first, at
    most ``NEW_LIMIT``: the walk stops at the pull request's merge base, so it reads the pull
    request's commits, never the history below them. A ``seen`` head no longer stored (a
    force push, then garbage collection) counts every commit of the pull request as new."""
    walker = handle.walk(pygit2.Oid(hex=head), SortMode.TOPOLOGICAL | SortMode.TIME)
    walker.hide(pygit2.Oid(hex=merge_base))
    forced = False
    try:
        walker.hide(pygit2.Oid(hex=seen))
        forced = handle.merge_base(pygit2.Oid(hex=seen), pygit2.Oid(hex=head)) != pygit2.Oid(
            hex=seen
        )
    except (KeyError, ValueError, pygit2.GitError):
        forced = True
    found: list[tuple[str, str]] = []
    for commit in walker:
        if len(found) == NEW_LIMIT:
            return NewCommits(found, True, forced)
        found.append((str(commit.id), commit.message.partition("\n")[0]))
    return NewCommits(found, False, forced)


def _review(row: Row) -> Review:
    return Review(
        id=int(row["id"]),
        author=row["author"] or "",
        author_id=row["author_id"],
        state=row["state"],
        body=row["body"],
        commit_oid=row["commit_oid"],
        created_at=float(row["created_at"]),
        submitted_at=row["submitted_at"],
    )


def _comment(row: Row) -> ReviewComment:
    return ReviewComment(
        id=int(row["id"]),
        review_id=int(row["review_id"]),
        author=row["author"] or "",
        author_id=row["author_id"],
        path=row["path"],
        side=row["side"],
        start_line=int(row["start_line"]),
        line=int(row["line"]),
        commit_oid=row["commit_oid"],
        line_text=row["line_text"],
        body=row["body"],
        outdated=bool(row["outdated"]),
        pending=row["review_state"] == "pending",
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )
