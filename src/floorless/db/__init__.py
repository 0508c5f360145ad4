"""Metadata and indexes: the repository list, the commit index, cached answers."""

from floorless.db.store import Database

__all__ = ["Database"]
