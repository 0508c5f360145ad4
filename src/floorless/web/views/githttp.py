"""git's smart HTTP protocol: ``info/refs``, ``git-upload-pack`` and ``git-receive-pack``.

- Access first, from the one policy: reading for clone and fetch, writing for push. Without
  credentials a private or unknown repository answers 401, so git asks for them; with
  credentials that may not read it, 404. Neither tells whether the repository exists.
- ``info/refs`` in protocol v2 is the capability advertisement git gave at start: no process.
  In v0 (and for pushes) git lists the refs: one process.
- A POST runs one ``git upload-pack`` or ``git receive-pack --stateless-rpc`` in floorless's
  isolated git environment. The body (read whole by the gateway first) streams into it in
  64 KiB pieces (gunzipped when the client compressed it), its pkt-line framing checked on
  the way and its size bounded; the answer streams back as git writes it. Nothing holds a
  whole pack in memory. The pipes are ``git/transport.py``'s.
- A body that is cut off closes git's input: git then abandons the push itself (its quarantine
  keeps half a pack out of the repository), and no ref moves.
- After a push the ref cache and the index learn of it before the client reads the last byte.
"""

from __future__ import annotations

import itertools
import json
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import falcon

import floorless
from floorless.accounts.access import Level
from floorless.collab import branchrules
from floorless.collab import githooks as hooks
from floorless.core.errors import (
    BadRequest,
    FloorlessError,
    GitCommandError,
    NotFound,
    Unauthorized,
    Unsupported,
)
from floorless.forge import Forge
from floorless.forgejo import payloads as hookpayloads
from floorless.git import protocol, pushreport, transport, unreachable
from floorless.repos.registry import Repo
from floorless.web.auth import viewer_of
from floorless.web.context import find_repo
from floorless.web.public import public_url
from floorless.web.views.base import View

log = logging.getLogger(__name__)

CHUNK = 65536
GIT_STALL_SECONDS = 120.0  # git neither reading nor writing this long: give up on it
_NO_CACHE = ["no-cache", "max-age=0", "must-revalidate"]


class GitView(View):
    def authorize(self, req: falcon.Request, owner: str, name: str, service: str) -> Repo:
        """The repository, if the requester may use ``service`` on it. A push needs an
        account with a write-scoped credential that may read the repository: whoever may
        only read it may still propose changes (``refs/for/``), which ``Service`` checks
        once it has read the updates."""
        req.context.plain = True
        try:
            repo, level = find_repo(self.forge, req, owner, name, Level.READ)
        except NotFound as exc:
            if viewer_of(req).anonymous:
                raise Unauthorized("authentication required") from exc
            raise
        if service == "git-receive-pack" and level < Level.WRITE:
            viewer = viewer_of(req)
            if not self.forge.policy.may_propose(viewer, level):
                self.forge.policy.require(viewer, repo, Level.WRITE)  # its 401 or 403
        return repo

    def environment(self, req: falcon.Request, repo: Repo | None = None) -> dict[str, str]:
        env: dict[str, str] = {}
        version = protocol.protocol_header(req.get_header("Git-Protocol"))
        if version is not None:
            env["GIT_PROTOCOL"] = version
        account = viewer_of(req).account
        if account is not None:
            env["GIT_COMMITTER_NAME"] = account.name
            env["GIT_COMMITTER_EMAIL"] = account.email or f"{account.name}@floorless"
            if repo is not None:  # for a push's hooks (floorless.collab.githooks)
                env.update(hook_environment(self.forge, req, repo, account.id))
        return env


def hook_environment(
    forge: Forge, req: falcon.Request, repo: Repo, account_id: int
) -> dict[str, str]:
    """What ``floorless.collab.githooks`` is told by the forge, never by the client: who pushes,
    with which access, where, the repositories whose refs the pusher may build on besides this
    one's (those it borrows objects from that the pusher may read now), the database, the
    public URL, and where floorless's own code is."""
    database = forge.settings.database  # the hook runs in the repository's directory
    if database.startswith("sqlite:///"):
        database = database.removeprefix("sqlite:///")
    if "://" not in database:
        database = str(Path(database).resolve())
    viewer = viewer_of(req)
    return {
        hooks.ENV_DATABASE: database,
        hooks.ENV_ACCOUNT: str(account_id),
        hooks.ENV_ACTOR: viewer.name,
        hooks.ENV_REPO: repo.full_name,
        hooks.ENV_URL: public_url(forge.settings, req),
        hooks.ENV_LEVEL: str(int(forge.policy.level(viewer, repo))),
        hooks.ENV_BORROWED: "\n".join(
            str(p.path) for p in forge.gate.readable_lenders(viewer, repo)
        ),
        "PYTHONPATH": str(Path(floorless.__file__).resolve().parent.parent),
    }


class InfoRefs(GitView):
    def __init__(self, *args: object, advertisement: Callable[[], bytes]) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.advertisement = advertisement

    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        req.context.plain = True
        service = req.get_param("service")
        if service not in protocol.SERVICES:
            raise falcon.HTTPForbidden(
                title="Forbidden",
                description="floorless serves git's smart HTTP protocol only "
                "(info/refs?service=git-upload-pack or git-receive-pack)",
            )
        found = self.authorize(req, owner, repo, service)
        resp.content_type = f"application/x-{service}-advertisement"
        resp.cache_control = _NO_CACHE
        env = self.environment(req)
        if (
            service == "git-upload-pack"
            and protocol.wants_v2(env.get("GIT_PROTOCOL"))
            and not self.forge.live.state(found).extended_format()
        ):
            resp.data = self.advertisement()
            return
        proc = self.forge.git.popen(
            found.path,
            protocol.advertise_args(service, found.path),
            extra_env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(timeout=GIT_STALL_SECONDS)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise GitCommandError("git took too long to list the refs") from exc
        if proc.returncode != 0:
            log.warning("%s: %s --advertise-refs: %s", found.full_name, service, err[-500:])
            raise GitCommandError("git could not list the refs")
        prefix = (
            b"" if out.startswith(b"000eversion 2\n") else protocol.service_announcement(service)
        )
        resp.data = prefix + out


class Service(GitView):
    """The POST of one service: the body into git, git's answer back."""

    def __init__(self, *args: object, service: str) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.service = service
        push = service == "git-receive-pack"
        self.limit = self.settings.max_push_bytes if push else self.settings.max_fetch_request_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        found = self.authorize(req, owner, repo, self.service)
        expected = f"application/x-{self.service}-request"
        if (req.content_type or "").split(";")[0].strip().lower() != expected:
            raise Unsupported(f"a {self.service} request has Content-Type {expected}")
        body = request_body(req, self.limit)  # checks the encoding and length before git starts
        resp.content_type = f"application/x-{self.service}-result"
        resp.cache_control = _NO_CACHE
        if self.service == "git-receive-pack":
            resp.data = self.push(req, found, body)
            return
        allowed = self.forge.gate.fetchable(found)  # nothing by id that no ref reaches
        body, refused = unreachable.screen_wants(body, allowed, self.forge.git.tmp)
        if refused is not None:
            resp.data = refused
            return
        checker = protocol.PktChecker(commands_only=False)
        output = self.start(req, found, body, checker, None)
        if not output.first():
            self.nothing(found, output)
            resp.data = b""
            return
        resp.stream = output

    def start(
        self,
        req: falcon.Request,
        found: Repo,
        body: Iterator[bytes],
        checker: protocol.PktChecker,
        work: Path | None,
    ) -> transport.GitBody:
        """Run the service's git with ``body`` as its input, read whole before it answers."""
        errors = tempfile.TemporaryFile(dir=self.forge.git.tmp)  # noqa: SIM115 (GitBody closes it)
        env = self.environment(req, found)
        if work is not None:
            env[hooks.ENV_DIR] = str(work)
        try:
            proc = self.forge.git.popen(
                found.path,
                protocol.service_args(
                    self.service, found.path, self.forge.git.hooks if work is not None else None
                ),
                extra_env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        except BaseException:
            errors.close()
            raise
        output = transport.GitBody(proc, errors=errors, scratch=self.forge.git.tmp)
        try:
            transport.feed(proc, body, checker, output.spool)
        except BaseException:
            output.close()
            raise
        return output

    def nothing(self, found: Repo, output: transport.GitBody) -> None:
        """git said nothing: an answer when it agrees (a push of more than git's
        http.postBuffer first probes with a bare flush)."""
        failed = not output.succeeded()
        if failed:
            log.warning("%s %s: %s", found.full_name, self.service, output.reason())
        output.close()
        if failed:
            raise BadRequest("git refused the request: malformed or unexpected request")

    def push(self, req: falcon.Request, found: Repo, body: Iterator[bytes]) -> bytes:
        """A push: git's answer as ``git/pushreport.py`` makes it, once git has ended and the
        forge has taken the push in (pages, index, pull requests, webhooks)."""
        request = pushreport.read_request(body)
        work = Path(tempfile.mkdtemp(prefix="push-", dir=self.forge.git.tmp))
        try:
            (work / hooks.UPDATES).write_text(str(len(request.updates)))
            if request.pack_count is not None:
                (work / hooks.PACK_COUNT).write_text(str(request.pack_count))
            (work / hooks.RULES).write_text(branchrules.dump(self.forge.protections.rules(found)))
            checker = protocol.PktChecker(commands_only=True)
            stream = itertools.chain([request.head], request.rest)
            output = self.start(req, found, stream, checker, work)
            try:
                report = output.first() + b"".join(output)
                if b"\nng " in b"\n" + b"\n".join(pushreport.parse_report(report)):
                    log.info("%s: git refused part of a push: %s", found.full_name, output.reason())
            finally:
                output.close()
            if not request.updates:
                return report
            self.took_in(req, found, request, work)
            return self.answer(found, request, report, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def answer(self, found: Repo, request: pushreport.Request, report: bytes, work: Path) -> bytes:
        verdicts = hooks.read_verdicts(work) or hooks.Verdicts({}, unusable_pack=False)
        refusals = verdicts.refs
        try:
            messages = (work / hooks.MESSAGES).read_text(encoding="utf-8").splitlines()
        except OSError:
            messages = []
        if refusals:
            log.info("%s: push refused: %s", found.full_name, refusals)
        lines = pushreport.rewrite(
            pushreport.parse_report(report),
            refusals,
            verdicts.unusable_pack,
            [u[2] for u in request.updates],
        )
        if b"report-status" not in request.capabilities and not any(
            c.startswith(b"report-status") for c in request.capabilities
        ):
            lines = []
        return pushreport.answer(lines, messages, request.side_band)

    def took_in(
        self, req: falcon.Request, found: Repo, request: pushreport.Request, work: Path
    ) -> None:
        """After git ended: the refs, caches and index learn of the push, then its webhooks
        (the updates git applied, and the pull requests an AGit push opened or moved)."""
        pusher, public = viewer_of(req).account, public_url(self.settings, req)
        self.forge.moves.after_push(found)
        updates = [
            hookpayloads.Update(old, new, ref)
            for old, new, ref in request.updates
            if ref.startswith(("refs/heads/", "refs/tags/"))
        ]
        try:
            hookpayloads.pushed(self.forge, found, pusher, updates, public)
        except (FloorlessError, OSError, ValueError) as exc:
            log.warning("%s: the push's webhook events: %s", found.full_name, exc)
        try:
            changes = json.loads((work / hooks.CHANGES).read_text())
        except (OSError, ValueError):
            return
        for change in changes if isinstance(changes, list) else []:
            try:
                pull = self.forge.pulls.get(found.owner, found.name, int(change["number"]))
            except (FloorlessError, KeyError, TypeError, ValueError):
                continue
            if change.get("action") == "opened":
                self.forge.issues.wrote(pull.issue, pusher, pull.issue.body)
            self.forge.issues.changed(pull.issue, pusher, str(change.get("action")))


def request_body(req: falcon.Request, limit: int) -> Iterator[bytes]:
    """The request body in pieces, decompressed, at most ``limit`` bytes; errors are 4xx."""
    encoding = (req.get_header("Content-Encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise Unsupported(f"Content-Encoding {encoding[:40]!r} is not supported: use gzip")
    return transport.read_body(req.stream, req.content_length, limit, encoding != "identity")
