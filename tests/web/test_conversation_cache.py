"""Pages of issues and pull requests are kept rendered while their repository's refs and its
activity version stay as they were: the version is moved by the database's own triggers on
every table those pages show, so no writer (a page, a background job, another node, a
statement typed by hand) can leave a kept page showing what is no longer so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import support.reviews
from falcon import testing
from support.forges import wait_for
from support.pagecache import serve
from support.queries import statements
from support.reviews import HEAD, Setup, account, commit, person
from support.spawns import counting

from floorless.db import Database, open_database
from floorless.db.schema import _ACTIVITY_BY_ISSUE, _ACTIVITY_BY_NAME, _LATER_ACTIVITY_BY_REPO
from floorless.forge import Forge
from floorless.web.render import Renderer

# the shared fixtures this module's tests ask for
forge = support.reviews.forge
setup = support.reviews.setup

LIST = "/ann/plans/issues"


@pytest.fixture
def served(forge: Forge) -> tuple[testing.TestClient, Renderer]:
    return serve(forge)


@pytest.fixture
def client(served: tuple[testing.TestClient, Renderer]) -> testing.TestClient:
    return served[0]


@pytest.fixture
def renderer(served: tuple[testing.TestClient, Renderer]) -> Renderer:
    return served[1]


@pytest.fixture
def other(forge: Forge) -> Iterator[Database]:
    """A second handle on the forge's database, as another node or the command line has."""
    db = open_database(forge.db.url)
    yield db
    db.close()


def _columns(db: Database, table: str) -> set[str]:
    if db.dialect == "postgresql":
        rows = db.query(
            "SELECT column_name AS name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        )
    else:
        rows = db.query(f"SELECT name FROM pragma_table_info('{table}')")
    return {str(row["name"]) for row in rows}


def _tables(db: Database) -> list[str]:
    if db.dialect == "postgresql":
        rows = db.query(
            "SELECT table_name AS name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    else:
        rows = db.query("SELECT name FROM sqlite_master WHERE type = 'table'")
    return sorted(str(row["name"]) for row in rows)


def test_every_table_hanging_from_an_issue_moves_the_version(forge: Forge) -> None:
    """A new table of issue data that nobody gave a trigger would leave kept pages stale:
    every table with an ``issue_id`` is watched, but the per-person record of looks and a
    pull request's scheduled merge, which no kept page shows (its events are on the
    timeline, which is watched). A table named by its repository's id (attachments) is
    watched by that id, which covers its issue's too."""
    hanging = {t for t in _tables(forge.db) if "issue_id" in _columns(forge.db, t)}
    assert hanging - {"review_views", "pull_automerges"} == {
        *_ACTIVITY_BY_ISSUE,
        *(t for t in _LATER_ACTIVITY_BY_REPO if t in hanging),
    }
    for table in _ACTIVITY_BY_NAME:
        assert {"owner", "name"} <= _columns(forge.db, table)
    for table in _LATER_ACTIVITY_BY_REPO:
        assert "repo_id" in _columns(forge.db, table)


def test_each_kind_of_write_moves_the_version_and_a_look_does_not(
    setup: Setup,
) -> None:
    forge_ = setup.forge
    ann, ben = account(forge_, "ann"), account(forge_, "ben")
    seen: list[int] = [forge_.issues.activity("ann", "plans")]

    def moved() -> bool:
        now = forge_.issues.activity("ann", "plans")
        before, _ = seen[-1], seen.append(now)
        return now > before

    issue = forge_.issues.create("ann", "plans", ann, "Broken", "It is")
    assert moved()
    comment = forge_.issues.comment(issue, ben, "Seen it too")
    assert moved()
    forge_.issues.edit_comment(issue, comment, ben, "Seen it too, twice")
    assert moved()
    label = forge_.triage.create_label("ann", "plans", "bug", "#d73a4a")
    assert moved()
    forge_.triage.set_label(forge_.issues.get("ann", "plans", issue.number), ann, label.id, True)
    assert moved()
    forge_.triage.edit_label("ann", "plans", label.id, "defect", "#d73a4a", "")
    assert moved()
    forge_.triage.set_assignee(forge_.issues.get("ann", "plans", issue.number), ann, ben, True)
    assert moved()
    forge_.issues.close(forge_.issues.get("ann", "plans", issue.number), ann, "completed")
    assert moved()
    setup.comment("ben", "app.py", "new", 1, body="a line comment")  # review_comments, reviews
    assert moved()
    forge_.reviews.submit(setup.current(), ann, "approve", "Fine")
    assert moved()
    forge_.pulls.record_check(setup.current(), setup.base, setup.head, "mergeable", setup.base, ())
    assert moved()
    forge_.reviews.saw(setup.current(), ann, setup.head)  # a look: per person, not shown to all
    assert not moved()
    forge_.issues.create("ann", "secret", ann, "Elsewhere", "")  # another repository
    assert not moved()


def test_a_kept_issue_page_is_served_until_something_on_it_changes(
    forge: Forge,
    client: testing.TestClient,
    renderer: Renderer,
    other: Database,
) -> None:
    ann, ben = account(forge, "ann"), account(forge, "ben")
    issue = forge.issues.create("ann", "plans", ann, "Broken", "It is")
    forge.issues.comment(issue, ben, "first comment")
    page = f"/ann/plans/issues/{issue.number}"

    def look(path: str = page) -> tuple[str, int]:
        with counting() as spawned:
            result = client.simulate_get(path)
        assert result.status_code == 200 and not spawned
        return result.text, statements(result)

    first, _ = look()
    hits = renderer.pages.hits
    again, kept = look()
    assert again == first and renderer.pages.hits == hits + 1
    assert kept <= 3  # the repository's row and its activity version, at most

    forge.issues.comment(issue, ben, "second comment")
    assert "second comment" in look()[0]
    # written behind the services' back, through another handle (another node, a script)
    other.execute("UPDATE issues SET title = 'Broken badly' WHERE id = ?", (issue.id,))
    # another node's write reaches this one as its notice arrives (PostgreSQL: a NOTIFY,
    # heard on the listener's thread; SQLite: the version is read at once)
    wait_for(lambda: "Broken badly" in look()[0])
    # a label's new name shows on the issue that carries it, and in the list
    label = forge.triage.create_label("ann", "plans", "bug", "#d73a4a")
    forge.triage.set_label(forge.issues.get("ann", "plans", issue.number), ann, label.id, True)
    assert "</svg> bug<" in look()[0] and "</svg> bug<" in look(LIST)[0]
    forge.triage.edit_label("ann", "plans", label.id, "defect", "#d73a4a", "")
    assert "</svg> defect<" in look()[0] and "</svg> defect<" in look(LIST)[0]


def test_each_person_has_their_own_kept_page(
    forge: Forge,
    client: testing.TestClient,
) -> None:
    ann = account(forge, "ann")
    issue = forge.issues.create("ann", "plans", ann, "Broken", "It is")
    page = f"/ann/plans/issues/{issue.number}"
    anonymous = client.simulate_get(page).text
    ben = person(client, "ben")
    signed_in = ben.get(page).text
    assert 'name="body"' in signed_in and 'name="body"' not in anonymous  # the comment form
    assert ben.get(page).text == signed_in  # kept for ben, with ben's form token
    result = ben.post(page, {"action": "comment", "body": "from ben's kept page"})
    assert result.status_code == 303, result.text[:300]
    assert "from ben's kept page" in client.simulate_get(page).text


def test_a_pull_request_page_is_kept_only_once_its_check_is_known(
    setup: Setup,
    client: testing.TestClient,
    renderer: Renderer,
) -> None:
    forge_ = setup.forge
    page = f"/ann/plans/pulls/{setup.pull.number}"
    client.simulate_get(page)  # queues the check
    wait_for(lambda: setup.current().checked and forge_.merger.idle())
    shown = client.simulate_get(page).text
    assert "Checking whether" not in shown
    hits = renderer.pages.hits
    assert client.simulate_get(page).text == shown and renderer.pages.hits == hits + 1
    # the check is forgotten (as when the base moves): "checking" is shown, and not kept,
    # so that the answer shows as soon as the follower writes it
    forge_.db.execute(
        "UPDATE pulls SET checked_head = '' WHERE issue_id = ?", (setup.pull.issue.id,)
    )
    held = renderer.pages.held(setup.repo.id)
    assert "Checking whether" in client.simulate_get(page).text
    assert renderer.pages.held(setup.repo.id) == held
    wait_for(lambda: setup.current().checked_head == setup.head and forge_.merger.idle())
    assert "Checking whether" not in client.simulate_get(page).text


def test_a_kept_compare_page_shows_a_pull_request_opened_of_it_and_a_new_commit(
    setup: Setup,
    client: testing.TestClient,
    renderer: Renderer,
) -> None:
    forge_ = setup.forge
    other = commit(
        setup.handle, {**HEAD, "more.txt": "more\n"}, [setup.base], "more", "refs/heads/other"
    )
    forge_.moves.refs_moved(setup.repo)
    # the background check of the open pull request writes its answer (a write the pages
    # show, so it moves the activity version): let it land before the page is kept
    wait_for(lambda: setup.current().checked and forge_.merger.idle())
    page = "/ann/plans/compare/main...other"
    first = client.simulate_get(page).text
    assert "is already open" not in first
    hits = renderer.pages.hits
    assert client.simulate_get(page).text == first and renderer.pages.hits == hits + 1
    pull = forge_.pulls.create(
        "ann",
        "plans",
        account(forge_, "ben"),
        "Other",
        "",
        "main",
        ("ann", "plans", "other"),
        other,
    )
    opened = client.simulate_get(page).text
    assert f"Pull request #{pull.number}</a> is already open" in opened
    newer = commit(
        setup.handle, {**HEAD, "more.txt": "most\n"}, [other], "newer", "refs/heads/other"
    )
    forge_.moves.refs_moved(setup.repo)
    assert newer[:10] in client.simulate_get(page).text
