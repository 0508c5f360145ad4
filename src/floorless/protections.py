"""Branch protection rules, as Forgejo has them: a rule names a branch or a glob of branch
names, and says what a pull request into a branch it matches needs before it is merged.

Floorless keeps the part that is about commit statuses: with ``enable_status_check`` a merge
is refused until every required context (``status_check_contexts``, globs as Forgejo reads
them) has ``success`` as its latest status on the pull request's head commit. Forgejo counts
nothing else as passing: not ``warning``, not ``pending``, and a required context with no
status at all is pending. With no context listed, the latest statuses of the head combined
must be ``success`` (so a head with none is refused), as Forgejo has it.

Who may merge anyway: no one by default. Forgejo lets a repository administrator force a
merge past the rule unless the rule has ``apply_to_admins``; floorless does the same, and
only when asked (``force``: the API's ``force_merge``, the merge form's "merge without the
required checks"), never silently. ``merging.py`` asks ``refusal`` before every merge, so the
web form and the API are held by the same rule.

Glob syntax is Forgejo's (gobwas/glob): ``*`` any run of characters (in a rule name, not
``/``), ``**`` any run, ``?`` one character, ``[abc]``, ``[!a-z]``, ``{a,b}``, ``\\`` to take
the next character as it is. A rule whose name has none of these matches that branch alone.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from floorless.db import Database, IntegrityError, Row
from floorless.errors import BadRequest, FloorlessError, NotFound
from floorless.repos import Repo
from floorless.statuses import Status, worst

RULE_MAX = 255
CONTEXTS_MAX = 50  # required contexts of one rule
_SPECIAL = frozenset("*?[]{}\\")


class DisallowedToMerge(FloorlessError):
    """A merge the branch's protection refuses: Forgejo answers 405 for it."""

    status = 405


class Exists(FloorlessError):
    """A rule of that name exists: Forgejo answers 403 for it."""

    status = 403


@dataclass(frozen=True)
class Rule:
    id: int
    rule: str  # a branch name or a glob of them
    enable_status_check: bool
    status_check_contexts: tuple[str, ...]
    apply_to_admins: bool
    created_at: float
    updated_at: float

    def matches(self, branch: str) -> bool:
        if not (_SPECIAL & set(self.rule)):
            return branch == self.rule
        return _compile(self.rule, "/").fullmatch(branch) is not None


@dataclass(frozen=True)
class Check:
    """A required context and how it stands on a commit: its state ("pending" when no
    status matches it), and the status that says so, if any."""

    context: str
    state: str
    status: Status | None


def checks(rule: Rule, latest: Sequence[Status]) -> list[Check]:
    """Each context ``rule`` requires, as ``latest`` (a commit's latest statuses) has it:
    the worst of the statuses it matches. With none required, one line for all of them."""
    if not rule.status_check_contexts:
        state = worst(s.state for s in latest) or "pending"
        bad = [s for s in latest if s.state == state]
        return [Check("every status", state, bad[0] if bad else None)]
    found = []
    for pattern in rule.status_check_contexts:
        expr = _compile(pattern, "")
        matched = [s for s in latest if expr.fullmatch(s.context)]
        state = worst(s.state for s in matched) or "pending"
        chosen = next((s for s in matched if s.state == state), None)
        found.append(Check(pattern, state, chosen))
    return found


def passing(found: Sequence[Check]) -> bool:
    return all(check.state == "success" for check in found)


def clean_rule(text: str) -> str:
    text = text.strip()
    if not text:
        raise BadRequest("both rule_name and branch_name are empty")
    if len(text) > RULE_MAX or any(ord(c) < 0x20 for c in text) or " " in text:
        raise BadRequest("a rule name is a branch name or a glob of them")
    try:
        _compile(text, "/")
    except ValueError as exc:
        raise BadRequest(f"not a glob: {exc}") from exc
    return text


def clean_contexts(items: Sequence[str]) -> tuple[str, ...]:
    found = []
    for item in items:
        item = item.strip()
        if not item or item in found:
            continue
        if len(item) > RULE_MAX or any(ord(c) < 0x20 for c in item):
            raise BadRequest("a status check context is at most 255 characters, on one line")
        try:
            _compile(item, "")
        except ValueError as exc:
            raise BadRequest(f"not a glob: {exc}") from exc
        found.append(item)
    if len(found) > CONTEXTS_MAX:
        raise BadRequest(f"at most {CONTEXTS_MAX} status check contexts")
    return tuple(found)


def _rule(row: Row) -> Rule:
    contexts = str(row["status_check_contexts"])
    return Rule(
        id=int(row["id"]),
        rule=row["rule"],
        enable_status_check=int(row["enable_status_check"]) == 1,
        status_check_contexts=tuple(c for c in contexts.split("\n") if c),
        apply_to_admins=int(row["apply_to_admins"]) == 1,
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


class Protections:
    def __init__(self, db: Database) -> None:
        self.db = db

    def rules(self, repo: Repo) -> list[Rule]:
        rows = self.db.query(
            "SELECT * FROM branch_protections WHERE owner = ? AND name = ? ORDER BY id",
            (repo.owner, repo.name),
        )
        return [_rule(row) for row in rows]

    def get(self, repo: Repo, rule: str) -> Rule:
        row = self.db.one(
            "SELECT * FROM branch_protections WHERE owner = ? AND name = ? AND rule = ?",
            (repo.owner, repo.name, rule),
        )
        if row is None:
            raise NotFound("no such branch protection rule")
        return _rule(row)

    def for_branch(self, repo: Repo, branch: str) -> Rule | None:
        """The rule that protects ``branch``: the one named after it, else the first glob
        (oldest first) that matches it."""
        rules = self.rules(repo)
        exact = [r for r in rules if r.rule == branch]
        if exact:
            return exact[0]
        return next((r for r in rules if r.matches(branch)), None)

    def create(
        self,
        repo: Repo,
        rule: str,
        enable_status_check: bool,
        contexts: Sequence[str],
        apply_to_admins: bool,
    ) -> Rule:
        rule = clean_rule(rule)
        cleaned = clean_contexts(contexts)
        now = time.time()
        try:
            with self.db.transaction():
                if self.db.one(
                    "SELECT 1 FROM branch_protections WHERE owner = ? AND name = ? AND rule = ?",
                    (repo.owner, repo.name, rule),
                ):
                    raise Exists("Branch protection already exist")
                self.db.execute(
                    "INSERT INTO branch_protections (owner, name, rule, enable_status_check,"
                    " status_check_contexts, apply_to_admins, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        repo.owner,
                        repo.name,
                        rule,
                        1 if enable_status_check else 0,
                        "\n".join(cleaned),
                        1 if apply_to_admins else 0,
                        now,
                        now,
                    ),
                )
        except IntegrityError as exc:  # made by another at the same moment
            raise Exists("Branch protection already exist") from exc
        return self.get(repo, rule)

    def edit(
        self,
        repo: Repo,
        rule: str,
        enable_status_check: bool | None = None,
        contexts: Sequence[str] | None = None,
        apply_to_admins: bool | None = None,
    ) -> Rule:
        """Change what is given of the rule ``rule``; what is None stays."""
        with self.db.transaction():
            now = self.get(repo, rule)
            check = now.enable_status_check if enable_status_check is None else enable_status_check
            kept = now.status_check_contexts if contexts is None else clean_contexts(contexts)
            admins = now.apply_to_admins if apply_to_admins is None else apply_to_admins
            self.db.execute(
                "UPDATE branch_protections SET enable_status_check = ?,"
                " status_check_contexts = ?, apply_to_admins = ?, updated_at = ? WHERE id = ?",
                (1 if check else 0, "\n".join(kept), 1 if admins else 0, time.time(), now.id),
            )
        return self.get(repo, rule)

    def delete(self, repo: Repo, rule: str) -> None:
        found = self.get(repo, rule)
        self.db.execute("DELETE FROM branch_protections WHERE id = ?", (found.id,))


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, separator: str) -> re.Pattern[str]:
    """A glob as a regular expression; ``separator`` ("/" or "") is what ``*`` and ``?`` do
    not match. ``ValueError`` for an unclosed ``[`` or ``{``."""
    expr, end = _translate(pattern, 0, separator, nested=False)
    if end != len(pattern):
        raise ValueError(f"unexpected {pattern[end]!r}")
    return re.compile(expr, re.DOTALL)


def _translate(pattern: str, i: int, sep: str, nested: bool) -> tuple[str, int]:
    """The expression for ``pattern`` from ``i`` up to its end, or in braces up to the
    ``,`` or ``}`` that ends the alternative; and where it stopped."""
    one = f"[^{re.escape(sep)}]" if sep else "."
    out: list[str] = []
    while i < len(pattern):
        c = pattern[i]
        if nested and c in ",}":
            return "".join(out), i
        if c == "\\":
            if i + 1 >= len(pattern):
                raise ValueError("a trailing backslash")
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif c == "*":
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
            else:
                out.append(f"{one}*")
                i += 1
        elif c == "?":
            out.append(one)
            i += 1
        elif c == "[":
            close = pattern.find("]", i + 2)
            if close < 0:
                raise ValueError("an unclosed [")
            body = pattern[i + 1 : close]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            parts = []
            j = 0
            while j < len(body):
                if j + 2 < len(body) and body[j + 1] == "-":
                    parts.append(f"{re.escape(body[j])}-{re.escape(body[j + 2])}")
                    j += 3
                else:
                    parts.append(re.escape(body[j]))
                    j += 1
            out.append(f"[{'^' if negate else ''}{''.join(parts)}]")
            i = close + 1
        elif c == "{":
            options = []
            i += 1
            while True:
                part, i = _translate(pattern, i, sep, nested=True)
                options.append(part)
                if i >= len(pattern):
                    raise ValueError("an unclosed {")
                if pattern[i] == "}":
                    i += 1
                    break
                i += 1  # the comma
            out.append("(?:" + "|".join(options) + ")")
        else:
            out.append(re.escape(c))
            i += 1
    if nested:
        raise ValueError("an unclosed {")
    return "".join(out), i
