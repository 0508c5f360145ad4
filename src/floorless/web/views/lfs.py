"""Git LFS over HTTP, at ``/{owner}/{repo}.git/info/lfs/``: the batch API with the ``basic``
transfer, objects' upload and download, ``verify``, and the locks API, as the ``git lfs``
client speaks them (its ``docs/api/``) and Forgejo serves them.

- Access is git's (``githttp.GitView.reach``): reading to download and to list locks, writing
  to upload, lock, unlock and verify locks; the credentials are git's own (a password or a
  token over HTTP Basic, a token header). Without credentials a private or unknown repository
  answers 401, so that ``git lfs`` asks for them; with credentials that may not read it, 404.
- A batch answer names for each object what to do: for a download, the URL of its bytes when
  the repository holds it (an error entry when not); for an upload, nothing when the
  repository holds it already, else an upload URL and a ``verify`` URL. Objects the store has
  from some other repository are asked for again: only bytes sent here give this repository
  an object (``lfs/objects.py``).
- An upload streams into the content store as it arrives (the gateway spools a large body to
  disk first), is checked against the size and SHA-256 its URL and batch named, and is kept
  only when whole. A download streams from the store with ``Range``.
- Errors are JSON with a ``message`` in ``application/vnd.git-lfs+json`` (``web/errors.py``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import falcon

from floorless.accounts.access import ANONYMOUS, Level, Viewer
from floorless.core.errors import BadRequest, NotFound, Unauthorized
from floorless.files.store import valid_oid
from floorless.forge import Forge
from floorless.forgejo.people import rfc3339
from floorless.gitservice import access
from floorless.lfs import transfers
from floorless.lfs.locks import MAX_PAGE, Held, Lock
from floorless.lfs.objects import MAX_BATCH
from floorless.repos.registry import Repo
from floorless.web import blobs
from floorless.web.auth import Authenticator, viewer_of
from floorless.web.errors import LFS_MEDIA_TYPE as MEDIA_TYPE
from floorless.web.public import public_url
from floorless.web.render import Renderer
from floorless.web.views.githttp import GitView

_SIZE = re.compile(r"\A(0|[1-9][0-9]{0,17})\Z")
EXPIRES_IN = transfers.LIFETIME  # seconds an action's URL and its header are good for


class LfsView(GitView):
    identifies = False  # ``identify``: a transfer's header, or git's own credentials

    def __init__(self, forge: Forge, renderer: Renderer, auth: Authenticator) -> None:
        super().__init__(forge, renderer)
        self.auth = auth

    def lfs_repo(self, req: falcon.Request, owner: str, name: str, needed: Level) -> Repo:
        """The repository, if the caller may reach ``needed`` on it (git's rules)."""
        service = access.RECEIVE if needed >= Level.WRITE else access.UPLOAD
        repo, level = self.reach(req, owner, name, service)
        if level < needed:  # reach lets those who may only propose changes through
            self.forge.policy.require(viewer_of(req), repo, needed)
        return repo

    def answer(self, resp: falcon.Response, body: object, status: int = 200) -> None:
        resp.status = status
        resp.content_type = MEDIA_TYPE
        resp.cache_control = ["no-store"]
        resp.text = json.dumps(body)

    def transfer_header(
        self, req: falcon.Request, repo: Repo, operation: str, oid: str
    ) -> dict[str, str]:
        """The header that lets the caller of a batch make the transfer it was told to, by
        the same person with the same reach, for an hour (none for anonymous callers)."""
        viewer = viewer_of(req)
        if viewer.account is None:
            return {}
        key = self.forge.secret
        return transfers.make(key, repo.id, viewer.account.id, viewer.scope, operation, oid)

    def identify(
        self, req: falcon.Request, owner: str, name: str, operations: tuple[str, ...], oid: str = ""
    ) -> None:
        """Who asks: the person a transfer header (``lfs/transfers.py``) names, when it is one
        this forge made for this repository, one of ``operations`` and the object ``oid``,
        and has not expired (Unauthorized otherwise); else the credentials git sends (a
        password or a token: no session cookie, which no ``git lfs`` has)."""
        header = req.get_header("Authorization")
        if not transfers.carried(header):
            req.context.viewer = self.auth.identify(req) if header else ANONYMOUS
            return
        assert header is not None
        try:
            repo: Repo | None = self.forge.registry.get(owner, name)
        except NotFound:
            repo = None
        found = None
        for operation in operations if repo is not None else ():
            assert repo is not None
            found = found or transfers.read(self.forge.secret, header, repo.id, operation, oid)
        account = self.forge.accounts.by_id(found[0]) if found is not None else None
        if found is None or account is None:
            raise Unauthorized("the transfer's token is not valid here, or has expired")
        req.context.viewer = Viewer(account=account, scope=found[1])

    def base(self, req: falcon.Request, repo: Repo) -> str:
        return f"{public_url(self.settings, req)}/{repo.owner}/{repo.name}.git/info/lfs"


def read_json(req: falcon.Request) -> dict[str, Any]:
    """The request's JSON object; BadRequest when it is none. It must say it is JSON (as
    ``git lfs`` does): a body of no type, or of a form's, is what a page of another site may
    have a signed-in visitor's browser send here with their cookie without asking first
    (only other types need CORS's preflight, which is never granted)."""
    kind = (req.content_type or "").split(";")[0].strip().lower()
    if kind not in (MEDIA_TYPE, "application/json"):
        raise Unacceptable(f"a Git LFS request is {MEDIA_TYPE}")
    try:
        body = json.loads(req.bounded_stream.read() or b"{}")
    except RecursionError:  # nested past the parser's stack (100,000 ``[``)
        raise Unprocessable("the body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unprocessable("the body is not JSON") from exc
    if not isinstance(body, dict):
        raise Unprocessable("the body is a JSON object")
    return body


class Unprocessable(BadRequest):
    status = 422


class Unacceptable(BadRequest):
    status = 415


def _object(entry: object) -> tuple[str, int]:
    if not isinstance(entry, dict):
        raise Unprocessable("each object is {oid, size}")
    oid, size = entry.get("oid"), entry.get("size")
    if not isinstance(oid, str) or not valid_oid(oid):
        raise Unprocessable("an object's oid is 64 lower-case hexadecimal digits")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise Unprocessable("an object's size is a whole number of bytes")
    return oid, size


class Batch(LfsView):
    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        body = read_json(req)
        operation = body.get("operation")
        if operation not in ("download", "upload"):
            raise Unprocessable("operation is download or upload")
        transfers = body.get("transfers", ["basic"])
        if not isinstance(transfers, list) or "basic" not in transfers:
            raise Unprocessable("the only transfer served is basic")
        if body.get("hash_algo", "sha256") != "sha256":
            raise Unprocessable("the only hash algorithm served is sha256")
        entries = body.get("objects")
        if not isinstance(entries, list) or len(entries) > MAX_BATCH:
            raise Unprocessable(f"objects is a list of at most {MAX_BATCH}")
        wanted = [_object(entry) for entry in entries]
        self.identify(req, owner, repo, (f"batch-{operation}",))  # (a batch header: SSH's)
        needed = Level.WRITE if operation == "upload" else Level.READ
        found = self.lfs_repo(req, owner, repo, needed)
        lfs = self.forge.lfs
        held = lfs.held(found.id, (oid for oid, _ in wanted))
        base = self.base(req, found)
        objects = []
        for oid, size in wanted:
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            here = held.get(oid) == size and self.forge.store.size(oid) == size
            href = f"{base}/objects/{oid}"
            if operation == "download":
                if here:
                    entry["actions"] = {
                        "download": {
                            "href": href,
                            "header": self.transfer_header(req, found, "download", oid),
                            "expires_in": EXPIRES_IN,
                        }
                    }
                else:
                    entry["error"] = {"code": 404, "message": "Object does not exist"}
            elif lfs.max_bytes and size > lfs.max_bytes:
                entry["error"] = {
                    "code": 422,
                    "message": f"the object is larger than the limit of {lfs.max_bytes} bytes",
                }
            elif not here:
                entry["actions"] = {
                    "upload": {
                        "href": href,
                        "header": {
                            "X-Lfs-Size": str(size),
                            **self.transfer_header(req, found, "upload", oid),
                        },
                        "expires_in": EXPIRES_IN,
                    },
                    "verify": {
                        "href": f"{base}/verify",
                        "header": self.transfer_header(req, found, "verify", oid),
                        "expires_in": EXPIRES_IN,
                    },
                }
            objects.append(entry)
        self.answer(resp, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})


class Object(LfsView):
    def on_get(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, oid: str
    ) -> None:
        self.identify(req, owner, repo, ("download",), oid)
        found = self.lfs_repo(req, owner, repo, Level.READ)
        size = self.forge.lfs.size(found.id, oid) if valid_oid(oid) else None
        if size is None:
            raise NotFound("Object does not exist")
        opened = self.forge.store.open(oid)
        blobs.send_file(req, resp, opened, size, oid, oid, found.private)

    def on_put(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, oid: str
    ) -> None:
        self.identify(req, owner, repo, ("upload",), oid)
        found = self.lfs_repo(req, owner, repo, Level.WRITE)
        if not valid_oid(oid):
            raise Unprocessable("an object's oid is 64 lower-case hexadecimal digits")
        announced = req.get_header("X-Lfs-Size") or (
            str(req.content_length) if req.content_length is not None else None
        )
        if announced is None or not _SIZE.match(announced):
            raise falcon.HTTPLengthRequired(
                title="Length Required", description="an upload says its size"
            )
        size = int(announced)
        if req.content_length is not None and req.content_length != size:
            raise Unprocessable("the body's length is not the object's size")
        self.forge.lfs.upload(found.id, oid, size, req.bounded_stream.read)
        resp.status = falcon.HTTP_200
        resp.content_type = MEDIA_TYPE
        resp.text = ""


class Verify(LfsView):
    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        oid, size = _object(read_json(req))
        self.identify(req, owner, repo, ("verify",), oid)
        found = self.lfs_repo(req, owner, repo, Level.WRITE)
        held = self.forge.lfs.size(found.id, oid)
        if held is None:
            raise NotFound("Object does not exist")
        if held != size:
            raise Unprocessable(f"the object has {held} bytes, not {size}")
        self.answer(resp, {"message": "the object is whole"})


# -- locks -----------------------------------------------------------------------------------


def lock_json(lock: Lock) -> dict[str, Any]:
    return {
        "id": str(lock.id),
        "path": lock.path,
        "locked_at": rfc3339(lock.created_at),
        "owner": {"name": lock.owner},
    }


def _whole(text: object, what: str) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 18:
        value = int(text)
    else:
        raise BadRequest(f"{what} is a whole number")
    if not 0 <= value < 1 << 63:  # what a database stores
        raise BadRequest(f"{what} is a whole number")
    return value


class Locks(LfsView):
    def on_get(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        self.identify(req, owner, repo, ("batch-download", "batch-upload"))
        found = self.lfs_repo(req, owner, repo, Level.READ)
        cursor, limit = req.get_param("cursor"), req.get_param("limit")
        lock_id, path = req.get_param("id"), req.get_param("path")
        locks, after = self.forge.locks.list(
            found.id,
            path=path,
            lock_id=_whole(lock_id, "id") if lock_id is not None else None,
            after=_whole(cursor, "cursor") if cursor else 0,
            limit=_whole(limit, "limit") if limit else MAX_PAGE,
        )
        self.answer(
            resp,
            {"locks": [lock_json(x) for x in locks], "next_cursor": str(after or "")},
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        body = read_json(req)
        self.identify(req, owner, repo, ("batch-upload",))
        found = self.lfs_repo(req, owner, repo, Level.WRITE)
        account = viewer_of(req).account
        assert account is not None  # writing needs an account
        try:
            made = self.forge.locks.create(found.id, account.id, body.get("path"))
        except Held as held:
            existing = {"lock": lock_json(held.lock)} if held.lock is not None else {}
            self.answer(resp, {**existing, "message": str(held)}, 409)
            return
        self.answer(resp, {"lock": lock_json(made)}, 201)


class LocksVerify(LfsView):
    def on_post(self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str) -> None:
        body = read_json(req)
        self.identify(req, owner, repo, ("batch-upload",))
        found = self.lfs_repo(req, owner, repo, Level.WRITE)
        account = viewer_of(req).account
        assert account is not None
        cursor, limit = body.get("cursor"), body.get("limit")
        locks, after = self.forge.locks.list(
            found.id,
            after=_whole(cursor, "cursor") if cursor else 0,
            limit=_whole(limit, "limit") if limit else MAX_PAGE,
        )
        self.answer(
            resp,
            {
                "ours": [lock_json(x) for x in locks if x.owner_id == account.id],
                "theirs": [lock_json(x) for x in locks if x.owner_id != account.id],
                "next_cursor": str(after or ""),
            },
        )


class Unlock(LfsView):
    def on_post(
        self, req: falcon.Request, resp: falcon.Response, owner: str, repo: str, id: str
    ) -> None:
        body = read_json(req)
        self.identify(req, owner, repo, ("batch-upload",))
        found = self.lfs_repo(req, owner, repo, Level.WRITE)
        viewer = viewer_of(req)
        account = viewer.account
        assert account is not None
        lock = self.forge.locks.by_id(found.id, _whole(id, "a lock's id"))
        if lock is None:
            raise NotFound("no such lock")
        force = body.get("force", False) is True
        may_force = self.forge.policy.level(viewer, found) >= Level.ADMIN
        self.forge.locks.unlock(lock, account.id, force=force, may_force=may_force)
        self.answer(resp, {"lock": lock_json(lock)})
