"""A commit's statuses as pages show them: one mark for the worst of the latest status of each
context, its words for a screen reader and a tooltip (``templates/_status.html``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from floorless.collab.statuses import Status, combined

SYMBOLS = {"success": "✓", "failure": "✗", "error": "✗", "pending": "●", "warning": "!"}
WORDS = {
    "success": "All checks succeeded",
    "failure": "Some checks failed",
    "error": "Some checks errored",
    "pending": "Some checks are pending",
    "warning": "Some checks warn",
}


@dataclass(frozen=True)
class Mark:
    state: str
    statuses: tuple[Status, ...]

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.state]

    @property
    def label(self) -> str:
        count = len(self.statuses)
        return f"{WORDS[self.state]}: {count} status{'es' if count != 1 else ''}"

    @property
    def title(self) -> str:
        lines = []
        for s in self.statuses:
            said = f" — {s.description}" if s.description else ""
            lines.append(f"{s.context or 'default'}: {s.state}{said}")
        return "\n".join(lines)


def mark(latest: Sequence[Status]) -> Mark | None:
    """The mark for a commit's latest statuses; None when it has none."""
    state = combined(latest)
    return Mark(state, tuple(latest)) if state else None
