"""The built-in SSH server against a hostile client speaking git's protocol by hand (asyncssh
as the client): a connection kept open after its key was removed, more sessions on one
connection than it may run, ``want`` lines split across writes and ids asked for in every
way git takes them, malformed pushes; through all of it nothing leaks, nothing is written and
the server goes on serving."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import asyncssh
import pytest
from support.githttp import commit, git, rev
from support.serving import free_port, serving
from support.sshing import Ssh, SshSite, create_people, make_key

from floorless.ssh.server import MAX_SESSIONS

pytestmark = pytest.mark.network

V2 = {"GIT_PROTOCOL": "version=2"}


def pkt(text: str) -> bytes:
    data = text.encode()
    return b"%04x" % (len(data) + 4) + data


@dataclass
class Site(SshSite):
    secret: str = ""  # a commit of a deleted branch: no ref reaches it
    secret_blob: str = ""

    def log_text(self) -> str:
        return self.server.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("ssh-hostile")
    port = free_port()
    with serving(root / "repos", root / "data", "--ssh-port", str(port)) as server:
        create_people(server, "alice", "bob")
        keys = root / "keys"
        for name in ("alice", "bob"):
            make_key(keys, name)
            server.admin("key", "add", name, stdin=(keys / f"{name}.pub").read_text())
        server.admin("repo", "create", "alice/pub")
        alice = Ssh(port, keys / "alice", root / "known_hosts")
        work = root / "work"
        git("init", "-q", str(work))
        commit(work, "README.md", "# project\n", "first")
        alice.git("push", "-q", alice.url("alice/pub"), "main", cwd=work)
        alice.git("checkout", "-q", "-b", "oops", cwd=work)
        secret = commit(work, "secret.txt", "password=hunter2\n", "oops")
        secret_blob = alice.git("rev-parse", f"{secret}:secret.txt", cwd=work).stdout.strip()
        alice.git("push", "-q", alice.url("alice/pub"), "oops", cwd=work)
        alice.git("push", "-q", alice.url("alice/pub"), ":oops", cwd=work)
        yield Site(server, port, keys, root / "known_hosts", secret=secret, secret_blob=secret_blob)


@dataclass
class Answer:
    out: bytes
    err: bytes
    status: int | None


async def _connect(site: Site, key: str) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect(
        "127.0.0.1",
        site.port,
        username="git",
        client_keys=[str(site.keys / key)],
        known_hosts=None,
        agent_path=None,
    )


async def _session(
    conn: asyncssh.SSHClientConnection,
    command: str,
    writes: list[bytes | float],
    env: dict[str, str] | None = None,
    timeout: float = 30,
) -> Answer:
    """Run ``command``; send each of ``writes`` in its own write (a float: a pause), then the
    end of the input; what came back once the session ended."""
    proc = await conn.create_process(command, encoding=None, env=env or {})
    try:
        for piece in writes:
            if isinstance(piece, float):
                await asyncio.sleep(piece)
                continue
            proc.stdin.write(piece)
            await proc.stdin.drain()
        proc.stdin.write_eof()
    except (BrokenPipeError, asyncssh.Error):
        pass  # the server ended the session early (a refusal)
    out, err = await asyncio.wait_for(
        asyncio.gather(proc.stdout.read(), proc.stderr.read()), timeout
    )
    await proc.wait_closed()
    return Answer(out, err, proc.exit_status)


def _run(site: Site, key: str, command: str, writes: list[bytes | float], **kw: object) -> Answer:
    async def go() -> Answer:
        async with await _connect(site, key) as conn:
            return await _session(conn, command, writes, **kw)  # type: ignore[arg-type]

    return asyncio.run(go())


def test_a_removed_key_starts_no_more_sessions_on_its_open_connection(site: Site) -> None:
    """A client's ControlMaster keeps one connection for hours: each session asks again
    whether its key still signs anyone in (as each session through OpenSSH's server does)."""
    make_key(site.keys, "spare")
    added = site.server.admin("key", "add", "bob", stdin=(site.keys / "spare.pub").read_text())
    fingerprint = added.split()[0]

    async def go() -> tuple[Answer, Answer]:
        async with await _connect(site, "spare") as conn:
            before = await _session(conn, "git-upload-pack 'alice/pub.git'", [b"0000"])
            await asyncio.to_thread(site.server.admin, "key", "remove", fingerprint)
            after = await _session(conn, "git-upload-pack 'alice/pub.git'", [b"0000"])
            return before, after

    before, after = asyncio.run(go())
    assert before.status == 0 and b"refs/heads/main" in before.out
    assert after.status == 1 and after.out == b""
    assert b"this key is not known" in after.err


def test_one_connection_runs_a_bounded_number_of_sessions(site: Site) -> None:
    """Each session is a git process: one connection may not start them without end."""

    async def go() -> tuple[list[Answer], Answer]:
        async with await _connect(site, "bob") as conn:
            held = [
                await conn.create_process("git-upload-pack 'alice/pub.git'", encoding=None)
                for _ in range(MAX_SESSIONS)
            ]
            for proc in held:  # each has started its git: its advertisement came
                assert b"refs/heads/main" in await proc.stdout.read(4096)
            extra = [
                await _session(conn, "git-upload-pack 'alice/pub.git'", [b"0000"]) for _ in range(3)
            ]
            for proc in held:
                proc.stdin.write(b"0000")
                proc.stdin.write_eof()
                await proc.wait_closed()
            again = await _session(conn, "git-upload-pack 'alice/pub.git'", [b"0000"])
            return extra, again

    extra, again = asyncio.run(go())
    for answer in extra:
        assert answer.status == 1 and answer.out == b""
        assert f"at most {MAX_SESSIONS} sessions".encode() in answer.err
    assert again.status == 0 and b"refs/heads/main" in again.out  # once the others ended


@pytest.mark.parametrize(
    "request_of",
    [
        pytest.param(
            lambda s: [pkt(f"want {s.secret_blob} ofs-delta\n")[:19], 0.2,
                       pkt(f"want {s.secret_blob} ofs-delta\n")[19:] + b"0000" + pkt("done\n")],
            id="v0-want-split-across-writes",
        ),
        pytest.param(
            lambda s: [pkt(f"want {s.secret.upper()}\n") + b"0000" + pkt("done\n")],
            id="v0-want-in-capitals",
        ),
    ],
)  # fmt: skip
def test_a_want_no_ref_reaches_is_refused_however_it_is_written(
    site: Site, request_of: object
) -> None:
    writes = request_of(site)  # type: ignore[operator]
    answer = _run(site, "bob", "git-upload-pack 'alice/pub.git'", writes)
    assert answer.status == 128 and b"ERR upload-pack: not our ref" in answer.out
    assert b"PACK" not in answer.out


@pytest.mark.parametrize(
    "body_of",
    [
        pytest.param(
            lambda s: pkt("command=object-info\n") + b"0001" + pkt("size\n")
            + pkt(f"oid {s.secret_blob}\n") + b"0000",
            id="object-info",
        ),
        pytest.param(
            lambda s: pkt("command=fetch\n") + b"0001" + pkt("thin-pack\n")
            + pkt(f"want {s.secret}\n") + pkt("done\n") + b"0000",
            id="fetch",
        ),
        pytest.param(  # a harmless command first, then the want in the same session
            lambda s: pkt("command=ls-refs\n") + b"0000" + pkt("command=fetch\n") + b"0001"
            + pkt(f"want {s.secret_blob}\n") + pkt("done\n") + b"0000",
            id="fetch-after-ls-refs",
        ),
    ],
)  # fmt: skip
def test_v2_requests_by_id_are_screened_byte_by_byte(site: Site, body_of: object) -> None:
    """The request comes one byte a write: git never holds a whole line before the screen."""
    body = body_of(site)  # type: ignore[operator]
    writes: list[bytes | float] = [body[n : n + 1] for n in range(len(body))]
    answer = _run(site, "bob", "git-upload-pack 'alice/pub.git'", writes, env=V2)
    assert answer.status == 128 and b"ERR upload-pack: not our ref" in answer.out
    assert b"PACK" not in answer.out and b"size" not in answer.out.split(b"object-info\n0000")[-1]


@pytest.mark.parametrize(
    ("request_bytes", "says"),
    [
        (b"zzzz", b"bad pkt-line length"),
        (b"+7_f", b"bad pkt-line length"),
        (b"ffff" + b"a" * 100, b"pkt-line length 65535"),
        (b"0003", b"pkt-line length 3"),
        (b"0032" + b"0" * 20, b"the push ends early"),
    ],
)
def test_a_malformed_push_writes_nothing_and_leaves_no_trace(
    site: Site, request_bytes: bytes, says: bytes
) -> None:
    before = rev(site.bare("alice/pub"), "main")
    offset = len(site.log_text())
    answer = _run(site, "alice", "git-receive-pack 'alice/pub.git'", [request_bytes])
    assert answer.status == 1 and says in answer.err
    assert rev(site.bare("alice/pub"), "main") == before
    assert "Traceback" not in site.log_text()[offset:]
    alice = site.as_("alice")
    assert alice.git("ls-remote", alice.url("alice/pub")).returncode == 0


def test_a_client_that_hangs_up_mid_session_leaves_no_trace(site: Site) -> None:
    offset = len(site.log_text())

    async def go() -> None:
        conn = await _connect(site, "bob")
        procs = [
            await conn.create_process("git-upload-pack 'alice/pub.git'", encoding=None)
            for _ in range(3)
        ]
        for proc in procs:
            await proc.stdout.read(4096)
        conn.abort()  # no channel closed, no goodbye: the socket goes

    asyncio.run(go())
    bob = site.as_("bob")
    assert bob.git("ls-remote", bob.url("alice/pub")).returncode == 0
    assert "Traceback" not in site.log_text()[offset:]
