"""``python -m bench.search``: code search over a git.git-sized tree.

The repository is a generated size (``--repo large`` by default, as ``python -m bench``
builds it) or any path; unless ``--files 0``, one commit on its default branch widens its
tree to git.git's size (``--files`` more files, ``--megabytes`` of text in all, generated
from a fixed seed, one of them holding a rare marker: 4,500 files and ~40 MB with
``large``). Then, in this process, the code index is built from nothing (timed, and its size
in the database measured), and built again after a push that changes three files (timed,
with the blobs it read). Then ``floorless serve`` answers literal and regular-expression
searches of the repository and of the whole site, and each query's warm p50 is measured over
HTTP with the processes the server reports starting for it (``Server-Timing``); beside each,
what the search read (candidate files from the trigram index, files read, whether the time
budget cut it short).
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote

import pygit2

from bench import measure
from bench.harness import (
    OWNER,
    machine,
    prepare_store,
    start_floorless,
    target_repository,
    wait_floorless_indexed,
    wait_listening,
)
from bench.repos import _ADJS, _NOUNS, _VERBS

MARKER = "floorless_rare_marker_7431"
QUERIES = [
    ("literal, one file", MARKER, ""),
    ("literal, common word", "return", ""),
    ("literal, common trigrams, no match", "return return return", ""),
    ("literal, two words", "static int", ""),
    ("literal, path filter", "return path:src/", ""),
    ("regex, rare", "rare_marker_[0-9]+", "regex"),
    ("regex, identifier", r"\w+_parse_9\d\d\b", "regex"),
    ("regex, alternatives", r"(render|parse)_[a-z]+_4242", "regex"),
    ("regex, no trigram", r"\bq[a-z]*zx\b", "regex"),
]


@dataclass
class Figure:
    query: str
    text: str
    mode: str
    scope: str
    status: int
    p50_ms: float
    p95_ms: float
    server_spawns: float | None
    spawns_per_request: float
    files: int
    candidates: int
    read: int
    partial: bool


@dataclass
class SearchBench:
    repo: str
    options: dict[str, object]
    machine: dict[str, str]
    tree_files: int
    tree_bytes: int
    index_seconds: float
    index_sizes: dict[str, int]
    database_bytes: int
    push_index_seconds: float
    push_blobs_read: int
    figures: list[Figure]


def _line(rng: random.Random, ext: str) -> str:
    noun, verb, adj = rng.choice(_NOUNS), rng.choice(_VERBS), rng.choice(_ADJS)
    number = rng.randint(0, 9999)
    roll = rng.random()
    if ext in (".c", ".h"):
        if roll < 0.15:
            return f"static int {noun}_{verb}_{number}(struct {noun} *{adj})"
        if roll < 0.45:
            return f"\treturn {verb}_{noun}({adj}, {number});"
        if roll < 0.6:
            return f"\t/* {verb} the {adj} {noun} before it is {verb}ed */"
        return f"\tif ({adj}->{noun} && !{verb}_{noun}_{number}({adj}))"
    if roll < 0.3:
        return f"def {verb}_{noun}_{number}({adj}):"
    if roll < 0.6:
        return f"    return {adj}.{noun} + {number}"
    return " ".join(rng.choice(_NOUNS + _VERBS + _ADJS) for _ in range(rng.randint(4, 12)))


def widen(git_dir: Path, branch: str, files: int, megabytes: float) -> tuple[str, int]:
    """One commit on ``branch`` adding ``files`` generated files (``megabytes`` in all) under
    ``wide/``; its id and the tree's total size."""
    repo = pygit2.Repository(str(git_dir))
    tip = repo.revparse_single(f"refs/heads/{branch}").peel(pygit2.Commit)
    rng = random.Random("floorless search bench")
    per_file = int(megabytes * 1024 * 1024 / max(1, files))
    exts = (".c", ".h", ".py", ".txt", ".sh")
    directories: dict[str, pygit2.TreeBuilder] = {}
    for n in range(files):
        ext = exts[n % len(exts)]
        lines: list[str] = []
        size = 0
        while size < per_file:
            line = _line(rng, ext)
            lines.append(line)
            size += len(line) + 1
        if n == files // 2:
            lines.insert(len(lines) // 2, f"/* {MARKER}: the one file that says this */")
        folder = f"d{n % 45:02d}"
        builder = directories.setdefault(folder, repo.TreeBuilder())
        blob = repo.create_blob(("\n".join(lines) + "\n").encode())
        builder.insert(f"f{n:05d}{ext}", blob, pygit2.GIT_FILEMODE_BLOB)
    wide = repo.TreeBuilder()
    for folder, builder in directories.items():
        wide.insert(folder, builder.write(), pygit2.GIT_FILEMODE_TREE)
    root = repo.TreeBuilder(tip.tree)
    root.insert("wide", wide.write(), pygit2.GIT_FILEMODE_TREE)
    signature = pygit2.Signature("Bench", "bench@example.org", int(tip.commit_time) + 60, 0)
    oid = repo.create_commit(
        f"refs/heads/{branch}",
        signature,
        signature,
        "A git.git-sized tree",
        root.write(),
        [tip.id],
    )
    return str(oid), tree_bytes(repo, repo[oid].peel(pygit2.Commit).tree)[1]


def tree_bytes(repo: pygit2.Repository, tree: pygit2.Tree) -> tuple[int, int]:
    count = size = 0
    for entry in tree:
        if entry.filemode == pygit2.GIT_FILEMODE_TREE:
            more = tree_bytes(repo, repo[entry.id].peel(pygit2.Tree))
            count, size = count + more[0], size + more[1]
        elif entry.filemode in (pygit2.GIT_FILEMODE_BLOB, pygit2.GIT_FILEMODE_BLOB_EXECUTABLE):
            count += 1
            size += repo.odb.read_header(entry.id)[1]
    return count, size


def change_three(git_dir: Path, branch: str) -> str:
    """A push's worth of change: three files of ``wide/`` edited."""
    repo = pygit2.Repository(str(git_dir))
    tip = repo.revparse_single(f"refs/heads/{branch}").peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(tip.tree)
    for n, entry in enumerate(e for e in index if e.path.startswith("wide/d00/")):
        if n == 3:
            break
        data = repo[entry.id].peel(pygit2.Blob).data + f"added line {n}\n".encode()
        index.add(pygit2.IndexEntry(entry.path, repo.create_blob(data), entry.mode))
    signature = pygit2.Signature("Bench", "bench@example.org", int(tip.commit_time) + 60, 0)
    oid = repo.create_commit(
        f"refs/heads/{branch}",
        signature,
        signature,
        "Three files",
        index.write_tree(repo),
        [tip.id],
    )
    return str(oid)


def run(options: argparse.Namespace, log=print) -> SearchBench:  # type: ignore[no-untyped-def]
    from floorless.core.config import Settings
    from floorless.forge import Forge
    from floorless.search import query as code

    target = target_repository(options.repo, options.cache_dir)
    work = Path(tempfile.mkdtemp(prefix="bench-search-"))
    repos, _home = prepare_store(work / "store", target.path, target.name)
    git_dir = repos / OWNER / f"{target.name}.git"
    if options.files:
        head, _ = widen(git_dir, target.branch, options.files, options.megabytes)
    else:
        head = str(pygit2.Repository(str(git_dir)).revparse_single(target.branch).id)
    handle = pygit2.Repository(str(git_dir))
    files, size = tree_bytes(handle, handle.revparse_single(head).peel(pygit2.Commit).tree)
    log(f"{target.name}: a tree of {files} files, {size / 1e6:.1f} MB")
    data = work / "data"
    forge = Forge(Settings.load(environ={}, data=data, repos=repos))
    forge.start(background=False)
    outcomes: dict[tuple[str, str, str], code.Results] = {}
    try:
        repo = forge.registry.get(OWNER, target.name)
        began = time.monotonic()
        forge.code.index(repo)
        index_seconds = time.monotonic() - began
        sizes = forge.code.size()
        database = sum(p.stat().st_size for p in data.glob("floorless.sqlite3*"))
        log(f"indexed in {index_seconds:.1f} s: {sizes}, database {database / 1e6:.1f} MB")
        change_three(git_dir, target.branch)
        forge.live.state(repo).refs_moved()
        read = forge.code.blobs_read
        began = time.monotonic()
        forge.code.index(repo)
        push_seconds = time.monotonic() - began
        push_read = forge.code.blobs_read - read
        log(f"after a push of three files: indexed in {push_seconds:.2f} s, {push_read} read")
        indexed = forge.code.indexed(repo.id)
        assert indexed is not None
        target_ = code.Target(repo, indexed, forge.live.open(repo))
        for label, text, mode in QUERIES:
            parsed = code.parse(text, mode)
            outcomes[(label, "repository", mode)] = code.search(
                forge.code, [target_], parsed, 1, forge.settings.search_seconds
            )
    finally:
        forge.stop()
    head = str(pygit2.Repository(str(git_dir)).revparse_single(target.branch).id)
    served, proc = start_floorless(repos, data, target, head)
    figures: list[Figure] = []
    try:
        wait_listening(int(served.base_url.rsplit(":", 1)[1]), proc, time.monotonic() + 60)
        wait_floorless_indexed(served, options.index_deadline)
        for label, text, mode in QUERIES:
            for scope, base in (
                ("repository", f"{served.base_url}/{OWNER}/{target.name}/search"),
                ("site", f"{served.base_url}/-/search"),
            ):
                url = f"{base}?q={quote(text)}" + (f"&mode={mode}" if mode else "")
                (result,) = measure.measure_interleaved(
                    label,
                    [url],
                    options.requests,
                    options.warmup,
                    deadline_seconds=60,
                    spawns_each=True,
                )
                outcome = outcomes[(label, "repository", mode)]
                figure = Figure(
                    label,
                    text,
                    mode or "literal",
                    scope,
                    result.status,
                    result.p50_ms,
                    result.p95_ms,
                    result.server_spawns_per_request,
                    result.spawns_per_request,
                    len(outcome.files),
                    outcome.candidates,
                    outcome.read,
                    outcome.partial,
                )
                figures.append(figure)
                log(
                    f"{label:36} {scope:10} {figure.status} p50 {figure.p50_ms:7.2f} ms"
                    f" p95 {figure.p95_ms:7.2f} ms processes {figure.server_spawns}"
                    f" candidates {figure.candidates} read {figure.read}"
                    f"{' PARTIAL' if figure.partial else ''}"
                )
    finally:
        served.stop()
    return SearchBench(
        target.name,
        vars(options) | {"cache_dir": str(options.cache_dir)},
        machine(),
        files,
        size,
        index_seconds,
        sizes,
        database,
        push_seconds,
        push_read,
        figures,
    )


def markdown(result: SearchBench, command: str) -> str:
    lines = [
        "# Code search",
        "",
        f"`{command}` on {result.machine.get('cpu', 'this machine')}: the `{result.repo}`"
        f" repository's default branch, a tree of {result.tree_files} files and"
        f" {result.tree_bytes / 1e6:.1f} MB. The code index was built from nothing in"
        f" {result.index_seconds:.1f} s (one thread); in the database it takes"
        f" {sum(v for k, v in result.index_sizes.items() if k.endswith('_bytes')) / 1e6:.1f} MB"
        f" of values ({result.index_sizes.get('search_postings_rows', 0)} posting rows), the"
        f" SQLite file {result.database_bytes / 1e6:.1f} MB in all. After a push changing three"
        f" files it was brought up to date in {result.push_index_seconds:.2f} s, reading"
        f" {result.push_blobs_read} blobs.",
        "",
        "| query | text | scope | status | p50 ms | p95 ms | processes (server) | files shown"
        " | candidates | files read | partial |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in result.figures:
        lines.append(
            f"| {f.query} | `{f.text}` | {f.scope} | {f.status} | {f.p50_ms:.2f}"
            f" | {f.p95_ms:.2f} | {'' if f.server_spawns is None else f'{f.server_spawns:.2f}'}"
            f" | {f.files} | {f.candidates} | {f.read} | {'yes' if f.partial else ''} |"
        )
    lines += [
        "",
        "Candidates are the files the trigram index names for the query; files read are those"
        " matched before the page of 20 files was full (and one more found), or the time"
        " budget (`search_seconds`) ran out. A query whose text has no run of three"
        " characters the index can use reads every file, within the budget.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--repo", default="large", help="small, medium, large, or a path")
    # with the large repository's 2,000 files: 4,500 files and ~40 MB, git.git's tree
    parser.add_argument("--files", type=int, default=2500, help="files added (0: none)")
    parser.add_argument("--megabytes", type=float, default=39.0, help="of the files added")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--index-deadline", type=float, default=1800.0)
    parser.add_argument("--cache-dir", type=Path, default=Path(".bench-cache"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--docs", type=Path, default=None, help="write the Markdown here")
    options = parser.parse_args(argv)
    result = run(options)
    command = "python -m bench.search " + shlex.join(argv if argv is not None else sys.argv[1:])
    if options.json is not None:
        options.json.write_text(json.dumps(asdict(result), indent=2, default=str))
    if options.docs is not None:
        options.docs.write_text(markdown(result, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
