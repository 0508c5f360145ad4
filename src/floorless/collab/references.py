"""References to issues: ``#N`` and ``owner/name#N`` in text and commit messages, and the
closing ones (``fixes #N``, ``closes #N``, ``resolves #N`` and their other tenses, any case,
as GitHub and Forgejo read them).

A mention puts a ``ref`` event on the issue or pull request named, once per source (an issue,
a pull request, a commit): ``old_value`` the kind of source, ``value`` where it is
("owner/name#M", "owner/name@commit"). A closing reference closes the issue as completed when
its commit reaches the repository's default branch, or when the pull request whose
description says it is merged; the ``closed`` event's ``old_value`` names the commit or the
pull request.

What readers may see decides what is recorded. A mention from another repository is recorded
only from a public one, by someone who may read the repository mentioned: a private
repository's text never shows on the timeline of an issue that people who cannot read that
repository see. A commit closes issues of its own repository alone; a merged pull request's
description closes those of other repositories only where its merger may push.

What readers may see *now* decides what is shown (``shown_to``): a repository public when it
mentioned an issue may be private since, so an entry naming another repository is shown only
to a viewer who may read that repository at the time of asking (a closing by another's pull
request is shown without naming it), on the pages and in the API alike.

Commits are read by a background thread, queued by a listener on the forge's ref moves
(cheap: it only queues). Each branch's last tip read is kept (``branch_marks``): a push reads
the commits it brought and no others, at most ``WALK_LIMIT`` of them (for the default branch,
those since its last tip; for another branch, those neither a branch had when last read nor
the default branch has), so the work is that of the push, never of the history. A
repository seen for the first time (none of its branches marked) has only its newest
``WALK_LIMIT`` commits read: those of its default branch, and of each other branch's newest
``WALK_LIMIT`` those not read for the default branch.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pygit2
from pygit2.enums import SortMode

from floorless.accounts.access import Level, Policy, Viewer
from floorless.accounts.accounts import Account, Accounts
from floorless.collab.issues import Entry, Issue, Issues
from floorless.collab.pulls import Pull
from floorless.core.background import Jobs
from floorless.core.errors import FloorlessError, NotFound
from floorless.db import Database
from floorless.git.refs import RefSnapshot
from floorless.repos.registry import Registry, Repo

log = logging.getLogger(__name__)

WALK_LIMIT = 500  # commits read per branch and push
MESSAGE_MAX = 20_000  # characters of a commit message read for references
_REF = r"(?:([A-Za-z0-9][\w.-]*)/([\w.-]+))?#([0-9]{1,9})(?![\w#])"
_MENTION = re.compile(r"(?<![\w/#&.-])" + _REF)
_CLOSING = re.compile(
    r"(?i)(?<![\w-])(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)[ \t]*:?[ \t]+" + _REF
)


@dataclass(frozen=True)
class Ref:
    owner: str  # "" for the repository the text is in
    name: str
    number: int


def _refs(pattern: re.Pattern[str], text: str) -> list[Ref]:
    found: dict[Ref, None] = {}
    for match in pattern.finditer(text):
        owner, name, number = match.group(1) or "", match.group(2) or "", int(match.group(3))
        if number:
            found[Ref(owner, name, number)] = None
    return list(found)


def mentions(text: str) -> list[Ref]:
    """Every ``#N`` and ``owner/name#N`` of ``text``, once each, in order."""
    return _refs(_MENTION, text)


def closings(text: str) -> list[Ref]:
    """The references ``text`` closes: ``fixes #N``, ``Closes owner/name#N``, ..."""
    return _refs(_CLOSING, text)


def source_of(entry: Entry) -> tuple[str, str] | None:
    """The repository (owner, name) a timeline entry names as where it came from: a mention's
    ("owner/name#M", "owner/name@oid"), a closing's ("pull:owner/name#M",
    "commit:owner/name@oid"); None for any other entry."""
    if entry.kind == "ref":
        where = entry.body
    elif entry.kind == "closed" and entry.old_value:
        where = entry.old_value.partition(":")[2]
    else:
        return None
    owner, _, name = re.split("[#@]", where, maxsplit=1)[0].partition("/")
    return owner, name


def names_others(repo: Repo, entries: Sequence[Entry], texts: Sequence[str] = ()) -> bool:
    """Whether any of ``entries`` (of a timeline of ``repo``), or an ``owner/name#N`` of
    ``texts``, names another repository: what a viewer is shown of them then depends on
    that repository's visibility too."""
    if any(_other(repo, source_of(entry)) for entry in entries):
        return True
    return any(
        _other(repo, (ref.owner, ref.name)) for text in texts for ref in mentions(text) if ref.owner
    )


def _other(repo: Repo, source: tuple[str, str] | None) -> bool:
    if source is None:
        return False
    return (source[0].lower(), source[1].lower()) != (repo.owner.lower(), repo.name.lower())


class References:
    def __init__(
        self,
        db: Database,
        accounts: Accounts,
        issues: Issues,
        registry: Registry,
        policy: Policy,
        locate: Callable[[Repo], tuple[pygit2.Repository, RefSnapshot]],
    ) -> None:
        self.db = db
        self.accounts = accounts
        self.issues = issues
        self.registry = registry
        self.policy = policy
        self.locate = locate
        self._jobs = Jobs(
            "references", log, (FloorlessError, pygit2.GitError, KeyError, ValueError, OSError)
        )

    # -- text ---------------------------------------------------------------------------------

    def from_text(self, source: Issue, author: Account | None, text: str) -> int:
        """Record the mentions in ``text``, written on ``source`` (an issue or a pull
        request, its description or a comment) by ``author``: how many were new."""
        kind = "pull" if source.is_pull else "issue"
        where = f"{source.owner}/{source.name}#{source.number}"
        recorded = 0
        for target in self._targets(source.owner, source.name, author, mentions(text)):
            if target.id != source.id:
                recorded += self.mention(target, author, kind, where)
        return recorded

    def on_merged(self, pull: Pull, actor: Account | None) -> None:
        """A merged pull request closes what its description's closing references name, if
        it merged into its repository's default branch."""
        try:
            repo = self.registry.get(pull.owner, pull.name)
            _, snapshot = self.locate(repo)
            if snapshot.default_branch != pull.base_branch.encode():
                return
            source = f"pull:{pull.owner}/{pull.name}#{pull.number}"
            refs = closings(pull.issue.body)
            for target in self._targets(pull.owner, pull.name, actor, refs, needed=Level.WRITE):
                self.close(target, actor, source)
        except (FloorlessError, pygit2.GitError, OSError) as exc:
            log.warning("%s/%s#%d: closing references: %s", pull.owner, pull.name, pull.number, exc)

    def _targets(
        self,
        owner: str,
        name: str,
        author: Account | None,
        refs: list[Ref],
        needed: Level = Level.READ,
    ) -> Iterator[Issue]:
        """The issues and pull requests ``refs`` name from repository ``owner/name``: those
        of other repositories only from a public one, and where ``author`` reaches
        ``needed``."""
        source_public: bool | None = None
        for ref in refs:
            same = not ref.owner or (
                ref.owner.lower() == owner.lower() and ref.name.lower() == name.lower()
            )
            target_owner, target_name = (owner, name) if same else (ref.owner, ref.name)
            if not same:
                if source_public is None:
                    source_public = not self.registry.get(owner, name).private
                try:
                    target_repo = self.registry.get(ref.owner, ref.name)
                except NotFound:
                    continue
                level = self.policy.level(Viewer(author), target_repo)
                if not source_public or author is None or level < needed:
                    continue
                target_owner, target_name = target_repo.owner, target_repo.name
            kind = self.issues.kind_of(target_owner, target_name, ref.number)
            if kind is not None:
                yield self.issues.get(target_owner, target_name, ref.number, pull=kind)

    def mention(self, target: Issue, actor: Account | None, kind: str, where: str) -> bool:
        """A ``ref`` event on ``target`` from ``where`` unless it has one already."""
        with self.db.transaction():
            seen = self.db.one(
                "SELECT 1 FROM issue_events WHERE issue_id = ? AND kind = 'ref' AND value = ?",
                (target.id, where),
            )
            if seen is None:
                self.issues.event(target, actor, "ref", kind, where)
        return seen is None

    def close(self, target: Issue, actor: Account | None, source: str) -> bool:
        """Close ``target`` as completed by ``source`` ("commit:owner/name@oid" or
        "pull:owner/name#M"), unless that source closed it before (it was reopened since:
        the same commit read again must not close it again)."""
        if target.is_pull:
            return False
        with self.db.transaction():
            before = self.db.one(
                "SELECT 1 FROM issue_events WHERE issue_id = ? AND kind = 'closed'"
                " AND old_value = ?",
                (target.id, source),
            )
            if before is not None:
                return False
            return self.issues.close(target, actor, "completed", source=source)

    # -- what is shown ------------------------------------------------------------------------

    def shown_to(self, viewer: Viewer, repo: Repo, entries: Sequence[Entry]) -> list[Entry]:
        """``entries`` of a timeline of ``repo`` as ``viewer`` may see them now: a mention
        from another repository only if ``viewer`` may read that repository (it may have
        gone private, or been deleted, since it was recorded); a closing by another
        repository's pull request, without naming it. One lookup per repository named."""
        readable: dict[tuple[str, str], bool] = {}
        shown: list[Entry] = []
        for entry in entries:
            source = source_of(entry)
            if source is None or not _other(repo, source):
                shown.append(entry)
                continue
            key = (source[0].lower(), source[1].lower())
            if key not in readable:
                try:
                    named = self.registry.get(*source)
                except NotFound:
                    readable[key] = False
                else:
                    readable[key] = self.policy.level(viewer, named) >= Level.READ
            if readable[key]:
                shown.append(entry)
            elif entry.kind == "closed":
                shown.append(dataclasses.replace(entry, old_value=""))
        return shown

    # -- commits ------------------------------------------------------------------------------

    def queue(self, repo: Repo, snapshot: RefSnapshot | None = None) -> None:
        """Read the commits new on ``repo``'s branches soon (for ``Moves.listeners``)."""
        owner, name = repo.owner, repo.name
        self._jobs.queue((owner, name), lambda: self.read_commits(owner, name))

    def read_commits(self, owner: str, name: str) -> int:
        """Read the commits each branch of ``owner/name`` got since it was last read for
        mentions (any branch) and closing references (the default branch); mark the tips.
        How many commits were read."""
        repo = self.registry.get(owner, name)
        handle, snapshot = self.locate(repo)
        rows = self.db.query(
            "SELECT branch, oid FROM branch_marks WHERE owner = ? AND name = ?",
            (repo.owner, repo.name),
        )
        marks = {str(row["branch"]): str(row["oid"]) for row in rows}
        default = snapshot.default_branch
        known = [oid for oid in marks.values() if _present(handle, oid)]
        emails: dict[str, Account | None] = {}
        read = 0
        seen: set[pygit2.Oid] = set()  # on a first sight, the default branch's commits read
        for branch, tip in sorted(snapshot.branches.items(), key=lambda b: (b[0] != default, b)):
            key = branch.hex()
            if marks.get(key) == tip.hex():
                continue
            # newest first as found: a topological order walks every commit the tip reaches
            # before the first (git.git's default branch: 1.1 s, against 2 ms)
            walker = handle.walk(pygit2.Oid(raw=tip), SortMode.NONE)
            if branch == default:  # what reached it since: closing references count here
                old = marks.get(key)
                if old is not None and _present(handle, old):
                    walker.hide(pygit2.Oid(hex=old))
            elif marks:  # what no branch had; the default branch's commits are read as its own
                for oid in known:
                    walker.hide(pygit2.Oid(hex=oid))
                if default is not None and default in snapshot.branches:
                    walker.hide(pygit2.Oid(raw=snapshot.branches[default]))
            # else a first sight: what the default branch's newest commits have not, hiding
            # nothing (a branch of a history of its own, as git.git's todo, hiding the default
            # branch, walks all of its history: 1.6 s)
            for count, commit in enumerate(walker):
                if count >= WALK_LIMIT:
                    break
                if branch == default:
                    seen.add(commit.id)
                elif commit.id in seen:
                    continue
                read += 1
                self._commit(repo, commit, branch == default, emails)
            self.db.execute(
                "INSERT INTO branch_marks (owner, name, branch, oid) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (owner, name, branch) DO UPDATE SET oid = excluded.oid",
                (repo.owner, repo.name, key, tip.hex()),
            )
        gone = [key for key in marks if bytes.fromhex(key) not in snapshot.branches]
        for key in gone:
            self.db.execute(
                "DELETE FROM branch_marks WHERE owner = ? AND name = ? AND branch = ?",
                (repo.owner, repo.name, key),
            )
        return read

    def _commit(
        self,
        repo: Repo,
        commit: pygit2.Commit,
        closing: bool,
        emails: dict[str, Account | None],
    ) -> None:
        try:
            message = commit.message[:MESSAGE_MAX]
        except (LookupError, ValueError):  # an encoding Python does not know
            message = commit.raw_message.decode("utf-8", "replace")[:MESSAGE_MAX]
        if "#" not in message:
            return
        email = (commit.author.raw_email or b"").decode("utf-8", "replace").lower()
        if email not in emails:
            row = self.db.one(
                "SELECT name FROM accounts WHERE lower(email) = ? AND kind = 'user'", (email,)
            )
            emails[email] = None if row is None or not email else self.accounts.get(row["name"])
        author = emails[email]  # who wrote it, if an account has the address
        where = f"{repo.owner}/{repo.name}@{commit.id}"
        for target in self._targets(repo.owner, repo.name, author, mentions(message)):
            if not (target.is_pull and self._merges(target, str(commit.id))):
                self.mention(target, author, "commit", where)
        if closing:
            for ref in closings(message):
                if ref.owner and (ref.owner, ref.name) != (repo.owner, repo.name):
                    continue  # a commit closes issues of its own repository alone
                if self.issues.kind_of(repo.owner, repo.name, ref.number) is False:
                    issue = self.issues.get(repo.owner, repo.name, ref.number)
                    self.close(issue, author, f"commit:{where}")

    def _merges(self, pull: Issue, oid: str) -> bool:
        """Whether commit ``oid`` is the one merging ``pull`` (its merge or squash commit names
        it, "(#N)", as Forgejo writes it): no mention of itself. The merge is written down
        before the branch moves (``Pulls.intend_merge``), so this is known by then."""
        row = self.db.one("SELECT merged_oid FROM pulls WHERE issue_id = ?", (pull.id,))
        return row is not None and row["merged_oid"] == oid

    # -- the thread ---------------------------------------------------------------------------

    def start(self) -> None:
        self._jobs.start()

    def stop(self) -> None:
        self._jobs.stop()

    def idle(self) -> bool:
        """Whether no work is queued or running (for tests)."""
        return self._jobs.idle()


def _present(handle: pygit2.Repository, oid: str) -> bool:
    try:
        return isinstance(handle.get(oid), pygit2.Commit)
    except (ValueError, pygit2.GitError):
        return False
