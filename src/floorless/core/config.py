"""Settings: declared once, with a type, a default and a help line each.

They are read, lowest precedence first, from the defaults below, a TOML file (``--config``),
``FLOORLESS_<NAME>`` environment variables, and command-line options. ``docs/configuration.md``
is checked against this table by a test, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floorless.core.errors import ConfigError


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    help: str
    minimum: float | None = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], None] | None = None  # raises ValueError for a bad value
    formerly: tuple[str, ...] = ()  # names it was known by, still read (the new name wins)

    @property
    def shown_default(self) -> str:
        """The default as the reference shows it."""
        if self.default is None:
            return ""
        if isinstance(self.default, tuple):
            return ", ".join(self.default)
        return str(self.default)


def _database(value: str) -> None:
    if "://" in value and not value.startswith(("postgresql://", "postgres://", "sqlite:///")):
        raise ValueError("expected postgresql://…, sqlite:///… or a path")


def _networks(values: tuple[str, ...]) -> None:
    for value in values:
        ipaddress.ip_network(value, strict=False)


def _ssh_user(value: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,32}", value):
        raise ValueError("letters, digits, '.', '_' and '-', at most 32")


def _attachment_types(values: tuple[str, ...]) -> None:
    for value in values:
        if not re.fullmatch(r"\.[A-Za-z0-9._+-]+|[a-z0-9.+-]+/(\*|[A-Za-z0-9.+_-]+)", value):
            raise ValueError(f"{value!r} is neither a name ending (.zip) nor a media type")


_HOST_PATTERN = re.compile(r"[A-Za-z0-9*?.\[\]{},_-]+")


def _allowed_hosts(values: tuple[str, ...]) -> None:
    """Keywords, addresses, networks (CIDR) or host name patterns (``*.example.org``)."""
    for value in values:
        if value.lower() in ("loopback", "private", "external", "*"):
            continue
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            if not _HOST_PATTERN.fullmatch(value):
                raise ValueError(
                    f"{value!r} is no keyword, address, network or host name"
                ) from None


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "data",
        Path,
        Path("floorless-data"),
        "Data directory: the SQLite database and, by default, the runtime directory and repositories.",
    ),
    Setting(
        "database",
        str,
        None,
        "The database: `postgresql://USER:PASSWORD@HOST:PORT/NAME` for PostgreSQL (what several nodes share), or `sqlite:///PATH` or a path for SQLite. Default: `<data>/floorless.sqlite3`.",
        check=_database,
    ),
    Setting(
        "database_timeout",
        float,
        5.0,
        "Seconds a request waits for a PostgreSQL connection (and a connection attempt takes) before it answers 503: a node that loses its database says so quickly, and keeps serving what it holds in memory.",
        minimum=1,
    ),
    Setting(
        "repos",
        Path,
        None,
        "Directory whose git repositories are served (`OWNER/NAME.git` or `OWNER/NAME`). Default: `<data>/repositories`.",
    ),
    Setting(
        "runtime_dir",
        Path,
        None,
        "Private directory for git's HOME and config; keep it on fast local storage. Default: `<data>/run`.",
    ),
    Setting("host", str, "127.0.0.1", "Address to listen on."),
    Setting("port", int, 3000, "TCP port to listen on.", minimum=0),
    Setting("threads", int, 4, "Request-handling threads.", minimum=1),
    Setting(
        "ssh_port",
        int,
        2222,
        "TCP port of the built-in SSH server of `floorless serve` (git clone, fetch and push with SSH keys). 0: no built-in server (OpenSSH's own may serve git instead: docs/ssh.md).",
        minimum=0,
    ),
    Setting(
        "ssh_host",
        str,
        "",
        "Address the built-in SSH server listens on. Empty: the same as `host`.",
    ),
    Setting(
        "ssh_domain",
        str,
        "",
        "Host name in the SSH clone URLs the pages and the API show. Empty: the host of `base_url`, or of each request.",
    ),
    Setting(
        "ssh_url_port",
        int,
        0,
        "Port in the SSH clone URLs, when people reach SSH on another port than `ssh_port` (OpenSSH on 22, a port forwarded). 0: `ssh_port`.",
        minimum=0,
    ),
    Setting(
        "ssh_user",
        str,
        "git",
        "User name in the SSH clone URLs (`git@host:owner/repo.git`). The built-in server takes any: the key says who connects.",
        check=_ssh_user,
    ),
    Setting(
        "ssh_idle_timeout",
        float,
        300.0,
        "Seconds an SSH connection may stay silent (signing in, between commands, or in a clone or push) before the server closes it.",
        minimum=0.1,
    ),
    Setting(
        "ssh_max_connections",
        int,
        200,
        "SSH connections one server process holds at once; more are closed at once, and the pages go on answering.",
        minimum=1,
    ),
    Setting(
        "expensive_threads",
        int,
        2,
        "Request threads of their own for expensive pages, those that can take seconds when not cached (blame, commit pages and their diffs, compares, archives): other pages never wait for a thread behind them. Formerly `dear_threads`, still read.",
        minimum=1,
        formerly=("dear_threads",),
    ),
    Setting(
        "processes",
        int,
        1,
        "Server processes on this machine (`floorless serve`), so that pages use every core. Each process is a node of its own as on several machines (scale-out.md), sharing the database and the data directory: on PostgreSQL they hear each other's changes through the database; on SQLite they post them on a notice board beside the database file (`<database>-board`, mapped into memory by each), and each keeps its own copy of the history index in memory.",
        minimum=1,
    ),
    Setting(
        "allocator",
        str,
        "pymalloc",
        "Where `floorless serve`'s processes take small objects' memory from: `pymalloc` (Python's own, which keeps every page it ever used) or `malloc` (the C library's, in one arena unless `MALLOC_ARENA_MAX` says otherwise, whose free pages go back to the system once the server is quiet). With git.git and flask indexed, `malloc` holds about 60 MB less at rest and 50 MB less at the first index's peak, and serves about 15% fewer requests a second at 16 clients.",
        choices=("malloc", "pymalloc"),
    ),
    Setting(
        "default_owner",
        str,
        "local",
        "Owner shown for repositories that sit directly in the repositories directory.",
    ),
    Setting("site_name", str, "floorless", "Name shown in page titles and the header."),
    Setting(
        "base_url",
        str,
        "",
        "Public URL of the forge, used in clone URLs and feeds. Empty: taken from each request.",
    ),
    Setting(
        "rescan_interval",
        float,
        30.0,
        "Seconds between scans of the repositories directory for added or removed repositories.",
        minimum=0.5,
    ),
    Setting(
        "adopt_visibility",
        str,
        "public",
        "Who may see a repository a scan finds in the repositories directory (one not created through floorless) when nothing is recorded for its name: `public` (anyone; a directory of checkouts to browse) or `private` (its owner, organisation members and administrators, until made public in its settings). A repository floorless creates or renames has its visibility recorded before its directory appears, so neither choice can expose one a crash interrupted.",
        choices=("public", "private"),
    ),
    Setting(
        "ref_check_interval",
        float,
        2.0,
        "Seconds between checks of cached refs for changes made outside floorless (a push straight into the directory, a mirror fetch).",
        minimum=0.1,
    ),
    Setting(
        "index_slice_commits",
        int,
        5000,
        "Commits whose changed paths the history index reads in one slice: each slice is stored as it ends, and between two slices the indexer turns to the repository most waited for.",
        minimum=1,
    ),
    Setting(
        "lease_seconds",
        float,
        30.0,
        "With several nodes on one PostgreSQL database: seconds a node's hold on a repository's index build lasts unless renewed (it renews it every third of that while it works). A node that dies holding one leaves the build to another node after at most this long.",
        minimum=0.5,
    ),
    Setting(
        "search_max_file_bytes",
        int,
        1_048_576,
        "Largest file, in bytes, that code search indexes; larger files (and binary ones: a NUL byte in their first 8000 bytes) are left out of its results.",
        minimum=1024,
    ),
    Setting(
        "search_cache_bytes",
        int,
        67_108_864,
        "Memory, in bytes, that code search keeps files' lower-cased contents in (by blob id), so that a repeated search reads no object; 0 keeps none.",
        minimum=0,
    ),
    Setting(
        "search_seconds",
        float,
        1.0,
        "Time one code search may spend matching files before it answers with what it found, marked as partial.",
        minimum=0.05,
    ),
    Setting(
        "repo_handles",
        int,
        128,
        "Open repository handles, one per repository shared by every thread (least recently "
        "used are closed).",
        minimum=1,
    ),
    Setting(
        "max_file_view",
        int,
        1_048_576,
        "Largest file, in bytes, shown in full on a file page; larger files are truncated with a link to the raw bytes.",
        minimum=1024,
    ),
    Setting(
        "max_highlight",
        int,
        524_288,
        "Largest file, in bytes, that gets syntax highlighting.",
        minimum=0,
    ),
    Setting(
        "max_render_bytes",
        int,
        524_288,
        "Largest document, in bytes, rendered (Markdown, reStructuredText, AsciiDoc, CSV, a "
        "notebook, a README); a larger one is shown as its source.",
        minimum=0,
    ),
    Setting(
        "asciidoctor_ruby",
        str,
        "ruby",
        "The Ruby that runs Asciidoctor (Debian package `asciidoctor`) to render AsciiDoc, in one worker process started when the first AsciiDoc document is shown. Without it (or empty) AsciiDoc is shown as its source.",
    ),
    Setting(
        "asciidoctor_seconds",
        float,
        10.0,
        "Time Asciidoctor may take to convert one AsciiDoc document; past it the worker is ended (another starts for the next document) and the document is shown as its source.",
        minimum=0.1,
    ),
    Setting(
        "max_diff_lines",
        int,
        1500,
        "Diff lines shown per file on a commit page before the file's diff is truncated.",
        minimum=10,
    ),
    Setting(
        "max_diff_total_lines",
        int,
        3000,
        "Diff lines shown in total on a commit page; a file whose diff does not fit is listed, and its diff loads on its own when asked for.",
        minimum=10,
    ),
    Setting(
        "max_diff_highlight_lines",
        int,
        1000,
        "Diff lines highlighted on a commit page, or in one file's diff loaded on its own (a file's lines before and after the change count once each); files past it are shown as plain text.",
        minimum=0,
    ),
    Setting(
        "max_diff_page_bytes",
        int,
        393_216,
        "Bytes of diff HTML on a commit page; a file whose diff does not fit is listed, and its diff loads on its own when asked for.",
        minimum=1024,
    ),
    Setting(
        "max_diff_files",
        int,
        300,
        "Files of a commit whose diff is made (their lines added and removed are counted and their diff may be shown on its page); the diffs of the others load one file at a time when asked for.",
        minimum=1,
    ),
    Setting(
        "max_diff_listed",
        int,
        1000,
        "Changed files listed on a commit page; beyond them only their number is given.",
        minimum=1,
    ),
    Setting(
        "max_diff_file_bytes",
        int,
        1_048_576,
        "Largest file, in bytes (before or after the commit), whose diff is made for a commit page; a larger one is listed as a large file without its diff. Diffing runs with the interpreter held: other requests wait meanwhile.",
        minimum=1024,
    ),
    Setting(
        "max_diff_bytes",
        int,
        8_388_608,
        "Bytes of file contents (before and after) diffed for one commit page; the files past this budget are listed, and their diff loads on its own when asked for. Also the largest commit whose `.diff` and `.patch` are made in-process: a larger one is streamed from a `git diff-tree` child, under the same limit as archives.",
        minimum=1024,
    ),
    Setting(
        "max_tree_entries",
        int,
        2000,
        "Entries listed on one page of a directory; a larger directory continues on further pages (`?after=NAME`) and is shown without each entry's last commit.",
        minimum=10,
    ),
    Setting(
        "max_blob_page_bytes",
        int,
        4_194_304,
        "Largest file, in bytes, read for a file page; a larger file is not read at all (reading holds the interpreter, so other requests would wait): the page gives its size and links to the raw bytes.",
        minimum=1024,
    ),
    Setting(
        "max_blame_bytes",
        int,
        1_048_576,
        "Largest file, in bytes, that the blame page blames; a larger one is not read, and the page says so.",
        minimum=1024,
    ),
    Setting(
        "max_blame_highlight",
        int,
        32_768,
        "Largest file, in bytes, whose blame page is syntax-highlighted; a larger one is shown as plain text, so that its first blame costs about what `git blame` costs (highlighting a 7,000-line C file takes longer than blaming it) and its page stays small.",
        minimum=0,
    ),
    Setting(
        "max_raw_in_process_bytes",
        int,
        8_388_608,
        "Largest file, in bytes, that a raw download serves from memory; a larger one is streamed by a `git cat-file` child, at most `threads` / 2 at once together with archives and blames (beyond that: 503 with `Retry-After`).",
        minimum=1024,
    ),
    Setting("commits_per_page", int, 50, "Commits per page of a commits list.", minimum=1),
    Setting(
        "repos_per_page",
        int,
        30,
        "Repositories per page of the explore and owner pages.",
        minimum=1,
    ),
    Setting(
        "page_cache_bytes",
        int,
        64 * 1024 * 1024,
        "Bytes of rendered pages kept in memory (home, file, commits, commit, blame, issue and pull request pages, keyed by the repository's refs, the path, the query parameters the page reads and the viewer; never the Host); 0 keeps none.",
        minimum=0,
    ),
    Setting(
        "render_cache_bytes",
        int,
        32 * 1024 * 1024,
        "Bytes kept in memory by each of the caches of rendered fragments and API answers keyed by object ids (highlighted files and blames, READMEs, commit diffs; the API's commits, diffs and tree listings); 0 keeps none.",
        minimum=0,
    ),
    Setting(
        "compressed_cache_bytes",
        int,
        16 * 1024 * 1024,
        "Bytes of gzip- and brotli-compressed answers kept in memory, keyed by the answer's ETag and encoding, so a warm page is not compressed again; 0 keeps none.",
        minimum=0,
    ),
    Setting(
        "git_mapped_bytes",
        int,
        32 * 1024 * 1024,
        "Bytes of pack files libgit2 keeps mapped at most, in windows of at most a quarter of this (its own default on 64-bit systems is 8 GiB of 1 GiB windows: every pack read stayed mapped and counted in the server's resident memory).",
        minimum=1024 * 1024,
    ),
    Setting(
        "git_object_cache_bytes",
        int,
        32 * 1024 * 1024,
        "Bytes of parsed git objects (trees, commits, small blobs) libgit2 keeps in memory across requests, shared by every repository; 0 keeps none.",
        minimum=0,
    ),
    Setting(
        "page_cache_seconds",
        float,
        60.0,
        'Seconds a rendered page is reused at most (its relative dates, such as "3 hours ago", age by as much).',
        minimum=0,
    ),
    Setting(
        "session_days",
        float,
        30.0,
        "Days a web sign-in lasts.",
        minimum=0.01,
    ),
    Setting(
        "secure_cookies",
        str,
        "auto",
        "Mark cookies `Secure`: `auto` (when the request came over HTTPS, or `base_url` is https), `always` or `never`.",
        choices=("auto", "always", "never"),
    ),
    Setting(
        "signin_attempts",
        int,
        5,
        "Failed sign-ins (web or git password) allowed for one account from one client address within `signin_window` seconds; that address's further attempts at that account wait.",
        minimum=1,
    ),
    Setting(
        "signin_address_attempts",
        int,
        20,
        "Failed sign-ins allowed from one client address (an IPv6 /64), whatever the accounts, within `signin_window` seconds.",
        minimum=1,
    ),
    Setting(
        "signin_account_attempts",
        int,
        20,
        "Failed sign-ins allowed for one account from all addresses together within `signin_window` seconds. Beyond it the account is slowed, never locked: an address that has signed in as that person before (password, token or session) is unaffected, and other addresses share one attempt per failure that ages out of the window.",
        minimum=1,
    ),
    Setting(
        "signin_window",
        float,
        300.0,
        "Seconds over which failed sign-ins are counted.",
        minimum=1,
    ),
    Setting(
        "password_checks",
        int,
        2,
        "Passwords checked at once (each argon2 check takes about 64 MiB and a core for tens of milliseconds); a sign-in beyond them is answered 503 with `Retry-After` rather than queued.",
        minimum=1,
    ),
    Setting(
        "trusted_proxies",
        list,
        (),
        "Addresses or networks (CIDR) of reverse proxies in front of floorless, comma-separated in the environment. Only for a request from one of them are `X-Forwarded-For` (the client address is its right-most address that is not itself a trusted proxy) and `X-Forwarded-Proto` believed; from anyone else both are ignored.",
        check=_networks,
    ),
    Setting(
        "metrics_addresses",
        list,
        ("127.0.0.0/8", "::1"),
        "Client addresses or networks (CIDR) that may read `/-/metrics`; anyone else gets 404 unless they send `metrics_token`. A request forwarded by a proxy that is not in `trusted_proxies` never counts as coming from these addresses.",
        check=_networks,
    ),
    Setting(
        "metrics_token",
        str,
        "",
        "A secret that opens `/-/metrics` from any address when sent as `Authorization: Bearer <token>`; empty: none.",
    ),
    Setting(
        "storage_dir",
        Path,
        None,
        "Directory of the files people upload (release and issue attachments, Git LFS objects), kept once each by the SHA-256 of their bytes. Several nodes serve the same files when it is on storage they share. Default: `<data>/storage`.",
    ),
    Setting(
        "attachment_max_bytes",
        int,
        2 * 1024**3,
        "Largest file that may be attached to a release, an issue or a comment (bytes).",
        minimum=1,
    ),
    Setting(
        "attachment_types",
        list,
        (),
        "What files may be attached, as Forgejo's `ALLOWED_TYPES`: name endings (`.zip`), media types (`application/gzip`) or families (`image/*`), judged by the file's name (never by the type its sender claims); empty: any file.",
        check=_attachment_types,
    ),
    Setting(
        "lfs_max_bytes",
        int,
        0,
        "Largest Git LFS object a push may upload (bytes); 0: no limit.",
        minimum=0,
    ),
    Setting(
        "max_push_bytes",
        int,
        2 * 1024**3,
        "Largest request body a push may send (bytes, after decompression).",
        minimum=1024,
    ),
    Setting(
        "max_fetch_request_bytes",
        int,
        64 * 1024**2,
        "Largest request body of a clone or fetch negotiation (bytes, after decompression).",
        minimum=1024,
    ),
    Setting(
        "max_form_bytes",
        int,
        1024**2,
        "Largest request body of anything but git's push, clone and fetch (a form, a sign-in).",
        minimum=1024,
    ),
    Setting(
        "client_timeout",
        float,
        30.0,
        "Seconds a client may go without sending the next piece of its request body, or without taking the next piece of a streamed answer (a clone, an archive), before it is cut off. No request thread waits on a client meanwhile.",
        minimum=1,
    ),
    Setting(
        "blame_timeout",
        float,
        60.0,
        "Seconds a `git blame` may run before it is stopped.",
        minimum=1,
    ),
    Setting(
        "gc_interval",
        float,
        86400.0,
        "Seconds between garbage collections (`git gc --prune=now`) of the repositories whose refs moved since their last one: they remove from disk what no branch or tag reaches any more, such as a deleted branch's commits (which are never served once unreachable). 0: never (`floorless admin gc` runs one on demand).",
        minimum=0,
    ),
    Setting(
        "gc_pack_depth",
        int,
        10,
        "Longest chain of deltas in the packs garbage collection writes (git's `pack.depth`, 50 by default in git): libgit2 rebuilds an object from its chain on each read, so a commit page's diff of a history packed 10 deep took about half the time of one packed 50 deep. Longer chains are cut when a repository is collected, which makes its pack larger (a generated 10,000-commit history: 9.1 MB at depth 50, 11.7 MB at 10).",
        minimum=1,
    ),
    Setting(
        "webhook_timeout",
        float,
        5.0,
        "Seconds a webhook's receiver has to connect, and then for each read of its answer; a receiver that takes longer fails that attempt (it is retried) and holds up no other delivery.",
        minimum=0.1,
    ),
    Setting(
        "webhook_allowed_hosts",
        list,
        ("external",),
        "Where webhooks may be delivered, as Forgejo's `ALLOWED_HOST_LIST`: `external` (public addresses), `private` (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7), `loopback`, `*` (anything), addresses, networks (CIDR) and host name patterns (`*.example.org`). Every address a receiver's name resolves to at delivery time must be allowed; link-local addresses (cloud metadata services among them) only by address or network. An IPv6 address carrying an IPv4 one (IPv4-mapped, -compatible or -translated, NAT64, 6to4, Teredo) is that IPv4 address.",
        check=_allowed_hosts,
    ),
    Setting(
        "webhook_retry_seconds",
        float,
        10.0,
        "Seconds before a failed webhook delivery is tried again, doubled at each further try; a delivery is given up after 5 tries.",
        minimum=0,
    ),
)

_BY_NAME = {s.name: s for s in SETTINGS}
_FORMER = {old: s.name for s in SETTINGS for old in s.formerly}


@dataclass(frozen=True)
class Settings:
    """Validated settings; build them with ``Settings.load`` (the defaults live in SETTINGS)."""

    data: Path
    database: str
    database_timeout: float
    repos: Path
    runtime_dir: Path
    host: str
    port: int
    threads: int
    ssh_port: int
    ssh_host: str
    ssh_domain: str
    ssh_url_port: int
    ssh_user: str
    ssh_idle_timeout: float
    ssh_max_connections: int
    expensive_threads: int
    processes: int
    allocator: str
    default_owner: str
    site_name: str
    base_url: str
    rescan_interval: float
    adopt_visibility: str
    ref_check_interval: float
    index_slice_commits: int
    lease_seconds: float
    search_max_file_bytes: int
    search_cache_bytes: int
    search_seconds: float
    repo_handles: int
    max_file_view: int
    max_highlight: int
    max_render_bytes: int
    asciidoctor_ruby: str
    asciidoctor_seconds: float
    max_diff_lines: int
    max_diff_total_lines: int
    max_diff_highlight_lines: int
    max_diff_page_bytes: int
    max_diff_files: int
    max_diff_listed: int
    max_diff_file_bytes: int
    max_diff_bytes: int
    max_tree_entries: int
    max_blob_page_bytes: int
    max_blame_bytes: int
    max_blame_highlight: int
    max_raw_in_process_bytes: int
    commits_per_page: int
    repos_per_page: int
    page_cache_bytes: int
    render_cache_bytes: int
    compressed_cache_bytes: int
    git_mapped_bytes: int
    git_object_cache_bytes: int
    page_cache_seconds: float
    session_days: float
    secure_cookies: str
    signin_attempts: int
    signin_address_attempts: int
    signin_account_attempts: int
    signin_window: float
    password_checks: int
    trusted_proxies: tuple[str, ...]
    metrics_addresses: tuple[str, ...]
    metrics_token: str
    storage_dir: Path
    attachment_max_bytes: int
    attachment_types: tuple[str, ...]
    lfs_max_bytes: int
    max_push_bytes: int
    max_fetch_request_bytes: int
    max_form_bytes: int
    client_timeout: float
    blame_timeout: float
    gc_interval: float
    gc_pack_depth: int
    webhook_timeout: float
    webhook_allowed_hosts: tuple[str, ...]
    webhook_retry_seconds: float

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Merge defaults, the TOML file, the environment and overrides, then validate."""
        environ = os.environ if environ is None else environ
        raw: dict[str, Any] = {}
        if config_file is None and environ.get("FLOORLESS_CONFIG"):
            config_file = Path(environ["FLOORLESS_CONFIG"])
        if config_file is not None:
            raw.update(_read_toml(config_file))
        for setting in SETTINGS:
            for name in (*setting.formerly, setting.name):
                value = environ.get("FLOORLESS_" + name.upper())
                if value is not None:
                    raw[setting.name] = value
        raw.update({k: v for k, v in overrides.items() if v is not None})
        values = {s.name: s.default for s in SETTINGS}
        values.update({name: _coerce(_BY_NAME[name], value) for name, value in raw.items()})
        data = Path(values["data"]).absolute()
        values["data"] = data
        values["database"] = values.get("database") or str(data / "floorless.sqlite3")
        values["repos"] = Path(values.get("repos") or data / "repositories").absolute()
        values["runtime_dir"] = Path(values.get("runtime_dir") or data / "run").absolute()
        values["storage_dir"] = Path(values.get("storage_dir") or data / "storage").absolute()
        return cls(**values)

    def ssh_clone_url(self, public: str, full_name: str) -> str:
        """The SSH clone URL of ``full_name`` (``owner/name``) as people reach the forge at
        ``public`` (its base URL): ``git@host:owner/name.git`` on port 22, ``ssh://`` with
        the port otherwise; empty when no SSH port is known."""
        port = self.ssh_url_port or self.ssh_port
        if not port:
            return ""
        host = self.ssh_domain or (urllib.parse.urlsplit(public).hostname or self.host)
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        if port == 22:
            return f"{self.ssh_user}@{host}:{full_name}.git"
        return f"ssh://{self.ssh_user}@{host}:{port}/{full_name}.git"

    def as_environ(self) -> dict[str, str]:
        """These settings as FLOORLESS_* variables, to hand to a server worker process."""
        return {
            "FLOORLESS_" + f.name.upper(): _environ_value(getattr(self, f.name))
            for f in dataclasses.fields(self)
        }


def _environ_value(value: object) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            table = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    unknown = sorted(set(table) - set(_BY_NAME) - set(_FORMER))
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting(s): {', '.join(unknown)}")
    former = {_FORMER[name]: value for name, value in table.items() if name in _FORMER}
    return former | {name: value for name, value in table.items() if name not in _FORMER}


def _coerce(setting: Setting, value: Any) -> Any:
    kind = setting.type
    try:
        if kind is Path:
            result: Any = Path(os.path.expanduser(str(value)))
        elif kind is bool and isinstance(value, str):
            result = value.strip().lower() in ("1", "true", "yes", "on")
        elif kind is int and isinstance(value, float):
            raise ValueError(value)
        elif kind is list:
            result = _list(value)
        else:
            result = kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"setting {setting.name!r}: expected {kind.__name__}, got {value!r}"
        ) from exc
    if setting.check is not None:
        try:
            setting.check(result)
        except ValueError as exc:
            raise ConfigError(f"setting {setting.name!r}: {exc}") from exc
    if setting.choices is not None and result not in setting.choices:
        raise ConfigError(f"setting {setting.name!r}: must be one of {', '.join(setting.choices)}")
    if setting.minimum is not None and result < setting.minimum:
        raise ConfigError(f"setting {setting.name!r}: must be at least {setting.minimum}")
    return result


def _list(value: Any) -> tuple[str, ...]:
    """A TOML list of strings, or a string of items separated by commas or spaces."""
    if isinstance(value, str):
        return tuple(item for item in value.replace(",", " ").split() if item)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(item.strip() for item in value if item.strip())
    raise TypeError(value)
