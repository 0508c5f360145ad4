"""A push, whatever carries it: git's environment and the hooks' work files before git runs,
floorless's answer from git's report after it, and what the forge then takes in.

A transport reads the start of the request (``pushreport.read_request``), opens a ``Push``,
writes its work files (``prepare``), runs ``git receive-pack`` with ``environment()`` and
``protocol.service_args(..., hooks=forge.git.hooks)``, and hands git's report to ``finish``,
whose bytes are the answer to send: git's report rewritten (``git/pushreport.py``), after the
refs, caches and index learnt of the push and its webhooks were queued.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path

import floorless
from floorless.accounts.access import Level
from floorless.collab import branchrules
from floorless.collab import githooks as hooks
from floorless.core.errors import FloorlessError
from floorless.forge import Forge
from floorless.forgejo import payloads as hookpayloads
from floorless.git import pushreport
from floorless.gitservice.access import Caller
from floorless.repos.registry import Repo

log = logging.getLogger(__name__)


def committer(caller: Caller) -> dict[str, str]:
    """git's committer for what it writes (a reflog): the person asking."""
    account = caller.viewer.account
    if account is None:
        return {}
    return {
        "GIT_COMMITTER_NAME": account.name,
        "GIT_COMMITTER_EMAIL": account.email or f"{account.name}@floorless",
    }


class Push:
    """One push into ``repo`` by ``caller`` at ``level``; ``public`` is the forge's address
    as the pusher reaches it (for the links in the hooks' messages and in webhooks)."""

    def __init__(self, forge: Forge, repo: Repo, caller: Caller, level: Level, public: str):
        self.forge = forge
        self.repo = repo
        self.caller = caller
        self.level = level
        self.public = public
        self.work = Path(tempfile.mkdtemp(prefix="push-", dir=forge.git.tmp))

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def environment(self) -> dict[str, str]:
        """What ``floorless.collab.githooks`` is told by the forge, never by the client: who
        pushes, with which access, where, the repositories whose refs the pusher may build on
        besides this one's (those it borrows objects from that the pusher may read now), the
        database, the public URL, the work directory, and where floorless's own code is."""
        forge, viewer = self.forge, self.caller.viewer
        database = forge.settings.database  # the hook runs in the repository's directory
        if database.startswith("sqlite:///"):
            database = database.removeprefix("sqlite:///")
        if "://" not in database:
            database = str(Path(database).resolve())
        account = viewer.account
        return {
            **committer(self.caller),
            hooks.ENV_DATABASE: database,
            hooks.ENV_ACCOUNT: str(account.id if account is not None else 0),
            hooks.ENV_ACTOR: viewer.name,
            hooks.ENV_REPO: self.repo.full_name,
            hooks.ENV_URL: self.public,
            hooks.ENV_LEVEL: str(int(self.level)),
            hooks.ENV_BORROWED: "\n".join(
                str(p.path) for p in forge.gate.readable_lenders(viewer, self.repo)
            ),
            hooks.ENV_DIR: str(self.work),
            "PYTHONPATH": str(Path(floorless.__file__).resolve().parent.parent),
        }

    def prepare(self, request: pushreport.Request) -> None:
        """The work files the hooks read: how many updates the push names, how many objects
        its pack announces, and the branch rules as they are now."""
        (self.work / hooks.UPDATES).write_text(str(len(request.updates)))
        if request.pack_count is not None:
            (self.work / hooks.PACK_COUNT).write_text(str(request.pack_count))
        rules = self.forge.protections.rules(self.repo)
        (self.work / hooks.RULES).write_text(branchrules.dump(rules))

    def finish(self, request: pushreport.Request, report: bytes) -> bytes:
        """The answer to send once git ended with ``report``, after the push was taken in."""
        if b"\nng " in b"\n" + b"\n".join(pushreport.parse_report(report)):
            log.info("%s: git refused part of a push", self.repo.full_name)
        if not request.updates:
            return report
        self.took_in(request)
        return self.answer(request, report)

    def answer(self, request: pushreport.Request, report: bytes) -> bytes:
        verdicts = hooks.read_verdicts(self.work) or hooks.Verdicts({}, unusable_pack=False)
        refusals = verdicts.refs
        try:
            messages = (self.work / hooks.MESSAGES).read_text(encoding="utf-8").splitlines()
        except OSError:
            messages = []
        if refusals:
            log.info("%s: push refused: %s", self.repo.full_name, refusals)
        lines = pushreport.rewrite(
            pushreport.parse_report(report),
            refusals,
            verdicts.unusable_pack,
            [u[2] for u in request.updates],
        )
        if not any(c.startswith(b"report-status") for c in request.capabilities):
            lines = []
        return pushreport.answer(lines, messages, request.side_band)

    def took_in(self, request: pushreport.Request) -> None:
        """After git ended: the refs, caches and index learn of the push, then its webhooks
        (the updates git applied, and the pull requests an AGit push opened or moved)."""
        forge, found = self.forge, self.repo
        pusher = self.caller.viewer.account
        forge.moves.after_push(found)
        updates = [
            hookpayloads.Update(old, new, ref)
            for old, new, ref in request.updates
            if ref.startswith(("refs/heads/", "refs/tags/"))
        ]
        try:
            hookpayloads.pushed(forge, found, pusher, updates, self.public)
        except (FloorlessError, OSError, ValueError) as exc:
            log.warning("%s: the push's webhook events: %s", found.full_name, exc)
        try:
            changes = json.loads((self.work / hooks.CHANGES).read_text())
        except (OSError, ValueError):
            return
        for change in changes if isinstance(changes, list) else []:
            try:
                pull = forge.pulls.get(found.owner, found.name, int(change["number"]))
            except (FloorlessError, KeyError, TypeError, ValueError):
                continue
            if change.get("action") == "opened":
                forge.issues.wrote(pull.issue, pusher, pull.issue.body)
            forge.issues.changed(pull.issue, pusher, str(change.get("action")))
