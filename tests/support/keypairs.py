"""SSH key pairs for the tests of the keys' pages and API, made by OpenSSH's own
``ssh-keygen``, with the fingerprint it prints as what floorless must show."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KeyPair:
    public: str  # the .pub file's line, its comment included
    private: str  # the private key's file, as text
    fingerprint: str  # "SHA256:...", as ``ssh-keygen -l`` prints it

    @property
    def content(self) -> str:
        """The public key without its comment: what floorless keeps and shows."""
        return " ".join(self.public.split()[:2])


def key_pair(directory: Path, name: str, kind: str = "ed25519", bits: int = 0) -> KeyPair:
    path = directory / name
    sized = ["-b", str(bits)] if bits else []
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, *sized, "-N", "", "-C", f"{name}@tests", "-f", str(path)],
        check=True,
    )
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    public = Path(f"{path}.pub").read_text().strip()
    return KeyPair(public, path.read_text(), listed[1])
