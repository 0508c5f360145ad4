"""Which URLs to time on a forge: one page of each class, found from the forge's own pages.

Page classes:

=========  ===========================================  ======================================
class      floorless, Forgejo, Gitea                    cgit
=========  ===========================================  ======================================
home       ``/{owner}/{repo}``                          ``/{repo}/``
raw        ``/{owner}/{repo}/raw/branch/{b}/README.md`` ``/{repo}/plain/README.md``
commits    ``/{owner}/{repo}/commits/branch/{b}``       ``/{repo}/log/``
outside    ``/`` (floorless), ``/explore/repos``        ``/`` (the index)
static     the first ``<link rel=stylesheet>``          the same
=========  ===========================================  ======================================

The forge is recognised from its landing page: a ``Server-Timing`` header counting spawned
processes is floorless's; cgit names itself in ``<meta name=generator>``; Forgejo and Gitea
name themselves in their pages. The repository is ``--repo`` or the first one the
non-repository page links to; the branch and the README come from the repository's home
page. Every class's URL can be given instead (``--url raw=/o/r/raw/branch/main/x``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit

from floorless.core.errors import DiagnosisError
from floorless.probe.client import Client, Response, check_url

FLOORLESS = "floorless"
FORGEJO = "Forgejo"
GITEA = "Gitea"
CGIT = "cgit"
UNKNOWN = "unknown"

CLASSES = ("home", "raw", "commits", "outside", "static")
LABELS = {
    "home": "repo home",
    "raw": "raw file",
    "commits": "commits",
    "outside": "non-repo page",
    "static": "static asset",
}
REPOSITORY_CLASSES = frozenset({"home", "raw", "commits"})

# First path segments that are never an owner on Forgejo, Gitea or floorless.
_NOT_OWNERS = frozenset(
    {
        "-", "explore", "user", "users", "org", "orgs", "repo", "api", "admin", "assets",
        "avatars", "attachments", "login", "notifications", "issues", "pulls", "milestones",
        "search", "swagger.v1.json", "static", "favicon.ico", "robots.txt", "devtest",
        "sitemap.xml", "help", "about", "mirrors",
    }
)  # fmt: skip


@dataclass
class Page:
    key: str
    url: str | None
    note: str

    @property
    def label(self) -> str:
        return LABELS[self.key]

    @property
    def in_repository(self) -> bool:
        return self.key in REPOSITORY_CLASSES


@dataclass
class Plan:
    base: str
    kind: str
    repository: str | None
    branch: str | None
    pages: list[Page]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.stylesheets: list[str] = []
        self.generator = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "a" and values.get("href"):
            self.hrefs.append(values["href"])
        elif tag == "link" and "stylesheet" in values.get("rel", "").lower().split():
            if values.get("href"):
                self.stylesheets.append(values["href"])
        elif tag == "meta" and values.get("name", "").lower() == "generator":
            self.generator = values.get("content", "")


def links(response: Response) -> _Links:
    parser = _Links()
    parser.feed(response.text())
    parser.close()
    return parser


def detect_kind(response: Response) -> str:
    timing = ",".join(response.header_values("Server-Timing"))
    if re.search(r"(^|,)\s*spawn\s*;", timing):
        return FLOORLESS
    page = links(response)
    if page.generator.lower().startswith("cgit"):
        return CGIT
    text = response.text().lower()
    if "forgejo" in text:
        return FORGEJO
    if "gitea" in text:
        return GITEA
    return UNKNOWN


def _paths(base: str, page_url: str, hrefs: list[str]) -> list[str]:
    """The hrefs that stay below ``base``, as paths relative to it, in page order."""
    root = urlsplit(base)
    found = []
    for href in hrefs:
        target = urlsplit(urljoin(page_url, href))
        if (target.scheme, target.netloc) != (root.scheme, root.netloc):
            continue
        if target.path.startswith(root.path):
            found.append(unquote(target.path[len(root.path) :]))
    return found


def find_repository(base: str, response: Response, kind: str) -> str | None:
    """The first repository a page links to: ``owner/name`` (cgit: its path)."""
    paths = _paths(base, response.url, links(response).hrefs)
    if kind == CGIT:
        for path in paths:
            if path.endswith("/") and path.strip("/") and "?" not in path:
                parts = path.strip("/").split("/")
                if parts[-1] not in ("tree", "log", "plain", "about", "refs", "summary"):
                    return path.strip("/")
        return None
    for path in paths:
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] not in _NOT_OWNERS and all(parts):
            return "/".join(parts)
    return None


def _branch_and_readme(base: str, home: Response, repository: str) -> tuple[str | None, str]:
    prefix = f"{repository}/src/branch/"
    branch: str | None = None
    readme = "README.md"
    for path in _paths(base, home.url, links(home).hrefs):
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        name, _, file = rest.partition("/")
        if branch is None and name:
            branch = name
        if name == branch and re.fullmatch(r"(?i)readme[^/]*", file):
            return branch, file
    return branch, readme


def _cgit_readme(base: str, home: Response, repository: str) -> str:
    for path in _paths(base, home.url, links(home).hrefs):
        for view in ("tree/", "plain/"):
            prefix = f"{repository}/{view}"
            if path.startswith(prefix) and re.fullmatch(r"(?i)readme[^/]*", path[len(prefix) :]):
                return path[len(prefix) :]
    return "README.md"


def plan(
    client: Client,
    url: str,
    repository: str | None = None,
    branch: str | None = None,
    overrides: dict[str, str] | None = None,
) -> Plan:
    """Find one URL per page class on the forge at ``url``."""
    overrides = overrides or {}
    base = check_url(url)
    base = base if base.endswith("/") else base + "/"
    landing = client.follow(base)
    if landing.status >= 400 and not overrides:
        raise DiagnosisError(f"GET {base}: HTTP {landing.status}; is this the forge's address?")
    kind = detect_kind(landing)
    notes: dict[str, str] = {}
    urls: dict[str, str | None] = dict.fromkeys(CLASSES)

    outside = landing
    if kind in (FORGEJO, GITEA, UNKNOWN):
        explore = client.follow(base + "explore/repos")
        if explore.status == 200:
            outside = explore
    urls["outside"] = outside.url
    notes["outside"] = "the non-repository page"

    if repository is None:
        repository = find_repository(base, outside, kind)
        if repository is None and outside is not landing:
            repository = find_repository(base, landing, kind)
        notes["home"] = "first repository listed" if repository else "no repository found"
        if repository is None:
            notes["raw"] = notes["commits"] = "needs a repository: --repo OWNER/NAME"
    else:
        repository = repository.strip("/")
        notes["home"] = "--repo"

    stylesheet_pages = [landing, outside]
    if repository:
        home_url = base + (f"{repository}/" if kind == CGIT else repository)
        urls["home"] = home_url
        home = client.follow(home_url)
        if home.status == 200:
            stylesheet_pages.insert(0, home)
        if kind == CGIT:
            readme = _cgit_readme(base, home, repository)
            urls["raw"] = f"{base}{repository}/plain/{readme}"
            urls["commits"] = f"{base}{repository}/log/"
        else:
            found_branch, readme = _branch_and_readme(base, home, repository)
            branch = branch or found_branch or "main"
            urls["raw"] = f"{base}{repository}/raw/branch/{branch}/{readme}"
            urls["commits"] = f"{base}{repository}/commits/branch/{branch}"
        notes["raw"] = f"{readme}, linked from the home page"
        notes["commits"] = "the default branch's history"

    for page in stylesheet_pages:
        sheets = links(page).stylesheets
        if sheets:
            urls["static"] = urljoin(page.url, sheets[0])
            notes["static"] = "first stylesheet"
            break
    else:
        notes["static"] = "no stylesheet linked"

    for key, value in overrides.items():
        urls[key] = check_url(urljoin(base, value))
        notes[key] = "--url"
    pages = [Page(key, urls[key], notes.get(key, "")) for key in CLASSES]
    return Plan(base, kind, repository, branch, pages)
