"""Mentorships: list per role and filters, create (roles, 422, 409 and the race on the pair),
get, PATCH (Coach field rules, status transitions of docs/api.md), DELETE (ends, cancels open
sessions with notices)."""
import concurrent.futures

import pytest

from helpers import Client, RedisSub, assert_error, psql, psql_value, sign_up
from ment_fixtures import future, make_mentorship, make_session, platform_admin
from orgs import new_org

STATUSES = ("pending", "active", "paused", "ended")
ALLOWED = {
    ("pending", "active"), ("pending", "ended"), ("active", "paused"), ("active", "ended"),
    ("paused", "active"), ("paused", "ended"),
}


@pytest.fixture
def org():
    o = new_org()
    o.add_member("Coach", key="Coach2", first="Other")
    o.add_member("Teacher", key="Teacher2", first="Other")
    return o


def ids(body):
    return [m["id"] for m in body["data"]]


# ---- create ------------------------------------------------------------------------------


def test_coach_creates_own_pending_enriched(org):
    body = {"organizationId": org.id, "coachId": org.uid("Coach"), "teacherId": org.uid("Teacher"),
            "title": "Algebra", "description": "Weekly", "notes": "internal"}
    m = org.client("Coach").post_json("/api/mentorships", body, expect=201)["data"]
    assert m["status"] == "pending"
    assert m["organizationId"] == org.id
    assert (m["coachId"], m["teacherId"]) == (org.uid("Coach"), org.uid("Teacher"))
    assert (m["title"], m["description"], m["notes"]) == ("Algebra", "Weekly", "internal")
    assert m["createdAt"].endswith("Z") and m["updatedAt"].endswith("Z")
    assert m["coach"] == {"id": org.uid("Coach"), "email": org.users["Coach"]["email"],
                          "firstName": "Member", "lastName": "Coach", "avatarUrl": None}
    assert m["teacher"]["id"] == org.uid("Teacher")
    assert set(m["teacher"]) == {"id", "email", "firstName", "lastName", "avatarUrl"}


def test_create_roles(org):
    body = {"organizationId": org.id, "coachId": org.uid("Coach2"), "teacherId": org.uid("Teacher")}
    r, _ = org.client("Coach").call("POST", "/api/mentorships", body)
    assert_error(r, 403, "FORBIDDEN")  # a coach only for themselves
    r, _ = org.client("Teacher").call("POST", "/api/mentorships", body)
    assert_error(r, 403, "FORBIDDEN")
    for role in ("Manager", "OrganizationAdmin"):
        r, _ = org.client(role).call("POST", "/api/mentorships", body)
        assert r.status_code in (201, 409), r.text
    pa, _ = platform_admin(org.id)
    body["teacherId"] = org.uid("Teacher2")
    pa.post_json("/api/mentorships", body, expect=201)


def test_create_requires_roles_in_org(org):
    mgr = org.client("Manager")
    cases = [
        (org.uid("Teacher"), org.uid("Teacher2")),  # coachId is a Teacher
        (org.uid("Coach"), org.uid("Coach2")),      # teacherId is a Coach
        (org.uid("Manager"), org.uid("Teacher")),
        ("c00000000000000000000000", org.uid("Teacher")),  # no such user
    ]
    for coach, teacher in cases:
        r, _ = mgr.call("POST", "/api/mentorships",
                        {"organizationId": org.id, "coachId": coach, "teacherId": teacher})
        assert_error(r, 422, "UNPROCESSABLE")
    # A member of another organization, and a disabled membership, do not count.
    other = new_org(roles=("Coach",))
    r, _ = mgr.call("POST", "/api/mentorships", {"organizationId": org.id,
                                                   "coachId": other.uid("Coach"),
                                                   "teacherId": org.uid("Teacher")})
    assert_error(r, 422)
    _, u = org.add_member("Teacher", key="Disabled")
    org.client("OrganizationAdmin").delete_json(
        "/api/organizations/%s/users/%s" % (org.id, u["id"]))  # disables the membership
    r, _ = mgr.call("POST", "/api/mentorships", {"organizationId": org.id,
                                                   "coachId": org.uid("Coach"),
                                                   "teacherId": u["id"]})
    assert_error(r, 422)


def test_create_pair_conflict(org):
    make_mentorship(org, status="pending")
    r, _ = org.client("Manager").call("POST", "/api/mentorships", {
        "organizationId": org.id, "coachId": org.uid("Coach"), "teacherId": org.uid("Teacher")})
    assert_error(r, 409, "CONFLICT")
    # Another pair with the same coach is fine.
    make_mentorship(org, teacher="Teacher2", status="pending")


def test_create_pair_race_exactly_one_wins(org):
    body = {"organizationId": org.id, "coachId": org.uid("Coach2"), "teacherId": org.uid("Teacher2")}
    clients = []
    for _ in range(16):
        c = Client(source_ip=org.client("Manager").ip)
        c.cookies.update(org.client("Manager").cookies)
        c.org(org.id)
        clients.append(c)

    def create(c):
        return c.post("/api/mentorships", json=body).status_code

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(create, clients))
    assert codes.count(201) == 1, codes
    assert codes.count(409) == 15, codes
    assert psql_value("SELECT count(*) FROM mentorships WHERE organization_id = :'o'"
                      " AND coach_id = :'c'", o=org.id, c=org.uid("Coach2")) == "1"


def test_create_org_rules(org):
    other = new_org(roles=("Coach", "Teacher"))
    body = {"organizationId": other.id, "coachId": other.uid("Coach"),
            "teacherId": other.uid("Teacher")}
    r, _ = org.client("OrganizationAdmin").call("POST", "/api/mentorships", body)
    assert_error(r, 403, "FORBIDDEN")
    # A PlatformAdmin may create in an organization other than the active one.
    pa, _ = platform_admin(org.id)
    m = pa.post_json("/api/mentorships", body, expect=201)["data"]
    assert m["organizationId"] == other.id
    r, _ = pa.call("POST", "/api/mentorships", dict(body, organizationId=
                                                     "00000000-0000-4000-8000-000000000000"))
    assert_error(r, 404, "NOT_FOUND")


def test_create_validation(org):
    mgr = org.client("Manager")
    r, _ = mgr.call("POST", "/api/mentorships", {})
    err = assert_error(r, 400, "VALIDATION_ERROR")
    assert {d["field"] for d in err["details"]} == {"organizationId", "coachId", "teacherId"}
    base = {"organizationId": org.id, "coachId": org.uid("Coach"), "teacherId": org.uid("Teacher")}
    for field, value in [("organizationId", "not-a-uuid"), ("title", "x" * 256),
                         ("description", "x" * 2001), ("notes", "x" * 1001), ("coachId", 5),
                         ("title", 7)]:
        r, _ = mgr.call("POST", "/api/mentorships", dict(base, **{field: value}))
        err = assert_error(r, 400, "VALIDATION_ERROR")
        assert [d["field"] for d in err["details"]] == [field]
    # Limits count code points, not bytes.
    m = mgr.post_json("/api/mentorships", dict(base, title="é" * 255), expect=201)["data"]
    assert m["title"] == "é" * 255
    r = mgr.post("/api/mentorships", data="{bad json", headers={"Content-Type": "application/json"})
    assert_error(r, 400)


def test_auth_and_org_context(org):
    r = Client().get("/api/mentorships")
    assert_error(r, 401, "UNAUTHENTICATED")
    c, _ = sign_up()
    r = c.get("/api/mentorships")
    assert_error(r, 400, "ORG_CONTEXT_REQUIRED")
    r = c.get("/api/mentorships", headers={"X-Organization-Id": org.id})
    assert_error(r, 403)  # not a member


# ---- list --------------------------------------------------------------------------------


def test_list_per_role_and_filters(org):
    m1 = make_mentorship(org, status="active")
    m2 = make_mentorship(org, teacher="Teacher2", status="pending")
    m3 = make_mentorship(org, coach="Coach2", teacher="Teacher2", status="paused")
    other = new_org(roles=("Coach", "Teacher", "Manager"))
    make_mentorship(other)

    def listing(key, query=""):
        return org.client(key).get_json("/api/mentorships" + query)

    for role in ("Manager", "OrganizationAdmin"):
        body = listing(role)
        assert ids(body) == [m3["id"], m2["id"], m1["id"]]  # newest first
        assert body["meta"] == {"total_count": 3}
    pa, _ = platform_admin(org.id)
    assert ids(pa.get_json("/api/mentorships")) == [m3["id"], m2["id"], m1["id"]]
    assert ids(listing("Coach")) == [m2["id"], m1["id"]]
    assert ids(listing("Coach2")) == [m3["id"]]
    assert ids(listing("Teacher")) == [m1["id"]]
    assert ids(listing("Teacher2")) == [m3["id"], m2["id"]]
    # Filters.
    assert ids(listing("Manager", "?status=paused")) == [m3["id"]]
    assert ids(listing("Manager", "?coachId=%s" % org.uid("Coach"))) == [m2["id"], m1["id"]]
    assert ids(listing("Manager", "?teacherId=%s" % org.uid("Teacher2"))) == [m3["id"], m2["id"]]
    assert ids(listing("Manager", "?coachId=%s&teacherId=%s" % (
        org.uid("Coach"), org.uid("Teacher2")))) == [m2["id"]]
    assert ids(listing("Coach", "?status=active")) == [m1["id"]]
    # coachId / teacherId are manager filters: a coach still sees only their own.
    assert ids(listing("Coach", "?coachId=%s" % org.uid("Coach2"))) == [m2["id"], m1["id"]]
    # Pagination keeps the total.
    body = listing("Manager", "?limit=2&offset=1")
    assert ids(body) == [m2["id"], m1["id"]] and body["meta"]["total_count"] == 3
    body = listing("Manager", "?limit=1&offset=5")
    assert body["data"] == [] and body["meta"]["total_count"] == 3
    # Teachers never see the internal notes.
    psql("UPDATE mentorships SET notes = 'internal' WHERE id = :'id'", id=m1["id"])
    assert listing("Teacher")["data"][0]["notes"] is None
    assert listing("Coach")["data"][1]["notes"] == "internal"
    item = listing("Manager")["data"][2]
    assert item["coach"]["id"] == org.uid("Coach") and item["teacher"]["id"] == org.uid("Teacher")


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "limit=abc", "limit=1.5", "offset=-1",
                                   "offset=x", "status=done", "limit="])
def test_list_bad_query(org, query):
    r = org.client("Manager").get("/api/mentorships?" + query)
    assert_error(r, 400, "VALIDATION_ERROR")


def test_list_limits_accepted(org):
    for q in ("limit=1", "limit=200", "offset=0", "limit=50&offset=100"):
        org.client("Manager").get_json("/api/mentorships?" + q)


# ---- get ---------------------------------------------------------------------------------


def test_get_rules(org):
    m = make_mentorship(org, notes="internal")
    path = "/api/mentorships/%s" % m["id"]
    for key in ("Coach", "Manager", "OrganizationAdmin"):
        got = org.client(key).get_json(path)["data"]
        assert got["id"] == m["id"] and got["notes"] == "internal"
        assert got["coach"]["id"] == org.uid("Coach")
    assert org.client("Teacher").get_json(path)["data"]["notes"] is None
    for key in ("Coach2", "Teacher2"):
        assert_error(org.client(key).get(path), 403, "FORBIDDEN")
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").get(path), 403, "FORBIDDEN")
    assert_error(org.client("Manager").get("/api/mentorships/00000000-0000-4000-8000-000000000000"),
                 404, "NOT_FOUND")
    assert_error(org.client("Manager").get("/api/mentorships/nope"), 400)


# ---- patch -------------------------------------------------------------------------------


def test_coach_patch_rules(org):
    m = make_mentorship(org)
    path = "/api/mentorships/%s" % m["id"]
    got = org.client("Coach").patch_json(path, {"title": "New", "description": None,
                                                "notes": "n"})["data"]
    assert (got["title"], got["description"], got["notes"]) == ("New", None, "n")
    assert got["status"] == "active" and got["coach"]["id"] == org.uid("Coach")
    r, _ = org.client("Coach").call("PATCH", path, {"status": "paused"})
    assert_error(r, 403, "FORBIDDEN")
    r, _ = org.client("Coach").call("PATCH", path, {"status": "active"})
    assert_error(r, 403, "FORBIDDEN")  # never status, not even the same value
    r, _ = org.client("Coach2").call("PATCH", path, {"title": "x"})
    assert_error(r, 403, "FORBIDDEN")
    r, _ = org.client("Teacher").call("PATCH", path, {"title": "x"})
    assert_error(r, 403, "FORBIDDEN")
    got = org.client("Manager").patch_json(path, {"status": "paused", "title": "M"})["data"]
    assert (got["status"], got["title"]) == ("paused", "M")
    r, _ = org.client("Manager").call("PATCH", path, {"status": "gone"})
    assert_error(r, 400, "VALIDATION_ERROR")
    r, _ = org.client("Manager").call("PATCH", path, {"title": "x" * 256})
    assert_error(r, 400, "VALIDATION_ERROR")
    r, _ = org.client("Manager").call("PATCH", "/api/mentorships/00000000-0000-4000-8000-000000000000",
                                      {"title": "x"})
    assert_error(r, 404, "NOT_FOUND")
    other = new_org(roles=("Manager",))
    r, _ = other.client("Manager").call("PATCH", path, {"title": "x"})
    assert_error(r, 403, "FORBIDDEN")


def test_status_transition_table(org):
    m = make_mentorship(org, status="pending")
    path = "/api/mentorships/%s" % m["id"]
    for frm in STATUSES:
        for to in STATUSES:
            psql("UPDATE mentorships SET status = :'s' WHERE id = :'id'", s=frm, id=m["id"])
            r, body = org.client("Manager").call("PATCH", path, {"status": to})
            if frm == to or (frm, to) in ALLOWED:
                assert r.status_code == 200, (frm, to, r.text)
                assert body["data"]["status"] == to
            else:
                assert_error(r, 422, "INVALID_TRANSITION")
                assert psql_value("SELECT status FROM mentorships WHERE id = :'id'",
                                  id=m["id"]) == frm


def test_same_status_is_a_noop(org):
    m = make_mentorship(org)
    got = org.client("Manager").patch_json("/api/mentorships/%s" % m["id"],
                                           {"status": "active"})["data"]
    assert got["updatedAt"] == m["updatedAt"]


# ---- delete ------------------------------------------------------------------------------


def test_delete_ends_and_cancels_open_sessions(org, mail):
    m = make_mentorship(org, title="Chemistry")
    s1 = make_session(org, m["id"], scheduledAt=future(24))["data"]
    s2 = make_session(org, m["id"], scheduledAt=future(48))["data"]
    s3 = make_session(org, m["id"], scheduledAt=future(72))["data"]
    org.client("Teacher").patch_json("/api/sessions/%s" % s2["id"], {"status": "confirmed"})
    org.client("Coach").patch_json("/api/sessions/%s" % s3["id"], {"status": "completed"})
    coach_mail = org.users["Coach"]["email"]
    teacher_mail = org.users["Teacher"]["email"]
    mail.wait_for(coach_mail, count=3)  # three confirmations
    with RedisSub("mentorship:%s" % m["id"], "user:%s" % org.uid("Teacher")) as sub:
        r, _ = org.client("Coach").call("DELETE", "/api/mentorships/%s" % m["id"])
        assert_error(r, 403, "FORBIDDEN")
        got = org.client("Manager").delete_json("/api/mentorships/%s" % m["id"])["data"]
        assert got["status"] == "ended" and got["coach"]["id"] == org.uid("Coach")
        chans = {e["channel"] for e in [sub.next("session-update"), sub.next("session-update")]}
        assert chans == {"mentorship:%s" % m["id"], "user:%s" % org.uid("Teacher")}
    rows = dict((r[0], r[1:]) for r in psql(
        "SELECT id, status, cancelled_by, cancelled_at IS NOT NULL FROM mentorship_sessions"
        " WHERE mentorship_id = :'m'", m=m["id"]))
    assert rows[s1["id"]] == ("cancelled", org.uid("Manager"), "t")
    assert rows[s2["id"]] == ("cancelled", org.uid("Manager"), "t")
    assert rows[s3["id"]][0] == "completed"
    for addr in (coach_mail, teacher_mail):
        cancelled = [x for x in mail.all_to(addr) if "cancelled" in x.subject]
        if len(cancelled) < 2:
            mail.wait_for(addr, count=2, subject="cancelled")
            cancelled = [x for x in mail.all_to(addr) if "cancelled" in x.subject]
        assert len(cancelled) == 2
    # No new session in an ended mentorship; DELETE again is a no-op.
    r = org.client("Coach").post("/api/sessions", json={"mentorshipId": m["id"],
                                                        "scheduledAt": future(100)})
    assert_error(r, 422)
    again = org.client("Manager").delete_json("/api/mentorships/%s" % m["id"])["data"]
    assert again["status"] == "ended" and again["updatedAt"] == got["updatedAt"]
    r = org.client("Manager").delete("/api/mentorships/00000000-0000-4000-8000-000000000000")
    assert_error(r, 404, "NOT_FOUND")
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").delete("/api/mentorships/%s" % m["id"]), 403)


def test_patch_to_ended_also_cancels(org):
    m = make_mentorship(org)
    s = make_session(org, m["id"])["data"]
    org.client("OrganizationAdmin").patch_json("/api/mentorships/%s" % m["id"], {"status": "ended"})
    assert psql_value("SELECT status FROM mentorship_sessions WHERE id = :'id'",
                      id=s["id"]) == "cancelled"
