"""Metadata and indexes: the repository list, the commit index, cached answers, on SQLite or
PostgreSQL."""

from floorless.db.store import Database, IntegrityError, Row, open_database

__all__ = ["Database", "IntegrityError", "Row", "open_database"]
