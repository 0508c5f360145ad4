"""``floorless doctor``: the mount table, app.ini resolution, the timings and the verdict.

The verdict tests use a real slow filesystem (bench/slowfs.py, 30 ms per operation, nothing
cached): a git HOME on it must be found, measured far above a local one, fixed and exit 2;
the same layout on local disk exits 0. Without FUSE those skip, except under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.gitfixtures import build_one

from bench import slowfs
from floorless.cli import main
from floorless.core.errors import DiagnosisError
from floorless.doctor.appini import FORGEJO, GITEA, parse_ini, resolve_layout
from floorless.doctor.measure import config_files, find_repository
from floorless.doctor.mounts import (
    HOST_SHARED,
    LOCAL,
    MEMORY,
    NETWORK,
    USERSPACE,
    classify,
    mount_of,
    parse_mountinfo,
)

ROOT = Path(__file__).resolve().parents[2]


DELAY_MS = 30


def doctor(*args: str, env: dict[str, str] | None = None):
    result = CliRunner().invoke(main, ["doctor", *args], env=env)
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result


# ------------------------------------------------------------------------ the mount table

MOUNTINFO = rb"""22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
30 27 0:27 / /dev/shm rw,relatime shared:4 master:2 - tmpfs tmpfs rw,size=1024k
41 27 0:40 / /srv/git rw,relatime - virtiofs hostshare rw
42 41 0:41 /exports /srv/git/mirror rw - nfs4 nas:/exports rw,vers=4.2
43 27 0:42 / /mnt/with\040space rw - 9p share rw
44 27 0:43 / /mnt/slow rw,nosuid - fuse.slowfs slowfs rw,user_id=0
45 27 0:44 / /mnt/slow rw,nosuid - fuse.sshfs me@host: rw
not a mountinfo line
"""


def test_mountinfo_is_parsed_with_optional_fields_and_escapes():
    mounts = parse_mountinfo(MOUNTINFO)
    assert [m.mountpoint for m in mounts] == [
        "/proc", "/", "/dev/shm", "/srv/git", "/srv/git/mirror", "/mnt/with space",
        "/mnt/slow", "/mnt/slow",
    ]  # fmt: skip
    assert mounts[2].fstype == "tmpfs"  # two optional fields before the separator
    assert mounts[4].source == "nas:/exports" and mounts[4].root == "/exports"


def test_a_path_lives_on_the_longest_mount_point_and_the_top_mount():
    mounts = parse_mountinfo(MOUNTINFO)

    def fstype(path: str) -> str | None:
        found = mount_of(path, mounts)
        return found.fstype if found else None

    assert fstype("/srv/git/alice/demo.git") == "virtiofs"
    assert fstype("/srv/git/mirror/x") == "nfs4"
    assert fstype("/srv/gitlab") == "ext4"  # a prefix of the string, not of the path
    assert fstype("/mnt/with space/home") == "9p"
    assert fstype("/mnt/slow/home") == "fuse.sshfs"  # the later mount is on top
    assert fstype("/does/not/exist/yet") == "ext4"
    assert mount_of("/x", []) is None


@pytest.mark.parametrize(
    ("fstype", "kind"),
    [
        ("nfs", NETWORK), ("nfs4", NETWORK), ("cifs", NETWORK), ("smb3", NETWORK),
        ("ceph", NETWORK), ("fuse.sshfs", NETWORK), ("fuse.glusterfs", NETWORK),
        ("virtiofs", HOST_SHARED), ("9p", HOST_SHARED), ("fuse.vmhgfs-fuse", HOST_SHARED),
        ("fuse.slowfs", USERSPACE), ("tmpfs", MEMORY), ("ext4", LOCAL), ("xfs", LOCAL),
        ("overlay", LOCAL), ("fuseblk", LOCAL), ("somethingelse", "unknown"),
    ],
)  # fmt: skip
def test_filesystem_kinds(fstype, kind):
    assert classify(fstype) == kind


# ----------------------------------------------------------------------------- app.ini


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("product", "repos"), [(FORGEJO, "forgejo"), (GITEA, "gitea")])
def test_defaults_without_home_path(tmp_path, product, repos):
    ini = write(tmp_path / "app.ini", f"APP_NAME = x\nWORK_PATH = {tmp_path}/work\n[server]\n")
    layout = resolve_layout(ini, product, environ={})
    work = tmp_path / "work"
    assert layout.work.path == work
    assert layout.app_data.path == work / "data"
    assert layout.repositories.path == work / "data" / f"{repos}-repositories"
    assert layout.git_home.path == work / "data" / "home"
    assert "default" in layout.git_home.origin
    assert layout.local_copies.path == work / "data" / "tmp" / "local-repo"
    assert layout.uploads.path == work / "data" / "tmp" / "uploads"
    assert layout.git_executable is None


def test_explicit_and_relative_paths(tmp_path):
    ini = write(
        tmp_path / "app.ini",
        f"""WORK_PATH = {tmp_path}
[server]
APP_DATA_PATH = appdata
[repository]
ROOT = repos ; relative to the work path
[git]
HOME_PATH = githome
PATH = /opt/git/bin/git
[repository.local]
LOCAL_COPY_PATH = /var/tmp/local
""",
    )
    layout = resolve_layout(ini, GITEA, environ={})
    assert layout.app_data.path == tmp_path / "appdata"
    assert layout.repositories.path == tmp_path / "repos"
    assert layout.git_home.path == tmp_path / "appdata" / "githome"  # relative to app data
    assert layout.git_home.origin == "[git] HOME_PATH"
    assert layout.local_copies.path == Path("/var/tmp/local")
    assert layout.git_executable == "/opt/git/bin/git"


@pytest.mark.parametrize("product", [FORGEJO, GITEA])
def test_interpolation_same_section_parents_and_top_level(tmp_path, product):
    ini = write(
        tmp_path / "app.ini",
        f"""ROOTDIR = {tmp_path}/forge
WORK_PATH = %(ROOTDIR)s
[server]
APP_DATA_PATH = %(ROOTDIR)s/data
[repository]
BASE = %(ROOTDIR)s/git
ROOT = %(BASE)s/repositories
[repository.local]
LOCAL_COPY_PATH = %(BASE)s/local
[git]
LOCAL = /var/lib/local
HOME_PATH = "%(LOCAL)s/home;1"
""",
    )
    layout = resolve_layout(ini, product, environ={})
    forge = tmp_path / "forge"
    assert layout.work.path == forge
    assert layout.app_data.path == forge / "data"
    assert layout.repositories.path == forge / "git" / "repositories"
    assert layout.local_copies.path == forge / "git" / "local"  # [repository]'s BASE
    assert layout.git_home.path == Path("/var/lib/local/home;1")  # quoted: ; is no comment
    assert layout.ini.unresolved == []


@pytest.mark.parametrize("product", [FORGEJO, GITEA])
def test_an_unknown_reference_stays_literal_and_is_reported(tmp_path, product):
    # APP_DATA_PATH lives in [server], so [git] cannot see it: the forge uses the text as is.
    ini = write(
        tmp_path / "app.ini",
        f"WORK_PATH = {tmp_path}\n[git]\nHOME_PATH = %(APP_DATA_PATH)s/home\n",
    )
    layout = resolve_layout(ini, product, environ={})
    assert layout.git_home.path == tmp_path / "data" / "%(APP_DATA_PATH)s" / "home"
    assert len(layout.ini.unresolved) == 1
    assert "%(APP_DATA_PATH)s names no key in [git]" in layout.ini.unresolved[0]


def test_interpolation_loops_end():
    ini = parse_ini("A = %(B)s\nB = %(A)s\n[s]\nX = %(X)s\n", Path("app.ini"))
    assert "%(" in (ini.get("", "A") or "")
    assert ini.get("s", "X") == "%(X)s"


def test_work_path_from_layout_environment_option_and_guess(tmp_path):
    ini = write(tmp_path / "w" / "custom" / "conf" / "app.ini", "[server]\n")
    assert resolve_layout(ini, FORGEJO, environ={}).work.path == tmp_path / "w"
    loose = write(tmp_path / "etc" / "app.ini", "[server]\n")
    guessed = resolve_layout(loose, GITEA, environ={}).work
    assert guessed.path == tmp_path / "etc" and guessed.origin.startswith("assumed")
    env = {"FORGEJO_WORK_DIR": "/srv/forgejo"}
    assert resolve_layout(loose, FORGEJO, environ=env).work.path == Path("/srv/forgejo")
    assert resolve_layout(loose, GITEA, environ=env).work.origin.startswith("assumed")
    given = resolve_layout(loose, GITEA, environ={}, work_path=tmp_path / "given")
    assert given.work.path == tmp_path / "given"


def test_bad_app_ini_files(tmp_path):
    with pytest.raises(DiagnosisError, match="must be an absolute path"):
        resolve_layout(write(tmp_path / "a.ini", "WORK_PATH = rel\n"), FORGEJO, environ={})
    with pytest.raises(DiagnosisError, match="line 2: not KEY = VALUE"):
        resolve_layout(write(tmp_path / "b.ini", "[server]\njust words\n"), FORGEJO, environ={})
    (tmp_path / "c.ini").write_bytes(b"[server]\nX = \xff\n")
    with pytest.raises(DiagnosisError, match="not UTF-8"):
        resolve_layout(tmp_path / "c.ini", FORGEJO, environ={})


# ------------------------------------------------------------------------ what git reads


def test_config_files_follow_gits_rules():
    assert [str(p) for _, p in config_files({"HOME": "/h"})] == [
        "/etc/gitconfig", "/h/.config/git/config", "/h/.gitconfig",
    ]  # fmt: skip
    assert [str(p) for _, p in config_files(
        {"HOME": "/h", "XDG_CONFIG_HOME": "/x", "GIT_CONFIG_NOSYSTEM": "true"}
    )] == ["/x/git/config", "/h/.gitconfig"]  # fmt: skip
    assert [str(p) for _, p in config_files(
        {"HOME": "/h", "GIT_CONFIG_GLOBAL": "/g", "GIT_CONFIG_NOSYSTEM": "0"}
    )] == ["/etc/gitconfig", "/g"]  # fmt: skip


def test_a_repository_is_found_below_the_root(tmp_path):
    assert find_repository(tmp_path) is None
    (tmp_path / "alice" / "notes").mkdir(parents=True)
    build_one(tmp_path / "bob" / "one.git")
    assert find_repository(tmp_path) == tmp_path / "bob" / "one.git"
    assert find_repository(tmp_path / "bob" / "one.git") == tmp_path / "bob" / "one.git"
    assert find_repository(tmp_path / "missing") is None


# ----------------------------------------------------------------------- bad input, cleanly


def test_missing_app_ini(tmp_path):
    result = doctor("--forgejo", str(tmp_path / "nope" / "app.ini"))
    assert result.exit_code == 3
    assert "app.ini: no such file" in result.output


def test_app_ini_that_is_a_directory(tmp_path):
    result = doctor("--gitea", str(tmp_path))
    assert result.exit_code == 3
    assert "is a directory" in result.output


def test_forgejo_and_gitea_together_is_a_usage_error(tmp_path):
    ini = str(write(tmp_path / "app.ini", "[server]\n"))
    result = doctor("--forgejo", ini, "--gitea", ini)
    assert result.exit_code == 2 and "not both" in result.output


def test_no_git_on_path(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    ini = write(tmp_path / "app.ini", f"WORK_PATH = {tmp_path}\n")
    result = doctor("--forgejo", str(ini), env={"PATH": str(empty)})
    assert result.exit_code == 3
    assert "no `git` on PATH" in result.output
    result = doctor("--forgejo", str(ini), "--git", str(tmp_path / "git"))
    assert result.exit_code == 3 and "not found" in result.output


def test_paths_that_do_not_exist_are_problems(tmp_path):
    ini = write(tmp_path / "app.ini", f"WORK_PATH = {tmp_path}/nowhere\n")
    result = doctor("--forgejo", str(ini), "--runs", "1", "--json")
    assert result.exit_code == 2
    report = json.loads(result.output)
    states = {d["role"]: d["state"] for d in report["directories"]}
    assert states["work"] == states["app_data"] == states["repositories"] == "missing"
    problems = [f["message"] for f in report["findings"] if f["level"] == "problem"]
    assert any("repositories" in p and "does not exist" in p for p in problems)
    assert report["rev_parse"]["throwaway_repository"] is True


def test_a_file_where_a_directory_belongs(tmp_path):
    write(tmp_path / "repos", "not a directory")
    result = doctor("--repos", str(tmp_path / "repos"), "--data", str(tmp_path / "data"),
                    "--runs", "1")  # fmt: skip
    assert result.exit_code == 2
    assert "repositories" in result.output and "not a directory" in result.output


def run_without_file_privileges(*args: str) -> subprocess.CompletedProcess[str]:
    """Run doctor as root without the capabilities that let root ignore file permissions, so
    a mode-000 file or directory is as closed to it as to any other user. Unlike switching to
    another user, this works wherever the package is installed (a clone under a directory
    private to root included)."""
    found = shutil.which("setpriv")
    if os.geteuid() != 0 or found is None:
        pytest.skip("needs root and setpriv to take file privileges away")
    command = [found, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--",
               sys.executable, "-m", "floorless", "doctor", *args]  # fmt: skip
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "LC_ALL": "C"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_an_unreadable_app_ini(tmp_path):
    ini = write(tmp_path / "app.ini", "[server]\n")
    ini.chmod(0o000)
    done = run_without_file_privileges("--forgejo", str(ini))
    assert done.returncode == 3, done.stderr
    assert "permission denied" in done.stderr and "Traceback" not in done.stderr


def test_no_permission_on_a_directory(tmp_path):
    build_one(tmp_path / "repos" / "alice" / "one.git")
    (tmp_path / "home").mkdir(exist_ok=True)
    ini = write(
        tmp_path / "app.ini",
        f"WORK_PATH = {tmp_path}\n[repository]\nROOT = {tmp_path}/repos\n"
        f"[git]\nHOME_PATH = {tmp_path}/home\n",
    )
    (tmp_path / "repos").chmod(0o000)
    try:
        done = run_without_file_privileges("--forgejo", str(ini), "--runs", "1")
    finally:
        (tmp_path / "repos").chmod(0o755)  # so pytest can remove it
    assert done.returncode == 2, done.stdout + done.stderr
    assert "repositories" in done.stdout and "permission denied" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


# ------------------------------------------------------------- the verdict, on real storage


def forgejo_site(root: Path, data: Path) -> Path:
    """A Forgejo layout: app.ini in WORK/custom/conf, repositories on local disk, app data
    (and so git's HOME, by default) at ``data``, with the .gitconfig Forgejo writes."""
    build_one(root / "repos" / "alice" / "one.git")
    (data / "home").mkdir(parents=True, exist_ok=True)
    (data / "home" / ".gitconfig").write_text("[user]\n\tname = Forgejo\n")
    return write(
        root / "custom" / "conf" / "app.ini",
        f"[server]\nAPP_DATA_PATH = {data}\n[repository]\nROOT = {root}/repos\n",
    )


def test_forgejo_git_home_on_slow_storage_is_a_problem_with_a_fix(fuse, tmp_path):
    source, mountpoint = tmp_path / "source", tmp_path / "mnt"
    source.mkdir()
    mountpoint.mkdir()
    ini = forgejo_site(tmp_path / "site", source)
    # The same app.ini, with app data seen through the slow mount.
    ini.write_text(ini.read_text().replace(str(source), str(mountpoint)))
    with slowfs.mounted(source, mountpoint, delay_ms=DELAY_MS) as mount:
        result = doctor("--forgejo", str(ini), "--runs", "3", "--max-seconds", "0", "--json")
        served = mount.counts()
    assert result.exit_code == 2, result.output
    report = json.loads(result.output)
    home = next(d for d in report["directories"] if d["role"] == "home")
    assert home["path"] == str(mountpoint / "home")
    assert home["filesystem"]["fstype"] == "fuse.slowfs" and home["filesystem"]["flagged"]
    timing = report["rev_parse"]
    assert timing["repository"] == str(tmp_path / "site" / "repos" / "alice" / "one.git")
    # Every git child crosses the mount several times: far above a local HOME.
    assert timing["home_penalty_ms"] >= 3 * DELAY_MS
    assert timing["forge_home_median_ms"] >= 5 * timing["local_home_median_ms"]
    gitconfig = next(f for f in report["config_files"] if f["path"].endswith("/.gitconfig"))
    assert gitconfig["exists"] and gitconfig["read_ms"] >= DELAY_MS
    assert report["floor"]["repository page"]["spawns"] == 6
    problems = [f["message"] for f in report["findings"] if f["level"] == "problem"]
    assert any(p.startswith(f"git HOME {mountpoint}/home on fuse.slowfs") for p in problems)
    assert "[git]\n    HOME_PATH = " in report["fix"] and "ephemeral" in report["fix"]
    assert served.get("getattr", 0) > 0  # the doctor's own reads crossed the mount


def test_forgejo_git_home_on_local_disk_is_healthy(tmp_path):
    ini = forgejo_site(tmp_path / "site", tmp_path / "data")
    result = doctor("--forgejo", str(ini), "--runs", "5")
    assert result.exit_code == 0, result.output
    assert "Status: ok (exit 0)" in result.output
    assert "HOME_PATH =" not in result.output  # no fix to offer


def floorless_site(root: Path, runtime: Path) -> list[str]:
    build_one(root / "repos" / "alice" / "one.git")
    (root / "data").mkdir()
    (runtime / "home").mkdir(parents=True, exist_ok=True)
    (runtime / "home" / "gitconfig").write_text("")
    config = write(root / "floorless.toml", f'runtime_dir = "{runtime}"\n')
    return ["--config", str(config), "--repos", str(root / "repos"), "--data", str(root / "data")]


def test_floorless_runtime_dir_on_slow_storage_is_a_problem(fuse, tmp_path):
    source, mountpoint = tmp_path / "source", tmp_path / "mnt"
    source.mkdir()
    mountpoint.mkdir()
    args = floorless_site(tmp_path / "site", source)
    config = Path(args[1])
    config.write_text(config.read_text().replace(str(source), str(mountpoint)))
    with slowfs.mounted(source, mountpoint, delay_ms=DELAY_MS):
        result = doctor(*args, "--runs", "3", "--max-seconds", "0")
    assert result.exit_code == 2, result.output
    flowing = " ".join(result.output.split())  # findings wrap at 100 columns
    assert f"PROBLEM git HOME {mountpoint}/home on fuse.slowfs" in flowing
    assert re.search(r"browse pages +0 +0 ms", result.output)
    assert 'runtime_dir = "/var/lib/floorless-run"' in result.output


@pytest.fixture
def local_disk(tmp_path):
    """A directory on a disk: /var/tmp's (kept on disk by convention), since the test's own
    temporary directory may be in memory (``./check`` puts it on /dev/shm), which the doctor
    rightly warns about."""
    if not Path("/var/tmp").is_dir():
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="floorless-doctor-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_floorless_on_local_disk_is_healthy(local_disk):
    args = floorless_site(local_disk / "site", local_disk / "run")
    result = doctor(*args, "--runs", "5", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["target"] == "floorless" and report["status"] == "ok"
    assert report["git_environment"]["GIT_CONFIG_NOSYSTEM"] == "1"
    assert [f["label"] for f in report["config_files"]] == ["global"]  # nothing else is read
    assert report["floor"]["browse pages"] == {"spawns": 0, "now_ms": 0, "local_home_ms": 0}


def test_a_bad_floorless_config_file(tmp_path):
    config = write(tmp_path / "floorless.toml", "no_such_setting = 1\n")
    result = doctor("--config", str(config))
    assert result.exit_code == 3 and "unknown setting(s): no_such_setting" in result.output


def test_an_unresolved_reference_is_a_warning_in_the_report(tmp_path):
    home = tmp_path / "data" / "%(NOPE)s"
    home.mkdir(parents=True)
    build_one(tmp_path / "data" / "gitea-repositories" / "alice" / "one.git")
    ini = write(tmp_path / "app.ini", f"WORK_PATH = {tmp_path}\n[git]\nHOME_PATH = %(NOPE)s\n")
    result = doctor("--gitea", str(ini), "--runs", "1", "--json")
    report = json.loads(result.output)
    warnings = [f["message"] for f in report["findings"] if f["level"] == "warning"]
    assert any("%(NOPE)s names no key in [git]" in w for w in warnings)
    assert result.exit_code == 1


def test_git_over_ssh_is_reported_with_the_host_keys(tmp_path):
    from floorless.core.config import Settings
    from floorless.ssh.server import host_keys

    data, repos = tmp_path / "data", tmp_path / "repos"
    repos.mkdir()
    args = ("--data", str(data), "--repos", str(repos), "--runs", "1", "--json")
    before = json.loads(doctor(*args).output)["ssh"]
    assert before["listen"] == "127.0.0.1:2222" and before["host_keys"] == []
    assert before["clone_url"] == "ssh://git@127.0.0.1:2222/OWNER/NAME.git"
    assert before["relay_socket"].endswith("relay.sock (no server)")
    made = host_keys(Settings.load(None, data=str(data)))
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(made[0])], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    after = json.loads(doctor(*args).output)["ssh"]
    assert after["host_keys"][0] == f"ssh-ed25519 {listed}"
    assert [k.split()[0] for k in after["host_keys"]] == ["ssh-ed25519", "ecdsa-sha2-nistp256"]
    text = doctor("--data", str(data), "--repos", str(repos), "--runs", "1").output
    assert "git over SSH" in text and listed in text
