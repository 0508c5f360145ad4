"""The spawn-per-page forge of DESIGN.md, reproduced small: what Forgejo/Gitea do per page.

Every repository page opens the repository as Gitea does, with a ``git rev-parse`` (its
``EnsureValidGitRepository``) before each of the two object readers it starts, a
``git cat-file --batch-check`` and a ``git cat-file --batch``; both live for the request and
die with it. The page then runs its own short-lived children. Children run in the
repository directory (git discovers it, no ``--git-dir``) with ``HOME=HOMEDIR`` and
``XDG_CONFIG_HOME=HOMEDIR/.config`` and neither ``GIT_CONFIG_NOSYSTEM`` nor
``GIT_CONFIG_GLOBAL``: each reads the system, global and XDG config files at start-up, which
is the point, since the benchmark puts HOMEDIR on slow storage.

==========================================  =========  =======================================
page (under ``/{owner}/{name}``)            processes  after the 4 of opening the repository
==========================================  =========  =======================================
``/`` (explore, lists REPOS/owner/name)     0          (no git)
home ``/{o}/{n}``                           6          ``rev-list --count``, ``hash-object``
                                                       of the README (tree and README read
                                                       through the readers)
tree ``/src/branch/{b}/{dir}``              6          ``log -n 1 -- dir``, ``rev-list --count``
file ``/src/branch/{b}/{path}``             6          ``log -n 1 -- path``, ``hash-object``
raw ``/raw/branch/{b}/{path}``              5          ``log -n 1 -- path`` (Last-Modified)
commits ``/commits/branch/{b}``             6          ``rev-list --count``, ``rev-list -n 50``
                                                       (then 50 commits read by the reader)
history ``/commits/branch/{b}/{path}``      6          ``rev-list --count -- path``,
                                                       ``log -n 50 -- path``
commit ``/commit/{sha}``                    6          ``diff-tree --numstat``, ``diff-tree -p``
blame ``/blame/branch/{b}/{path}``          6          ``blame --porcelain``, ``log -n 1 -- path``
an unknown repository                       0
==========================================  =========  =======================================

``{branch|tag|commit}`` all work; a branch or tag name may contain slashes and is resolved
shortest prefix first through the batch-check reader, as Gitea does. Every response carries
``X-Spawned: N``, the processes it started. Children are waited for with a blocking wait (no
polling, no sleeps) and every one is reaped before the response leaves.

Served by wsgiref in a thread-per-connection server whose handler keeps HTTP/1.1
connections alive (the benchmark's client reuses one connection, and the kernel's fork
counter would otherwise count a thread per request as a process)::

    python -m bench.reference --repos DIR --home HOMEDIR --port N

``make_app(repos, home)`` returns the WSGI application for in-process use.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from socketserver import ThreadingMixIn
from types import FrameType
from typing import IO, Any, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
HEX = re.compile(r"[0-9a-f]{4,40}")
PAGE_SIZE = 50
_LOG_FORMAT = "--format=%H%x00%an%x00%at%x00%s"
_GIT = shutil.which("git") or "/usr/bin/git"

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class NotFound(Exception):
    """The repository, ref, path or object does not exist: 404."""


class GitFailed(Exception):
    """A git child exited with a non-zero status: 500."""


# ------------------------------------------------------------------------------ git children


class Git:
    """The git children of one request: each is counted, and reaped before the response."""

    def __init__(self, cwd: Path, env: dict[str, str], stack: ExitStack) -> None:
        self.cwd = cwd
        self.env = env
        self.stack = stack
        self.spawned = 0

    def _popen(self, args: Iterable[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        self.spawned += 1
        return subprocess.Popen([_GIT, *args], cwd=self.cwd, env=self.env, **kwargs)

    def run(self, *args: str, stdin: bytes | None = None) -> bytes:
        """A short-lived child, run to completion (``communicate`` blocks, never polls)."""
        proc = self._popen(
            args,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(stdin)
        if proc.returncode != 0:
            text = err.decode("utf-8", "replace").strip()
            raise GitFailed(f"git {' '.join(args)} failed ({proc.returncode}): {text}")
        return out

    def reader(self, *args: str) -> tuple[IO[bytes], IO[bytes]]:
        """A child that lives until the request ends: its stdin and stdout."""
        proc = self._popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.stack.callback(_finish, proc)
        assert proc.stdin is not None and proc.stdout is not None
        return proc.stdin, proc.stdout


def _finish(proc: subprocess.Popen[bytes]) -> None:
    """End a reader: EOF on its stdin ends ``cat-file``; closing its stdout ends it even if
    it still had output to write; then a blocking wait reaps it."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):  # the child is gone: nothing to flush to
                stream.close()
    proc.wait()


class Objects:
    """The two readers Gitea opens per request, each after a ``git rev-parse``."""

    def __init__(self, git: Git) -> None:
        git.run("rev-parse")
        self._check_in, self._check_out = git.reader("cat-file", "--batch-check")
        git.run("rev-parse")
        self._batch_in, self._batch_out = git.reader("cat-file", "--batch")

    def info(self, name: str) -> tuple[str, str, int] | None:
        """``(id, type, size)`` of an object name such as ``refs/heads/x`` or ``sha:path``."""
        self._check_in.write(_name(name))
        self._check_in.flush()
        fields = self._check_out.readline().split()
        if len(fields) != 3:  # "<name> missing" / "<name> ambiguous"
            return None
        return fields[0].decode(), fields[1].decode(), int(fields[2])

    def read(self, name: str) -> tuple[str, str, bytes] | None:
        """``(id, type, data)`` of an object, through the ``--batch`` reader."""
        self._batch_in.write(_name(name))
        self._batch_in.flush()
        fields = self._batch_out.readline().split()
        if len(fields) != 3:
            return None
        data = self._batch_out.read(int(fields[2]) + 1)[:-1]
        return fields[0].decode(), fields[1].decode(), data


def _name(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape") + b"\n"


# ------------------------------------------------------------------------------ objects


@dataclass
class Commit:
    id: str
    tree: str
    parents: list[str]
    author: str
    when: int
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


def parse_commit(oid: str, data: bytes) -> Commit:
    head, _, message = data.partition(b"\n\n")
    tree, parents, author, when = "", [], "", 0
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value.decode()
        elif key == b"parent":
            parents.append(value.decode())
        elif key == b"author":
            name, _, rest = value.partition(b" <")
            author = name.decode("utf-8", "replace")
            when = int(rest.rsplit(b" ", 2)[-2])
    return Commit(oid, tree, parents, author, when, message.decode("utf-8", "replace"))


def parse_tree(data: bytes) -> list[tuple[str, str, str]]:
    """``(mode, name, id)`` of each entry of a raw (SHA-1) tree; directories first."""
    entries, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        mode = data[at:space].decode()
        name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries.append((mode, name, data[nul + 1 : nul + 21].hex()))
        at = nul + 21
    return sorted(entries, key=lambda e: (e[0] != "40000", e[1]))


def log_records(out: bytes) -> list[tuple[str, str, int, str]]:
    """``(id, author, time, subject)`` from ``git log`` with :data:`_LOG_FORMAT`."""
    records = []
    for line in out.decode("utf-8", "replace").splitlines():
        oid, author, when, subject = line.split("\0", 3)
        records.append((oid, author, int(when), subject))
    return records


# ------------------------------------------------------------------------------ rendering


def esc(text: str) -> str:
    return html.escape(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def when(stamp: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(stamp))


def document(title: str, *parts: str) -> bytes:
    body = "\n".join(parts)
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"</head><body>\n<h1>{esc(title)}</h1>\n{body}\n</body></html>\n"
    ).encode("utf-8", "surrogateescape")


def commit_rows(base: str, rows: Iterable[tuple[str, str, int, str]]) -> str:
    items = "".join(
        f'<tr><td><a href="{base}/commit/{oid}">{oid[:10]}</a></td><td>{esc(author)}</td>'
        f"<td>{when(stamp)}</td><td>{esc(subject)}</td></tr>\n"
        for oid, author, stamp, subject in rows
    )
    return f"<table>\n{items}</table>"


def tree_table(base: str, branch: str, folder: str, entries: list[tuple[str, str, str]]) -> str:
    prefix = f"{folder}/" if folder else ""
    items = "".join(
        f"<tr><td>{'dir' if mode == '40000' else mode}</td>"
        f'<td><a href="{base}/src/branch/{esc(branch)}/{esc(prefix + name)}">{esc(name)}</a>'
        f"</td></tr>\n"
        for mode, name, _ in entries
    )
    return f"<table>\n{items}</table>"


def text_block(data: bytes) -> str:
    return f"<pre>{esc(data.decode('utf-8', 'replace'))}</pre>"


# ------------------------------------------------------------------------------ the app


@dataclass
class Response:
    status: str
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    extra: tuple[tuple[str, str], ...] = ()


@dataclass
class Page:
    """One repository request: its readers, its children and the ref it resolved."""

    owner: str
    name: str
    git: Git
    objects: Objects

    @property
    def base(self) -> str:
        return f"/{self.owner}/{self.name}"

    def resolve(self, kind: str, rest: list[str]) -> tuple[str, str, str]:
        """``(commit id, ref name, path)`` from ``{kind}/{ref...}/{path...}``."""
        if kind == "commit" and rest and HEX.fullmatch(rest[0]):
            found = self.objects.info(rest[0])
            if found is not None and found[1] == "commit":
                return found[0], rest[0], "/".join(rest[1:])
            raise NotFound(rest[0])
        prefix = {"branch": "refs/heads/", "tag": "refs/tags/"}.get(kind)
        if prefix is None:
            raise NotFound(kind)
        for cut in range(1, len(rest) + 1):  # shortest prefix first, as Gitea does
            ref = "/".join(rest[:cut])
            found = self.objects.info(f"{prefix}{ref}^{{commit}}")
            if found is not None:
                return found[0], ref, "/".join(rest[cut:])
        raise NotFound("/".join(rest))

    def entry(self, commit: str, path: str) -> tuple[str, str]:
        """``(id, type)`` of ``path`` in ``commit``'s tree (the root tree for ``""``)."""
        found = self.objects.info(f"{commit}:{path}" if path else f"{commit}^{{tree}}")
        if found is None:
            raise NotFound(path)
        return found[0], found[1]

    def commit(self, oid: str) -> Commit:
        found = self.objects.read(oid)
        if found is None or found[1] != "commit":
            raise NotFound(oid)
        return parse_commit(found[0], found[2])

    def data(self, oid: str) -> bytes:
        found = self.objects.read(oid)
        if found is None:
            raise NotFound(oid)
        return found[2]

    def last_commit(self, commit: str, path: str) -> tuple[str, str, int, str]:
        out = self.git.run("log", "-n", "1", _LOG_FORMAT, commit, "--", *([path] if path else []))
        records = log_records(out)
        if not records:
            raise NotFound(path)
        return records[0]

    # -------------------------------------------------------------------------- pages

    def home(self, git_dir: Path) -> Response:
        head = (git_dir / "HEAD").read_text(errors="replace").strip()
        branch = head.removeprefix("ref: refs/heads/")
        found = self.objects.info(f"refs/heads/{branch}^{{commit}}")
        if not head.startswith("ref: ") or found is None:
            return Response("200 OK", document(f"{self.owner}/{self.name}", "<p>empty</p>"))
        tip = self.commit(found[0])
        entries = parse_tree(self.data(tip.tree))
        parts = [
            f"<p>branch {esc(branch)} at <code>{tip.id}</code>: {esc(tip.subject)}</p>",
        ]
        readme = next((e for e in entries if e[1].lower().startswith("readme")), None)
        if readme is not None:
            text = self.data(readme[2])
            self.git.run("hash-object", "--stdin", stdin=text)
        count = int(self.git.run("rev-list", "--count", tip.id))
        parts.append(f"<p>{count} commits</p>")
        parts.append(tree_table(self.base, branch, "", entries))
        if readme is not None:
            parts.append(text_block(text))
        return Response("200 OK", document(f"{self.owner}/{self.name}", *parts))

    def source(self, kind: str, rest: list[str]) -> Response:
        commit, ref, path = self.resolve(kind, rest)
        oid, otype = self.entry(commit, path)
        title = f"{self.owner}/{self.name}: {path or '/'} at {ref}"
        if otype == "tree":
            entries = parse_tree(self.data(oid))
            last = self.last_commit(commit, path)
            count = int(self.git.run("rev-list", "--count", commit))
            return Response(
                "200 OK",
                document(
                    title,
                    f"<p>{count} commits; last change {commit_rows(self.base, [last])}</p>",
                    tree_table(self.base, ref, path, entries),
                ),
            )
        if otype != "blob":
            raise NotFound(path)
        data = self.data(oid)
        self.git.run("hash-object", "--stdin", stdin=data)
        last = self.last_commit(commit, path)
        return Response(
            "200 OK",
            document(
                title, f"<p>last change {commit_rows(self.base, [last])}</p>", text_block(data)
            ),
        )

    def raw(self, kind: str, rest: list[str]) -> Response:
        commit, _, path = self.resolve(kind, rest)
        oid, otype = self.entry(commit, path)
        if otype != "blob":
            raise NotFound(path)
        data = self.data(oid)
        last = self.last_commit(commit, path)
        binary = b"\0" in data[:8000]
        return Response(
            "200 OK",
            data,
            "application/octet-stream" if binary else "text/plain; charset=utf-8",
            (("Last-Modified", formatdate(last[2], usegmt=True)), ("ETag", f'"{oid}"')),
        )

    def commits(self, kind: str, rest: list[str]) -> Response:
        commit, ref, path = self.resolve(kind, rest)
        if path:
            self.entry(commit, path)
            count = int(self.git.run("rev-list", "--count", commit, "--", path))
            out = self.git.run("log", _LOG_FORMAT, "-n", str(PAGE_SIZE), commit, "--", path)
            rows = log_records(out)
        else:
            count = int(self.git.run("rev-list", "--count", commit))
            ids = self.git.run("rev-list", "-n", str(PAGE_SIZE), commit).decode().split()
            found = [self.commit(oid) for oid in ids]
            rows = [(c.id, c.author, c.when, c.subject) for c in found]
        title = f"{self.owner}/{self.name}: commits of {path or '/'} at {ref}"
        return Response(
            "200 OK", document(title, f"<p>{count} commits</p>", commit_rows(self.base, rows))
        )

    def show(self, sha: str) -> Response:
        if not HEX.fullmatch(sha):
            raise NotFound(sha)
        found = self.objects.info(sha)
        if found is None or found[1] != "commit":
            raise NotFound(sha)
        commit = self.commit(found[0])
        span = [commit.parents[0], commit.id] if commit.parents else ["--root", commit.id]
        stat = self.git.run("diff-tree", "-r", "--numstat", *span)
        patch = self.git.run("diff-tree", "-r", "-p", "--no-commit-id", *span)
        return Response(
            "200 OK",
            document(
                f"{self.owner}/{self.name}: commit {commit.id}",
                f"<p>{esc(commit.author)}, {when(commit.when)}</p>",
                text_block(commit.message.encode()),
                text_block(stat),
                text_block(patch),
            ),
        )

    def blame(self, kind: str, rest: list[str]) -> Response:
        commit, ref, path = self.resolve(kind, rest)
        _, otype = self.entry(commit, path)
        if otype != "blob":
            raise NotFound(path)
        out = self.git.run("blame", "--porcelain", commit, "--", path)
        last = self.last_commit(commit, path)
        rows = "".join(
            f"<tr><td>{oid[:10]}</td><td>{esc(author)}</td><td>{number}</td>"
            f"<td><code>{esc(text)}</code></td></tr>\n"
            for oid, author, number, text in blame_lines(out)
        )
        return Response(
            "200 OK",
            document(
                f"{self.owner}/{self.name}: blame of {path} at {ref}",
                f"<p>last change {commit_rows(self.base, [last])}</p>",
                f"<table>\n{rows}</table>",
            ),
        )


def blame_lines(out: bytes) -> Iterator[tuple[str, str, int, str]]:
    """``(commit, author, line number, text)`` of each line of ``git blame --porcelain``."""
    authors: dict[str, str] = {}
    oid, number = "", 0
    for line in out.decode("utf-8", "replace").split("\n"):
        if line.startswith("\t"):
            yield oid, authors.get(oid, ""), number, line[1:]
        elif line.startswith("author "):
            authors[oid] = line[7:]
        elif line and HEX.fullmatch(line.split(" ", 1)[0]) and line.count(" ") >= 2:
            fields = line.split(" ")
            oid, number = fields[0], int(fields[2])


def git_dir_of(path: Path) -> Path | None:
    """The git directory of a bare repository or a checkout at ``path``."""
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    if (path / ".git" / "HEAD").is_file():
        return path / ".git"
    return None


def child_env(home: Path) -> dict[str, str]:
    """A git child's environment: HOME on the storage under test, and no config isolation."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }


class ReferenceForge:
    """The WSGI application."""

    def __init__(self, repos: Path, home: Path) -> None:
        self.repos = repos
        self.home = home
        self.env = child_env(home)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        git: Git | None = None
        if method not in ("GET", "HEAD"):
            response = Response("405 Method Not Allowed", b"", extra=(("Allow", "GET, HEAD"),))
        else:
            path = environ.get("PATH_INFO", "/").encode("latin-1")
            segments = [s for s in path.decode("utf-8", "surrogateescape").split("/") if s]
            with ExitStack() as stack:  # every reader is reaped before the response leaves
                try:
                    if not segments:
                        response = self.explore()
                    else:
                        owner, name, workdir, git_dir = self.locate(segments)
                        git = Git(workdir, self.env, stack)
                        page = Page(owner, name, git, Objects(git))
                        response = self.dispatch(page, git_dir, segments[2:])
                except NotFound:
                    response = Response("404 Not Found", document("not found"))
                except GitFailed as exc:
                    print(f"reference: {exc}", file=sys.stderr)
                    response = Response("500 Internal Server Error", document("git failed"))
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            ("X-Spawned", str(git.spawned if git is not None else 0)),
            *response.extra,
        ]
        start_response(response.status, headers)
        return [b"" if method == "HEAD" else response.body]

    def locate(self, segments: list[str]) -> tuple[str, str, Path, Path]:
        """``(owner, name, directory, git directory)`` of the repository a URL names."""
        if any(s in (".", "..") or "\n" in s or "\0" in s for s in segments):
            raise NotFound("/".join(segments))
        if len(segments) < 2 or not all(NAME.fullmatch(s) for s in segments[:2]):
            raise NotFound(segments[0])
        if segments[1].endswith(".git"):  # the name is shown without its ".git"
            raise NotFound(segments[1])
        owner, name = segments[:2]
        for directory in (self.repos / owner / f"{name}.git", self.repos / owner / name):
            git_dir = git_dir_of(directory)
            if git_dir is not None:
                return owner, name, directory, git_dir
        raise NotFound(f"{owner}/{name}")

    @staticmethod
    def dispatch(page: Page, git_dir: Path, rest: list[str]) -> Response:
        if not rest:
            return page.home(git_dir)
        action, *tail = rest
        if action == "commit" and len(tail) == 1:
            return page.show(tail[0])
        if not tail:
            raise NotFound(action)
        kind, *more = tail
        if action == "src":
            return page.source(kind, more)
        if action == "raw":
            return page.raw(kind, more)
        if action == "commits":
            return page.commits(kind, more)
        if action == "blame":
            return page.blame(kind, more)
        raise NotFound(action)

    def explore(self) -> Response:
        rows = []
        for owner in sorted(_subdirs(self.repos)):
            for entry in sorted(_subdirs(owner)):
                name = entry.name.removesuffix(".git")
                if NAME.fullmatch(owner.name) and NAME.fullmatch(name) and git_dir_of(entry):
                    full = f"{owner.name}/{name}"
                    rows.append(f'<li><a href="/{esc(full)}">{esc(full)}</a></li>')
        return Response("200 OK", document("explore", "<ul>\n" + "\n".join(rows) + "\n</ul>"))


def _subdirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if not p.name.startswith(".") and p.is_dir()]
    except OSError:
        return []


def make_app(repos: Path, home: Path) -> ReferenceForge:
    """The reference forge over ``repos/OWNER/NAME[.git]``; git children get ``home`` as HOME
    (a ``.gitconfig`` with a ``[user]`` section and Gitea's ``safe.directory = *`` is
    created there if absent)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / ".gitconfig"
    if not config.exists():
        config.write_text(
            "[user]\n\tname = Reference Forge\n\temail = forge@reference.invalid\n"
            "[safe]\n\tdirectory = *\n"  # as Gitea writes it
        )
    return ReferenceForge(repos, home)


# ------------------------------------------------------------------------------ the server


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _ServerHandler(ServerHandler):
    http_version = "1.1"
    request_handler: WSGIRequestHandler  # set by the request handler; wsgiref logs through it


class _Handler(WSGIRequestHandler):
    """wsgiref's handler answers one request per connection; this one keeps HTTP/1.1
    connections alive, and logs nothing."""

    protocol_version = "HTTP/1.1"
    timeout = 300
    wbufsize = -1  # status line, headers and body leave in one write (no Nagle delay)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    def handle(self) -> None:
        self.close_connection = True
        self._handle_one()
        while not self.close_connection:
            self._handle_one()

    def _handle_one(self) -> None:
        self.close_connection = True
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except OSError:  # includes the idle timeout
            return
        if not self.raw_requestline:
            return
        if len(self.raw_requestline) > 65536:
            self.send_error(414)
            self.wfile.flush()
            return
        if not self.parse_request():  # sets close_connection from the request
            self.wfile.flush()
            return
        if self.command not in ("GET", "HEAD"):
            self.close_connection = True  # its body is never read
        handler = _ServerHandler(
            self.rfile,
            cast(IO[bytes], self.wfile),  # a buffered socket file, as wsgiref passes it
            self.get_stderr(),
            self.get_environ(),
            multithread=True,
        )
        handler.request_handler = self
        handler.run(self.server.get_app())  # type: ignore[attr-defined]
        self.wfile.flush()


def serve(repos: Path, home: Path, port: int, host: str = "127.0.0.1") -> None:
    """Serve until SIGTERM or SIGINT; print the address once listening."""
    server = make_server(
        host, port, make_app(repos, home), server_class=_Server, handler_class=_Handler
    )

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"reference forge listening on http://{host}:{server.server_port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reference", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repos", type=Path, required=True, help="DIR/OWNER/NAME[.git]")
    parser.add_argument("--home", type=Path, required=True, help="every git child's HOME")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    serve(args.repos.absolute(), args.home.absolute(), args.port, args.host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
