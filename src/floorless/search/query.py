"""Code search: a query's words and filters, and the matching files with their lines.

A query is text to find, with filters among its words (as GitHub's code search reads them):
``path:`` (a part of the path, or a glob such as ``*.py`` or ``src/**``), ``lang:`` (a
language, by file name), ``repo:`` (``owner/name``, site-wide), ``case:yes`` (match case).
The rest is the text: a literal, or a regular expression when written ``/like this/`` (or
asked for with ``mode=regex``).

A search reads the index's candidates (``grams.py``) in path order, matches each with Python's
``re`` (a literal is an escaped pattern) and stops once it has the files the page shows and
knows whether there are more, or when its time budget is spent: then the answer says it is
partial. Nothing here starts a process; every file is read from the repository's own
objects through its open handle.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pygit2
import regex as rx  # (not ``regex``: a query's field and parse's flag have that name)

from floorless.core.errors import BadRequest
from floorless.repos.registry import Repo
from floorless.search import grams
from floorless.search.grams import AllOf, AnyOf, Grams, Plan
from floorless.search.index import CodeIndex, Indexed

MAX_QUERY = 500  # characters of a query
MAX_PATTERN = 300  # characters of its text
LINES_PER_FILE = 5  # matching lines shown per file
CONTEXT = 1  # lines shown around each
MAX_LINE = 500  # characters of a line shown
FILES_PER_PAGE = 20
MAX_PAGE = 50  # the deepest page: past it, narrow the query
MAX_COUNTED = 1000  # matches counted in one file

_FILTER = re.compile(r"(?<!\S)(-?)(path|lang|language|repo|case):(\S+)")


@dataclass(frozen=True)
class Query:
    text: str
    regex: bool = False
    paths: tuple[str, ...] = ()
    langs: tuple[str, ...] = ()
    repos: tuple[str, ...] = ()
    case: bool = False

    def pattern(self) -> rx.Pattern[bytes]:
        """The pattern, over a file's UTF-8 bytes (case folding and ``\\w`` cover ASCII).

        Compiled by the ``regex`` package, not ``re``: the same syntax (``parse`` checks it
        with ``re``'s parser), but a match can be given a timeout and lets go of the
        interpreter lock while it runs, so a pattern that backtracks past what
        ``grams.check_pattern`` foresees costs its search ``search_seconds`` and never stalls
        the other requests."""
        flags = rx.MULTILINE | (0 if self.case else rx.IGNORECASE)
        data = self.text.encode("utf-8", "surrogateescape")
        return rx.compile(data if self.regex else rx.escape(data), flags)

    def single_line(self) -> bool:
        if self.regex:
            return grams.single_line(self.text)
        return "\n" not in self.text

    def plan(self, shortest: int = 3) -> Plan | None:
        """The trigrams a matching file holds, for the index; with ``shortest`` 2, the
        sieve: every literal run of two bytes or more, which a file's bytes are checked for
        before the pattern runs on them."""
        if self.regex:
            return grams.regex_plan(self.text, not self.case, shortest)
        return grams.text_plan(self.text, not self.case, shortest)


def parse(q: str, mode: str = "") -> Query:
    """The query ``q`` says; ``BadRequest`` with the reason when it cannot be run."""
    if "\0" in q:
        raise BadRequest("a query cannot contain a NUL character")
    if len(q) > MAX_QUERY:
        raise BadRequest(f"a query is at most {MAX_QUERY} characters")
    filters: dict[str, list[str]] = {"path": [], "lang": [], "repo": [], "case": []}
    for negated, key, value in _FILTER.findall(q):
        if negated:
            raise BadRequest(f"-{key}: (excluding) is not supported")
        filters["lang" if key == "language" else key].append(value)
    text = _FILTER.sub("", q).strip()
    regex = mode == "regex"
    if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
        text, regex = text[1:-1], True
    if not text:
        raise BadRequest("type some text to search for (filters alone match every file)")
    if len(text) > MAX_PATTERN:
        raise BadRequest(f"the text to search for is at most {MAX_PATTERN} characters")
    query = Query(
        text,
        regex,
        tuple(filters["path"]),
        tuple(v.lower() for v in filters["lang"]),
        tuple(filters["repo"]),
        any(v.lower() in ("yes", "true", "sensitive") for v in filters["case"]),
    )
    if regex:
        try:
            grams.check_pattern(text)
            query.pattern()
        except (re.error, rx.error) as exc:
            raise BadRequest(f"not a valid regular expression: {exc}") from exc
        except grams.PatternRefused as exc:
            raise BadRequest(f"regular expression refused: {exc}") from exc
        except RecursionError as exc:
            raise BadRequest("regular expression refused: nested too deeply") from exc
    return query


# -- languages ---------------------------------------------------------------------------------


@functools.cache
def _languages() -> tuple[dict[str, str], dict[str, str], dict[str, set[str]]]:
    """Pygments' languages: by file extension, by whole file name, and each one's names."""
    from pygments.lexers import get_all_lexers

    by_ext: dict[str, str] = {}
    by_name: dict[str, str] = {}
    names: dict[str, set[str]] = {}
    for name, aliases, patterns, _ in get_all_lexers(plugins=False):
        names[name] = {name.lower(), *(a.lower() for a in aliases)}
        for pattern in patterns:
            if pattern.startswith("*.") and not any(c in pattern[2:] for c in "*?["):
                by_ext.setdefault(pattern[1:].lower(), name)
            elif not any(c in pattern for c in "*?["):
                by_name.setdefault(pattern, name)
    for ext, name in _PREFERRED.items():
        if name in names:
            by_ext[ext] = name
    return by_ext, by_name, names


# Extensions that several lexers claim, given to the language most files with them are in.
_PREFERRED = {".h": "C", ".m": "Objective-C", ".pl": "Perl", ".sh": "Bash", ".md": "Markdown"}


@functools.lru_cache(maxsize=4096)
def language(name: bytes) -> str:
    """The language of a file, by its name ("" when unknown)."""
    by_ext, by_name, _ = _languages()
    base = name.rsplit(b"/", 1)[-1].decode("utf-8", "replace")
    found = by_name.get(base)
    if found:
        return found
    dot = base.rfind(".")
    return by_ext.get(base[dot:].lower(), "") if dot > 0 else ""


def language_matches(path: bytes, wanted: Sequence[str]) -> bool:
    found = language(path)
    if not found:
        return False
    names = _languages()[2].get(found, set())
    return any(w in names for w in wanted)


def path_matches(path: bytes, wanted: Sequence[str]) -> bool:
    text = path.decode("utf-8", "replace")
    for want in wanted:
        if any(c in want for c in "*?["):
            glob = want.lstrip("/")
            if not (fnmatch.fnmatch(text, glob) or fnmatch.fnmatch(text.rsplit("/", 1)[-1], glob)):
                return False
        elif want.lower() not in text.lower():
            return False
    return True


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    number: int
    parts: tuple[tuple[str, bool], ...]  # (text, whether it is a match)
    matched: bool


@dataclass
class FileResult:
    repo: Repo
    commit: bytes
    path: bytes
    lines: list[list[Line]]  # snippets: runs of consecutive lines
    matches: int
    more_lines: bool = False


@dataclass
class Results:
    query: Query
    files: list[FileResult] = field(default_factory=list)
    more: bool = False  # a next page exists
    partial: bool = False  # the time budget ran out before the page was complete
    candidates: int = 0  # files the index named
    read: int = 0  # files read and matched
    searched: list[Indexed] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """A repository's indexed tree to search, with the handle that reads its files."""

    repo: Repo
    indexed: Indexed
    handle: pygit2.Repository


def candidates(index: CodeIndex, plan: Plan | None) -> set[int] | None:
    """The blob numbers that may match ``plan``; None for every blob."""
    if plan is None:
        return None
    wanted: set[int] = set()
    _collect(plan, wanted)
    postings = index.postings(wanted)
    return _evaluate(plan, postings)


def _collect(plan: Plan, into: set[int]) -> None:
    if isinstance(plan, Grams):
        into.update(plan.grams)
    else:
        for part in plan.parts:
            _collect(part, into)


def _evaluate(plan: Plan, postings: dict[int, set[int]]) -> set[int]:
    if isinstance(plan, Grams):
        lists = sorted((postings.get(g, set()) for g in plan.grams), key=len)
        return set.intersection(*lists) if lists else set()
    results = [_evaluate(part, postings) for part in plan.parts]
    if isinstance(plan, AllOf):
        results.sort(key=len)
        return set.intersection(*results)
    assert isinstance(plan, AnyOf)
    return set().union(*results)


def search(
    index: CodeIndex,
    targets: Sequence[Target],
    query: Query,
    page: int = 1,
    budget: float = 2.0,
) -> Results:
    """Page ``page`` of the files of ``targets`` that match ``query``.

    Each candidate is first checked for the literal runs the query needs in its lower-cased
    bytes (kept in memory by blob id, ``CodeIndex.lowered``); only where they are is the
    pattern run on its bytes."""
    if not 1 <= page <= MAX_PAGE:
        raise BadRequest(f"page must be between 1 and {MAX_PAGE}: narrow the query instead")
    results = Results(query)
    pattern = query.pattern()
    allowed = candidates(index, query.plan())
    plan = query.plan(shortest=2)
    # a pattern confined to a line is run only on the lines that hold its anchor
    lines_of = grams.anchor(plan) if query.single_line() else None
    skip = (page - 1) * FILES_PER_PAGE
    deadline = time.monotonic() + budget
    for target, path, oid in _files(index, targets, query, allowed, results):
        if time.monotonic() > deadline:
            results.partial = True
            break
        results.read += 1
        raw: bytes | None = None
        lowered = index.lowered.get(oid)
        if lowered is None:
            raw = _read(target, oid)
            if raw is None:
                continue
            lowered = raw.lower()
            index.lowered.put(oid, lowered)
        if plan is not None and not grams.holds(plan, lowered):
            continue
        raw = raw if raw is not None else _read(target, oid)
        if raw is None:
            continue
        try:
            if lines_of is not None:
                found = _search_lines(pattern, raw, lowered, lines_of, deadline)
            else:
                found = pattern.search(raw, timeout=_left(deadline), concurrent=True)
            if found is None:
                continue
            if skip:
                skip -= 1
                continue
            if len(results.files) == FILES_PER_PAGE:
                results.more = True
                break
            results.files.append(_result(target, path, raw, pattern, found, deadline))
        except TimeoutError:  # a pattern that backtracks: what was found so far
            results.partial = True
            break
    return results


def _left(deadline: float) -> float:
    """Seconds a match may still take (a little even when none are left, so that the
    search it belongs to finishes a file it began with its first matches)."""
    return max(deadline - time.monotonic(), 0.05)


def _search_lines(
    pattern: rx.Pattern[bytes], raw: bytes, lowered: bytes, anchor: bytes, deadline: float
) -> rx.Match[bytes] | None:
    """The first match of ``pattern`` in ``raw``, run only on the lines where ``lowered``
    (``raw`` lower-cased: the same offsets) holds ``anchor``, which every match holds and
    never crosses a line: the earliest such line's match is the file's first."""
    at = 0
    while True:
        hit = lowered.find(anchor, at)
        if hit < 0:
            return None
        begins = raw.rfind(b"\n", 0, hit) + 1
        ends = raw.find(b"\n", hit)
        ends = len(raw) if ends < 0 else ends
        found = pattern.search(raw, begins, ends, timeout=_left(deadline), concurrent=True)
        if found is not None:
            return found
        at = ends + 1


def _read(target: Target, oid: bytes) -> bytes | None:
    blob = target.handle.get(pygit2.Oid(raw=oid))
    return bytes(memoryview(blob)) if isinstance(blob, pygit2.Blob) else None


def _files(
    index: CodeIndex,
    targets: Sequence[Target],
    query: Query,
    allowed: set[int] | None,
    results: Results,
) -> Iterator[tuple[Target, bytes, bytes]]:
    for target in targets:
        files = index.stored_tree(target.indexed.tree)
        if files is None:
            continue
        results.searched.append(target.indexed)
        for path, oid, number in zip(files.paths, files.oids, files.numbers, strict=True):
            if allowed is not None and number not in allowed:
                continue
            if query.paths and not path_matches(path, query.paths):
                continue
            if query.langs and not language_matches(path, query.langs):
                continue
            results.candidates += 1
            yield target, path, oid


def _result(
    target: Target,
    path: bytes,
    text: bytes,
    pattern: rx.Pattern[bytes],
    first: rx.Match[bytes],
    deadline: float,
) -> FileResult:
    """A file's matching lines (the first ``LINES_PER_FILE``), each with ``CONTEXT`` lines
    around it, the matches marked; matches are counted (by ``findall``, in C) up to
    ``MAX_COUNTED``. Line numbers are counted from one match to the next, never by
    splitting the file into lines."""
    left = _left(deadline)
    every = pattern.findall(text, first.start(), timeout=left, concurrent=True)
    count = min(len(every), MAX_COUNTED)
    spans: dict[int, list[tuple[int, int]]] = {}
    starts: dict[int, int] = {}  # where each marked line begins
    line_no, line_at = text.count(b"\n", 0, first.start()), first.start()
    shown = 0
    for match in pattern.finditer(text, first.start(), timeout=left, concurrent=True):
        start, end = match.span()
        line_no, line_at = line_no + text.count(b"\n", line_at, start), start
        if line_no not in spans and len(spans) >= LINES_PER_FILE:
            break
        shown += 1
        number, begins = line_no, text.rfind(b"\n", 0, start) + 1
        while True:  # a match over several lines marks each
            if number not in spans and len(spans) >= LINES_PER_FILE:
                break
            starts[number] = begins
            ends = text.find(b"\n", begins)
            ends = len(text) if ends < 0 else ends
            marked = spans.setdefault(number, [])
            if end > start:
                marked.append((max(start, begins) - begins, min(end, ends) - begins))
            if end <= ends + 1 or ends == len(text):
                break
            number, begins = number + 1, ends + 1
    wanted = sorted({n for s in spans for n in range(max(0, s - CONTEXT), s + CONTEXT + 1)})
    found = _lines(text, wanted, starts)
    snippets: list[list[Line]] = []
    for number in wanted:
        if number not in found:
            continue
        line = _line(number, found[number], spans.get(number))
        if snippets and snippets[-1][-1].number == number:  # numbers count from 1
            snippets[-1].append(line)
        else:
            snippets.append([line])
    return FileResult(
        target.repo,
        target.indexed.commit,
        path,
        snippets,
        count,
        more_lines=count > shown,
    )


def _lines(text: bytes, wanted: list[int], starts: dict[int, int]) -> dict[int, bytes]:
    """The lines numbered ``wanted`` (from 0) of ``text``, each found from the nearest line
    whose start is known (``starts``: a few lines away at most)."""
    found: dict[int, bytes] = {}
    for number in wanted:
        begins: int | None = starts.get(number)
        after = [k for k in starts if k > number]
        if begins is None and after:
            known = min(after)
            begins = starts[known]
            for _ in range(known - number):
                begins = text.rfind(b"\n", 0, begins - 1) + 1
        elif begins is None:
            known = max(k for k in starts if k < number)
            begins = starts[known]
            for _ in range(number - known):
                ends = text.find(b"\n", begins)
                if ends < 0:
                    begins = None
                    break
                begins = ends + 1
        if begins is None or (begins >= len(text) and number > 0):
            continue  # past the last line
        ends = text.find(b"\n", begins)
        found[number] = text[begins : len(text) if ends < 0 else ends]
    return found


def _line(index: int, data: bytes, spans: list[tuple[int, int]] | None) -> Line:
    """Line ``index`` (from 0) with its matched spans marked, cut to ``MAX_LINE`` bytes."""
    data = data.rstrip(b"\r")
    parts: list[tuple[str, bool]] = []

    def text(piece: bytes) -> str:
        return piece.decode("utf-8", "replace")

    at = 0
    for start, end in sorted(spans or ()):
        start, end = max(start, at), min(end, MAX_LINE)
        if start >= MAX_LINE or start >= end:
            continue
        if start > at:
            parts.append((text(data[at:start]), False))
        parts.append((text(data[start:end]), True))
        at = end
    if at < min(len(data), MAX_LINE):
        parts.append((text(data[at:MAX_LINE]), False))
    if len(data) > MAX_LINE:
        parts.append(("…", False))
    return Line(index + 1, tuple(parts), spans is not None)
