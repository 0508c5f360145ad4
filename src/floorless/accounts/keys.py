"""SSH keys: a person's keys, and a repository's deploy keys.

A person's key signs them in over SSH as themselves: what they may read and push is what the
access policy gives them, as over HTTP. A deploy key belongs to one repository: it reads it,
and pushes to it too unless it is read-only; it reaches no other repository. A key is used in
one place alone, so that the key a connection signs with names exactly one person or one
repository (its SHA-256 fingerprint, as ``ssh-keygen -l`` shows it, is unique).

Keys are read with asyncssh's parser (imported when a key is first read: the pages never need
it). Accepted: Ed25519, ECDSA on NIST P-256, P-384 and P-521, RSA of at least 2048 bits, and
their security-key forms; DSA and shorter RSA keys are refused, as OpenSSH itself now does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from floorless.accounts.accounts import Account
from floorless.core.errors import BadRequest, Conflict, NotFound
from floorless.db import Database, IntegrityError, Row

KINDS = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
MIN_RSA_BITS = 2048
MAX_KEY_TEXT = 16_384  # characters: an RSA key of 16384 bits is about 2,800
MAX_TITLE = 100
_LAST_USED_RESOLUTION = 60.0  # seconds: a key used all day is not a write per connection


@dataclass(frozen=True)
class ParsedKey:
    kind: str  # its algorithm, as OpenSSH names it
    content: str  # "KIND BASE64", without a comment
    fingerprint: str  # "SHA256:..."
    comment: str


@dataclass(frozen=True)
class SshKey:
    id: int
    title: str
    kind: str
    content: str
    fingerprint: str
    created_at: float
    last_used_at: float | None
    user_id: int | None  # a person's key
    repo_id: int | None  # a deploy key
    read_only: bool
    added_by: int | None

    @property
    def deploy(self) -> bool:
        return self.repo_id is not None


def parse(text: str) -> ParsedKey:
    """One public key in OpenSSH's format (``ssh-ed25519 AAAA... comment``); BadRequest with
    what is wrong when it is not one, or is one floorless refuses."""
    import asyncssh  # (see the module's docstring)

    text = text.strip()
    if not text:
        raise BadRequest("the key is empty: paste the contents of a .pub file")
    if len(text) > MAX_KEY_TEXT:
        raise BadRequest(f"the key is longer than {MAX_KEY_TEXT} characters")
    if text.startswith("-----BEGIN") and "PRIVATE" in text.split("\n", 1)[0]:
        raise BadRequest("this is a private key: give the public one (the .pub file)")
    if "\n" in text or "\r" in text or "\0" in text:
        raise BadRequest("give one key, on one line")
    try:
        key = asyncssh.import_public_key(text)
    except (asyncssh.KeyImportError, ValueError, TypeError) as exc:
        raise BadRequest("not an SSH public key: paste the contents of a .pub file") from exc
    kind = key.get_algorithm()
    if kind not in KINDS:
        raise BadRequest(f"{kind} keys are not accepted: use an Ed25519, ECDSA or RSA key")
    bits = getattr(getattr(key, "pyca_key", None), "key_size", None)
    if kind == "ssh-rsa" and (bits is None or bits < MIN_RSA_BITS):
        raise BadRequest(f"an RSA key has at least {MIN_RSA_BITS} bits; this one has {bits}")
    content = key.export_public_key("openssh").decode("ascii").split()
    return ParsedKey(
        kind=kind,
        content=" ".join(content[:2]),
        fingerprint=key.get_fingerprint("sha256"),
        comment=(key.get_comment() or "").strip(),
    )


class Keys:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add_user_key(self, user: Account, text: str, title: str = "") -> SshKey:
        if user.is_org:
            raise BadRequest("SSH keys belong to people, not organisations")
        return self._add(text, title, user_id=user.id, repo_id=None, added_by=user.id)

    def add_deploy_key(
        self, repo_id: int, text: str, title: str, read_only: bool, added_by: Account
    ) -> SshKey:
        return self._add(
            text, title, user_id=None, repo_id=repo_id, added_by=added_by.id, read_only=read_only
        )

    def _add(
        self,
        text: str,
        title: str,
        user_id: int | None,
        repo_id: int | None,
        added_by: int,
        read_only: bool = False,
    ) -> SshKey:
        key = parse(text)
        title = " ".join(title.split())[:MAX_TITLE] or key.comment[:MAX_TITLE] or key.kind
        if self.db.one("SELECT 1 FROM ssh_keys WHERE fingerprint = ?", (key.fingerprint,)):
            raise Conflict(f"the key {key.fingerprint} is already in use")
        try:
            self.db.execute(
                "INSERT INTO ssh_keys (user_id, repo_id, added_by, title, kind, content,"
                " fingerprint, read_only, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    user_id,
                    repo_id,
                    added_by,
                    title,
                    key.kind,
                    key.content,
                    key.fingerprint,
                    int(read_only),
                    time.time(),
                ),
            )
        except IntegrityError as exc:  # added at the same moment elsewhere
            raise Conflict(f"the key {key.fingerprint} is already in use") from exc
        found = self.by_fingerprint(key.fingerprint)
        assert found is not None
        return found

    def of_user(self, user_id: int) -> list[SshKey]:
        rows = self.db.query("SELECT * FROM ssh_keys WHERE user_id = ? ORDER BY id", (user_id,))
        return [_key(r) for r in rows]

    def of_repo(self, repo_id: int) -> list[SshKey]:
        rows = self.db.query("SELECT * FROM ssh_keys WHERE repo_id = ? ORDER BY id", (repo_id,))
        return [_key(r) for r in rows]

    def get(self, key_id: int) -> SshKey | None:
        row = self.db.one("SELECT * FROM ssh_keys WHERE id = ?", (key_id,))
        return _key(row) if row is not None else None

    def user_key(self, user_id: int, key_id: int) -> SshKey:
        key = self.get(key_id)
        if key is None or key.user_id != user_id:
            raise NotFound("no such key")
        return key

    def deploy_key(self, repo_id: int, key_id: int) -> SshKey:
        key = self.get(key_id)
        if key is None or key.repo_id != repo_id:
            raise NotFound("no such deploy key")
        return key

    def delete(self, key: SshKey) -> None:
        self.db.execute("DELETE FROM ssh_keys WHERE id = ?", (key.id,))

    def by_fingerprint(self, fingerprint: str) -> SshKey | None:
        row = self.db.one("SELECT * FROM ssh_keys WHERE fingerprint = ?", (fingerprint,))
        return _key(row) if row is not None else None

    def used(self, key: SshKey) -> None:
        """Note that ``key`` signed a connection in (at most once a minute)."""
        now = time.time()
        if key.last_used_at is None or now - key.last_used_at > _LAST_USED_RESOLUTION:
            self.db.execute("UPDATE ssh_keys SET last_used_at = ? WHERE id = ?", (now, key.id))

    def every(self) -> list[SshKey]:
        """Every key, for ``floorless ssh authorized-keys`` without ``--key``."""
        return [_key(r) for r in self.db.query("SELECT * FROM ssh_keys ORDER BY id")]


def _key(row: Row) -> SshKey:
    return SshKey(
        id=int(row["id"]),
        title=row["title"],
        kind=row["kind"],
        content=row["content"],
        fingerprint=row["fingerprint"],
        created_at=float(row["created_at"]),
        last_used_at=row["last_used_at"],
        user_id=row["user_id"],
        repo_id=row["repo_id"],
        read_only=bool(row["read_only"]),
        added_by=row["added_by"],
    )
