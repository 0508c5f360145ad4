"""git's hooks for every push through floorless: who may move which ref, to what.

``git receive-pack``, run by the forge with its own hooks directory (``core.hooksPath``; a
repository's own hooks never run), calls ``python -m floorless.hooks`` three ways:

- ``pre-receive``, once per push, while the pushed objects are still in git's quarantine:
  it decides, for every update, whether it is refused, and writes the verdicts in the push's
  work directory (``FLOORLESS_HOOK_DIR``). An update is refused when the pusher may only read
  the repository and it is not a proposal (``refs/for/``); when it would point at objects the
  push neither sent nor may reach (``git/pushgate.py``: what a fork's parent hides, what a
  deleted branch left); or when a branch protection rule forbids it (``protections.py``). It
  fails the whole push, so that nothing it sent is kept, when every update is refused.
- ``update REF OLD NEW``, once per ref git is about to move: it fails (and git leaves that
  ref alone) when the pre-receive verdicts refused it. The forge rewrites git's report so
  the pusher reads the verdict's reason (``git/pushreport.py``).
- ``proc-receive``, for updates of ``refs/for/*`` (the AGit flow): a push to
  ``refs/for/{branch}`` (``git push origin HEAD:refs/for/main -o title=...``) stores no ref
  of that name; the hook opens a pull request with the pushed commit as its head (its
  ``refs/pull/{n}/head``), or moves the head of the one the same person opened on the same
  topic, and tells git ``ok`` with the ref it wrote instead. Anyone who may read the
  repository may propose a change this way, as on Forgejo.

The topic names the pull request among its author's: ``refs/for/{branch}/{topic}`` or
``-o topic=...``. git does not send the name of the pusher's local branch, so a push with
neither is refused, as Forgejo refuses it. The title is ``-o title=``, else the subject of
the first commit the base branch lacks; the description ``-o description=``. A head that
shares no history with the base is refused, as the web and the API refuse it.

Who pushes is never taken from the client: the forge puts the signed-in account's id, their
access level, the repository's name, the repositories whose objects it borrows that the
pusher may read, and the database in the hook's environment (``FLOORLESS_HOOK_*``). What the
hooks have to tell the pusher (a pull request's URL) they write to the work directory's
``messages``, which the forge sends on git's side band; the pull requests they opened or
moved to ``changes``, whose webhooks the forge sends.

The proc-receive protocol (``git help githooks``, version 1): git sends
``version=1\\0push-options`` and a flush; the hook answers its version and a flush; git sends
one ``old new ref`` line per update and a flush, then the push options and a flush; the hook
answers ``ok ref`` (with ``option refname ...``) or ``ng ref reason`` for each, and a flush.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pygit2

from floorless.accounts import Account, _account
from floorless.db import Database, open_database
from floorless.errors import FloorlessError
from floorless.git import pushgate
from floorless.issues import Change, Issues
from floorless.protections import Protections, move_of, pick, push_refusal
from floorless.pulls import Pulls

PREFIX = "refs/for/"
# The environment the forge gives the hook.
ENV_DATABASE = "FLOORLESS_HOOK_DATABASE"
ENV_ACCOUNT = "FLOORLESS_HOOK_ACCOUNT"
ENV_REPO = "FLOORLESS_HOOK_REPO"
ENV_URL = "FLOORLESS_HOOK_URL"
ENV_DIR = "FLOORLESS_HOOK_DIR"  # the push's work directory: verdicts, messages, changes
ENV_LEVEL = "FLOORLESS_HOOK_LEVEL"  # the pusher's access level (access.Level's number)
ENV_BORROWED = "FLOORLESS_HOOK_BORROWED"  # git dirs, one a line, whose refs are allowed tips
PACK_COUNT = "pack-count"  # in the work directory: the objects the push's pack announced
VERDICTS = "verdicts.json"
MESSAGES = "messages"
CHANGES = "changes.json"
MAX_OPTIONS = 100
WRITE, ADMIN = 2, 3  # access.Level's numbers (the hook does not import the policy)


def read_pkt(stream: BinaryIO) -> bytes | None:
    """One pkt-line's payload; None for a flush."""
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError("git closed the hook's input")
    size = int(head, 16)
    if size == 0:
        return None
    if size < 4:
        raise ValueError(f"bad pkt-line length {size}")
    data = stream.read(size - 4)
    return data[:-1] if data.endswith(b"\n") else data


def read_until_flush(stream: BinaryIO) -> list[bytes]:
    lines: list[bytes] = []
    while (line := read_pkt(stream)) is not None:
        lines.append(line)
    return lines


def pkt(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"%04x" % (len(data) + 5) + data + b"\n"


FLUSH = b"0000"


@dataclass(frozen=True)
class Command:
    old: str
    new: str
    ref: str


def options_of(lines: list[bytes]) -> dict[str, str]:
    """``-o key=value`` push options; a key given twice keeps the last value."""
    found: dict[str, str] = {}
    for line in lines[:MAX_OPTIONS]:
        key, _, value = line.decode("utf-8", "replace").partition("=")
        found[key.strip().lower()] = value
    return found


def split_target(handle: pygit2.Repository, rest: str, topic: str) -> tuple[str, str]:
    """The base branch and the topic a ``refs/for/{rest}`` push names: the longest branch
    ``rest`` starts with, the remainder (or ``-o topic``) the topic."""
    if topic:
        return rest, topic
    parts = rest.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        branch = "/".join(parts[:cut])
        if f"refs/heads/{branch}" in handle.references:
            return branch, "/".join(parts[cut:])
    return rest, ""


class Receiver:
    def __init__(self, db: Database, handle: pygit2.Repository, repo: str, pusher: Account) -> None:
        self.db = db
        self.handle = handle
        self.owner, self.name = repo.split("/", 1)
        self.pusher = pusher
        self.pulls = Pulls(db, Issues(db))
        self.url = os.environ.get(ENV_URL, "").rstrip("/")
        self.messages: list[str] = []

    def receive(self, command: Command, options: dict[str, str]) -> list[str]:
        """The answer lines for one update, ``ok ...`` and its options or ``ng ...``."""
        rest = command.ref.removeprefix(PREFIX)
        branch, topic = split_target(self.handle, rest, options.get("topic", "").strip())
        if set(command.new) == {"0"}:
            return [f"ng {command.ref} a pull request's topic cannot be deleted by a push"]
        if f"refs/heads/{branch}" not in self.handle.references:
            return [f"ng {command.ref} there is no branch {branch!r} to open a pull request into"]
        if not topic:
            return [
                f"ng {command.ref} name a topic: push to refs/for/{branch}/<topic>"
                " or add -o topic=<topic>"
            ]
        base_tip = self.handle.references[f"refs/heads/{branch}"].peel(pygit2.Commit).id
        new = pygit2.Oid(hex=command.new)
        if new == base_tip or self.handle.descendant_of(base_tip, new):
            return [f"ng {command.ref} the branch {branch!r} already has these commits"]
        try:
            shared = self.handle.merge_base(base_tip, new)
        except (KeyError, ValueError, pygit2.GitError):
            shared = None
        if shared is None:
            return [f"ng {command.ref} {branch} and the pushed commits have unrelated histories"]
        try:
            existing = self.pulls.agit(self.owner, self.name, topic, self.pusher)
            if existing is None:
                pull = self.pulls.create(
                    self.owner,
                    self.name,
                    self.pusher,
                    options.get("title", "").strip() or self.first_subject(base_tip, new),
                    options.get("description", ""),
                    branch,
                    (self.owner, self.name, ""),
                    command.new,
                    agit_topic=topic,
                )
                old = "0" * len(command.new)
            else:
                pull, old = existing, existing.head_oid
                forced = not self.handle.descendant_of(new, pygit2.Oid(hex=old))
                if old != command.new:
                    self.pulls.moved_head(existing, command.new, forced, self.pusher)
        except FloorlessError as exc:
            return [f"ng {command.ref} {exc}"]
        self.handle.references.create(pull.ref, new, force=True)
        verb = "Opened" if existing is None else "Updated"
        self.messages.append(f"{verb} pull request #{pull.number} ({topic} into {branch}):")
        self.messages.append(f"  {self.url}/{self.owner}/{self.name}/pulls/{pull.number}")
        return [
            f"ok {command.ref}",
            f"option refname {pull.ref}",
            f"option old-oid {old}",
            f"option new-oid {command.new}",
        ]

    def first_subject(self, base_tip: pygit2.Oid, new: pygit2.Oid) -> str:
        """The subject of the oldest commit of ``new`` the base branch lacks."""
        walker = self.handle.walk(new, pygit2.enums.SortMode.TOPOLOGICAL)
        walker.hide(base_tip)
        oldest = None
        for count, commit in enumerate(walker):
            oldest = commit
            if count > 10_000:
                break
        if oldest is None:
            return "Pull request"
        return oldest.message.strip().splitlines()[0] if oldest.message.strip() else "Untitled"


def work_dir() -> Path | None:
    value = os.environ.get(ENV_DIR, "")
    return Path(value) if value else None


def verdicts() -> dict[str, str]:
    """The pre-receive hook's refusals (ref -> reason)."""
    folder = work_dir()
    if folder is None:
        return {}
    try:
        found = json.loads((folder / VERDICTS).read_text())
    except (OSError, ValueError):
        return {}
    refs = found.get("refs", {}) if isinstance(found, dict) else {}
    return {str(k): str(v) for k, v in refs.items()}


def tell(lines: Sequence[str]) -> None:
    """Lines for the pusher: the forge sends them on git's side band."""
    folder = work_dir()
    if folder is None or not lines:
        return
    with (folder / MESSAGES).open("a", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))


def record_change(change: Change) -> None:
    """A pull request opened or moved by this push, for the forge's webhooks."""
    folder = work_dir()
    if folder is None:
        return
    path = folder / CHANGES
    try:
        found = json.loads(path.read_text()) if path.exists() else []
    except (OSError, ValueError):
        found = []
    found.append({"number": change.issue.number, "action": change.action})
    path.write_text(json.dumps(found))


def proc_receive(stdin: BinaryIO, stdout: BinaryIO) -> int:
    version = read_until_flush(stdin)
    if not version or not version[0].startswith(b"version=1"):
        return 1
    push_options = b"push-options" in version[0]
    stdout.write(pkt(b"version=1\0push-options" if push_options else b"version=1") + FLUSH)
    stdout.flush()
    commands = []
    for line in read_until_flush(stdin):
        old, new, ref = line.decode("utf-8", "replace").split(" ", 2)
        commands.append(Command(old, new, ref))
    options = options_of(read_until_flush(stdin)) if push_options else {}
    git_dir = Path(os.environ.get("GIT_DIR", ".")).resolve()
    db = open_database(os.environ[ENV_DATABASE], max_connections=2)
    try:
        row = db.one("SELECT * FROM accounts WHERE id = ?", (int(os.environ[ENV_ACCOUNT]),))
        answers: list[str] = []
        if row is None:
            answers = [f"ng {c.ref} no such account" for c in commands]
        else:
            receiver = Receiver(
                db, pygit2.Repository(str(git_dir)), os.environ[ENV_REPO], _account(row)
            )
            receiver.pulls.issues.on_change.append(record_change)
            refused = verdicts()
            for command in commands:
                if command.ref in refused:
                    answers.append(f"ng {command.ref} {refused[command.ref]}")
                    continue
                answers += receiver.receive(command, options)
            if receiver.messages:
                tell(["", *receiver.messages, ""])
    finally:
        db.close()
    stdout.write(b"".join(pkt(line) for line in answers) + FLUSH)
    stdout.flush()
    return 0


# -- pre-receive and update ---------------------------------------------------------------


def _tips(handle: pygit2.Repository) -> list[str]:
    """What every ref of ``handle`` points at (hex): the allowed tips it gives."""
    found = []
    for ref in handle.references.iterator():
        try:
            target = ref.resolve().target
        except (KeyError, ValueError, pygit2.GitError):
            continue
        if isinstance(target, pygit2.Oid):
            found.append(str(target))
    return found


def judge(
    handle: pygit2.Repository,
    git_dir: Path,
    updates: list[Command],
    level: int,
    actor: str,
    protections: Callable[[], Protections | None],
    repo: str,
) -> tuple[dict[str, str], bool]:
    """Each refused update with its reason, and whether the pack's thin bases may be used
    (``pushgate.refused``)."""
    reasons: dict[str, str] = {}
    for command in updates:
        if level < WRITE and not command.ref.startswith(PREFIX):
            reasons[command.ref] = (
                f"you may read {repo} but not push to it; propose the change with"
                f" git push origin HEAD:refs/for/<branch>/<topic>"
            )
    borrowed = [Path(p) for p in os.environ.get(ENV_BORROWED, "").splitlines() if p]
    allowed = _tips(handle)
    for other in borrowed:
        try:
            allowed += _tips(pygit2.Repository(str(other)))
        except (pygit2.GitError, OSError):
            continue
    folder = work_dir()
    count = None
    if folder is not None:
        try:
            count = int((folder / PACK_COUNT).read_text())
        except (OSError, ValueError):
            count = None
    hash_size = len(updates[0].new) // 2 if updates else 20
    quarantine = os.environ.get("GIT_QUARANTINE_PATH")
    push = pushgate.pushed(Path(quarantine) if quarantine else None, count, hash_size)
    wanted = {c.ref: c.new for c in updates if c.ref not in reasons}
    missing, bases_ok = pushgate.refused(git_dir, handle, wanted, allowed, push)
    reasons.update(missing)
    heads = [c for c in updates if c.ref.startswith("refs/heads/") and c.ref not in reasons]
    rules = protections() if heads else None
    if rules is not None:
        known = rules.rules_of(*repo.split("/", 1))
        for command in heads:
            branch = command.ref.removeprefix("refs/heads/")
            rule = pick(known, branch)
            if rule is None:
                continue
            move = move_of(handle, branch, actor, level >= ADMIN, command.old, command.new)
            refusal = push_refusal(rule, move)
            if refusal is not None:
                reasons[command.ref] = refusal
    return reasons, bases_ok


def pre_receive(stdin: BinaryIO) -> int:
    updates = []
    for line in stdin.read().decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            updates.append(Command(*parts))
    git_dir = Path(os.environ.get("GIT_DIR", ".")).resolve()
    folder = work_dir()
    if folder is None or ENV_DATABASE not in os.environ:
        sys.stderr.write("floorless's pre-receive hook runs only for pushes through floorless\n")
        return 1
    handle = pygit2.Repository(str(git_dir))
    quarantine = os.environ.get("GIT_QUARANTINE_PATH")
    if quarantine:
        handle.odb.add_disk_alternate(quarantine)
    level = int(os.environ.get(ENV_LEVEL, "0"))
    opened: list[Database] = []

    def protections() -> Protections | None:
        if not opened:
            opened.append(open_database(os.environ[ENV_DATABASE], max_connections=1))
        return Protections(opened[0])

    try:
        actor = ""
        if any(c.ref.startswith("refs/heads/") for c in updates):
            found = protections()
            assert found is not None
            account = int(os.environ[ENV_ACCOUNT])
            row = found.db.one("SELECT name FROM accounts WHERE id = ?", (account,))
            actor = str(row["name"]) if row is not None else ""
        reasons, bases_ok = judge(
            handle, git_dir, updates, level, actor, protections, os.environ[ENV_REPO]
        )
    finally:
        for db in opened:
            db.close()
    (folder / VERDICTS).write_text(json.dumps({"refs": reasons, "unusable_pack": not bases_ok}))
    if not bases_ok or (updates and all(c.ref in reasons for c in updates)):
        return 1  # nothing of the push is kept
    return 0


def update(ref: str) -> int:
    """git is about to move ``ref``: refuse it when the pre-receive hook did."""
    return 1 if ref in verdicts() else 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["pre-receive"]:
        return pre_receive(sys.stdin.buffer)
    if argv[1:2] == ["update"] and len(argv) == 5:
        return update(argv[2])
    if argv[1:] == ["proc-receive"]:
        return proc_receive(sys.stdin.buffer, sys.stdout.buffer)
    sys.stderr.write(
        "usage: python -m floorless.hooks pre-receive | update REF OLD NEW | proc-receive\n"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
