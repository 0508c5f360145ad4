"""The ``/api/v1`` route table, one line per route, as ``web/app.py``'s; the OpenAPI
description (``openapi.py``) is made from it."""

from __future__ import annotations

from floorless.forge import Forge
from floorless.web.api import (
    attachments,
    collaborators,
    contents,
    forks,
    git,
    hooks,
    issues,
    keys,
    misc,
    openapi,
    pulls,
    releases,
    repos,
    reviews,
    statuses,
    triage,
    users,
)
from floorless.web.api.base import Resource
from floorless.web.auth import Authenticator

V1 = "/api/v1"
REPO = V1 + "/repos/{owner}/{repo}"

API_ROUTES: tuple[tuple[str, type[Resource]], ...] = (
    (V1 + "/version", misc.Version),
    (V1 + "/settings/api", misc.ApiSettings),
    (V1 + "/user", users.CurrentUser),
    (V1 + "/users/search", users.UserSearch),
    (V1 + "/users/{name}", users.User),
    (V1 + "/users/{name}/tokens", users.Tokens),
    (V1 + "/users/{name}/tokens/{token}", users.Token),
    (V1 + "/users/{name}/repos", repos.UserRepos),
    (V1 + "/users/{name}/keys", keys.UserKeys),
    (V1 + "/user/repos", repos.MyRepos),
    (V1 + "/user/keys", keys.MyKeys),
    (V1 + "/user/keys/{id}", keys.MyKey),
    (V1 + "/orgs", repos.Orgs),
    (V1 + "/orgs/{org}", repos.Org),
    (V1 + "/orgs/{org}/repos", repos.OrgRepos),
    (V1 + "/orgs/{org}/hooks", hooks.OrgHooks),
    (V1 + "/orgs/{org}/hooks/{id}", hooks.OrgHook),
    (V1 + "/repos/search", repos.RepoSearch),
    (REPO, repos.OneRepo),
    (REPO + "/branches", git.Branches),
    (REPO + "/branches/{tail:path}", git.Branch),
    (REPO + "/tags", git.Tags),
    (REPO + "/tags/{tail:path}", git.TagOne),
    (REPO + "/releases", releases.Releases),
    (REPO + "/releases/latest", releases.LatestRelease),
    (REPO + "/releases/tags/{tag}", releases.ReleaseByTag),
    (REPO + "/releases/{id}", releases.OneRelease),
    (REPO + "/releases/{id}/assets", releases.Assets),
    (REPO + "/releases/{id}/assets/{asset}", releases.OneAsset),
    (REPO + "/commits", git.Commits),
    (REPO + "/git/commits/{sha}", git.GitCommit),
    (REPO + "/git/refs", git.Refs),
    (REPO + "/git/refs/{tail:path}", git.RefsUnder),
    (REPO + "/git/trees/{sha}", git.Tree),
    (REPO + "/git/blobs/{sha}", git.Blob),
    (REPO + "/contents", contents.ContentsRoot),
    (REPO + "/contents/{tail:path}", contents.Contents),
    (REPO + "/raw/{tail:path}", contents.RawFile),
    (REPO + "/media/{tail:path}", contents.MediaFile),
    (REPO + "/archive/{tail:path}", contents.Archive),
    (REPO + "/compare/{tail:path}", git.Compare),
    (REPO + "/collaborators", collaborators.Collaborators),
    (REPO + "/collaborators/{user}", collaborators.Collaborator),
    (REPO + "/collaborators/{user}/permission", collaborators.Permission),
    (REPO + "/assignees", collaborators.Assignees),
    (REPO + "/forks", forks.Forks),
    (REPO + "/pulls", pulls.PullList),
    (REPO + "/pulls/{index}", pulls.OnePull),
    (REPO + "/pulls/{index}.{diff_type}", pulls.PullDiff),
    (REPO + "/pulls/{index}/commits", pulls.PullCommits),
    (REPO + "/pulls/{index}/files", pulls.PullFiles),
    (REPO + "/pulls/{index}/merge", pulls.PullMerge),
    (REPO + "/pulls/{index}/reviews", reviews.Reviews),
    (REPO + "/pulls/{index}/reviews/{review}", reviews.OneReview),
    (REPO + "/pulls/{index}/reviews/{review}/comments", reviews.ReviewComments),
    (REPO + "/pulls/{index}/{head}", pulls.PullByBranches),
    (REPO + "/issues", issues.RepoIssues),
    (REPO + "/issues/comments", issues.RepoComments),
    (REPO + "/issues/comments/{id}", issues.RepoComment),
    (REPO + "/issues/comments/{id}/assets", attachments.CommentAssets),
    (REPO + "/issues/comments/{id}/assets/{asset}", attachments.CommentAsset),
    (REPO + "/issues/{index}", issues.RepoIssue),
    (REPO + "/issues/{index}/assets", attachments.IssueAssets),
    (REPO + "/issues/{index}/assets/{asset}", attachments.IssueAsset),
    (REPO + "/issues/{index}/comments", issues.IssueComments),
    (REPO + "/issues/{index}/labels", issues.IssueLabels),
    (REPO + "/issues/{index}/labels/{id}", issues.IssueLabel),
    (REPO + "/issues/{index}/timeline", issues.IssueTimeline),
    (REPO + "/labels", triage.Labels),
    (REPO + "/labels/{id}", triage.OneLabel),
    (REPO + "/milestones", triage.Milestones),
    (REPO + "/milestones/{id}", triage.OneMilestone),
    (REPO + "/hooks", hooks.RepoHooks),
    (REPO + "/hooks/{id}", hooks.RepoHook),
    (REPO + "/hooks/{id}/tests", hooks.RepoHookTest),
    (REPO + "/keys", keys.RepoKeys),
    (REPO + "/keys/{id}", keys.RepoKey),
    (REPO + "/statuses/{sha}", statuses.Statuses),
    (REPO + "/commits/{ref}/statuses", statuses.RefStatuses),
    (REPO + "/commits/{ref}/status", statuses.Combined),
    (REPO + "/branch_protections", statuses.BranchProtections),
    (REPO + "/branch_protections/{name:path}", statuses.BranchProtection),
)

# Routes described as Forgejo has them, but served by one route whose tail is parsed: a ref
# may hold slashes (``release/1``), and a router's path field can only come last.
BY_TAIL = frozenset({REPO + "/commits/{ref}/statuses", REPO + "/commits/{ref}/status"})


def api_routes(forge: Forge, auth: Authenticator) -> list[tuple[str, object]]:
    """The API's resources, made for ``forge``, for ``create_app``'s route table; after the
    table, what is not part of its description: the description itself, its page, and a JSON
    404 for every other path under /api/v1."""
    made: list[tuple[str, object]] = [
        (t, kind(forge, auth)) for t, kind in API_ROUTES if t not in BY_TAIL
    ]
    return [
        *made,
        # what BY_TAIL describes: a ref that may hold slashes, then /status or /statuses
        (REPO + "/commits/{tail:path}", statuses.SlashedRef(forge, auth)),
        ("/swagger.v1.json", openapi.Description(API_ROUTES, forge.settings)),
        ("/api/swagger", openapi.Page(API_ROUTES, forge.settings)),
        (V1, misc.Unknown(forge, auth)),
        (V1 + "/{tail:path}", misc.Unknown(forge, auth)),
    ]
