"""``create_app(forge)``: a fresh WSGI app with one route table, readable as a grid."""

from __future__ import annotations

import falcon

from floorless.core import timing
from floorless.core.metrics import Metrics
from floorless.forge import Forge
from floorless.git import objects
from floorless.web import auth, errors, headers
from floorless.web.api.repository import FindTarget
from floorless.web.api.routes import api_routes
from floorless.web.compression import CompressionMiddleware
from floorless.web.pages import page_etag
from floorless.web.render import Renderer
from floorless.web.views import (
    account,
    archive,
    attachments,
    blame,
    commit,
    commits,
    compare,
    explore,
    feed,
    finder,
    forks,
    githttp,
    health,
    issues,
    keys,
    lastcommit,
    lfs,
    merge,
    pulls,
    raw,
    redirects,
    refs,
    refswitch,
    release_forms,
    releases,
    repo,
    reviews,
    search,
    settings,
    source,
    static,
    triage,
)
from floorless.web.views.base import FindRepository


class TimingMiddleware:
    """Starts each request's timer; adds ``Server-Timing`` and records metrics at the end."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.timer = timing.start_request()

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        timer: timing.RequestTimer | None = req.context.get("timer")
        if timer is None:
            return
        route = req.uri_template or "unmatched"
        resp.set_header("Server-Timing", timer.header())
        self.metrics.latency.labels(route).observe(timer.total())
        self.metrics.responses.labels(route, resp.status_code).inc()
        if timer.spawns:
            self.metrics.spawns.labels(route).inc(timer.spawns)
        if timer.queries:
            self.metrics.queries.labels(route).inc(timer.queries)
        timing.end_request()


class BodylessMiddleware:
    """Closes a streamed body that will not be sent: falcon drops ``resp.stream`` for HEAD and
    for 204 and 304 answers without closing it, and a body left open keeps its git child
    running and its git slot taken (two HEADs of a large ``.diff`` took every slot)."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if resp.stream is None:
            return
        if req.method == "HEAD" or resp.status_code in (204, 304):
            close = getattr(resp.stream, "close", None)
            resp.stream = None
            if close is not None:
                close()


class ConditionalMiddleware:
    """An ETag for every HTML page, from its bytes, and 304 when the client already has it.

    Pages are cheap to make, so this saves the transfer, not the work; byte-exact answers (raw
    files, archives, diffs by commit id) set their own ETag or immutable caching instead.
    """

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if req.method not in ("GET", "HEAD") or resp.status_code != 200:
            return
        if not isinstance(resp.text, str) or not (resp.content_type or "").startswith("text/html"):
            return
        if not resp.etag:  # a page from the page cache comes with its own
            resp.etag = page_etag(resp.text)
        tag = resp.etag.strip('"').removeprefix("W/").strip('"')
        if not resp.get_header("Cache-Control"):
            resp.cache_control = ["no-cache"]
        if any(match in ("*", tag) for match in req.if_none_match or []):
            resp.status = falcon.HTTP_304
            resp.text = None
            resp.delete_header("Content-Type")


def create_app(forge: Forge) -> falcon.App[falcon.Request, falcon.Response]:
    """A WSGI app serving ``forge``; the caller starts and stops the forge."""
    timing.spawn_counter()
    renderer = Renderer(forge.settings.site_name)
    renderer.configure(forge.settings)
    forge.states.attach(renderer.pages)  # a repository's pages go when its state is forgotten
    authenticator = auth.Authenticator(forge)
    compression = CompressionMiddleware(forge.settings.compressed_cache_bytes)
    metrics = Metrics(
        lambda: {
            **renderer.caches,
            "pages": renderer.pages,
            "answers": forge.answers.cache,
            "history-walks": forge.answers.walks,
            "object-headers": objects.HEADERS,
            "compressed": compression.cache,
            **forge.shapes.named(),
        }
    )
    app = falcon.App(
        middleware=(
            BodylessMiddleware(),  # first, so that its process_response runs last
            headers.SecurityHeadersMiddleware(),
            TimingMiddleware(metrics),
            compression,  # before auth and conditional: its process_response runs after theirs
            auth.AuthMiddleware(authenticator),
            FindRepository(forge),  # after auth: who asks is known by then
            FindTarget(forge),  # the same for the API's resources of a repository
            ConditionalMiddleware(),
        ),
        media_type="text/html; charset=utf-8",
        cors_enable=False,
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.resp_options.secure_cookies_by_default = False
    errors.install(app, renderer)
    deps = (forge, renderer)
    form = (forge, renderer, authenticator)
    repo_prefix = "/{owner}/{repo}"
    review_prefix = repo_prefix + "/pulls/{number}/files/reviews"
    lfs_prefix = repo_prefix + "/info/lfs"

    routes: list[tuple[str, object]] = [
        ("/", explore.Explore(*deps)),
        ("/-/metrics", explore.MetricsPage(forge, metrics)),
        ("/-/health", health.Health()),
        ("/-/ready", health.Ready(forge)),
        ("/-/static/{name}", static.Static()),
        ("/-/login", account.Login(*deps, authenticator)),
        ("/-/logout", account.Logout(*deps, authenticator)),
        ("/-/tokens", account.Tokens(*deps, authenticator)),
        ("/-/keys", keys.SshKeys(*deps, authenticator)),
        ("/attachments/{uuid}", attachments.ByUuid(*deps)),
        ("/-/new", account.NewRepo(*deps, authenticator)),
        ("/-/search", search.SiteSearch(*deps)),
        ("/-/orgs/{org}/hooks", settings.OrgHookSettings(*deps, authenticator)),
        ("/-/orgs/{org}/hooks/{hook}", settings.OrgHookSettings(*deps, authenticator)),
        ("/{owner}", explore.Owner(*deps)),
        ("/{owner}.keys", keys.PublicKeys(*deps)),
        (repo_prefix, repo.Home(*deps)),
        (repo_prefix + "/src", repo.DefaultBranch(*deps, page="src")),
        (repo_prefix + "/src/{kind}", source.Source(*deps)),
        (repo_prefix + "/src/{kind}/{tail:path}", source.Source(*deps)),
        (repo_prefix + "/raw/{kind}", raw.Raw(*deps)),
        (repo_prefix + "/raw/{kind}/{tail:path}", raw.Raw(*deps)),
        (repo_prefix + "/media/{kind}", raw.Media(*deps)),
        (repo_prefix + "/media/{kind}/{tail:path}", raw.Media(*deps)),
        (repo_prefix + "/commits", repo.DefaultBranch(*deps, page="commits")),
        (repo_prefix + "/commits/{kind}", commits.Commits(*deps)),
        (repo_prefix + "/commits/{kind}/{tail:path}", commits.Commits(*deps)),
        (repo_prefix + "/commit/{sha}", commit.Commit(*deps)),
        (repo_prefix + "/commit/{sha}/-/diff/{tail:path}", commit.CommitFile(*deps)),
        (repo_prefix + "/find/{kind}", finder.Find(*deps)),
        (repo_prefix + "/find/{kind}/{tail:path}", finder.Find(*deps)),
        (repo_prefix + "/commit/{sha}/-/lines/{tail:path}", commit.DiffLines(*deps)),
        (repo_prefix + "/commit/{sha}/{tail:path}", redirects.RefCommit(*deps)),
        (repo_prefix + "/tree/{ref}", redirects.GitHubShape(*deps, page="src")),
        (repo_prefix + "/tree/{ref}/{tail:path}", redirects.GitHubShape(*deps, page="src")),
        (repo_prefix + "/blob/{ref}", redirects.GitHubShape(*deps, page="src")),
        (repo_prefix + "/blob/{ref}/{tail:path}", redirects.GitHubShape(*deps, page="src")),
        (repo_prefix + "/blame/{kind}", blame.Blame(*deps)),
        (repo_prefix + "/blame/{kind}/{tail:path}", blame.Blame(*deps)),
        (repo_prefix + "/settings", settings.Settings(*deps, authenticator)),
        (repo_prefix + "/settings/hooks", settings.HookSettings(*deps, authenticator)),
        (repo_prefix + "/settings/hooks/{hook}", settings.HookSettings(*deps, authenticator)),
        (repo_prefix + "/settings/keys", keys.DeployKeys(*deps, authenticator)),
        (repo_prefix + "/fork", forks.Fork(*form)),
        (repo_prefix + "/issues", issues.IssueList(*deps, authenticator)),
        (repo_prefix + "/issues/new", issues.NewIssue(*deps, authenticator)),
        (repo_prefix + "/issues/attachments", attachments.IssueUpload(*form)),
        (repo_prefix + "/issues/{number}", issues.IssueDetail(*deps, authenticator)),
        (repo_prefix + "/issues/{number}/triage", triage.TriageChange(*form)),
        (repo_prefix + "/labels", triage.Labels(*form)),
        (repo_prefix + "/milestones", triage.Milestones(*form)),
        (repo_prefix + "/milestone/{milestone}", triage.MilestoneDetail(*form)),
        (repo_prefix + "/pulls/{number}/merge", merge.Merge(*form)),
        (repo_prefix + "/pulls", issues.IssueList(*form, pull=True)),
        (repo_prefix + "/pulls/{number}", pulls.PullDetail(*form)),
        (repo_prefix + "/pulls/{number}/commits", pulls.PullCommits(*form)),
        (repo_prefix + "/pulls/{number}/files", pulls.PullFiles(*form)),
        (repo_prefix + "/compare", compare.CompareChoose(*form)),
        (repo_prefix + "/compare/{spec:path}", compare.Compare(*form)),
        (review_prefix + "/comments", reviews.ReviewComments(*form)),
        (review_prefix + "/comments/{comment}", reviews.ReviewCommentChange(*form)),
        (review_prefix + "/submit", reviews.ReviewSubmit(*form)),
        (repo_prefix + "/search", search.RepoSearch(*deps)),
        (repo_prefix + "/branches", refs.Branches(*deps)),
        (repo_prefix + "/tags", refs.Tags(*deps)),
        (repo_prefix + "/tags.atom", feed.TagFeed(*deps, fmt="atom")),
        (repo_prefix + "/tags.rss", feed.TagFeed(*deps, fmt="rss")),
        (repo_prefix + "/releases", releases.Releases(*form)),
        (repo_prefix + "/releases.atom", feed.ReleaseFeed(*form, fmt="atom")),
        (repo_prefix + "/releases.rss", feed.ReleaseFeed(*form, fmt="rss")),
        (repo_prefix + "/releases/latest", releases.LatestRelease(*form)),
        (repo_prefix + "/releases/tag/{tail:path}", releases.ReleaseTag(*form)),
        (repo_prefix + "/releases/new", release_forms.NewRelease(*form)),
        (repo_prefix + "/releases/edit/{tail:path}", release_forms.EditRelease(*form)),
        (repo_prefix + "/releases/download/{tail:path}", attachments.ReleaseDownload(*deps)),
        (repo_prefix + "/archive/{tail:path}", archive.Archive(*deps)),
        (repo_prefix + "/atom/branch/{tail:path}", feed.Feed(*deps, fmt="atom")),
        (repo_prefix + "/rss/branch/{tail:path}", feed.Feed(*deps, fmt="rss")),
        (repo_prefix + "/-/last/{sha}", lastcommit.LastCommits(*deps)),
        (repo_prefix + "/-/last/{sha}/{tail:path}", lastcommit.LastCommits(*deps)),
        (repo_prefix + "/-/refs", refswitch.RefSwitch(*deps)),
        (repo_prefix + "/-/paths/{tree}", finder.Paths(*deps)),
        (repo_prefix + "/info/refs", githttp.InfoRefs(*deps, advertisement=forge.advertisement)),
        (repo_prefix + "/git-upload-pack", githttp.Service(*deps, service="git-upload-pack")),
        (repo_prefix + "/git-receive-pack", githttp.Service(*deps, service="git-receive-pack")),
        (lfs_prefix + "/objects/batch", lfs.Batch(*form)),
        (lfs_prefix + "/objects/{oid}", lfs.Object(*form)),
        (lfs_prefix + "/verify", lfs.Verify(*form)),
        (lfs_prefix + "/locks", lfs.Locks(*form)),
        (lfs_prefix + "/locks/verify", lfs.LocksVerify(*form)),
        (lfs_prefix + "/locks/{id}/unlock", lfs.Unlock(*form)),
        *api_routes(forge, authenticator),
    ]
    for template, resource in routes:
        if hasattr(resource, "on_get") and not hasattr(
            resource, "on_head"
        ):  # HEAD is GET without the body (RFC 9110 9.3.2)
            resource.on_head = resource.on_get  # type: ignore[attr-defined]
        app.add_route(template, resource)
    return app
