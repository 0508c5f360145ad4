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
import logging
import subprocess
import tempfile
from collections.abc import Callable, Iterator

import falcon

from floorless.accounts.access import Level
from floorless.core.errors import (
    BadRequest,
    GitCommandError,
    NotFound,
    Unauthorized,
    Unsupported,
)
from floorless.git import protocol, pushreport, transport, unreachable
from floorless.gitservice import access, push
from floorless.gitservice.access import Caller
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
        """The repository, if the requester may use ``service`` on it (``gitservice/access.py``).
        Without credentials a repository they may not read asks for them (401)."""
        req.context.plain = True
        repo, level = self.reach(req, owner, name, service)
        req.context.git_level = level
        return repo

    def reach(self, req: falcon.Request, owner: str, name: str, service: str) -> tuple[Repo, Level]:
        """A page's lookup (``find_repo``), then what a push needs beyond reading: writing,
        or proposing changes (``refs/for/``), which ``Service`` checks once it has read the
        updates."""
        try:
            repo, level = find_repo(self.forge, req, owner, name, Level.READ)
        except NotFound as exc:
            if viewer_of(req).anonymous:
                raise Unauthorized("authentication required") from exc
            raise
        access.may_push_or_propose(self.forge.policy, viewer_of(req), repo, level, service)
        return repo, level

    def environment(self, req: falcon.Request) -> dict[str, str]:
        env = push.committer(Caller(viewer_of(req)))
        version = protocol.protocol_header(req.get_header("Git-Protocol"))
        if version is not None:
            env["GIT_PROTOCOL"] = version
        return env


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
        pushing: push.Push | None,
    ) -> transport.GitBody:
        """Run the service's git with ``body`` as its input, read whole before it answers."""
        errors = tempfile.TemporaryFile(dir=self.forge.git.tmp)  # noqa: SIM115 (GitBody closes it)
        env = self.environment(req)
        if pushing is not None:
            env.update(pushing.environment())
        try:
            proc = self.forge.git.popen(
                found.path,
                protocol.service_args(
                    self.service, found.path, self.forge.git.hooks if pushing else None
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
        """A push: git's answer as ``gitservice/push.py`` makes it, once git has ended and the
        forge has taken the push in (pages, index, pull requests, webhooks)."""
        request = pushreport.read_request(body)
        level = req.context.git_level
        pushing = push.Push(
            self.forge, found, Caller(viewer_of(req)), level, public_url(self.settings, req)
        )
        try:
            pushing.prepare(request)
            checker = protocol.PktChecker(commands_only=True)
            stream = itertools.chain([request.head], request.rest)
            output = self.start(req, found, stream, checker, pushing)
            try:
                report = output.first() + b"".join(output)
                if b"\nng " in b"\n" + b"\n".join(pushreport.parse_report(report)):
                    log.info("%s: git: %s", found.full_name, output.reason())
            finally:
                output.close()
            return pushing.finish(request, report)
        finally:
            pushing.close()


def request_body(req: falcon.Request, limit: int) -> Iterator[bytes]:
    """The request body in pieces, decompressed, at most ``limit`` bytes; errors are 4xx."""
    encoding = (req.get_header("Content-Encoding") or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise Unsupported(f"Content-Encoding {encoding[:40]!r} is not supported: use gzip")
    return transport.read_body(req.stream, req.content_length, limit, encoding != "identity")
