"""AsciiDoc rendered by Asciidoctor (the Debian package asciidoctor) in one worker per forge:
pages that render it (0 processes: the worker is started by a background thread, once), what
hostile documents cannot reach, the worker's limits, its restart, and the source shown when
there is no Asciidoctor."""

from __future__ import annotations

import http.client
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from falcon import testing
from support.asciidoc import HOSTILE, MANY, SLOW, SLOW_DOCS, TABLE, build
from support.forges import patience, start_forge, wait_for, wait_indexed
from support.serving import serving
from support.spawns import counting, spawn_timing

from floorless.core import asciidoctor
from floorless.core.asciidoctor import Asciidoctor
from floorless.forge import Forge
from floorless.web.app import create_app

SECRET = "TOP-SECRET-4242"  # in a file beside the repositories, never in a page





def make_forge(root: Path, **overrides) -> Forge:
    build(root / "repos" / "alice" / "docs.git")
    (root / "secret.txt").write_text(SECRET)
    forge = start_forge(root / "repos", root / "data", **overrides)
    wait_indexed(forge)
    return forge


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forge]:
    forge = make_forge(tmp_path_factory.mktemp("adoc"))
    yield forge
    forge.stop()


@pytest.fixture(scope="module")
def client(forge: Forge) -> testing.TestClient:
    return testing.TestClient(create_app(forge))


def get(client: testing.TestClient, url: str) -> str:
    """A page: 200, and no process spawned while it was answered (by the test's own audit
    hook and by the page's Server-Timing)."""
    with counting() as events:
        result = client.simulate_get(url)
    assert result.status_code == 200, (url, result.status_code, result.text[:300])
    assert events == [], (url, events)
    assert spawn_timing(result) == 0
    return result.text


def rendered(page: str) -> str:
    """The rendered document of a file page (the source beside it is escaped text)."""
    start = page.index('<div class="markdown rendered">')
    return page[start : page.index("</main>", start)]


def workers(forge: Forge) -> list[int]:
    """This process's children that are Asciidoctor workers of ``forge``."""
    workdir = str(forge.settings.runtime_dir / "asciidoctor")
    found = []
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except FileNotFoundError:  # ended meanwhile
                continue
            if cwd == workdir and b"asciidoctor.rb" in command:
                found.append(int(pid))
    return found


def cpu_seconds(pid: int) -> float:
    """The processor time process ``pid`` has taken."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_readme_and_file_pages_render_asciidoc(forge: Forge, client: testing.TestClient) -> None:
    home = get(client, "/alice/docs")
    html = home[home.index('<section class="readme">') :]
    assert '<h1 id="demo-manual">Demo Manual' in html
    assert '<h2 id="install">Install' in html
    assert 'href="/alice/docs/src/branch/main/docs/guide.adoc"' in html
    flat = re.sub(r"\s+|</?div>|</?p>", "", html)
    assert "<ol><li>Downloadit.</li><li>Runit:" in flat
    assert "<ul><li>one<ul><li>nested</li></ul></li></ul>" in flat
    assert '<span class="nb">print</span>' in html  # the source block, highlighted
    assert "conum" not in html and "&lt;b" not in html and "Says hello." in html  # callout
    assert '<div class="admonition tip"><p><strong>Tip</strong></p>' in html
    assert '<div class="admonition warning">' in html and "Mind the gap." in html
    assert "<th>Name</th>" in html and "<td><p>colour</p></td>" in html
    assert ' class=""' not in html and "<colgroup" not in html

    page = get(client, "/alice/docs/src/branch/main/docs/guide.adoc")
    body = rendered(page)
    assert '<h1 id="guide">' in body and '<h2 id="setting-up">' in body
    assert 'href="/alice/docs/src/branch/main/README.adoc"' in body
    assert 'href="/alice/docs/src/branch/main/docs/other.adoc#part"' in body
    assert 'src="/alice/docs/raw/branch/main/docs/img/logo.png"' in body
    # an id the document gives a section stays a target: <<setup>> leads somewhere
    assert 'href="#setup"' in body and 'id="setup"' in body
    assert 'id="fn-1"' in body and body.count('href="#fn-1"') == 2  # a footnote named twice
    assert body.count('id="fnref-1"') == 1  # and one id, on its first reference
    assert "This document is shown as its source" not in page


def test_a_second_view_asks_nothing(forge: Forge, client: testing.TestClient) -> None:
    url = "/alice/docs/src/branch/main/docs/other.adoc"
    first = get(client, url)
    assert '<h2 id="part">' in first
    converted = forge.asciidoctor.converted
    again = get(client, url)
    assert again.count('<h2 id="part">') == 1
    assert forge.asciidoctor.converted == converted  # from the cache: the worker was not asked


def test_one_worker_for_many_documents(forge: Forge, client: testing.TestClient) -> None:
    for name in MANY:
        page = get(client, f"/alice/docs/src/branch/main/{name}")
        assert '<h2 id="part-' in page
    assert forge.asciidoctor.started == 1
    assert workers(forge) == [forge.asciidoctor.pid]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_documents_reach_nothing(
    forge: Forge, client: testing.TestClient, name: str
) -> None:
    page = get(client, f"/alice/docs/src/branch/main/hostile/{name}")
    body = rendered(page)  # the rendered document: the source beside it is escaped text
    for secret in (SECRET, "root:x:0", str(forge.settings.data), os.environ["HOME"]):
        assert secret not in page, secret
    for bad in ("<script", "javascript:", "root home", "pwned"):
        assert bad not in body, bad
    assert not Path("/tmp/floorless-adoc-pwned").exists()
    assert not re.search(r"<[^>]*\son\w+=", body), body
    if name == "include.adoc":  # a link to the path named, inside the repository
        assert 'href="/alice/docs/src/branch/main/etc/passwd"' in body
    if name == "ids.adoc":
        ids = re.findall(r'\sid="([^"]*)"', body)
        assert ids == ["ids", "finder-list-1", "finder-2-1", "about"], ids
    if name == "attributes.adoc":
        assert "{env-HOME}" in body  # no such attribute: the reference stays text


def test_large_documents_are_answered(forge: Forge, client: testing.TestClient) -> None:
    nested = get(client, "/alice/docs/src/branch/main/big/nested.adoc")
    assert "This document is shown as its source: it is larger than 256.0 KiB" in nested
    table = get(client, "/alice/docs/src/branch/main/big/table.adoc")
    body = rendered(table)
    assert body.count("<td>") == 30_000 and len(body) < 1 << 20
    assert '<h1 id="demo-manual">' in get(client, "/alice/docs")  # and it goes on serving


def test_a_document_nested_too_deep_is_its_source_once(
    forge: Forge, client: testing.TestClient
) -> None:
    url = "/alice/docs/src/branch/main/big/deep.adoc"
    page = get(client, url)
    assert '<pre class="too-deep">====\n=====\n' in rendered(page)  # the source, escaped
    converted = forge.asciidoctor.converted
    assert get(client, url) == page and forge.asciidoctor.converted == converted  # kept


def test_a_slow_document_ends_the_worker_and_is_not_tried_again(tmp_path: Path) -> None:
    worker = Asciidoctor("ruby", 1.0, tmp_path)
    try:
        assert worker.convert("= Quick\n") is not None
        first = worker.pid
        slow = "|===\n" + "|x " * 80_000 + "\n|===\n"  # 2-3 s of work for Asciidoctor
        assert worker.convert(slow) is None
        assert worker.pid is None and not Path(f"/proc/{first}").exists()  # ended, reaped
        assert worker.convert("= Next\n") is not None  # a new worker
        assert worker.started == 2
        assert worker.convert(slow) is None  # remembered: not sent again
        assert worker.started == 2 and worker.pid is not None
    finally:
        worker.stop()
    assert worker.pid is None


def test_a_worker_grown_large_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asciidoctor, "RESTART_BYTES", 48 * 1024 * 1024)
    worker = Asciidoctor("ruby", patience(30), tmp_path)
    try:
        for n in range(3):  # a README leaves it at ~20 MB: it stays
            assert worker.convert(f"= Small {n}\n\n* a\n* b\n") is not None
        first = worker.pid
        assert worker.started == 1 and asciidoctor._resident(first) < asciidoctor.RESTART_BYTES
        assert worker.convert(TABLE.decode()) is not None  # Ruby's heap grows past 48 MB
        assert worker.pid is None and not Path(f"/proc/{first}").exists()
        assert worker.convert("= Next\n") is not None and worker.started == 2
    finally:
        worker.stop()


def test_stopping_waits_for_the_document_being_converted(tmp_path: Path) -> None:
    worker = Asciidoctor("ruby", patience(30), tmp_path)
    assert worker.convert("= Quick\n") is not None
    pid = worker.pid
    answers: list[str | None] = []
    slow = "|===\n" + "|x " * 120_000 + "\n|===\n"  # 3-4 s of work for Asciidoctor
    thread = threading.Thread(target=lambda: answers.append(worker.convert(slow)))
    thread.start()
    wait_for(worker._turn.locked)
    worker.stop()  # the document is answered, then the worker ends; pipes are not closed under it
    thread.join(timeout=patience(30))
    assert len(answers) == 1 and answers[0] is not None and answers[0].count("<td") == 120_000
    assert worker.pid is None and not Path(f"/proc/{pid}").exists()
    assert worker.convert("= After\n") is None and worker.started == 1  # stopped: no other


def test_pages_past_half_the_threads_do_not_wait_for_the_worker(tmp_path: Path) -> None:
    worker = Asciidoctor("ruby", patience(60), tmp_path, at_once=2)
    try:
        assert worker.convert("= Quick\n") is not None
        answers: dict[int, str | None] = {}

        def convert(n: int) -> None:
            answers[n] = worker.convert(f"= Slow {n}\n\n{SLOW}\n")

        first = threading.Thread(target=convert, args=(0,))
        first.start()
        wait_for(worker._turn.locked)  # the first document is being converted
        second = threading.Thread(target=convert, args=(1,))
        second.start()
        wait_for(lambda: worker.inside == 2)  # and the second waits for the worker
        assert worker.convert("= Third\n") is None  # the third page shows the source at once,
        assert first.is_alive() and worker.inside == 2  # while the first is converted
        first.join(timeout=patience(60))
        second.join(timeout=patience(60))
        assert all("Slow" in (answers[n] or "") for n in (0, 1)), answers
        assert worker.inside == 0
        assert "Third" in (worker.convert("= Third\n") or "")  # not remembered as failed
        assert worker.started == 1
    finally:
        worker.stop()


@pytest.mark.network
def test_documents_that_keep_the_worker_busy_leave_threads_for_other_pages(
    tmp_path: Path,
) -> None:
    repos = tmp_path / "repos"
    build(repos / "alice" / "docs.git")
    config = tmp_path / "floorless.toml"
    config.write_text(f"threads = 4\nasciidoctor_seconds = {patience(60)}\n")
    with serving(repos, tmp_path / "data", "--config", str(config)) as server:

        def fetch(path: str) -> str:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=patience(120))
            try:
                conn.request("GET", path)
                answer = conn.getresponse()
                assert answer.status == 200, (path, answer.status)
                assert 'spawn;desc="processes";dur=0' in (answer.getheader("Server-Timing") or "")
                return answer.read().decode()
            finally:
                conn.close()

        assert '<h2 id="part-0">' in fetch("/alice/docs/src/branch/main/many/doc0.adoc")
        answered: list[str] = []  # what each answer was, in the order they came

        def slow(name: str) -> None:
            page = fetch(f"/alice/docs/src/branch/main/{name}")
            answered.append("rendered" if '<div class="markdown rendered">' in page else "source")

        # four pages of documents that keep the worker busy: two are in it (one converted,
        # one waiting), the other two show their source at once
        pages = [threading.Thread(target=slow, args=(name,)) for name in SLOW_DOCS]
        for page in pages:
            page.start()
        wait_for(lambda: len(answered) >= 2)
        # and two threads are free meanwhile: a raw file and a file page are answered
        assert fetch("/alice/docs/raw/branch/main/docs/other.adoc").startswith("= Other")
        answered.append("raw")
        assert "guide.adoc" in fetch("/alice/docs/src/branch/main/docs")
        answered.append("page")
        for page in pages:
            page.join(timeout=patience(120))
        assert answered == ["source", "source", "raw", "page", "rendered", "rendered"]
        # a page shown as its source for want of the worker is not kept: it renders now
        for name in SLOW_DOCS:
            page = fetch(f"/alice/docs/src/branch/main/{name}")
            assert '<div class="markdown rendered">' in page, name


def test_a_document_whose_worker_is_killed_from_outside_is_tried_again(tmp_path: Path) -> None:
    worker = Asciidoctor("ruby", patience(60), tmp_path)
    try:
        assert worker.convert("= Quick\n") is not None
        killed = worker.pid
        assert killed is not None
        answers: list[str | None] = []
        document = "= Slow\n\n" + "link:x[" * 12_000 + "\n"  # 2.25 times the work of SLOW
        idle = cpu_seconds(killed)
        thread = threading.Thread(target=lambda: answers.append(worker.convert(document)))
        thread.start()
        # it has converted for longer than a worker that dies at once (tried again at once)
        wait_for(lambda: cpu_seconds(killed) - idle > asciidoctor.QUICK)
        os.kill(killed, signal.SIGKILL)  # by an administrator, or the system short of memory
        thread.join(timeout=patience(60))
        assert answers == [None] and not Path(f"/proc/{killed}").exists()
        again = worker.convert(document)  # not remembered as a document that fails
        assert again is not None and "Slow" in again and worker.started == 2
    finally:
        worker.stop()


def test_a_killed_worker_is_restarted(tmp_path: Path) -> None:
    forge = make_forge(tmp_path)
    try:
        client = testing.TestClient(create_app(forge))
        assert '<h2 id="part-0">' in get(client, "/alice/docs/src/branch/main/many/doc0.adoc")
        killed = forge.asciidoctor.pid
        assert killed is not None and workers(forge) == [killed]
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: Path(f"/proc/{killed}/stat").read_text().split(") ")[1][0] == "Z")
        page = get(client, "/alice/docs/src/branch/main/many/doc1.adoc")
        assert '<h2 id="part-1">' in page
        assert forge.asciidoctor.started == 2 and forge.asciidoctor.pid != killed
        assert workers(forge) == [forge.asciidoctor.pid]
    finally:
        forge.stop()
    assert workers(forge) == []


@pytest.mark.parametrize("ruby", ["/nonexistent/ruby", "false"])
def test_without_asciidoctor_the_source_is_shown(tmp_path: Path, ruby: str) -> None:
    forge = make_forge(tmp_path, asciidoctor_ruby=ruby)
    try:
        client = testing.TestClient(create_app(forge))
        page = get(client, "/alice/docs/src/branch/main/docs/guide.adoc")
        assert "This document is shown as its source: it could not be rendered." in page
        assert "link:../README.adoc[the README]" in page and '<h1 id="guide">' not in page
        home = get(client, "/alice/docs")
        assert "This document is shown as its source: it could not be rendered." in home
        assert '<pre class="plain">= Demo Manual' in home
        assert forge.asciidoctor.started == 0 and workers(forge) == []
    finally:
        forge.stop()


def test_no_ruby_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory
    worker = Asciidoctor("ruby", 5, tmp_path / "work")
    assert worker.convert("= Title\n") is None
    assert worker.convert("= Title\n") is None  # not tried again at once
    assert worker.started == 0
    worker.stop()


@pytest.mark.network
def test_a_real_server_keeps_one_worker(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    build(repos / "alice" / "docs.git")
    with serving(repos, tmp_path / "data") as server:

        def fetch(path: str) -> tuple[str, str]:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=patience(60))
            try:
                conn.request("GET", path)
                answer = conn.getresponse()
                assert answer.status == 200, (path, answer.status)
                return answer.read().decode(), answer.getheader("Server-Timing") or ""
            finally:
                conn.close()

        for path in ["/alice/docs", *(f"/alice/docs/src/branch/main/{n}" for n in MANY)]:
            page, timing = fetch(path)
            assert re.search(r'<h[12] id="(demo-manual|part-\d)">', page), path
            assert 'spawn;desc="processes";dur=0' in timing, timing
        found = [
            pid
            for pid in server.descendants()
            if b"asciidoctor.rb" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(found) == 1, found
        page, _ = fetch("/alice/docs/src/branch/main/big/table.adoc")
        assert page.count("<td>") == 30_000
        assert "Demo Manual" in fetch("/alice/docs")[0]
