"""Attachments: files attached to a release, an issue or a comment (Forgejo's
``attachment``), each a record here and its bytes in the content store (``store.py``).

An attachment is named by a random UUID in its URL (``/attachments/{uuid}``) and by the name
it was uploaded with, cleaned of any directory part and of control characters. Its record
says where it belongs; what a reader may see of it is what they may see of that release or
issue (the web layer asks the access policy). A file uploaded while a comment was being
written belongs to no issue yet, only to its repository and uploader: ``claim`` gives it its
place when the comment is posted. Deleting the last record of some bytes removes
them from the store, unless a Git LFS object is the same bytes; files whose records went with
their repository are collected by ``collect``.
"""

from __future__ import annotations

import mimetypes
import time
import uuid as uuids
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from floorless.core.errors import BadRequest, NotFound, Unsupported
from floorless.db import Database, Row
from floorless.files.store import Store

MAX_NAME = 255  # characters
UNCLAIMED_DAYS = 1  # an upload no comment claimed within a day is removed (``expire``)


@dataclass(frozen=True)
class Attachment:
    id: int
    uuid: str
    repo_id: int
    release_id: int | None
    issue_id: int | None
    comment_id: int | None
    uploader_id: int | None
    name: str
    oid: str
    size: int
    download_count: int
    created_at: float

    @property
    def claimed(self) -> bool:
        """Whether it has its place (a release, an issue, a comment): one uploaded while a
        comment was being written has none until the comment is posted."""
        return self.release_id is not None or self.issue_id is not None

    @property
    def content_type(self) -> str:
        guessed, _ = mimetypes.guess_type(self.name, strict=False)
        return guessed or "application/octet-stream"


def clean_name(name: str) -> str:
    """The file name an upload is kept under: its last path component, without control
    characters; BadRequest when nothing is left of it."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if c.isprintable()).strip()
    if name in ("", ".", ".."):
        raise BadRequest("the file has no name")
    if len(name) > MAX_NAME:
        stem, dot, ending = name.rpartition(".")
        keep = MAX_NAME - len(ending) - 1
        name = stem[:keep] + dot + ending if dot and keep > 0 else name[:MAX_NAME]
    return name


def allowed(types: tuple[str, ...], name: str) -> bool:
    """Whether ``name`` is of a type ``types`` allows: a name ending, a media type or a family
    (``image/*``), the types judged from the name; every file when ``types`` is empty. The
    type an upload says it is goes for nothing: its sender says what they like."""
    if not types:
        return True
    lowered = name.lower()
    kinds: set[str] = set()
    guessed, encoding = mimetypes.guess_type(name, strict=False)
    if guessed:
        kinds.add(guessed)
    if encoding:  # a .tar.gz is an application/gzip too
        kinds.add({"gzip": "application/gzip", "bzip2": "application/x-bzip2"}.get(encoding, ""))
    for allowed_type in types:
        allowed_type = allowed_type.lower()
        if allowed_type.startswith("."):
            if lowered.endswith(allowed_type):
                return True
        elif allowed_type.endswith("/*"):
            if any(k.startswith(allowed_type[:-1]) for k in kinds):
                return True
        elif allowed_type in kinds:
            return True
    return False


class Attachments:
    def __init__(self, db: Database, store: Store, max_bytes: int, types: tuple[str, ...]) -> None:
        self.db = db
        self.store = store
        self.max_bytes = max_bytes
        self.types = types

    def upload(
        self,
        repo_id: int,
        uploader_id: int | None,
        name: str,
        read: Callable[[int], bytes],
        *,
        size: int | None = None,
        release_id: int | None = None,
        issue_id: int | None = None,
        comment_id: int | None = None,
    ) -> Attachment:
        """Store what ``read`` gives as the file ``name``, then record it: the record is
        written only once the bytes are whole on disk, so an upload cut short leaves
        neither (the store's write removes its part file)."""
        name = clean_name(name)
        if not allowed(self.types, name):
            raise Unsupported(f"files of this type may not be attached: {name}")
        stored = self.store.write(read, limit=self.max_bytes, size=size)
        made = str(uuids.uuid4())
        try:
            self.db.execute(
                "INSERT INTO attachments (uuid, repo_id, release_id, issue_id, comment_id,"
                " uploader_id, name, oid, size, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    made,
                    repo_id,
                    release_id,
                    issue_id,
                    comment_id,
                    uploader_id,
                    name,
                    stored.oid,
                    stored.size,
                    time.time(),
                ),
            )
        except BaseException:
            if stored.new:
                self.collect(stored.oid)
            raise
        found = self.by_uuid(made)
        assert found is not None
        return found

    def by_uuid(self, uuid: str) -> Attachment | None:
        row = self.db.one("SELECT * FROM attachments WHERE uuid = ?", (uuid,))
        return _attachment(row) if row is not None else None

    def by_id(self, attachment_id: int) -> Attachment | None:
        row = self.db.one("SELECT * FROM attachments WHERE id = ?", (attachment_id,))
        return _attachment(row) if row is not None else None

    def of_releases(self, release_ids: Iterable[int]) -> dict[int, list[Attachment]]:
        """Each release's attachments, oldest first: one statement for a page of releases,
        remembered until the table is written."""
        ids = sorted(set(release_ids))
        found: dict[int, list[Attachment]] = {i: [] for i in ids}
        if not ids:
            return found
        marks = ", ".join("?" for _ in ids)
        rows = self.db.remembered(
            f"SELECT * FROM attachments WHERE release_id IN ({marks}) ORDER BY id",  # noqa: S608
            tuple(ids),
            ("attachments",),
        )
        for row in rows:
            found[int(row["release_id"])].append(_attachment(row))
        return found

    def of_release_tag(self, repo_id: int, tag: str, name: str) -> Attachment | None:
        """The file ``name`` of the release of ``tag`` (the newest, if two share a name)."""
        row = self.db.one(
            "SELECT a.* FROM attachments a JOIN releases r ON r.id = a.release_id"
            " WHERE r.repo_id = ? AND r.tag_name = ? AND a.name = ? ORDER BY a.id DESC LIMIT 1",
            (repo_id, tag, name),
        )
        return _attachment(row) if row is not None else None

    def of_issue(self, issue_id: int) -> list[Attachment]:
        """An issue's attachments and its comments' (each says which), oldest first."""
        rows = self.db.remembered(
            "SELECT * FROM attachments WHERE issue_id = ? ORDER BY id",
            (issue_id,),
            ("attachments",),
        )
        return [_attachment(r) for r in rows]

    def of_issues(
        self, issue_ids: Iterable[int], comment_ids: Iterable[int] = ()
    ) -> tuple[dict[int, list[Attachment]], dict[int, list[Attachment]]]:
        """The files of each of ``issue_ids`` (its own, not its comments') and of each of
        ``comment_ids``, oldest first: one statement for a page of either, remembered until
        the table is written."""
        issues, comments = sorted(set(issue_ids)), sorted(set(comment_ids))
        by_issue: dict[int, list[Attachment]] = {i: [] for i in issues}
        by_comment: dict[int, list[Attachment]] = {c: [] for c in comments}
        if not issues and not comments:
            return by_issue, by_comment
        wheres = []
        if issues:
            marks = ", ".join("?" for _ in issues)
            wheres.append(f"(issue_id IN ({marks}) AND comment_id IS NULL)")
        if comments:
            wheres.append(f"comment_id IN ({', '.join('?' for _ in comments)})")
        rows = self.db.remembered(
            f"SELECT * FROM attachments WHERE {' OR '.join(wheres)} ORDER BY id",  # noqa: S608
            (*issues, *comments),
            ("attachments",),
        )
        for row in rows:
            found = _attachment(row)
            if found.comment_id is not None:
                by_comment.setdefault(found.comment_id, []).append(found)
            elif found.issue_id is not None:
                by_issue.setdefault(found.issue_id, []).append(found)
        return by_issue, by_comment

    def claim(
        self,
        repo_id: int,
        uploader_id: int,
        uuids: Iterable[str],
        issue_id: int,
        comment_id: int | None = None,
    ) -> int:
        """Give the uploads ``uuids`` their place once the issue (or its comment) they were
        uploaded for is posted: only those ``uploader_id`` uploaded to ``repo_id`` and that
        have no place yet, so that nobody claims another's file, or one of another
        repository, by naming it. How many were claimed."""
        wanted = sorted({u for u in uuids if 0 < len(u) <= 64})
        if not wanted:
            return 0
        marks = ", ".join("?" for _ in wanted)
        return self.db.execute(
            "UPDATE attachments SET issue_id = ?, comment_id = ?"  # noqa: S608
            f" WHERE uuid IN ({marks}) AND repo_id = ? AND uploader_id = ?"
            " AND release_id IS NULL AND issue_id IS NULL AND comment_id IS NULL",
            (issue_id, comment_id, *wanted, repo_id, uploader_id),
        )

    def attach(
        self,
        attachment: Attachment,
        *,
        release_id: int | None = None,
        issue_id: int | None = None,
        comment_id: int | None = None,
    ) -> None:
        """Give an attachment uploaded ahead (while a comment was being written) its place."""
        self.db.execute(
            "UPDATE attachments SET release_id = COALESCE(?, release_id),"
            " issue_id = COALESCE(?, issue_id), comment_id = COALESCE(?, comment_id)"
            " WHERE id = ?",
            (release_id, issue_id, comment_id, attachment.id),
        )

    def rename(self, attachment: Attachment, name: str) -> Attachment:
        name = clean_name(name)
        if not allowed(self.types, name):
            raise Unsupported(f"files of this type may not be attached: {name}")
        self.db.execute("UPDATE attachments SET name = ? WHERE id = ?", (name, attachment.id))
        found = self.by_id(attachment.id)
        if found is None:
            raise NotFound("no such attachment")
        return found

    def downloaded(self, attachment: Attachment) -> None:
        self.db.execute(
            "UPDATE attachments SET download_count = download_count + 1 WHERE id = ?",
            (attachment.id,),
        )

    def delete(self, attachment: Attachment) -> None:
        self.db.execute("DELETE FROM attachments WHERE id = ?", (attachment.id,))
        self.collect(attachment.oid)

    def expire(self, older_than: float = UNCLAIMED_DAYS * 86400.0) -> int:
        """Delete the uploads nothing claimed (a comment never posted) older than
        ``older_than`` seconds, and their bytes once nothing else refers to them; how many."""
        rows = self.db.query(
            "SELECT * FROM attachments WHERE release_id IS NULL AND issue_id IS NULL"
            " AND comment_id IS NULL AND created_at < ?",
            (time.time() - older_than,),
        )
        for row in rows:
            self.delete(_attachment(row))
        return len(rows)

    def delete_of_release(self, release_id: int) -> None:
        """Delete a release's attachments (before the release itself)."""
        rows = self.db.query("SELECT oid FROM attachments WHERE release_id = ?", (release_id,))
        self.db.execute("DELETE FROM attachments WHERE release_id = ?", (release_id,))
        for oid in {r["oid"] for r in rows}:
            self.collect(oid)

    def held_by_comment(self, comment_id: int) -> set[str]:
        """The bytes a comment's files are (read before it is deleted: its records go with
        it, and ``collect`` then removes what nothing else refers to)."""
        rows = self.db.query("SELECT oid FROM attachments WHERE comment_id = ?", (comment_id,))
        return {r["oid"] for r in rows}

    def referred(self, oid: str) -> bool:
        """Whether any record (an attachment, an LFS object) still needs the bytes ``oid``."""
        return (
            self.db.one("SELECT 1 FROM attachments WHERE oid = ? LIMIT 1", (oid,)) is not None
            or self.db.one("SELECT 1 FROM lfs_objects WHERE oid = ? LIMIT 1", (oid,)) is not None
        )

    def collect(self, oid: str | None = None) -> int:
        """Remove the bytes ``oid`` from the store if nothing refers to them any more; with
        no ``oid``, every such file (those whose records went with their repository). The
        number of files removed."""
        if oid is not None:
            return int(not self.referred(oid) and self.store.remove(oid))
        kept = {r["oid"] for r in self.db.query("SELECT DISTINCT oid FROM attachments")}
        kept |= {r["oid"] for r in self.db.query("SELECT DISTINCT oid FROM lfs_objects")}
        removed = 0
        for held in self.store.every():
            if held not in kept and not self.referred(held):  # (asked again: it may be new)
                removed += self.store.remove(held)
        return removed


def _attachment(row: Row) -> Attachment:
    return Attachment(
        id=int(row["id"]),
        uuid=row["uuid"],
        repo_id=int(row["repo_id"]),
        release_id=row["release_id"],
        issue_id=row["issue_id"],
        comment_id=row["comment_id"],
        uploader_id=row["uploader_id"],
        name=row["name"],
        oid=row["oid"],
        size=int(row["size"]),
        download_count=int(row["download_count"]),
        created_at=float(row["created_at"]),
    )
