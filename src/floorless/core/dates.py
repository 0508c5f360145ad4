"""Timestamps as git stores them, made safe to show and to store.

A commit's date is whatever its author wrote: git keeps any count of seconds (negative, or
far past the year 9999) and any four characters of offset, and libgit2 reads them as 64-bit
integers. Python's ``datetime`` holds the years 1 to 9999 and offsets under a day, and
``datetime.fromtimestamp`` stops even sooner, at what the platform's ``time_t`` takes. So
every timestamp floorless shows or stores goes through :func:`moment` or :func:`clamp`: a
date outside ``EARLIEST .. LATEST`` is pinned to the nearer end (and reported as clamped), an
offset of a day or more is read as UTC. Nothing here calls the platform's time functions.
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A day inside datetime's range at each end, so that any offset under a day still fits.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, tzinfo=UTC)
EARLIEST_SECONDS = int((EARLIEST - EPOCH).total_seconds())
LATEST_SECONDS = int((LATEST - EPOCH).total_seconds())
MAX_OFFSET_MINUTES = 24 * 60 - 1


@dataclass(frozen=True)
class Moment:
    """A timestamp ready to show: ``when`` is always a valid, timezone-aware datetime."""

    when: datetime
    clamped: bool  # the seconds or the offset were out of range and were replaced


def clamp(seconds: float) -> float:
    """``seconds`` since the epoch, pinned into ``EARLIEST_SECONDS .. LATEST_SECONDS``."""
    if math.isnan(seconds):
        return 0
    return min(max(seconds, EARLIEST_SECONDS), LATEST_SECONDS)


def moment(seconds: float, offset_minutes: int = 0) -> Moment:
    """The datetime git means by ``seconds`` and ``offset_minutes`` (east of UTC)."""
    inside = clamp(seconds)
    clamped = inside != seconds
    if abs(offset_minutes) > MAX_OFFSET_MINUTES:
        offset_minutes, clamped = 0, True
    utc = EPOCH + timedelta(seconds=inside)
    return Moment(utc.astimezone(timezone(timedelta(minutes=offset_minutes))), clamped)


def to_datetime(when: datetime | float) -> datetime:
    """A datetime for a stored timestamp (epoch seconds, UTC) or one already made."""
    return when if isinstance(when, datetime) else moment(when).when


def display(when: datetime) -> str:
    """``2023-11-14 22:13:20 +0000``, with a four-digit year whatever the platform."""
    return f"{when.year:04d}-{when:%m-%d %H:%M:%S %z}"


def rfc2822(when: datetime) -> str:
    """``Tue, 14 Nov 2023 22:13:20 +0000`` as mail and RSS want it, in English always."""
    return email.utils.format_datetime(when)
