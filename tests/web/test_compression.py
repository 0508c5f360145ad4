"""Compressed answers: HTML, JSON, feeds, diffs, patches and raw text are sent gzip- or
brotli-encoded when the client accepts it, and decode to the very bytes of the identity answer;
images, archives, git's smart HTTP, byte ranges and downloads of stated length are sent as they
are; ETags differ by encoding and a conditional request with either form is answered 304."""

from __future__ import annotations

import gzip
import http.client
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import brotli
import pygit2
import pytest
from falcon import testing
from support.forges import start_forge, wait_indexed
from support.gitfixtures import git, png_bytes
from support.serving import serving
from support.spawns import counting

from floorless.forge import Forge
from floorless.web import compression
from floorless.web.app import create_app
from floorless.web.auth import SESSION_COOKIE
from floorless.web.compression import Choice, choose

WHEN = 1_700_000_000
BUDGETS = {"max_raw_in_process_bytes": 64 << 10, "max_diff_bytes": 128 << 10}
FILE = pygit2.enums.FileMode.BLOB
TREE = pygit2.enums.FileMode.TREE
ENCODINGS = ("gzip", "br")
PASSWORD = "a long enough password"
# headers that say when and how long, not what: they differ between any two answers
TIMELY = {"server-timing", "date"}


def lines(count: int, word: bytes) -> bytes:
    return b"".join(
        b"%06d %s: the quick brown fox jumps over the lazy dog\n" % (i, word) for i in range(count)
    )


def build_comp(path: Path) -> dict[str, str]:
    """A small text file, an 8 KB one, a 200 KB one (past the raw budget), a PNG and a
    directory of a dozen files; then the 8 KB file changed (a diff made in-process), then the
    200 KB one (past the diff budget: from git)."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    sig = pygit2.Signature("Ada Author", "ada@example.org", WHEN, 0)
    pixels = [[(x * 8 % 256, y * 8 % 256, (x * y) % 256) for x in range(24)] for y in range(24)]
    docs = repo.TreeBuilder()
    for i in range(12):
        docs.insert(f"chapter-{i:02d}.md", repo.create_blob(b"# Chapter %d\n" % i), FILE)
    docs_id = docs.write()

    def root(notes: bytes, big: bytes) -> pygit2.Oid:
        tb = repo.TreeBuilder()
        tb.insert("README.md", repo.create_blob(b"# comp\n\n" + lines(40, b"readme")), FILE)
        tb.insert("small.txt", repo.create_blob(b"small\n"), FILE)
        tb.insert("notes.txt", repo.create_blob(notes), FILE)
        tb.insert("big.txt", repo.create_blob(big), FILE)
        tb.insert("logo.png", repo.create_blob(png_bytes(pixels)), FILE)
        tb.insert("docs", docs_id, TREE)
        return tb.write()

    notes1, notes2 = lines(120, b"note"), lines(120, b"changed note")
    big1, big2 = lines(3000, b"big"), lines(3000, b"changed big")
    first = repo.create_commit(None, sig, sig, "Add files\n", root(notes1, big1), [])
    small = repo.create_commit(None, sig, sig, "Change the notes\n", root(notes2, big1), [first])
    large = repo.create_commit(None, sig, sig, "Change the big file\n", root(notes2, big2), [small])
    repo.references.create("refs/heads/main", large)
    return {"small": str(small), "large": str(large)}


@pytest.fixture(scope="module")
def comp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("comp")
    ids = build_comp(root / "alice" / "comp.git")
    return root, ids


@pytest.fixture(scope="module")
def forge(comp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    forge = start_forge(comp[0], tmp_path_factory.mktemp("comp-data"), **BUDGETS)
    wait_indexed(forge)
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def decode(result: testing.Result) -> bytes:
    encoding = result.headers.get("content-encoding")
    if encoding == "gzip":
        return gzip.decompress(result.content)
    if encoding == "br":
        return brotli.decompress(result.content)
    assert encoding is None
    return result.content


def varies(result: testing.Result) -> bool:
    vary = result.headers.get("vary", "")
    return "accept-encoding" in [v.strip().lower() for v in vary.split(",")]


def whole_urls(ids: dict[str, str]) -> dict[str, str]:
    return {
        "page": "/alice/comp",
        "commit page": f"/alice/comp/commit/{ids['small']}",
        "atom": "/alice/comp/atom/branch/main",
        "rss": "/alice/comp/rss/branch/main",
        "diff": f"/alice/comp/commit/{ids['small']}.diff",
        "patch": f"/alice/comp/commit/{ids['small']}.patch",
        "raw text": "/alice/comp/raw/branch/main/notes.txt",
        "json": f"/alice/comp/-/last/{ids['large']}/docs",
    }


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "name", ["page", "commit page", "atom", "rss", "diff", "patch", "raw text", "json"]
)
def test_encoded_answers_decode_to_the_identity_bytes(client, comp, name, encoding):
    url = whole_urls(comp[1])[name]
    plain = client.simulate_get(url)
    encoded = client.simulate_get(url, headers={"Accept-Encoding": encoding})
    assert plain.status_code == encoded.status_code == 200
    assert "content-encoding" not in plain.headers
    assert len(plain.content) >= compression.MIN_BYTES
    assert encoded.headers["content-encoding"] == encoding
    assert decode(encoded) == plain.content
    assert int(encoded.headers["content-length"]) == len(encoded.content) < len(plain.content)
    assert varies(plain) and varies(encoded)
    assert encoded.headers["content-type"] == plain.headers["content-type"]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("variant", ["diff", "patch"])
def test_a_diff_streamed_from_git_is_encoded_piece_by_piece(client, comp, variant, encoding):
    root, ids = comp
    url = f"/alice/comp/commit/{ids['large']}.{variant}"
    plain = client.simulate_get(url)
    with counting() as events:
        encoded = client.simulate_get(url, headers={"Accept-Encoding": encoding})
    assert len(events) == 1  # one git child, as without compression
    assert encoded.status_code == 200
    assert encoded.headers["content-encoding"] == encoding
    assert "content-length" not in encoded.headers
    assert varies(encoded)
    assert decode(encoded) == plain.content
    expected = git(
        root / "alice" / "comp.git", "diff-tree", "-p", "-M", f"{ids['large']}^", ids["large"]
    )
    assert expected in plain.content
    assert len(encoded.content) < len(plain.content) // 4


def test_each_piece_of_a_stream_is_flushed():
    pieces = [lines(200, b"piece %d" % i) for i in range(3)]
    encoded = list(compression.EncodedStream(iter(pieces), "gzip"))
    assert len(encoded) == 4  # one per piece, and the end
    decoder = __import__("zlib").decompressobj(31)
    for piece, out in zip(pieces, encoded, strict=False):
        assert decoder.decompress(out) == piece  # each decodes whole as it arrives
    assert decoder.decompress(encoded[-1]) == b"" and decoder.eof


def test_only_textual_whole_answers_are_encoded(client):
    """What a client accepting both encodings gets, URL by URL: each answer decodes to the
    identity answer's bytes, and only text that gains is encoded."""
    expected = {
        "/alice/comp/raw/branch/main/notes.txt": ("br", True),
        "/alice/comp/raw/branch/main/logo.png": (None, False),
        "/alice/comp/archive/main.tar.gz": (None, False),
        "/alice/comp/archive/main.zip": (None, False),
        "/alice/comp/info/refs?service=git-upload-pack": (None, False),
        "/alice/comp/raw/branch/main/small.txt": (None, True),  # too small to gain
        "/alice/comp/raw/branch/main/big.txt": (None, True),  # a download of stated length
    }
    found = {}
    for url in expected:
        plain = client.simulate_get(url)
        encoded = client.simulate_get(url, headers={"Accept-Encoding": "gzip, br"})
        assert plain.status_code == encoded.status_code == 200
        assert decode(encoded) == plain.content
        if encoded.headers.get("content-encoding") is None:
            assert encoded.headers.get("content-length") == plain.headers.get("content-length")
        found[url] = (encoded.headers.get("content-encoding"), varies(encoded))
    assert found == expected


def test_a_byte_range_is_never_encoded(client):
    url = "/alice/comp/raw/branch/main/notes.txt"
    whole = client.simulate_get(url, headers={"Accept-Encoding": "gzip"})
    part = client.simulate_get(url, headers={"Accept-Encoding": "gzip", "Range": "bytes=100-2147"})
    assert whole.headers["content-encoding"] == "gzip"
    assert part.status_code == 206
    assert "content-encoding" not in part.headers
    assert part.content == decode(whole)[100:2148]
    assert part.headers["content-length"] == "2048"


@pytest.mark.parametrize("name", ["raw text", "page"])
def test_etags_differ_by_encoding_and_either_form_revalidates(client, comp, name):
    url = whole_urls(comp[1])[name]
    plain = client.simulate_get(url).headers["etag"]
    assert plain.startswith('"') and plain.endswith('"')
    for encoding in ENCODINGS:
        encoded = client.simulate_get(url, headers={"Accept-Encoding": encoding})
        tag = encoded.headers["etag"]
        assert tag == plain[:-1] + f'-{encoding}"'
        held = client.simulate_get(url, headers={"Accept-Encoding": encoding, "If-None-Match": tag})
        assert held.status_code == 304 and held.content == b""
        assert held.headers["etag"] == tag and varies(held)
        # the identity tag names the same content; a client that no longer accepts the
        # encoding still holds it (decoded)
        for headers in (
            {"Accept-Encoding": encoding, "If-None-Match": plain},
            {"If-None-Match": tag},
        ):
            assert client.simulate_get(url, headers=headers).status_code == 304
        other = client.simulate_get(
            url, headers={"Accept-Encoding": encoding, "If-None-Match": '"another"'}
        )
        assert other.status_code == 200 and other.headers["etag"] == tag


def test_if_range_with_an_encoded_tag_gets_the_whole_answer(client):
    url = "/alice/comp/raw/branch/main/notes.txt"
    encoded = client.simulate_get(url, headers={"Accept-Encoding": "gzip"})
    again = client.simulate_get(
        url,
        headers={
            "Accept-Encoding": "gzip",
            "Range": "bytes=0-99",
            "If-Range": encoded.headers["etag"],
        },
    )
    # a range of the identity is not a range of what the client holds: the whole, encoded
    assert again.status_code == 200
    assert again.content == encoded.content


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", ["page", "atom", "diff", "raw text", "json"])
def test_head_sends_the_headers_of_get(client, comp, name, encoding):
    url = whole_urls(comp[1])[name]
    headers = {"Accept-Encoding": encoding}
    get = client.simulate_get(url, headers=headers)
    head = client.simulate_head(url, headers=headers)
    assert head.status_code == 200 and head.content == b""
    assert get.headers["content-encoding"] == encoding
    shown = {k: v for k, v in head.headers.items() if k not in TIMELY}
    assert shown == {k: v for k, v in get.headers.items() if k not in TIMELY}


def test_head_of_a_streamed_diff_says_how_its_get_is_encoded(client, comp):
    url = f"/alice/comp/commit/{comp[1]['large']}.diff"
    with counting() as events:
        head = client.simulate_head(url, headers={"Accept-Encoding": "gzip"})
    assert len(events) == 0 and head.content == b""
    assert head.headers["content-encoding"] == "gzip" and varies(head)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, Choice(None, False)),
        ("", Choice(None, False)),
        ("gzip", Choice("gzip", False)),
        ("x-gzip", Choice("gzip", False)),
        ("GZip", Choice("gzip", False)),
        ("gzip, deflate, br", Choice("br", False)),
        ("gzip;q=1, br;q=0.5", Choice("gzip", False)),
        ("br;q=0, gzip", Choice("gzip", False)),
        ("gzip;q=0", Choice(None, False)),
        ("gzip;q=0, br;q=0", Choice(None, False)),
        ("gzip;q=0.000", Choice(None, False)),
        ("gzip;q=0.001", Choice("gzip", False)),
        ("gzip;q=2", Choice(None, False)),  # not a weight: not acceptable
        ("gzip;q=nan", Choice(None, False)),
        ("deflate, zstd", Choice(None, False)),
        ("*", Choice("br", False)),
        ("*;q=0.5, br;q=0", Choice("gzip", False)),
        ("*;q=0", Choice(None, True)),
        ("identity;q=0, gzip", Choice("gzip", True)),
        ("identity, gzip;q=0.5", Choice(None, False)),
        ("identity;q=0.5, gzip;q=0.5", Choice("gzip", False)),
        ("gzip ; q=0.8 , br ; q=0.9", Choice("br", False)),
    ],
)
def test_accept_encoding_weights(header, expected):
    assert choose(header) == expected


def test_weights_are_honoured_by_the_app(client, comp):
    url = whole_urls(comp[1])["page"]
    for header, encoding in (
        ("gzip;q=0", None),
        ("gzip;q=0, br", "br"),
        ("br;q=0, gzip", "gzip"),
        ("identity, gzip;q=0.5", None),
    ):
        result = client.simulate_get(url, headers={"Accept-Encoding": header})
        assert result.headers.get("content-encoding") == encoding
    small = "/alice/comp/raw/branch/main/small.txt"
    refused = client.simulate_get(small, headers={"Accept-Encoding": "gzip, identity;q=0"})
    assert refused.headers["content-encoding"] == "gzip"  # encoded, small as it is
    assert decode(refused) == b"small\n"


def test_a_warm_page_is_compressed_once(client, comp, monkeypatch):
    made: list[str] = []
    real = compression.compress

    def counted(data: bytes, encoding: str) -> bytes:
        made.append(encoding)
        return real(data, encoding)

    monkeypatch.setattr(compression, "compress", counted)
    url = "/alice/comp/src/branch/main/notes.txt"
    answers = [client.simulate_get(url, headers={"Accept-Encoding": "gzip"}) for _ in range(3)]
    answers += [client.simulate_get(url, headers={"Accept-Encoding": "br"}) for _ in range(3)]
    assert made == ["gzip", "br"]
    assert len({a.content for a in answers[:3]}) == 1 and len({a.content for a in answers[3:]}) == 1
    assert decode(answers[0]) == decode(answers[3])


def test_a_page_carrying_a_csrf_token_is_not_compressed(client, forge):
    # a signed-in person's page carries their CSRF token: compressed beside text an attacker
    # chooses (a repository's files, the URL), its length would tell the token (BREACH)
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    login = client.simulate_get("/-/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)
    signed = client.simulate_post(
        "/-/login",
        body=urlencode({"csrf": csrf, "name": "ann", "password": PASSWORD}),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"floorless_csrf={login.cookies['floorless_csrf'].value}",
        },
    )
    session = signed.cookies[SESSION_COOKIE].value
    url = "/alice/comp"
    anonymous = client.simulate_get(url, headers={"Accept-Encoding": "gzip"})
    theirs = client.simulate_get(
        url, headers={"Accept-Encoding": "gzip", "Cookie": f"{SESSION_COOKIE}={session}"}
    )
    assert re.search(r'name="csrf" value="[^"]+"', theirs.text)
    assert (anonymous.headers.get("content-encoding"), theirs.headers.get("content-encoding")) == (
        "gzip",
        None,
    )
    assert varies(theirs)


@pytest.mark.network
def test_a_real_server_sends_encoded_answers(comp, tmp_path):
    root, ids = comp
    config = tmp_path / "floorless.toml"
    config.write_text("".join(f"{name} = {value}\n" for name, value in BUDGETS.items()))
    urls = [
        f"/alice/comp/commit/{ids['small']}",
        f"/alice/comp/commit/{ids['small']}.diff",
        f"/alice/comp/commit/{ids['large']}.diff",  # streamed from git, encoded in pieces
        "/alice/comp/raw/branch/main/notes.txt",
    ]
    with serving(root, tmp_path / "data", "--config", str(config)) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            for url in urls:
                conn.request("GET", url)
                plain = conn.getresponse()
                plain_body = plain.read()
                assert plain.status == 200 and plain.getheader("Content-Encoding") is None
                for encoding, decoder in (("gzip", gzip.decompress), ("br", brotli.decompress)):
                    conn.request("GET", url, headers={"Accept-Encoding": encoding})
                    answer = conn.getresponse()
                    body = answer.read()
                    assert answer.status == 200, url
                    assert answer.getheader("Content-Encoding") == encoding, url
                    assert "Accept-Encoding" in (answer.getheader("Vary") or "")
                    assert decoder(body) == plain_body, url
                    length = answer.getheader("Content-Length")
                    assert length is None or int(length) == len(body)
        finally:
            conn.close()
