"""deploy/nginx.conf run for real, unprivileged, on loopback: the tested proxy configuration
in front of floorless nodes, for the scale-out benchmark and tests/cli/test_scaleout_proxy.py.

The file is used as shipped; only what names a machine changes: the nodes' addresses, the
listening addresses (free loopback ports instead of 80 and 443) and the certificate (a
self-signed one for 127.0.0.1). Each replacement must match the file exactly once, so that
an edit to the shipped file that this does not know of fails loudly instead of being
measured untested. nginx gets a main configuration of its own around it (pid, logs and
temporary files in the work directory) and runs in the foreground, in a session of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.contenders import nginx_main

SHIPPED = Path(__file__).resolve().parents[1] / "deploy" / "nginx.conf"
NODES = ("server 10.0.0.11:3000 ", "server 10.0.0.12:3000 ")
PLAIN_LISTEN = "    listen 80;\n    listen [::]:80;\n"
TLS_LISTEN = "    listen 443 ssl http2;\n    listen [::]:443 ssl http2;\n"
CERTIFICATE = "/etc/ssl/git.example.org/fullchain.pem"
KEY = "/etc/ssl/git.example.org/privkey.pem"
HAPROXY = SHIPPED.with_name("haproxy.cfg")
HAPROXY_NODES = ("server node1 10.0.0.11:3000\n", "server node2 10.0.0.12:3000\n")
HAPROXY_PEM = "/etc/ssl/git.example.org/combined.pem"


class ProxyError(RuntimeError):
    """nginx could not be started (its error log is quoted)."""


def nginx_path() -> str | None:
    return _which("nginx")


def haproxy_path() -> str | None:
    return _which("haproxy")


def _which(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1, valid for two days."""
    cert, key = directory / "proxy-cert.pem", directory / "proxy-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
        check=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


def render(
    text: str, nodes: list[int], plain_port: int, tls_port: int, cert: Path, key: Path
) -> str:
    """The shipped configuration with this machine's ports and certificate."""
    if len(nodes) > len(NODES):
        raise ValueError(f"the shipped configuration names {len(NODES)} nodes")
    swaps = [(NODES[i], f"server 127.0.0.1:{port} ") for i, port in enumerate(nodes)]
    swaps += [(n, f"# {n}") for n in NODES[len(nodes) :]]
    swaps += [
        (PLAIN_LISTEN, f"    listen 127.0.0.1:{plain_port};\n"),
        (TLS_LISTEN, f"    listen 127.0.0.1:{tls_port} ssl http2;\n"),
        (CERTIFICATE, str(cert)),
        (KEY, str(key)),
    ]
    return _swapped(text, swaps, SHIPPED.name)


def render_haproxy(text: str, nodes: list[int], plain_port: int, tls_port: int, pem: Path) -> str:
    """deploy/haproxy.cfg with this machine's ports and certificate (and its log sent to
    standard error rather than syslog)."""
    if len(nodes) != len(HAPROXY_NODES):
        raise ValueError(f"the shipped configuration names {len(HAPROXY_NODES)} nodes")
    swaps = [(old, f"server node{i + 1} 127.0.0.1:{port}\n")
             for i, (old, port) in enumerate(zip(HAPROXY_NODES, nodes, strict=True))]  # fmt: skip
    swaps += [
        ("    log /dev/log local0\n", "    log stderr format short local0\n"),
        ("    bind :80\n", f"    bind 127.0.0.1:{plain_port}\n"),
        (f"    bind :443 ssl crt {HAPROXY_PEM} ", f"    bind 127.0.0.1:{tls_port} ssl crt {pem} "),
    ]
    return _swapped(text, swaps, HAPROXY.name)


def _swapped(text: str, swaps: list[tuple[str, str]], name: str) -> str:
    """``text`` with each ``old`` replaced: each must be there exactly once, so that the
    configuration tested is the one shipped, with only its addresses changed."""
    for old, new in swaps:
        found = text.count(old)
        if found != 1:
            raise ProxyError(f"{name} holds {old.strip()!r} {found} times, not once")
        text = text.replace(old, new)
    return text


def main_conf(work: Path, site: Path) -> str:
    return nginx_main(
        work,
        2,
        f"""\
    log_format nodes '$status $upstream_addr $request';
    access_log {work / "nginx-access.log"} nodes;
    include {site};""",
    )


@dataclass
class Proxy:
    url: str  # https://127.0.0.1:PORT
    plain_url: str  # http://127.0.0.1:PORT, which redirects to url
    port: int
    cert: Path
    proc: subprocess.Popen[bytes]
    error_log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def running(
    nodes: list[int], work: Path, tls_port: int = 0, timeout: float = 30.0
) -> Iterator[Proxy]:
    """nginx with deploy/nginx.conf in front of the floorless nodes on ``nodes`` (ports),
    listening for HTTPS on ``tls_port`` (0: a free one)."""
    nginx = nginx_path()
    if nginx is None:
        raise ProxyError("nginx is not installed (scripts/install-test-deps.sh)")
    if any(c.isspace() or c in ";{}\"'" for c in str(work)):
        raise ProxyError(f"nginx's configuration cannot name {work}: choose a plainer directory")
    work.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(work)
    plain_port, tls_port = free_port(), tls_port or free_port()
    site = work / "site.conf"
    site.write_text(render(SHIPPED.read_text(), nodes, plain_port, tls_port, cert, key))
    (work / "nginx.conf").write_text(main_conf(work, site))
    error_log = work / "nginx-error.log"
    command = [nginx, "-e", str(error_log), "-p", str(work), "-c", str(work / "nginx.conf"),
               "-g", "daemon off;"]  # fmt: skip
    with _launched(command, work, plain_port, tls_port, cert, error_log, timeout) as proxy:
        yield proxy


@contextlib.contextmanager
def haproxy_running(nodes: list[int], work: Path, timeout: float = 30.0) -> Iterator[Proxy]:
    """HAProxy with deploy/haproxy.cfg in front of the floorless nodes on ``nodes``."""
    haproxy = haproxy_path()
    if haproxy is None:
        raise ProxyError("haproxy is not installed (scripts/install-test-deps.sh)")
    work.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(work)
    pem = work / "combined.pem"  # HAProxy takes the certificate and its key in one file
    pem.write_bytes(cert.read_bytes() + key.read_bytes())
    plain_port, tls_port = free_port(), free_port()
    config = work / "haproxy.cfg"
    config.write_text(render_haproxy(HAPROXY.read_text(), nodes, plain_port, tls_port, pem))
    command = [haproxy, "-db", "-f", str(config)]
    with _launched(command, work, plain_port, tls_port, cert, work / "proxy.out", timeout) as p:
        yield p


@contextlib.contextmanager
def _launched(
    command: list[str],
    work: Path,
    plain_port: int,
    tls_port: int,
    cert: Path,
    error_log: Path,
    timeout: float,
) -> Iterator[Proxy]:
    """``command`` started in the foreground, once it listens on ``tls_port``; stopped after."""
    name = Path(command[0]).name
    with open(work / "proxy.out", "wb") as out:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxy = Proxy(
        f"https://127.0.0.1:{tls_port}",
        f"http://127.0.0.1:{plain_port}",
        tls_port,
        cert,
        proc,
        error_log,
    )
    try:
        stop_at = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log = (work / "proxy.out").read_text(errors="replace")
                if error_log.exists() and error_log != work / "proxy.out":
                    log += error_log.read_text(errors="replace")
                raise ProxyError(f"{name} exited with {proc.returncode}:\n{log}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", tls_port), 0.2),
            ):
                break
            if time.monotonic() > stop_at:
                raise ProxyError(f"{name} did not listen on {tls_port} within {timeout:.0f} s")
            time.sleep(0.02)
        yield proxy
    finally:
        proxy.stop()
