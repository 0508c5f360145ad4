"""git's pre-receive hook for every push through floorless: each update's verdict.

It runs while the pushed objects are still in git's quarantine, and imports no more than it
needs (no database: the forge hands it the repository's rules and the pusher's name and
level), since it runs once per push. See ``floorless.collab.githooks`` for the three hooks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pygit2

from floorless.collab.branchrules import Rule, load, move_of, pick, push_refusal
from floorless.collab.githooks import (
    ADMIN,
    ALLOWED,
    ENV_ACTOR,
    ENV_BORROWED,
    ENV_LEVEL,
    ENV_REPO,
    PACK_COUNT,
    PREFIX,
    RULES,
    UPDATES,
    VERDICTS,
    WRITE,
    Command,
    Verdicts,
    work_dir,
)
from floorless.git import pushgate


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
    rules: Sequence[Rule],
    repo: str,
) -> tuple[dict[str, str], bool]:
    """Each refused update with its reason, and whether the pack's thin bases may be used
    (``pushgate.refused``)."""
    reasons: dict[str, str] = {}
    for command in updates:
        if command.ref.startswith("refs/pull/"):
            reasons[command.ref] = "refs/pull/ is the forge's own: open a pull request instead"
        elif level < WRITE and not command.ref.startswith(PREFIX):
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
    if rules:
        for command in heads:
            branch = command.ref.removeprefix("refs/heads/")
            rule = pick(rules, branch)
            if rule is None:
                continue
            move = move_of(handle, branch, actor, level >= ADMIN, command.old, command.new)
            refusal = push_refusal(rule, move)
            if refusal is not None:
                reasons[command.ref] = refusal
    return reasons, bases_ok


def main(stdin: bytes) -> int:
    updates = []
    text = stdin.decode("utf-8", "surrogateescape")
    for line in (line for line in text.split("\n") if line):
        parts = line.split(" ", 2)
        if len(parts) != 3 or parts[2] != parts[2].encode("utf-8", "replace").decode():
            sys.stderr.write("floorless: an update git gave the hook cannot be read\n")
            return 1  # (the forge refuses ref names that are not UTF-8 before git starts)
        updates.append(Command(*parts))
    git_dir = Path(os.environ.get("GIT_DIR", ".")).resolve()
    folder = work_dir()
    if folder is None or ENV_REPO not in os.environ:
        sys.stderr.write("floorless's pre-receive hook runs only for pushes through floorless\n")
        return 1
    handle = pygit2.Repository(str(git_dir))
    quarantine = os.environ.get("GIT_QUARANTINE_PATH")
    if quarantine:
        handle.odb.add_disk_alternate(quarantine)
    try:
        rules = load((folder / RULES).read_text())
    except FileNotFoundError:
        rules = []
    reasons, bases_ok = judge(
        handle,
        git_dir,
        updates,
        int(os.environ.get(ENV_LEVEL, "0")),
        os.environ.get(ENV_ACTOR, ""),
        rules,
        os.environ[ENV_REPO],
    )
    try:
        expected = int((folder / UPDATES).read_text())
    except (OSError, ValueError):
        expected = -1
    if expected != len(updates):  # git left some out: refuse all, as for a missing object
        reasons = {c.ref: pushgate.MISSING for c in updates}
    verdicts = Verdicts(reasons, unusable_pack=not bases_ok)
    (folder / VERDICTS).write_text(json.dumps(dataclasses.asdict(verdicts)))
    allowed = [c.ref for c in updates if c.ref not in reasons and bases_ok]
    (folder / ALLOWED).write_text("".join(ref + "\n" for ref in allowed))
    if not bases_ok or (updates and not allowed):
        return 1  # nothing of the push is kept
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.stdin.buffer.read()))
