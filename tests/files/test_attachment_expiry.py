"""Uploads nothing claimed (a comment written, a file dropped into it, the comment never posted)
go after a day with their bytes, unless something else holds the same bytes; claimed files and
young uploads stay."""

from __future__ import annotations

import io
import time
from pathlib import Path

from support.accounts import PASSWORD
from support.forges import start_forge


def test_unclaimed_uploads_expire(tmp_path: Path) -> None:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    try:
        ann = forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
        repo = forge.registry.create("ann", "plans")
        now = time.time()

        def upload(data: bytes, **where: int) -> str:
            return forge.attachments.upload(
                repo.id, ann.id, "f.bin", io.BytesIO(data).read, **where
            ).uuid

        old = upload(b"old and unclaimed")
        shared = upload(b"the same bytes")
        young = upload(b"young")
        forge.db.execute(
            "UPDATE attachments SET created_at = ? WHERE uuid IN (?, ?)",
            (now - 2 * 86400, old, shared),
        )
        issue = forge.issues.create("ann", "plans", ann, "Kept", "")
        kept = upload(b"the same bytes", issue_id=issue.id)  # claimed, the bytes shared
        forge.db.execute("UPDATE attachments SET created_at = ? WHERE uuid = ?", (now - 9e6, kept))
        assert forge.attachments.expire() == 2
        left = {a for a in (old, shared, young, kept) if forge.attachments.by_uuid(a)}
        assert left == {young, kept}
        stored = {forge.store.path(oid).read_bytes() for oid in forge.store.every()}
        assert stored == {b"young", b"the same bytes"}  # the old one's bytes went with it
    finally:
        forge.stop()
