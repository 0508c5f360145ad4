"""Trigrams: what the code index keeps of each file, and what a query needs of it.

A file is indexed by the set of its three-byte sequences, ASCII letters folded to lower case
(searches ignore case unless asked not to, and a case-sensitive match is still a
case-insensitive one). A gram is an integer, ``b0 | b1 << 8 | b2 << 16``.

A query is turned into a ``Plan``: the trigrams a file must contain to possibly match, as an
AND and OR tree, so that only candidate files are read and matched. A literal needs every
trigram it has; a regular expression needs those of the literal runs it cannot match
without (taken from the pattern's parse tree), with alternatives joined by OR. A plan of
``None`` says the index cannot narrow the search: every file is a candidate.

Python's ``re`` cannot be interrupted while it matches, so the patterns that backtrack
exponentially are refused before they run (``check_pattern``): a repeat inside an unbounded
repeat, an alternation inside one, and back-references.
"""

from __future__ import annotations

import importlib
import re
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# re's own parser (``sre_parse`` is its deprecated public name): the parse tree it gives is
# what ``re.compile`` compiles, so the literal runs read from it are exactly the pattern's.
_parser: Any = importlib.import_module("re._parser")
_constants: Any = importlib.import_module("re._constants")

MAX_GRAMS = 24  # trigrams of one literal looked up: enough to narrow, few rows to read


def gram(chunk: bytes) -> int:
    """Three bytes as one integer, the first in the lowest byte."""
    return chunk[0] | chunk[1] << 8 | chunk[2] << 16


def file_grams(data: bytes) -> set[int]:
    """Every trigram of ``data`` (lower-cased), as integers.

    Done at C speed where it can be: the bytes are read as 32-bit words at two alignments
    (``array``), the distinct words kept (``set``), and each word gives the trigrams at its
    first and second byte; the interpreter only loops over distinct words, far fewer than
    the bytes of a source file. The last few positions are taken one by one."""
    lower = data.lower()
    size = len(lower)
    quads: set[int] = set()
    for start in (0, 2):
        words = array("I")
        words.frombytes(lower[start : start + (size - start) // 4 * 4])
        if sys.byteorder == "big":
            words.byteswap()
        quads.update(words)
    found = {word & 0xFFFFFF for word in quads}
    found.update(word >> 8 for word in quads)
    for i in range(max(0, size - 6), size - 2):
        found.add(gram(lower[i : i + 3]))
    return found


def literal_grams(text: bytes) -> list[int]:
    """The distinct trigrams of a literal (lower-cased), at most ``MAX_GRAMS`` of them, spread
    over its length."""
    lower = text.lower()
    found = list(dict.fromkeys(gram(lower[i : i + 3]) for i in range(len(lower) - 2)))
    if len(found) <= MAX_GRAMS:
        return found
    step = len(found) / MAX_GRAMS
    return [found[int(i * step)] for i in range(MAX_GRAMS)]


@dataclass(frozen=True)
class Grams:
    """Every one of ``grams``: those of the literal run ``text`` (lower-cased), which a
    matching file holds as a whole (``holds``)."""

    grams: tuple[int, ...]
    text: bytes = b""


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Plan, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Plan, ...]


Plan = Grams | AllOf | AnyOf


def literal_plan(text: bytes) -> Plan | None:
    found = literal_grams(text)
    return Grams(tuple(found), text.lower()) if found else None


def holds(plan: Plan, lowered: bytes) -> bool:
    """Whether a file's lower-cased bytes hold the literal runs ``plan`` needs: a check far
    cheaper than the regular expression, which runs only where it passes."""
    if isinstance(plan, Grams):
        return plan.text in lowered
    if isinstance(plan, AllOf):
        return all(holds(part, lowered) for part in plan.parts)
    return any(holds(part, lowered) for part in plan.parts)


def text_plan(text: str, ignore_case: bool = True, shortest: int = 3) -> Plan | None:
    """The plan of a literal query. Ignoring case, only its ASCII runs narrow the search:
    the index folds ASCII letters alone, and ``re`` folds every letter. With a ``shortest``
    run under 3, a sieve (``run_plan``)."""
    data = text.encode("utf-8", "surrogateescape")
    runs = re.split(rb"[\x80-\xff]+", data) if ignore_case else [data]
    return _all(run_plan(run) for run in runs if len(run) >= shortest)


def run_plan(run: bytes) -> Grams:
    """A literal run's plan: its trigrams for the index, and the run for ``holds``; a run
    of one or two bytes has no trigram, but a file that lacks it is still passed over at
    the speed of a byte search, before any regular expression runs on it."""
    return Grams(tuple(literal_grams(run)), run.lower())


def _all(parts: Iterable[Plan | None]) -> Plan | None:
    kept = tuple(p for p in parts if p is not None)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else AllOf(kept)


def _any(parts: list[Plan | None]) -> Plan | None:
    if not parts or any(p is None for p in parts):
        return None  # one alternative that needs nothing: any file may match
    kept = tuple(p for p in parts if p is not None)
    return kept[0] if len(kept) == 1 else AnyOf(kept)


class PatternRefused(ValueError):
    """A regular expression that could take exponential time."""


def regex_plan(pattern: str, ignore_case: bool = True, shortest: int = 3) -> Plan | None:
    """The trigrams a file must hold to match ``pattern`` (which ``re`` compiles); with a
    ``shortest`` run under 3, the sieve of every literal run of that length or more."""
    flags = _constants.SRE_FLAG_IGNORECASE if ignore_case else 0
    return _sequence(_parser.parse(pattern, flags), ignore_case, shortest)


def _sequence(items: Any, ignore_case: bool, shortest: int = 3) -> Plan | None:
    """The plan of a sequence of parse-tree items: its literal runs, and what its groups and
    required repeats need."""
    parts: list[Plan | None] = []
    run = bytearray()

    def close() -> None:
        if len(run) >= shortest:
            parts.append(run_plan(bytes(run)))
        run.clear()

    for op, arg in items:
        name = str(op)
        if name == "LITERAL" and (arg < 128 or not ignore_case):
            run.extend(chr(arg).encode("utf-8", "surrogateescape"))
            continue
        close()
        if name == "SUBPATTERN":
            parts.append(_sequence(arg[-1], ignore_case, shortest))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and arg[0] >= 1:
            parts.append(_sequence(arg[2], ignore_case, shortest))
        elif name == "ATOMIC_GROUP":
            parts.append(_sequence(arg, ignore_case, shortest))
        elif name == "BRANCH":
            branches = [_sequence(branch, ignore_case, shortest) for branch in arg[1]]
            parts.append(_any(branches))
    close()
    return _all(parts)


def check_pattern(pattern: str) -> None:
    """Refuse (``PatternRefused``) what could backtrack exponentially; a syntax error raises
    ``re.error``."""
    _check(_parser.parse(pattern, 0), inside_unbounded=False)


def _check(items: Any, inside_unbounded: bool) -> None:
    for op, arg in items:
        name = str(op)
        if name == "GROUPREF" or name == "GROUPREF_EXISTS":
            raise PatternRefused("back-references are not supported")
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _, high, body = arg
            if inside_unbounded and high > 1:
                raise PatternRefused(
                    "a repeat inside a repeat (such as (a+)+) can take exponential time"
                )
            unbounded = high == _constants.MAXREPEAT or high > 100
            _check(body, inside_unbounded or unbounded)
        elif name == "SUBPATTERN":
            _check(arg[-1], inside_unbounded)
        elif name == "ATOMIC_GROUP":
            _check(arg, inside_unbounded)
        elif name == "BRANCH":
            if inside_unbounded and len(arg[1]) > 1:
                raise PatternRefused(
                    "alternatives inside a repeat (such as (a|ab)*) can take exponential time"
                )
            for branch in arg[1]:
                _check(branch, inside_unbounded)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _check(arg[1], inside_unbounded)


def anchor(plan: Plan | None) -> bytes | None:
    """The longest literal run (lower-cased) that every match holds, or None."""
    if isinstance(plan, Grams):
        return plan.text or None
    if isinstance(plan, AllOf):
        runs = [found for part in plan.parts if (found := anchor(part)) is not None]
        return max(runs, key=len) if runs else None
    return None


_NEWLINE_SAFE = frozenset({"CATEGORY_DIGIT", "CATEGORY_WORD"})


def single_line(pattern: str) -> bool:
    """Whether no match of ``pattern`` can hold a newline or look past its own line: then a
    file's matches are searched only on the lines that hold its ``anchor``. Conservative:
    anything not known to be safe says no."""
    if re.search(r"\(\?[a-zA-Z-]*s", pattern):  # an inline DOTALL: a dot takes newlines
        return False
    try:
        return _single(_parser.parse(pattern, 0))
    except (re.error, RecursionError):
        return False


def _single(items: Any) -> bool:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            if arg == 10:
                return False
        elif name in ("ANY", "AT"):
            continue
        elif name == "IN":
            for kind, value in arg:
                kind_name = str(kind)
                if kind_name == "LITERAL" and value != 10:
                    continue
                if kind_name == "RANGE" and not value[0] <= 10 <= value[1]:
                    continue
                if kind_name == "CATEGORY" and str(value) in _NEWLINE_SAFE:
                    continue
                return False
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if not _single(arg[2]):
                return False
        elif name == "SUBPATTERN":
            if not _single(arg[-1]):
                return False
        elif name == "BRANCH":
            if not all(_single(branch) for branch in arg[1]):
                return False
        else:  # lookarounds, NOT_LITERAL, back-references, ...
            return False
    return True
