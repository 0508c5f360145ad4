"""Reading commits, trees and blobs in-process through libgit2."""

from __future__ import annotations

import codecs
import functools
import heapq
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pygit2

from floorless.core import dates, timing
from floorless.core.caches import Cache
from floorless.core.errors import NotFound, RepositoryBroken, UnknownRevision
from floorless.git.lenient import AnyCommit, LenientSignature, read_commit
from floorless.git.oid import is_abbreviation

MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_SUBMODULE = 0o160000
MODE_EXEC = 0o100755


# Python codecs that are no character set: they transform text (idna, punycode), read
# backslash escapes, or refuse every input. A commit naming one is read as UTF-8.
_NOT_CHARSETS = frozenset({"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape"})


@functools.lru_cache(maxsize=256)
def charset(name: str | None) -> str:
    """The Python codec for a commit's ``encoding`` header: UTF-8 (git's default) when there
    is none, or when it names nothing Python can decode a message with."""
    if not name:
        return "utf-8"
    try:
        found = codecs.lookup(name)
    except (LookupError, ValueError):  # unknown, or a name with a NUL in it
        return "utf-8"
    if not getattr(found, "_is_text_encoding", True) or found.name in _NOT_CHARSETS:
        return "utf-8"  # rot13, base64, zlib ...: bytes-to-bytes transforms
    return found.name


def decode_text(raw: bytes, encoding: str | None) -> str:
    """A commit's message, name or e-mail as text, in the commit's ``encoding``: what git
    shows, with replacement characters for bytes that do not decode. Never raises."""
    codec = charset(encoding)
    try:
        return raw.decode(codec, "replace")
    except (UnicodeError, LookupError):  # a codec that refuses "replace" or every input
        return raw.decode("utf-8", "replace")


def message_encoding(commit: AnyCommit) -> str | None:
    """The commit's ``encoding`` header (pygit2 raises on one that is not ASCII)."""
    try:
        return commit.message_encoding
    except (UnicodeError, ValueError):
        return None


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    when: datetime
    clamped: bool = False  # the date (or its offset) git holds is out of range: ``when`` is near

    @classmethod
    def of(cls, sig: pygit2.Signature | LenientSignature, encoding: str | None = None) -> Person:
        stamp = dates.moment(sig.time, sig.offset)
        return cls(
            name=decode_text(sig.raw_name, encoding),
            email=decode_text(sig.raw_email, encoding),
            when=stamp.when,
            clamped=stamp.clamped,
        )


@dataclass(frozen=True)
class CommitInfo:
    id: str
    parents: tuple[str, ...]
    author: Person
    committer: Person
    message: str
    tree: str

    @property
    def summary(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def body(self) -> str:
        parts = self.message.split("\n", 1)
        return parts[1].strip("\n") if len(parts) > 1 else ""

    @property
    def short(self) -> str:
        return self.id[:10]

    @property
    def time(self) -> datetime:
        return self.committer.when


@dataclass(frozen=True)
class Entry:
    """One entry of a tree, with its kind spelled out."""

    name: bytes
    path: bytes
    mode: int
    id: str

    @property
    def kind(self) -> str:
        if self.mode == MODE_TREE:
            return "tree"
        if self.mode == MODE_SUBMODULE:
            return "submodule"
        if self.mode == MODE_LINK:
            return "link"
        return "blob"


def commit_info(commit: AnyCommit) -> CommitInfo:
    """A commit as pages show it; any date, offset or ``encoding`` header renders."""
    encoding = message_encoding(commit)
    return CommitInfo(
        id=str(commit.id),
        parents=tuple(str(p) for p in commit.parent_ids),
        author=Person.of(commit.author, encoding),
        committer=Person.of(commit.committer, encoding),
        message=decode_text(commit.raw_message, encoding),
        tree=str(commit.tree_id),
    )


def to_oid(raw: bytes) -> pygit2.Oid:
    """A binary object id as libgit2 takes it. An id of the other hash's length (a SHA-256
    id where this libgit2 knows only SHA-1) names no object here: UnknownRevision."""
    try:
        return pygit2.Oid(raw=raw)
    except ValueError as exc:
        raise UnknownRevision("no such object") from exc


def get_commit(repo: pygit2.Repository, commit_id: bytes) -> AnyCommit:
    """The commit ``commit_id`` names: libgit2's, or a ``LenientCommit`` read from its bytes
    when libgit2 will not parse it (a date past 64 bits, no author)."""
    oid = to_oid(commit_id)
    with timing.phase("git"):
        try:
            obj = read_commit(repo, oid)
        except KeyError as exc:
            raise UnknownRevision("no such commit") from exc
        except (pygit2.GitError, ValueError) as exc:
            raise RepositoryBroken(f"cannot read commit: {exc}") from exc
    if obj is None:
        raise UnknownRevision("no such commit")
    return obj


def commit_links(
    repo: pygit2.Repository,
) -> tuple[Callable[[bytes], list[bytes]], Callable[[bytes], int]]:
    """A commit's parents and its committer time, for a history walk: each commit is read
    once (a walk asks a commit's time when it queues it, its parents when it takes it)."""
    read: dict[bytes, tuple[list[bytes], int]] = {}

    def links(commit_id: bytes) -> tuple[list[bytes], int]:
        found = read.get(commit_id)
        if found is None:
            commit = get_commit(repo, commit_id)
            found = read[commit_id] = ([p.raw for p in commit.parent_ids], commit.commit_time)
        return found

    return (lambda commit_id: links(commit_id)[0]), (lambda commit_id: links(commit_id)[1])


def expand_commit_id(repo: pygit2.Repository, prefix: bytes) -> bytes | None:
    """Full hex id of the commit an abbreviated hex id names, or None."""
    if not is_abbreviation(prefix):
        return None
    with timing.phase("git"):
        try:
            obj = repo.get(prefix.decode())
        except (pygit2.GitError, ValueError, KeyError):
            return None
    if isinstance(obj, pygit2.Commit):
        return str(obj.id).encode()
    return None


def entry_at(tree: pygit2.Tree, path: str) -> pygit2.Object:
    """``tree[path]`` (KeyError when there is nothing there), the path interned.

    pygit2's tree lookup by name keeps a reference to the name it is given and never lets it
    go (1.17 to 1.21, at least): given a new string each time, as a name decoded from bytes
    is, every lookup left its string behind for good (2 million lookups: 127 MB; git.git's
    first index, 18 MB). Interned, the references pile up on one string per name instead,
    and memory grows only with the names looked up, which a repository bounds."""
    return tree[sys.intern(path)]


def child(tree: pygit2.Tree, name: bytes) -> pygit2.Object | None:
    """The entry ``name`` of ``tree``, matched on its exact bytes."""
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        try:
            found = entry_at(tree, text)
        except KeyError:
            found = None
        if found is not None and found.raw_name == name:
            return found
    for entry in tree:
        if entry.raw_name == name:
            return entry
    return None


def lookup(repo: pygit2.Repository, commit: AnyCommit, path: bytes) -> tuple[pygit2.Object, int]:
    """The object at ``path`` in ``commit`` and its file mode; NotFound when there is none."""
    with timing.phase("git"):
        tree = commit.tree
        if not path:
            return tree, MODE_TREE
        parts = path.split(b"/")
        node: pygit2.Object = tree
        mode = MODE_TREE
        for i, part in enumerate(parts):
            if not isinstance(node, pygit2.Tree):
                raise NotFound("no such path")
            entry = child(node, part)
            if entry is None:
                raise NotFound("no such path")
            mode = entry.filemode
            if mode == MODE_SUBMODULE:
                if i != len(parts) - 1:
                    raise NotFound("no such path (inside a submodule)")
                return entry, mode
            node = entry
        return node, mode


def _entry(entry: pygit2.Object, base: bytes) -> Entry:
    name = entry.raw_name or b""
    return Entry(
        name=name, path=base + b"/" + name if base else name, mode=entry.filemode, id=str(entry.id)
    )


def list_tree(tree: pygit2.Tree, base: bytes) -> list[Entry]:
    """Entries of a tree, directories first, then by name (as forges show them)."""
    with timing.phase("git"):
        entries = [_entry(e, base) for e in tree]
    entries.sort(key=lambda e: (e.mode != MODE_TREE, e.name.lower()))
    return entries


def blob_bytes(blob: pygit2.Blob, limit: int | None = None) -> bytes:
    """The blob's content (at most ``limit`` bytes), read once through a memoryview."""
    with timing.phase("git"):
        view = memoryview(blob)
        return bytes(view if limit is None else view[:limit])


# An object id names its content, so its type and size are the same in every repository and
# never change: kept by id, a warm page asks the storage nothing (reading a loose object's
# header opens its file each time). About 200 bytes an entry with the cache's own links.
# One for the process, as libgit2's own object cache is (``GitEnvironment`` sizes that one):
# the 19 callers reach it with nothing but a handle, deep in diffs and listings, and an
# answer is the same for every repository and forge the process serves. The metrics list it
# as ``object-headers``.
HEADERS: Cache[bytes, tuple[int, int]] = Cache.lru(12 << 20, getsizeof=lambda _: 200)


def object_header(repo: pygit2.Repository, oid: pygit2.Oid) -> tuple[int, int] | None:
    """An object's type and size from its header, without reading it: libgit2 inflates a
    whole blob, with the interpreter held, the first time its content, size or kind is asked.
    None when the object cannot be read (a submodule's commit, a missing object)."""
    known = HEADERS.get(oid.raw)
    if known is not None:
        return known
    with timing.phase("git"):
        try:
            kind, size = repo.odb.read_header(oid)
        except (KeyError, ValueError, pygit2.GitError):
            return None
    header = int(kind), int(size)
    HEADERS.put(oid.raw, header)
    return header


def tag_time(repo: pygit2.Repository, tag_id: bytes) -> int | None:
    """When the annotated tag object ``tag_id`` was made (its tagger's date, epoch seconds);
    None for a tag without a tagger or an object that is no tag."""
    with timing.phase("git"):
        try:
            obj = repo.get(to_oid(tag_id))
        except (pygit2.GitError, ValueError):
            return None
    if not isinstance(obj, pygit2.Tag) or obj.tagger is None:
        return None
    return int(obj.tagger.time)


def ref_dates(
    repo: pygit2.Repository,
) -> tuple[Callable[[bytes], int], Callable[[bytes], int | None]]:
    """A commit's time and an annotated tag's (``tag_time``): what ``RefSnapshot.newest_first``
    dates refs by, the same for every page and API that lists them."""
    return (lambda oid: get_commit(repo, oid).commit_time), functools.partial(tag_time, repo)


def object_size(repo: pygit2.Repository, oid: pygit2.Oid) -> int | None:
    header = object_header(repo, oid)
    return None if header is None else header[1]


def _order(entry: pygit2.Object) -> tuple[bool, bytes, bytes]:
    name = entry.raw_name or b""
    return (entry.filemode != MODE_TREE, name.lower(), name)


def list_tree_page(
    tree: pygit2.Tree, base: bytes, after: bytes | None, limit: int
) -> tuple[list[Entry], bool]:
    """At most ``limit`` entries of a tree in ``list_tree``'s order, from the one after the
    entry named ``after`` (or the first); and whether more follow. Only the entries shown are
    made into ``Entry``s, so a directory of 100,000 files costs one pass over its names."""
    with timing.phase("git"):
        start = None
        if after is not None:
            found = child(tree, after)
            start = _order(found) if found is not None else (True, after.lower(), after)
        keyed = ((_order(e), e) for e in tree)  # names are unique: entries never compared
        chosen = heapq.nsmallest(limit + 1, (k for k in keyed if start is None or k[0] > start))
        entries = [_entry(e, base) for _, e in chosen[:limit]]
    return entries, len(chosen) > limit


def now() -> datetime:
    return datetime.now(UTC)
