"""Hostile pushes a review tried against the push gate, each refused now: a gitlink or a
refused update's commit making a hidden object a thin pack's base (a byte-by-byte content
oracle), a ref name that is not UTF-8, a side band asked for on a later line, an atomic push,
and a merge deleting a protected head branch. Each answer for a hidden id is the same as for
an id that does not exist."""



from __future__ import annotations

import urllib.error
import urllib.request

import pytest
import support.protection
import support.pushes
from support.forges import wait_for
from support.githttp import git
from support.protection import OWNER, WRITER, Repo
from support.pushes import (
    MADE_UP,
    ZERO,
    World,
    entry,
    object_id,
    pack,
    raw_push,
    receive_pack,
    varint,
)
from support.pushes import api as papi

# the shared fixtures this module's tests ask for
repo = support.protection.repo
world = support.pushes.world

pytestmark = pytest.mark.network


def fork_main(world: World) -> tuple[str, str, str]:
    """bob's fork's main: its commit, tree and README blob."""

    def rev(what: str) -> str:
        return str(git("rev-parse", what, cwd=world.work).stdout.strip())

    return rev("HEAD~1"), rev("HEAD~1^{tree}"), rev("HEAD~1:README.md")


def tree(*entries: tuple[str, str, str]) -> bytes:
    return b"".join(
        f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in sorted(entries, key=lambda e: e[1])
    )


def commit(tree_id: str, parents: list[str], message: str) -> bytes:
    return (
        f"tree {tree_id}\n"
        + "".join(f"parent {p}\n" for p in parents)
        + f"author b <b@b> 1700000000 +0000\ncommitter b <b@b> 1700000000 +0000\n\n{message}\n"
    ).encode()


def copy_one(source_size: int, offset: int) -> bytes:
    """A delta: one byte of the base, copied from ``offset`` (under 256, not 0)."""
    return varint(source_size) + varint(1) + bytes([0x80 | 0x01 | 0x10, offset, 1])


SECRET = b"password=hunter2\n"


def test_a_gitlink_makes_a_hidden_blob_a_thin_base(world: World) -> None:
    """pushgate does not follow gitlinks (git does not), and bases_allowed discards every
    non-tree entry of the parent's tree, gitlinks included: a branch whose tree names the
    hidden blob as a submodule lets the next push read the blob, one guessed byte a push."""
    site = world.site
    main, _, readme = fork_main(world)
    linked = tree(("100644", "README.md", readme), ("160000", "sub", world.secret_blob))
    linker = commit(object_id("tree", linked), [main], "a submodule")
    answer = receive_pack(
        site, "bob/proj", "bob",
        [f"{ZERO} {object_id('commit', linker)} refs/heads/sub"],
        pack(entry(2, linked), entry(1, linker)),
    )  # fmt: skip
    assert b"ok refs/heads/sub" in answer  # accepted: a gitlink names any id
    accepted = []
    for guess in (b"a", b"s"):  # SECRET[2] is "s"
        blob = object_id("blob", guess)
        guessed = tree(("100644", "README.md", readme), ("100644", "g", blob))
        probe = commit(
            object_id("tree", guessed), [object_id("commit", linker)], f"guess {guess!r}"
        )
        answer = receive_pack(
            site, "bob/proj", "bob",
            [f"{ZERO} {object_id('commit', probe)} refs/heads/guess-{guess.decode()}"],
            pack(
                entry(7, copy_one(len(SECRET), 2), bytes.fromhex(world.secret_blob)),
                entry(2, guessed),
                entry(1, probe),
            ),
        )  # fmt: skip
        accepted.append(b"ok refs/heads/guess-" in answer)
    assert accepted == [False, False], "a hidden blob's byte was guessed through a thin pack"


def test_a_refused_update_makes_a_hidden_tree_a_thin_base(world: World) -> None:
    """bases_allowed takes the parents of every new commit as what the push builds on, the
    commits of refused updates included: a decoy whose parent is the hidden commit."""
    site = world.site
    main, main_tree, readme = fork_main(world)
    decoy = commit(main_tree, [world.secret], "decoy")
    blob = object_id("blob", b"s")
    guessed = tree(("100644", "README.md", readme), ("100644", "g", blob))
    probe = commit(object_id("tree", guessed), [main], "guess")
    answer = receive_pack(
        site, "bob/proj", "bob",
        [
            f"{ZERO} {object_id('commit', decoy)} refs/heads/decoy",
            f"{ZERO} {object_id('commit', probe)} refs/heads/innocent",
        ],
        pack(
            entry(1, decoy),
            entry(7, copy_one(len(SECRET), 2), bytes.fromhex(world.secret_blob)),
            entry(2, guessed),
            entry(1, probe),
        ),
    )  # fmt: skip
    assert b"ok refs/heads/innocent" not in answer


def test_a_ref_name_that_is_not_utf8_is_refused_before_git(world: World) -> None:
    """A name decoded one way by one hook and another way by the next would slip a refusal:
    such a name is refused before git starts (400), and the update hook moves only what the
    pre-receive hook allowed."""
    site = world.site
    main, main_tree, _ = fork_main(world)
    cover = commit(main_tree, [main], "cover")
    with pytest.raises(urllib.error.HTTPError) as refused:
        raw_push(
        site, "bob/proj", "bob",
        [
            f"{ZERO} {world.later} ".encode() + b"refs/heads/\xffleak\0report-status",
            f"{ZERO} {object_id('commit', cover)} refs/heads/cover".encode(),
            ],
            pack(entry(1, cover)),
        )  # fmt: skip
    assert refused.value.code == 400
    assert b"must be UTF-8" in refused.value.read()
    status, _ = site.page(f"/bob/proj/raw/commit/{world.later}/plans.txt", user="bob")
    assert status == 404, "the private parent's later commit is readable in the fork"


def test_a_side_band_asked_for_on_a_later_line_tells_hidden_from_missing(world: World) -> None:
    """read_request strips the side band from the first line's capabilities only; git reads
    capabilities on every line, so its own words come back unrewritten."""
    answers = []
    for oid in (world.later, MADE_UP):
        answers.append(
            raw_push(
                world.site,
                "bob/proj",
                "bob",
                [
                    f"{ZERO} {oid} refs/heads/sb1\0report-status".encode(),
                    f"{ZERO} {oid} refs/heads/sb2\0side-band-64k".encode(),
                ],
                pack(),
            )
        )
    assert answers[0] == answers[1]


def test_an_atomic_push_tells_hidden_from_missing(world: World) -> None:
    """git skips an update whose objects are missing and applies the rest of an atomic push;
    the update hook's refusal of a hidden one fails the whole transaction."""
    main, main_tree, _ = fork_main(world)
    answers, created = [], []
    for n, oid in enumerate((world.later, MADE_UP)):
        good = commit(main_tree, [main], f"good {n}")
        answers.append(
            raw_push(
                world.site,
                "bob/proj",
                "bob",
                [
                    f"{ZERO} {object_id('commit', good)} refs/heads/atomic-good".encode()
                    + b"\0report-status atomic",
                    f"{ZERO} {oid} refs/heads/atomic-bad".encode(),
                ],
                pack(entry(1, good)),
            )
        )
        listing = git("ls-remote", world.site.url("bob/proj", "bob"), "refs/heads/atomic-*").stdout
        created.append("refs/heads/atomic-good" in listing)
        if created[-1]:
            git("push", "-q", world.site.url("bob/proj", "bob"), ":atomic-good", check=False)
    assert answers[0] == answers[1] and created[0] == created[1]


def test_merging_with_delete_branch_deletes_a_protected_head(repo: Repo) -> None:
    """_delete_head runs `update-ref -d` without asking the head branch's protection."""
    site = repo.site
    head = repo.branch({"enable_push": False})  # protected: nobody may delete it
    base = repo.branch(None)
    work = repo.clone(OWNER)  # the owner, an administrator the rule does not bind
    git("checkout", "-q", head, cwd=work)
    (work / "head.txt").write_text("work on the protected branch\n")
    git("add", "head.txt", cwd=work)
    git("commit", "-q", "-m", "work", cwd=work)
    git("push", "-q", "origin", head, cwd=work)
    status, pull = papi(
        site, "POST", "/repos/alice/proj/pulls", WRITER,
        {"head": head, "base": base, "title": "protected head"},
    )  # fmt: skip
    assert status == 201, pull
    number = pull["number"]  # type: ignore[index]

    def checked() -> bool:
        _, found = papi(site, "GET", f"/repos/alice/proj/pulls/{number}", WRITER)
        return isinstance(found, dict) and found.get("mergeable") is True

    wait_for(checked)
    status, answer = papi(
        site, "POST", f"/repos/alice/proj/pulls/{number}/merge", WRITER,
        {"Do": "merge", "delete_branch_after_merge": True},
    )  # fmt: skip
    assert status == 200, answer
    listing = git("ls-remote", site.url("alice/proj", OWNER)).stdout
    assert f"refs/heads/{head}\n" in listing + "\n", "a writer deleted a protected branch"
