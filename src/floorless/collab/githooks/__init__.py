"""git's hooks for every push through floorless: who may move which ref, to what.

``git receive-pack``, run by the forge with its own hooks directory (``core.hooksPath``; a
repository's own hooks never run), runs three hooks (``git/env.py`` writes them):

- ``pre-receive`` (``pre_receive.py``), once per push, while the pushed objects are still
  in git's quarantine: it decides, for every update, whether it is refused, and writes the
  verdicts in the push's work directory (``FLOORLESS_HOOK_DIR``). An update is refused when
  the pusher may only read the repository and it is not a proposal (``refs/for/``); when it
  would point at objects the push neither sent nor may reach (``git/pushgate.py``: what a
  fork's parent hides, what a deleted branch left); or when a branch protection rule forbids
  it (``branchrules.py``). It fails the whole push, so that nothing it sent is kept, when
  every update is refused.
- ``update REF OLD NEW``, once per ref git is about to move: a shell script that fails (and
  git leaves that ref alone) unless the pre-receive hook allowed that ref (``ALLOWED``). The
  forge rewrites git's report so the pusher reads the verdict's reason
  (``git/pushreport.py``).
- ``proc-receive`` (``proc_receive.py``), for updates of ``refs/for/*`` (the AGit flow): a
  push to ``refs/for/{branch}`` (``git push origin HEAD:refs/for/main -o title=...``) stores no ref
  of that name; the hook opens a pull request with the pushed commit as its head (its
  ``refs/pull/{n}/head``), or moves the head of the one the same person opened on the same
  topic, and tells git ``ok`` with the ref it wrote instead. Anyone who may read the
  repository may propose a change this way, as on Forgejo.

The topic names the pull request among its author's: ``refs/for/{branch}/{topic}`` or
``-o topic=...``. git does not send the name of the pusher's local branch, so a push with
neither is refused, as Forgejo refuses it. The title is ``-o title=``, else the subject of
the first commit the base branch lacks; the description ``-o description=``. A head that
shares no history with the base is refused, as the web and the API refuse it.

Who pushes is never taken from the client: the forge puts the signed-in account's id and
name, their access level, the repository's name, the repositories whose objects it borrows
that the pusher may read, and the database in the hook's environment (``FLOORLESS_HOOK_*``),
and the repository's protection rules in the work directory. What the
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PREFIX = "refs/for/"
# The environment the forge gives the hooks.
ENV_DATABASE = "FLOORLESS_HOOK_DATABASE"
ENV_ACCOUNT = "FLOORLESS_HOOK_ACCOUNT"
ENV_ACTOR = "FLOORLESS_HOOK_ACTOR"  # the pusher's account name
ENV_REPO = "FLOORLESS_HOOK_REPO"
ENV_URL = "FLOORLESS_HOOK_URL"
ENV_DIR = "FLOORLESS_HOOK_DIR"  # the push's work directory: verdicts, messages, changes
ENV_LEVEL = "FLOORLESS_HOOK_LEVEL"  # the pusher's access level (access.Level's number)
ENV_BORROWED = "FLOORLESS_HOOK_BORROWED"  # git dirs, one a line, whose refs are allowed tips
# In the work directory:
PACK_COUNT = "pack-count"  # the objects the push's pack announced (the forge writes it)
RULES = "rules.json"  # the repository's protection rules (the forge writes them)
VERDICTS = "verdicts.json"  # the pre-receive hook's refusals
ALLOWED = "allowed"  # the refs git may move, one a line, for the update hook
UPDATES = "updates"  # how many updates the push's request holds (the forge writes it)
MESSAGES = "messages"  # lines for the pusher, sent on git's side band
CHANGES = "changes.json"  # pull requests the push opened or moved
WRITE, ADMIN = 2, 3  # access.Level's numbers


@dataclass(frozen=True)
class Command:
    old: str
    new: str
    ref: str


def work_dir() -> Path | None:
    value = os.environ.get(ENV_DIR, "")
    return Path(value) if value else None


@dataclass(frozen=True)
class Verdicts:
    """What the pre-receive hook decided: the refused refs with their reasons, and whether
    the pack's thin bases could not be used (the whole push then reads as a pack git could
    not complete)."""

    refs: dict[str, str]
    unusable_pack: bool


def read_verdicts(folder: Path) -> Verdicts | None:
    """The pre-receive hook's verdicts in the push's work directory; None when it wrote
    none (it did not run, or failed)."""
    try:
        found = json.loads((folder / VERDICTS).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict):
        return None
    refs = found.get("refs", {})
    return Verdicts({str(k): str(v) for k, v in refs.items()}, bool(found.get("unusable_pack")))


def verdicts() -> dict[str, str] | None:
    """The refusals (ref -> reason) of this push's pre-receive hook, for a later hook."""
    folder = work_dir()
    found = read_verdicts(folder) if folder is not None else None
    return None if found is None else found.refs


def tell(lines: Sequence[str]) -> None:
    """Lines for the pusher: the forge sends them on git's side band."""
    folder = work_dir()
    if folder is None or not lines:
        return
    with (folder / MESSAGES).open("a", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
