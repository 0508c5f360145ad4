"""Which filesystem a path lives on, from the kernel's mount table, and what kind it is.

``/proc/self/mountinfo`` has one line per mount::

    36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    (1)(2)(3)   (4)   (5)         (6)       (7)      (8) (9)   (10)      (11)

Fields 1-6 are fixed, then zero or more optional fields (7) end at a lone ``-`` (8), followed
by the filesystem type, the source and the superblock options. Paths escape space, tab,
newline and backslash as three-digit octal (``\\040``). A path lives on the mount with the
longest mount point that is a prefix of its resolved path; when several mounts share a mount
point, the one listed last is on top.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")

# What a filesystem type means for a git child's config reads.
LOCAL = "local"
MEMORY = "memory"
NETWORK = "network"
HOST_SHARED = "host-shared"
USERSPACE = "userspace"
UNKNOWN = "unknown"

# Kinds whose every syscall may be a round trip to another machine, the host or a daemon.
FLAGGED = frozenset({NETWORK, HOST_SHARED, USERSPACE})

_NETWORK_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "afs",
        "beegfs", "ocfs2", "gfs2", "orangefs", "pvfs2", "davfs", "ncpfs", "coda",
    }
)  # fmt: skip
_NETWORK_FUSE = frozenset(
    {
        "sshfs", "glusterfs", "ceph", "cephfs", "s3fs", "gcsfuse", "rclone", "davfs",
        "juicefs", "moosefs", "mfs", "lizardfs", "seaweedfs", "goofys", "blobfuse", "sshfs.real",
    }
)  # fmt: skip
_HOST_SHARED_TYPES = frozenset({"virtiofs", "9p", "vboxsf", "vmhgfs", "prl_fs", "hgfs"})
_HOST_SHARED_FUSE = frozenset({"vmhgfs-fuse", "virtiofsd", "prl_fsd", "grpcfuse", "osxfs"})
_MEMORY_TYPES = frozenset({"tmpfs", "ramfs", "devtmpfs", "shm"})
_LOCAL_TYPES = frozenset(
    {
        "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs", "bcachefs",
        "vfat", "exfat", "ntfs", "ntfs3", "hfsplus", "apfs", "ufs", "nilfs2", "overlay",
        "aufs", "squashfs", "iso9660", "erofs",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    fstype: str
    source: str
    root: str = "/"

    @property
    def kind(self) -> str:
        return classify(self.fstype)

    @property
    def flagged(self) -> bool:
        return self.kind in FLAGGED

    def describe(self) -> str:
        """``virtiofs (host-shared)``."""
        return f"{self.fstype} ({self.kind})"


def classify(fstype: str) -> str:
    """The kind of a filesystem type: local, memory, network, host-shared, userspace, unknown."""
    base, _, sub = fstype.partition(".")
    if fstype in _NETWORK_TYPES:
        return NETWORK
    if fstype in _HOST_SHARED_TYPES:
        return HOST_SHARED
    if fstype in _MEMORY_TYPES:
        return MEMORY
    if fstype in _LOCAL_TYPES:
        return LOCAL
    if base in ("fuse", "fuseblk"):
        if sub in _NETWORK_FUSE:
            return NETWORK
        if sub in _HOST_SHARED_FUSE:
            return HOST_SHARED
        if base == "fuseblk":  # a block device behind FUSE (ntfs-3g, exfat-fuse): local
            return LOCAL
        return USERSPACE  # every operation is served by a daemon; it may be anything
    return UNKNOWN


_OCTAL = re.compile(rb"\\([0-7]{3})")


def _unescape(field: bytes) -> str:
    return os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse_mountinfo(data: bytes) -> list[Mount]:
    """Every mount in a ``/proc/<pid>/mountinfo`` text, in the kernel's order."""
    mounts: list[Mount] = []
    for line in data.splitlines():
        fields = line.split(b" ")
        try:
            separator = fields.index(b"-", 6)
        except ValueError:
            continue  # not a mountinfo line
        if len(fields) < separator + 3:
            continue
        mounts.append(
            Mount(
                mountpoint=_unescape(fields[4]),
                fstype=_unescape(fields[separator + 1]),
                source=_unescape(fields[separator + 2]),
                root=_unescape(fields[3]),
            )
        )
    return mounts


def read_mounts(table: Path = MOUNTINFO) -> list[Mount]:
    """The mount table of this process; empty where there is none (not Linux)."""
    try:
        return parse_mountinfo(table.read_bytes())
    except OSError:
        return []


def _contains(mountpoint: str, path: str) -> bool:
    if mountpoint == "/":
        return path.startswith("/")
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def mount_of(path: Path | str, mounts: list[Mount]) -> Mount | None:
    """The mount a path lives on: the longest containing mount point, the last listed on top.

    The path is resolved first (symlinks, ``..``); a path that does not exist (yet) is
    placed where it would be created.
    """
    resolved = os.path.realpath(path)
    found: Mount | None = None
    for mount in mounts:
        if _contains(mount.mountpoint, resolved) and (
            found is None or len(mount.mountpoint) >= len(found.mountpoint)
        ):
            found = mount
    return found
