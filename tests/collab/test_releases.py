"""The releases domain: a release belongs to a tag, made at its target when published; drafts
make no tag and are listed to writers alone; deleting a release keeps its tag."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pygit2
import pytest
from support.accounts import PASSWORD
from support.forges import start_forge

from floorless.collab.releases import ReleaseChange, Tagged
from floorless.core.errors import BadRequest, Conflict, NotFound
from floorless.forge import Forge
from floorless.repos.registry import Repo

WHEN = 1_700_000_000


@pytest.fixture
def forge(tmp_path) -> Iterator[Forge]:
    forge = start_forge(tmp_path / "repos", tmp_path / "data")
    forge.accounts.create_user("ann", "ann@example.org", PASSWORD)
    yield forge
    forge.stop()


def _repo(forge: Forge) -> tuple[Repo, list[str]]:
    repo = forge.registry.create("ann", "plans")
    handle = forge.live.open(repo)
    who = pygit2.Signature("Ann", "ann@example.org", WHEN, 0)
    commits: list[str] = []
    parents: list[pygit2.Oid] = []
    for n in range(2):
        tree = handle.TreeBuilder()
        tree.insert("a.txt", handle.create_blob(b"%d\n" % n), pygit2.GIT_FILEMODE_BLOB)
        oid = handle.create_commit("refs/heads/main", who, who, f"c{n}", tree.write(), parents)
        parents = [oid]
        commits.append(str(oid))
    handle.set_head("refs/heads/main")
    forge.moves.refs_moved(repo)
    return repo, commits


def _tags(forge: Forge, repo: Repo) -> dict[str, str]:
    handle = forge.live.open(repo)
    return {
        name.removeprefix("refs/tags/"): str(handle.lookup_reference(name).peel(pygit2.Commit).id)
        for name in handle.references
        if name.startswith("refs/tags/")
    }


def test_publishing_makes_the_tag_at_its_target(forge: Forge) -> None:
    repo, commits = _repo(forge)
    first = forge.releases.create(repo, None, "v1.0", target=commits[0], title="One")
    assert _tags(forge, repo) == {"v1.0": commits[0]}
    assert (first.title, first.commit_id, first.draft) == ("One", commits[0], False)
    second = forge.releases.create(repo, None, "v2.0", title="Two")  # the default branch
    assert _tags(forge, repo)["v2.0"] == commits[1]
    assert forge.releases.latest(repo.id) == second
    assert forge.releases.by_tag(repo.id, "v1.0") == first
    with pytest.raises(Conflict):
        forge.releases.create(repo, None, "v1.0")


def test_a_draft_makes_no_tag_until_published(forge: Forge) -> None:
    repo, commits = _repo(forge)
    draft = forge.releases.create(repo, None, "v3.0", target="main", draft=True)
    assert _tags(forge, repo) == {}
    assert forge.releases.list(repo.id) == []
    assert [r.id for r in forge.releases.list(repo.id, drafts=True)] == [draft.id]
    assert forge.releases.latest(repo.id) is None
    forge.releases.edit(repo, draft, draft=False)
    assert _tags(forge, repo) == {"v3.0": commits[1]}
    assert [r.tag_name for r in forge.releases.list(repo.id)] == ["v3.0"]


@pytest.mark.parametrize(
    ("tag", "target", "error"),
    [
        ("bad..name", "main", BadRequest),
        ("with space", "main", BadRequest),
        ("v1", "no-such-branch", NotFound),
        ("v1", "0" * 40, NotFound),
    ],
)
def test_bad_tags_and_targets_leave_nothing(
    forge: Forge, tag: str, target: str, error: type[Exception]
) -> None:
    repo, _ = _repo(forge)
    with pytest.raises(error):
        forge.releases.create(repo, None, tag, target=target)
    assert _tags(forge, repo) == {}
    assert forge.releases.list(repo.id, drafts=True) == []


def test_deleting_a_release_keeps_its_tag_and_drops_its_files(forge: Forge) -> None:
    repo, commits = _repo(forge)
    release = forge.releases.create(repo, None, "v1.0")
    attachment = forge.attachments.upload(
        repo.id, None, "build.zip", io.BytesIO(b"zip bytes").read, release_id=release.id
    )
    forge.releases.delete(release)
    assert _tags(forge, repo) == {"v1.0": commits[1]}
    assert forge.releases.by_id(repo.id, release.id) is None
    assert forge.attachments.by_id(attachment.id) is None
    assert forge.store.size(attachment.oid) is None


def test_what_the_webhooks_are_told_whoever_calls(forge: Forge) -> None:
    """``on_change`` hears a published release's making, edits and deletion, and each tag
    made or deleted; a draft's nothing until it is published. With no actor named (a caller
    that does not say), the release's publisher stands for it."""
    repo, commits = _repo(forge)
    ann = forge.accounts.require("ann")
    ben = forge.accounts.create_user("ben", "ben@example.org", PASSWORD)
    heard: list[ReleaseChange | Tagged] = []
    forge.releases.on_change.append(heard.append)

    draft = forge.releases.create(repo, ann.id, "v1.0", target=commits[0], draft=True)
    draft = forge.releases.edit(repo, draft, title="Soon")
    assert heard == []
    published = forge.releases.edit(repo, draft, draft=False)  # no actor: its publisher's
    tagged, first = heard
    assert tagged == Tagged(repo, "refs/tags/v1.0", "0" * 40, commits[0], ann.id)
    assert first == ReleaseChange(published, ann.id, "published")
    heard.clear()

    edited = forge.releases.edit(repo, published, note="Notes", actor=ben)
    assert heard == [ReleaseChange(edited, ben.id, "updated")]
    heard.clear()
    attachment = forge.attachments.upload(
        repo.id, ann.id, "build.zip", io.BytesIO(b"zip bytes").read, release_id=edited.id
    )
    forge.releases.delete(edited, actor=ben)
    (gone,) = heard
    assert isinstance(gone, ReleaseChange)
    assert (gone.action, gone.actor_id, gone.release) == ("deleted", ben.id, edited)
    assert [a.id for a in gone.assets or ()] == [attachment.id]
    heard.clear()

    # a release made at once makes its tag first; a draft deleted tells nothing
    made = forge.releases.create(repo, None, "v2.0", actor=ben)
    assert [type(c).__name__ for c in heard] == ["Tagged", "ReleaseChange"]
    assert heard[1] == ReleaseChange(made, ben.id, "published")
    heard.clear()
    forge.releases.delete(forge.releases.create(repo, ann.id, "v3.0", draft=True))
    assert heard == []

    # tags alone: an annotated one names its tag object, as a push's update does
    sign = pygit2.Signature("Ann", "ann@example.org", WHEN, 0)
    forge.releases.create_tag(repo, "v4.0", "main", "Four", sign, actor=ann)
    annotated = str(forge.live.open(repo).references["refs/tags/v4.0"].target)
    assert annotated != commits[1]
    forge.releases.delete_tag(repo, "v4.0", actor=ben)
    assert heard == [
        Tagged(repo, "refs/tags/v4.0", "0" * 40, annotated, ann.id),
        Tagged(repo, "refs/tags/v4.0", annotated, "0" * 40, ben.id),
    ]
