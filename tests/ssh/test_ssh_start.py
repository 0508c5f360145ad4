"""The SSH side of a server process starting where it cannot do everything: a data directory
deep enough that the relay's socket path is too long for a Unix socket, and an SSH port
already taken. The forge serves all the same."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from support.forges import patience, start_forge
from support.serving import floorless_command

from floorless.ssh import server, wire

pytestmark = pytest.mark.network


def test_a_deep_data_directory_relays_through_an_abstract_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    (tmp_path / "repos").mkdir()
    forge = start_forge(tmp_path / "repos", deep, ssh_port=0)
    stop = server.start_in_process(forge)
    try:
        address = wire.socket_address(forge.settings)
        assert address.startswith("\0") and len(str(wire.socket_path(forge.settings))) > 107
        # the relaying process reaches the forge, which answers for an unknown key
        relayed = subprocess.run(
            [floorless_command(), "ssh", "serve", "--data", str(deep), "key-99"],
            input=b"", capture_output=True, timeout=patience(60), check=False,
            env={**os.environ, "SSH_ORIGINAL_COMMAND": "git-upload-pack 'a/b.git'"},
        )  # fmt: skip
        assert relayed.returncode == 1
        assert relayed.stderr == b"floorless: this key is not known (removed?)\n"
    finally:
        stop()
        forge.stop()


def test_a_taken_ssh_port_leaves_the_forge_serving(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "repos").mkdir()
        forge = start_forge(tmp_path / "repos", tmp_path / "data", ssh_port=port)
        try:
            stop = server.start_in_process(forge)  # logs why, raises nothing
            stop()
            stop()  # and twice is harmless
        finally:
            forge.stop()
