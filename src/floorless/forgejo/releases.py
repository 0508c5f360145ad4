"""Releases and their files as Forgejo's API shows them (``Release``, ``Attachment``).

A release's ``body`` is its Markdown as written, as an issue's; ``published_at`` is when it
was made (a draft's too, as Forgejo says); its source archives are the tag's. A file's
``browser_download_url`` is its release's download address (``/releases/download/{tag}/{name}``);
an issue's file is reached by its UUID (``/attachments/{uuid}``).
"""

from __future__ import annotations

from typing import TypedDict

from floorless.collab.releases import Release as ReleaseRow
from floorless.files.attachments import Attachment as AttachmentRow
from floorless.forgejo import urls
from floorless.forgejo.issues import Attachment, attachment_json
from floorless.forgejo.people import User, rfc3339
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
