"""Releases and their files as Forgejo's API shows them (``Release``, ``Attachment``).

A release's ``body`` is its Markdown as written, as an issue's; ``published_at`` is when it
was made (a draft's too, as Forgejo says); its source archives are the tag's. A file's
``browser_download_url`` is its release's download address (``/releases/download/{tag}/{name}``);
an issue's file is reached by its UUID (``/attachments/{uuid}``).

``releases_json`` shapes a page of releases with their authors and files, for the API and the
webhooks' ``release`` event alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypedDict

from floorless.accounts.access import Viewer
from floorless.accounts.accounts import Accounts
from floorless.collab.releases import Release as ReleaseRow
from floorless.db import Database
from floorless.files.attachments import Attachment as AttachmentRow
from floorless.files.attachments import Attachments
from floorless.forgejo import urls
from floorless.forgejo.issues import GHOST, Attachment, attachment_json
from floorless.forgejo.people import User, people, rfc3339, user_json
from floorless.forgejo.schema import DateTime
from floorless.repos.registry import Repo


class Release(TypedDict):
    """Forgejo's ``Release``."""

    id: int
    tag_name: str
    target_commitish: str
    name: str
    body: str
    url: str
    html_url: str
    tarball_url: str
    zipball_url: str
    upload_url: str
    draft: bool
    prerelease: bool
    created_at: DateTime
    published_at: DateTime
    author: User
    assets: list[Attachment]


def release_json(
    release: ReleaseRow,
    repo: Repo,
    author: User,
    assets: list[AttachmentRow],
    public: str,
) -> Release:
    api = public + urls.api_repo(repo, "releases", str(release.id))
    return {
        "id": release.id,
        "tag_name": release.tag_name,
        "target_commitish": release.target or release.commit_id or "",
        "name": release.title,
        "body": release.note,
        "url": api,
        "html_url": public + urls.release(repo, release.tag_name),
        "tarball_url": public + urls.archive(repo, release.tag_name, ".tar.gz"),
        "zipball_url": public + urls.archive(repo, release.tag_name, ".zip"),
        "upload_url": api + "/assets",
        "draft": release.draft,
        "prerelease": release.prerelease,
        "created_at": rfc3339(release.created_at),
        "published_at": rfc3339(release.created_at),
        "author": author,
        "assets": [attachment_json(a, public, repo, release.tag_name) for a in assets],
    }


class ReleaseSources(Protocol):
    """What a page of releases' JSON reads: the rows, the accounts that published them and
    their files. The forge is one (taken by structure)."""

    @property
    def db(self) -> Database: ...

    @property
    def accounts(self) -> Accounts: ...

    @property
    def attachments(self) -> Attachments: ...


def releases_json(
    forge: ReleaseSources,
    viewer: Viewer,
    repo: Repo,
    releases: Sequence[ReleaseRow],
    public: str,
    assets: Mapping[int, Sequence[AttachmentRow]] | None = None,
) -> list[Release]:
    """``releases`` of ``repo`` as Forgejo's ``Release``, their authors and files read for
    them all at once (the files given in ``assets``, by release id, when they are gone)."""
    files = dict(
        forge.attachments.of_releases(r.id for r in releases if r.id not in (assets or {}))
    )
    files.update({k: list(v) for k, v in (assets or {}).items()})
    publishers = forge.accounts.by_ids(r.publisher_id for r in releases if r.publisher_id)
    names = {account_id: account.name for account_id, account in publishers.items()}
    found = people(forge.db, names.values())

    def author(release: ReleaseRow) -> User:
        who = found.get(names.get(release.publisher_id or 0, "").lower(), GHOST)
        return user_json(who, viewer, public)

    return [release_json(r, repo, author(r), files.get(r.id, []), public) for r in releases]
