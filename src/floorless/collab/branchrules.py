"""What a branch protection rule says, as Forgejo has it: a rule names a branch or a glob
of branch names, and says who may move a branch it matches, and how, and what a pull request into it
needs before it is merged.

Pure rules, with no database (``protections.py`` keeps them in their table): git's
pre-receive hook (``hooks/pre_receive.py``) applies them to every push through floorless, the
contents and branch APIs through ``Protections.guard``, and merges through ``merging.py``.

What a rule says, in Forgejo's words (the API's field names):

- **Deletion** of a protected branch is refused to everyone.
- **Push** (``enable_push``): off, nobody may push to the branch; on, everyone who may write
  to the repository may, or with ``enable_push_whitelist`` only the people named in
  ``push_whitelist_usernames``. A merge through floorless is not a push: it is held by the
  merge rules below.
- **Force push** (``enable_force_push``, Gitea's name for it): off, no push may rewrite the
  branch's history; on, whoever may push may, or with ``enable_force_push_allowlist`` only the
  people named in ``force_push_allowlist_usernames``.
- **Protected file patterns** (``protected_file_patterns``, globs separated by ``;``, case
  insensitive, ``*`` not crossing ``.`` or ``/``): a push that changes a matching file is
  refused, and a pull request that changes one is merged only by an administrator.
  **Unprotected file patterns**: a push that changes only matching files is let through even
  where pushing is off.
- **Merges** wait for the required status checks (``enable_status_check``,
  ``status_check_contexts``: globs, each of which must have ``success`` as its latest state
  on the head; with none listed, every status of the head must), for ``required_approvals``
  approvals (from anyone who may write, or with ``enable_approvals_whitelist`` from the
  people in ``approvals_whitelist_username``; an approval of an earlier head does not count
  with ``dismiss_stale_approvals`` or ``ignore_stale_approvals``), for no request for changes
  (``block_on_rejected_reviews``), and for a head that contains the base branch
  (``block_on_outdated_branch``). With ``enable_merge_whitelist`` only the people in
  ``merge_whitelist_usernames`` may merge.
- **Administrators** of the repository are bound by every rule when ``apply_to_admins`` is
  set. Without it they may push and force-push past the rule, and merge past its checks and
  approvals when they ask to (``force``: the API's ``force_merge``, the merge form's "merge
  without the required checks"), never silently. Deletion stays refused.

floorless has no teams: a rule naming one is refused. It does not verify commit signatures,
so ``require_signed_commits`` cannot be set.

Glob syntax is Forgejo's (gobwas/glob): ``*`` any run of characters (in a rule name, not
``/``), ``**`` any run, ``?`` one character, ``[abc]``, ``[!a-z]``, ``{a,b}``, ``\\`` to take
the next character as it is. A rule whose name has none of these matches that branch alone.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pygit2

from floorless.core.errors import BadRequest
from floorless.git.merge import is_ancestor, paths_between

RULE_MAX = 255
CONTEXTS_MAX = 50  # required contexts of one rule
NAMES_MAX = 100  # people named in one list of a rule
PATTERNS_MAX = 2000  # characters of a file pattern list
_SPECIAL = frozenset("*?[]{}\\")


@dataclass(frozen=True)
class Rule:
    id: int
    rule: str  # a branch name or a glob of them
    enable_status_check: bool
    status_check_contexts: tuple[str, ...]
    apply_to_admins: bool
    created_at: float
    updated_at: float
    enable_push: bool = False
    enable_push_whitelist: bool = False
    push_whitelist_usernames: tuple[str, ...] = ()
    enable_force_push: bool = False
    enable_force_push_allowlist: bool = False
    force_push_allowlist_usernames: tuple[str, ...] = ()
    enable_merge_whitelist: bool = False
    merge_whitelist_usernames: tuple[str, ...] = ()
    required_approvals: int = 0
    enable_approvals_whitelist: bool = False
    approvals_whitelist_username: tuple[str, ...] = ()
    block_on_rejected_reviews: bool = False
    block_on_official_review_requests: bool = False
    block_on_outdated_branch: bool = False
    dismiss_stale_approvals: bool = False
    ignore_stale_approvals: bool = False
    protected_file_patterns: str = ""
    unprotected_file_patterns: str = ""

    def matches(self, branch: str) -> bool:
        if not (_SPECIAL & set(self.rule)):
            return branch == self.rule
        return _compile(self.rule, "/").fullmatch(branch) is not None

    def bound(self, is_admin: bool) -> bool:
        """Whether the rule holds for someone (an administrator of the repository or not)."""
        return self.apply_to_admins or not is_admin


# The fields a rule keeps in its ``options`` (everything but its name, status checks and
# ``apply_to_admins``, which have columns of their own), with their kinds.
_BOOLS = (
    "enable_push",
    "enable_push_whitelist",
    "enable_force_push",
    "enable_force_push_allowlist",
    "enable_merge_whitelist",
    "enable_approvals_whitelist",
    "block_on_rejected_reviews",
    "block_on_official_review_requests",
    "block_on_outdated_branch",
    "dismiss_stale_approvals",
    "ignore_stale_approvals",
)
_NAME_LISTS = (
    "push_whitelist_usernames",
    "force_push_allowlist_usernames",
    "merge_whitelist_usernames",
    "approvals_whitelist_username",
)
_TEAM_LISTS = (
    "push_whitelist_teams",
    "force_push_allowlist_teams",
    "merge_whitelist_teams",
    "approvals_whitelist_teams",
)
_PATTERNS = ("protected_file_patterns", "unprotected_file_patterns")
# Forgejo's fields that floorless takes but that change nothing it does: deploy keys
# (floorless has none yet) are never on a list.
_IGNORED = ("push_whitelist_deploy_keys", "force_push_allowlist_deploy_keys")
FIELDS = (
    "enable_status_check",
    "status_check_contexts",
    "apply_to_admins",
    "required_approvals",
    "require_signed_commits",
    *_BOOLS,
    *_NAME_LISTS,
    *_TEAM_LISTS,
    *_PATTERNS,
    *_IGNORED,
)


# What each of a rule's fields does, in Forgejo's words (its kind, then its meaning): the API's
# description of the fields and the configuration reference are made from this.
HELP: dict[str, tuple[str, str]] = {
    "rule_name": ("string", "the branch, or a glob of branches (`release/*`), the rule protects"),
    "enable_push": ("boolean", "enable push: whoever may write may push (off: nobody may)"),
    "enable_push_whitelist": ("boolean", "only the people in the push allowlist may push"),
    "push_whitelist_usernames": ("array", "the push allowlist"),
    "enable_force_push": ("boolean", "whoever may push may also force-push (off: nobody may)"),
    "enable_force_push_allowlist": ("boolean", "only the force-push allowlist may force-push"),
    "force_push_allowlist_usernames": ("array", "the force-push allowlist"),
    "enable_status_check": ("boolean", "require status checks to pass before merging"),
    "status_check_contexts": (
        "array",
        "the contexts (globs) whose latest status must be `success`; none: every status",
    ),
    "required_approvals": ("integer", "approvals a pull request needs before it is merged"),
    "enable_approvals_whitelist": ("boolean", "only approvals by the approvals list count"),
    "approvals_whitelist_username": ("array", "whose approvals count (else: whoever may write)"),
    "dismiss_stale_approvals": (
        "boolean",
        "an approval of an earlier head no longer counts once new commits are pushed",
    ),
    "ignore_stale_approvals": ("boolean", "the same: approvals of an earlier head do not count"),
    "block_on_rejected_reviews": ("boolean", "a request for changes holds the merge"),
    "block_on_official_review_requests": ("boolean", "taken; floorless asks no reviewers yet"),
    "block_on_outdated_branch": ("boolean", "a head behind its base branch is not merged"),
    "enable_merge_whitelist": ("boolean", "only the people in the merge allowlist may merge"),
    "merge_whitelist_usernames": ("array", "the merge allowlist"),
    "protected_file_patterns": (
        "string",
        "files (globs separated by `;`) no push may change; a pull request changing one is"
        " merged only by an administrator",
    ),
    "unprotected_file_patterns": (
        "string",
        "files (globs separated by `;`) a writer may push even where pushing is off",
    ),
    "apply_to_admins": (
        "boolean",
        "administrators are held by the rule too (off: they may push past it, and force a"
        " merge past its checks and approvals)",
    ),
    "require_signed_commits": ("boolean", "refused: floorless does not verify signatures"),
    "push_whitelist_teams": ("array", "refused unless empty: floorless has no teams"),
    "force_push_allowlist_teams": ("array", "refused unless empty: floorless has no teams"),
    "merge_whitelist_teams": ("array", "refused unless empty: floorless has no teams"),
    "approvals_whitelist_teams": ("array", "refused unless empty: floorless has no teams"),
    "push_whitelist_deploy_keys": ("boolean", "taken; floorless has no deploy keys yet"),
    "force_push_allowlist_deploy_keys": ("boolean", "taken; floorless has no deploy keys yet"),
}


def clean_fields(data: Mapping[str, Any], known: Callable[[str], bool]) -> dict[str, Any]:
    """The rule fields given in ``data`` (Forgejo's names), checked: what is absent stays as
    it is. ``known`` tells whether a user name is an account's. BadRequest names the first
    field that is wrong."""
    found: dict[str, Any] = {}
    for name in ("enable_status_check", "apply_to_admins", *_BOOLS):
        if data.get(name) is not None:
            if not isinstance(data[name], bool):
                raise BadRequest(f"{name} is true or false")
            found[name] = data[name]
    if data.get("status_check_contexts") is not None:
        found["status_check_contexts"] = clean_contexts(_strings(data, "status_check_contexts"))
    for name in _NAME_LISTS:
        if data.get(name) is not None:
            names = tuple(dict.fromkeys(n.strip() for n in _strings(data, name) if n.strip()))
            if len(names) > NAMES_MAX:
                raise BadRequest(f"{name} names at most {NAMES_MAX} people")
            unknown = [n for n in names if not known(n)]
            if unknown:
                raise BadRequest(f"{name}: no such user {unknown[0][:100]!r}")
            found[name] = names
    for name in _TEAM_LISTS:
        if data.get(name):
            raise BadRequest(f"{name}: floorless has no teams; name people instead")
    for name in _PATTERNS:
        if data.get(name) is not None:
            text = data[name]
            if not isinstance(text, str) or len(text) > PATTERNS_MAX:
                raise BadRequest(f"{name} is a text of globs separated by ';'")
            try:
                file_patterns(text)
            except ValueError as exc:
                raise BadRequest(f"{name}: not a glob: {exc}") from exc
            found[name] = text.strip()
    if data.get("required_approvals") is not None:
        count = data["required_approvals"]
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 100:
            raise BadRequest("required_approvals is a whole number from 0 to 100")
        found["required_approvals"] = count
    if data.get("require_signed_commits"):
        raise BadRequest("floorless does not verify commit signatures: require_signed_commits")
    return found


def _strings(data: Mapping[str, Any], name: str) -> list[str]:
    value = data[name]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{name} is a list of texts")
    return value


def file_patterns(text: str) -> list[re.Pattern[str]]:
    """Forgejo's file patterns: globs separated by ``;``, matched against the lower-cased
    path, ``*`` and ``?`` crossing neither ``.`` nor ``/``."""
    return [_compile(p.strip().lower(), "./") for p in text.split(";") if p.strip()]


def matching_files(text: str, paths: Sequence[str]) -> list[str]:
    patterns = file_patterns(text)
    return [p for p in paths if any(e.fullmatch(p.lower()) for e in patterns)]


# -- moving a branch ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """A ref about to move: by whom (their account name; whether they administer the
    repository), from ``old`` to ``new`` (hex; zeros for none), whether it rewrites history,
    and the paths it changes (asked only when a rule has file patterns)."""

    branch: str
    actor: str
    is_admin: bool
    deleted: bool
    forced: bool
    changed: Callable[[], Sequence[str]]


def move_of(
    handle: pygit2.Repository, branch: str, actor: str, is_admin: bool, old: str, new: str
) -> Move:
    """The move of ``branch`` from ``old`` to ``new`` (hex; zeros, or "", for none) in
    ``handle``, by ``actor``: whether it deletes the branch or rewrites its history, and
    (when asked) the paths it changes."""
    deleted = not new or set(new) == {"0"}
    created = not old or set(old) == {"0"}
    forced = not deleted and not created and not _descends(handle, new, old)

    def changed() -> list[str]:
        return [] if deleted or created else paths_between(handle, old, new)

    return Move(branch, actor, is_admin, deleted, forced, changed)


def _descends(handle: pygit2.Repository, new: str, old: str) -> bool:
    try:
        return is_ancestor(handle, old, new)
    except (KeyError, ValueError, pygit2.GitError):
        return False  # an object that cannot be read: treated as rewritten history


def push_refusal(rule: Rule | None, move: Move) -> str | None:
    """Why ``rule`` refuses ``move`` as a push (or an API write straight to the branch), in
    Forgejo's words; None when it allows it."""
    if rule is None:
        return None
    branch = move.branch
    if move.deleted:
        return f"branch {branch} is protected from deletion"
    bound = rule.bound(move.is_admin)
    if not bound:
        return None
    actor = move.actor.lower()
    if move.forced:
        allowed = rule.enable_force_push and (
            not rule.enable_force_push_allowlist
            or actor in (n.lower() for n in rule.force_push_allowlist_usernames)
        )
        if not allowed:
            return f"branch {branch} is protected from force push"
    changed: Sequence[str] | None = None
    if rule.protected_file_patterns:
        changed = move.changed()
        hit = matching_files(rule.protected_file_patterns, changed)
        if hit:
            return f"branch {branch} is protected from changing file {hit[0]}"
    may_push = rule.enable_push and (
        not rule.enable_push_whitelist
        or actor in (n.lower() for n in rule.push_whitelist_usernames)
    )
    if may_push:
        return None
    if rule.unprotected_file_patterns and not move.forced:
        changed = move.changed() if changed is None else changed
        if changed and len(matching_files(rule.unprotected_file_patterns, changed)) == len(changed):
            return None
    return f"Not allowed to push to protected branch {branch}"


@dataclass(frozen=True)
class Verdict:
    """A review that counts towards a merge: who, approve or request_changes, of which head."""

    reviewer: str
    state: str
    commit: str
    official: bool  # by someone the rule counts (a writer, or one on the approvals list)


def merge_refusals(
    rule: Rule,
    actor: str,
    found: Sequence[Stands] | None,
    verdicts: Sequence[Verdict],
    head: str,
    outdated: bool,
    protected: Sequence[str],
) -> list[str]:
    """Everything ``rule`` holds against merging a pull request into its branch now: its
    checks (``found``, None when none are required), the latest ``verdicts`` of its
    reviewers, whether the head lacks the base's tip, and the protected files it changes."""
    reasons = []
    if rule.enable_merge_whitelist and actor.lower() not in (
        n.lower() for n in rule.merge_whitelist_usernames
    ):
        reasons.append("you are not on the list of who may merge into this branch")
    if found is not None and not passing(found):
        failing = ", ".join(f"{c.context} ({c.state})" for c in found if c.state != "success")
        reasons.append(f"Not all required status checks successful: {failing}")
    official = [v for v in verdicts if v.official]
    if rule.required_approvals:
        stale_out = rule.dismiss_stale_approvals or rule.ignore_stale_approvals
        approvals = [
            v for v in official if v.state == "approve" and (v.commit == head or not stale_out)
        ]
        if len(approvals) < rule.required_approvals:
            reasons.append(
                f"Does not have enough approvals: {len(approvals)} of {rule.required_approvals}"
            )
    if rule.block_on_rejected_reviews and any(v.state == "request_changes" for v in official):
        reasons.append("There are requested changes")
    if rule.block_on_outdated_branch and outdated:
        reasons.append("The head branch is behind the base branch")
    if protected:
        reasons.append(f"It changes protected files: {', '.join(protected[:5])}")
    return reasons


class Stands(Protocol):
    """A required check as it stands on a commit (``protections.Check``)."""

    @property
    def context(self) -> str: ...

    @property
    def state(self) -> str: ...


def passing(found: Sequence[Stands]) -> bool:
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


_OPTION_NAMES = frozenset(
    f.name
    for f in dataclasses.fields(Rule)
    if f.name
    not in (
        "id",
        "rule",
        "enable_status_check",
        "status_check_contexts",
        "apply_to_admins",
        "created_at",
        "updated_at",
    )
)


def rule_of(fields: Mapping[str, Any]) -> Rule:
    """A rule from its fields (lists as lists or tuples); unknown ones are left out."""
    known = {f.name for f in dataclasses.fields(Rule)}
    given: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in fields.items() if k in known
    }
    return Rule(**given)


def options_of(rule: Rule) -> dict[str, Any]:
    """The fields of ``rule`` kept as its options (those not at their default)."""
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name in sorted(_OPTION_NAMES)
        if (value := getattr(rule, name)) != getattr(DEFAULT, name)
    }


def dump(rules: Sequence[Rule]) -> str:
    """Rules as JSON, for the pre-receive hook (``load``)."""
    return json.dumps([dataclasses.asdict(rule) for rule in rules])


def load(text: str) -> list[Rule]:
    return [rule_of(fields) for fields in json.loads(text)]


DEFAULT = Rule(0, "", False, (), False, 0.0, 0.0)


def pick(rules: Sequence[Rule], branch: str) -> Rule | None:
    """The rule that protects ``branch``: the one named after it, else the first glob
    (oldest first) that matches it."""
    exact = [r for r in rules if r.rule == branch]
    if exact:
        return exact[0]
    return next((r for r in rules if r.matches(branch)), None)


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
