"""The rendered-page cache of GET /api/mentorships and GET /api/sessions (routes/mentoring.h,
migration 0007): a page listed again after a write shows the write, whichever way it was made
(API, a user's profile, a plain SQL update like the missed-session sweeper's), and a cached page
is never shown to a caller who lost access or to another visibility class."""
import pytest

from helpers import assert_error, psql
from ment_fixtures import make_mentorship, make_session
from orgs import new_org

M_PATH = "/api/mentorships?limit=50"
S_PATH = "/api/sessions?limit=50"


@pytest.fixture
def org():
    o = new_org()
    o.add_member("Coach", key="Coach2", first="Other")
    return o


def listed(client, path, twice=True):
    """The list, read twice so that the second read can come from the cache; both agree."""
    first = client.get_json(path)
    if twice:
        assert client.get_json(path) == first
    return first


def by_id(body, id_):
    return next(x for x in body["data"] if x["id"] == id_)


def test_mentorship_patch_shows_in_cached_lists(org):
    m = make_mentorship(org, title="Before", notes="n1")
    mgr, coach = org.client("Manager"), org.client("Coach")
    assert by_id(listed(mgr, M_PATH), m["id"])["title"] == "Before"
    assert by_id(listed(coach, M_PATH), m["id"])["notes"] == "n1"
    coach.patch_json("/api/mentorships/%s" % m["id"], {"title": "After", "notes": "n2"})
    for c in (mgr, coach):
        item = by_id(listed(c, M_PATH), m["id"])
        assert (item["title"], item["notes"]) == ("After", "n2")


def test_new_mentorship_shows_in_cached_list_and_count(org):
    make_mentorship(org)
    mgr = org.client("Manager")
    before = listed(mgr, M_PATH)
    m2 = make_mentorship(org, coach="Coach2")
    after = listed(mgr, M_PATH)
    assert after["meta"]["total_count"] == before["meta"]["total_count"] + 1
    assert after["data"][0]["id"] == m2["id"]


def test_session_patch_and_sql_update_show_in_cached_list(org):
    m = make_mentorship(org)
    s = make_session(org, m["id"], notes="first")["data"]
    mgr = org.client("Manager")
    assert by_id(listed(mgr, S_PATH), s["id"])["notes"] == "first"
    org.client("Coach").patch_json("/api/sessions/%s" % s["id"], {"notes": "second"})
    assert by_id(listed(mgr, S_PATH), s["id"])["notes"] == "second"
    # A write outside the API (as the missed-session sweeper's UPDATE) invalidates too.
    psql("UPDATE mentorship_sessions SET status = 'missed' WHERE id = :'id'", id=s["id"])
    assert by_id(listed(mgr, S_PATH), s["id"])["status"] == "missed"
    # A mentorship change shows in the session's embedded mentorship.
    mgr.patch_json("/api/mentorships/%s" % m["id"], {"title": "Renamed"})
    assert by_id(listed(mgr, S_PATH), s["id"])["mentorship"]["title"] == "Renamed"


def test_user_name_change_shows_in_cached_lists(org):
    m = make_mentorship(org)
    s = make_session(org, m["id"])["data"]
    mgr, coach = org.client("Manager"), org.client("Coach")
    assert by_id(listed(mgr, M_PATH), m["id"])["coach"]["firstName"] == "Member"
    assert by_id(listed(mgr, S_PATH), s["id"])["coach"]["firstName"] == "Member"
    coach.patch_json("/api/users/me", {"firstName": "Renamed"})
    assert by_id(listed(mgr, M_PATH), m["id"])["coach"]["firstName"] == "Renamed"
    assert by_id(listed(mgr, S_PATH), s["id"])["coach"]["firstName"] == "Renamed"
    psql("UPDATE users SET avatar_url = 'https://example.com/a.png' WHERE id = :'id'",
         id=org.uid("Teacher"))
    assert by_id(listed(mgr, M_PATH), m["id"])["teacher"]["avatarUrl"] == \
        "https://example.com/a.png"


def test_cached_page_keeps_visibility_classes_apart(org):
    m = make_mentorship(org, notes="internal")
    make_mentorship(org, coach="Coach2")
    s = make_session(org, m["id"])["data"]
    mgr, coach, teacher = org.client("Manager"), org.client("Coach"), org.client("Teacher")
    coach2 = org.client("Coach2")
    assert len(listed(mgr, M_PATH)["data"]) == 2
    assert [x["id"] for x in listed(coach, M_PATH)["data"]] == [m["id"]]
    assert len(listed(coach2, M_PATH)["data"]) == 1
    assert listed(coach2, M_PATH)["data"][0]["id"] != m["id"]
    assert listed(coach, M_PATH)["data"][0]["notes"] == "internal"
    assert listed(teacher, M_PATH)["data"][0]["notes"] is None
    assert by_id(listed(teacher, S_PATH), s["id"])["mentorship"]["notes"] is None
    assert listed(coach2, S_PATH)["data"] == []


def test_cached_page_not_shown_after_access_lost(org):
    make_mentorship(org)
    teacher = org.client("Teacher")
    assert len(listed(teacher, M_PATH)["data"]) == 1
    org.admin.patch_json("/api/organizations/%s/users/%s" % (org.id, org.uid("Teacher")),
                         {"membershipStatus": "disabled"})
    r, _ = teacher.call("GET", M_PATH)
    assert_error(r, 403, "FORBIDDEN")
    r, _ = teacher.call("GET", S_PATH)
    assert_error(r, 403, "FORBIDDEN")
