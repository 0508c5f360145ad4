"""Branch protection rules in the database, and what a merge's required checks say.

What a rule says and refuses is ``branchrules.py``'s (pure, no database); this module keeps
the rules of each repository (their name, status checks and ``apply_to_admins`` in columns,
the other fields as JSON options), refuses in-process moves of a protected branch
(``guard``: the contents and branch APIs), and tells how a commit's statuses stand against a
rule's required contexts (``checks``). git pushes are held by the same rules in git's
pre-receive hook, which the forge hands the repository's rules (``branchrules.dump``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pygit2

from floorless.collab.branchrules import (
    DEFAULT,
    HELP,
    Move,
    Rule,
    Verdict,
    _compile,
    clean_fields,
    clean_rule,
    matching_files,
    merge_refusals,
    move_of,
    options_of,
    passing,
    pick,
    push_refusal,
    rule_of,
)
from floorless.collab.statuses import Status, worst
from floorless.core.errors import FloorlessError, NotFound
from floorless.db import Database, IntegrityError, Row
from floorless.repos.registry import Repo

__all__ = [
    "HELP",
    "Check",
    "DisallowedToMerge",
    "Exists",
    "Move",
    "Protected",
    "Protections",
    "Rule",
    "Verdict",
    "_compile",
    "checks",
    "clean_fields",
    "matching_files",
    "merge_refusals",
    "move_of",
    "passing",
    "pick",
    "push_refusal",
]


class DisallowedToMerge(FloorlessError):
    """A merge the branch's protection refuses: Forgejo answers 405 for it."""

    status = 405


class Exists(FloorlessError):
    """A rule of that name exists: Forgejo answers 403 for it."""

    status = 403


class Protected(FloorlessError):
    """A ref move the branch's protection refuses (a push, a deletion, a file written)."""

    status = 403


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


def _rule(row: Row) -> Rule:
    try:
        stored = json.loads(row["options"] or "{}")
    except ValueError:
        stored = {}
    contexts = str(row["status_check_contexts"])
    return rule_of(
        {
            **(stored if isinstance(stored, dict) else {}),
            "id": int(row["id"]),
            "rule": row["rule"],
            "enable_status_check": int(row["enable_status_check"]) == 1,
            "status_check_contexts": tuple(c for c in contexts.split("\n") if c),
            "apply_to_admins": int(row["apply_to_admins"]) == 1,
            "created_at": float(row["created_at"]),
            "updated_at": float(row["updated_at"]),
        }
    )


class Protections:
    def __init__(self, db: Database) -> None:
        self.db = db

    def rules(self, repo: Repo) -> list[Rule]:
        return self.rules_of(repo.owner, repo.name)

    def rules_of(self, owner: str, name: str) -> list[Rule]:
        rows = self.db.query(
            "SELECT * FROM branch_protections WHERE owner = ? AND name = ? ORDER BY id",
            (owner, name),
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
        return pick(self.rules(repo), branch)

    def create(self, repo: Repo, rule: str, fields: Mapping[str, Any]) -> Rule:
        """A new rule named ``rule`` with ``fields`` (``clean_fields``'s answer)."""
        rule = clean_rule(rule)
        made = replace(DEFAULT, rule=rule, **fields)
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
                    " status_check_contexts, apply_to_admins, options, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        repo.owner,
                        repo.name,
                        rule,
                        1 if made.enable_status_check else 0,
                        "\n".join(made.status_check_contexts),
                        1 if made.apply_to_admins else 0,
                        json.dumps(options_of(made)),
                        now,
                        now,
                    ),
                )
        except IntegrityError as exc:  # made by another at the same moment
            raise Exists("Branch protection already exist") from exc
        return self.get(repo, rule)

    def edit(self, repo: Repo, rule: str, fields: Mapping[str, Any]) -> Rule:
        """Change the fields given of the rule ``rule``; the others stay."""
        with self.db.transaction():
            now = self.get(repo, rule)
            changed = replace(now, **fields)
            self.db.execute(
                "UPDATE branch_protections SET enable_status_check = ?,"
                " status_check_contexts = ?, apply_to_admins = ?, options = ?, updated_at = ?"
                " WHERE id = ?",
                (
                    1 if changed.enable_status_check else 0,
                    "\n".join(changed.status_check_contexts),
                    1 if changed.apply_to_admins else 0,
                    json.dumps(options_of(changed)),
                    time.time(),
                    now.id,
                ),
            )
        return self.get(repo, rule)

    def guard(
        self,
        repo: Repo,
        handle: pygit2.Repository,
        actor: str,
        is_admin: bool,
        branch: str,
        old: str,
        new: str,
    ) -> None:
        """Refuse (``Protected``, 403) a move of ``branch`` made in-process (the contents and
        branch APIs) that its rule refuses to a push: the same rule as
        ``floorless.collab.githooks``."""
        refusal = push_refusal(
            self.for_branch(repo, branch), move_of(handle, branch, actor, is_admin, old, new)
        )
        if refusal is not None:
            raise Protected(refusal)

    def delete(self, repo: Repo, rule: str) -> None:
        found = self.get(repo, rule)
        self.db.execute("DELETE FROM branch_protections WHERE id = ?", (found.id,))
