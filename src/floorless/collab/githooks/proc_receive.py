"""git's proc-receive hook: pull requests opened and updated by a push (the AGit flow).

See ``floorless.collab.githooks`` for what it does and the protocol.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import BinaryIO

import pygit2

from floorless.accounts.accounts import Account, _account
from floorless.collab.githooks import (
    CHANGES,
    ENV_ACCOUNT,
    ENV_DATABASE,
    ENV_REPO,
    ENV_URL,
    PREFIX,
    Command,
    tell,
    verdicts,
    work_dir,
)
from floorless.collab.issues import Change, Issues
from floorless.collab.pulls import Pulls
from floorless.core.errors import FloorlessError
from floorless.db import Database, open_database

MAX_OPTIONS = 100


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
                if refused is None or command.ref in refused:
                    reason = "refused" if refused is None else refused[command.ref]
                    answers.append(f"ng {command.ref} {reason}")
                    continue
                answers += receiver.receive(command, options)
            if receiver.messages:
                tell(["", *receiver.messages, ""])
    finally:
        db.close()
    stdout.write(b"".join(pkt(line) for line in answers) + FLUSH)
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(proc_receive(sys.stdin.buffer, sys.stdout.buffer))
