"""Organization members: list, add, update, disable (docs/api.md "Organizations and
members"), with the visibility rules: Manager never sees OrganizationAdmins, Coach sees only
active Teachers."""
import re
import time
import uuid

import pytest

from helpers import RedisSub, assert_error, psql_value, sign_up, unique_email
from orgs import make_platform_admin

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ITEM_FIELDS = {"id", "email", "status", "firstName", "lastName", "avatarUrl", "roleInOrganization",
               "isPrimary", "membershipStatus", "joinedAt"}


def users_path(org_id, user_id=None):
    p = "/api/organizations/%s/users" % org_id
    return p + "/" + user_id if user_id else p


def ids(body):
    return [m["id"] for m in body["data"]]


# ---- POST ----------------------------------------------------------------------------------


def test_add_member(make_org):
    org = make_org(roles=("OrganizationAdmin",))
    admin = org.clients["OrganizationAdmin"]
    c, u = sign_up()
    r, body = admin.call("POST", users_path(org.id), {"userId": u["id"], "roleInOrganization": "Coach"})
    assert r.status_code == 201, r.text
    d = body["data"]
    assert set(d) == {"organizationId", "userId", "roleInOrganization", "isPrimary",
                      "membershipStatus", "joinedAt"}
    assert d["organizationId"] == org.id and d["userId"] == u["id"]
    assert d["roleInOrganization"] == "Coach" and d["isPrimary"] is False
    assert d["membershipStatus"] == "active" and ISO.match(d["joinedAt"])
    listed = admin.get_json(users_path(org.id) + "?role=Coach")["data"]
    assert [(m["id"], m["joinedAt"]) for m in listed] == [(u["id"], d["joinedAt"])]
    # First active membership of a user without a current organization: it becomes current.
    assert c.get_json("/api/users/me")["data"]["currentOrganizationId"] == org.id
    me = c.get_json("/api/users/me")["data"]
    assert me["role"] == "Coach" and me["orgId"] == org.id


def test_add_keeps_existing_current_org(make_org):
    a, b = make_org(), make_org(roles=())
    c, u = a.clients["Teacher"], a.users["Teacher"]
    d = b.admin.post_json(users_path(b.id), {"userId": u["id"], "roleInOrganization": "Manager",
                                             "isPrimary": True}, expect=201)["data"]
    assert d["isPrimary"] is True
    assert psql_value("SELECT current_organization_id FROM users WHERE id = :'id'", id=u["id"]) == a.id


def test_add_primary_clears_other_primary(make_org):
    a, b = make_org(roles=()), make_org(roles=())
    _, u = sign_up()
    a.admin.post_json(users_path(a.id), {"userId": u["id"], "roleInOrganization": "Teacher",
                                         "isPrimary": True}, expect=201)
    b.admin.post_json(users_path(b.id), {"userId": u["id"], "roleInOrganization": "Teacher",
                                         "isPrimary": True}, expect=201)
    rows = psql_value("SELECT string_agg(organization_id || ':' || is_primary, ',' ORDER BY joined_at)"
                      " FROM organization_memberships WHERE user_id = :'id'", id=u["id"])
    assert rows == "%s:false,%s:true" % (a.id, b.id)


def test_add_errors(make_org, platform_admin):
    org, other = make_org(), make_org()
    admin = org.clients["OrganizationAdmin"]
    _, u = sign_up()
    # Validation.
    err = assert_error(admin.post(users_path(org.id), json={}), 400, "VALIDATION_ERROR")
    assert {d["field"] for d in err["details"]} == {"userId", "roleInOrganization"}
    for body in ({"userId": "not-a-cuid", "roleInOrganization": "Coach"},
                 {"userId": u["id"], "roleInOrganization": "Owner"},
                 {"userId": u["id"], "roleInOrganization": "PlatformAdmin"},
                 {"userId": u["id"], "roleInOrganization": "coach"},
                 {"userId": u["id"], "roleInOrganization": "Coach", "isPrimary": "yes"},
                 {"userId": 5, "roleInOrganization": "Coach"}):
        assert_error(admin.post(users_path(org.id), json=body), 400, "VALIDATION_ERROR")
    assert_error(admin.post(users_path("nope"), json={"userId": u["id"], "roleInOrganization": "Coach"}),
                 400, "VALIDATION_ERROR")
    # The user must exist.
    assert_error(admin.post(users_path(org.id), json={
        "userId": "c" + "0" * 24, "roleInOrganization": "Coach"}), 404, "NOT_FOUND")
    # Already a member (also when disabled: access comes back through PATCH).
    admin.post_json(users_path(org.id), {"userId": u["id"], "roleInOrganization": "Teacher"},
                    expect=201)
    assert_error(admin.post(users_path(org.id), json={"userId": u["id"], "roleInOrganization": "Coach"}),
                 409, "CONFLICT")
    admin.delete_json(users_path(org.id, u["id"]))
    assert_error(admin.post(users_path(org.id), json={"userId": u["id"], "roleInOrganization": "Coach"}),
                 409, "CONFLICT")
    # Another organization: 403; lower roles: 403.
    _, v = sign_up()
    body = {"userId": v["id"], "roleInOrganization": "Teacher"}
    assert_error(admin.post(users_path(other.id), json=body), 403, "FORBIDDEN")
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].post(users_path(org.id), json=body), 403, "FORBIDDEN")
    assert psql_value("SELECT count(*) FROM organization_memberships WHERE user_id = :'id'",
                      id=v["id"]) == "0"
    # PlatformAdmin: 404 for a missing organization.
    assert_error(platform_admin[0].post(users_path(uuid.uuid4()), json=body), 404, "NOT_FOUND")


# ---- GET -----------------------------------------------------------------------------------


def test_list_fields_and_order(make_org):
    org = make_org()
    body = org.clients["OrganizationAdmin"].get_json(users_path(org.id))
    assert body["meta"]["total_count"] == 4
    assert [m["roleInOrganization"] for m in body["data"]] == [
        "OrganizationAdmin", "Manager", "Coach", "Teacher"]  # joinedAt order
    m = body["data"][3]
    assert set(m) == ITEM_FIELDS
    u = org.users["Teacher"]
    assert m["id"] == u["id"] and m["email"] == u["email"] and m["status"] == "active"
    assert m["firstName"] == "Member" and m["lastName"] == "Teacher" and m["avatarUrl"] is None
    assert m["isPrimary"] is False and m["membershipStatus"] == "active" and ISO.match(m["joinedAt"])


def test_list_visibility_by_role(make_org, platform_admin):
    org = make_org()
    org.add_member("Teacher", key="Teacher2")
    org.add_member("OrganizationAdmin", key="Admin2")
    admin = org.clients["OrganizationAdmin"]
    admin.delete_json(users_path(org.id, org.users["Teacher2"]["id"]))
    everyone = ids(admin.get_json(users_path(org.id)))
    assert len(everyone) == 6
    assert ids(platform_admin[0].get_json(users_path(org.id))) == everyone
    owner, _ = make_platform_admin("Owner")
    assert ids(owner.get_json(users_path(org.id))) == everyone
    mgr = org.clients["Manager"].get_json(users_path(org.id))
    assert all(m["roleInOrganization"] != "OrganizationAdmin" for m in mgr["data"])
    assert mgr["meta"]["total_count"] == 4  # manager, coach, two teachers (one disabled)
    coach = org.clients["Coach"].get_json(users_path(org.id))
    assert ids(coach) == [org.users["Teacher"]["id"]] and coach["meta"]["total_count"] == 1
    # Filters cannot widen what a role sees.
    assert org.clients["Manager"].get_json(users_path(org.id) + "?role=OrganizationAdmin") == {
        "data": [], "meta": {"total_count": 0}}
    assert org.clients["Coach"].get_json(users_path(org.id) + "?membershipStatus=disabled") == {
        "data": [], "meta": {"total_count": 0}}
    assert_error(org.clients["Teacher"].get(users_path(org.id)), 403, "FORBIDDEN")


def test_list_other_org_forbidden(make_org, platform_admin):
    a, b = make_org(), make_org()
    for role in ("OrganizationAdmin", "Manager", "Coach", "Teacher"):
        assert_error(a.clients[role].get(users_path(b.id)), 403, "FORBIDDEN")
    assert_error(a.clients["OrganizationAdmin"].get(users_path(uuid.uuid4())), 403, "FORBIDDEN")
    assert_error(platform_admin[0].get(users_path(uuid.uuid4())), 404, "NOT_FOUND")
    assert_error(platform_admin[0].get(users_path("xyz")), 400, "VALIDATION_ERROR")


def test_list_filters_search_paging(make_org, psql):
    org = make_org(roles=("OrganizationAdmin",))
    tag = uuid.uuid4().hex[:8]
    people = []
    for i, (first, last, role) in enumerate([("Ada", "Lovelace", "Coach"),
                                             ("Grace", "Hopper", "Teacher"),
                                             ("Alan", "Turing", "Teacher"),
                                             ("Edsger", "Dijkstra", "Manager")]):
        _, u = org.add_member(role, key="p%d" % i, first=first, last=last + tag)
        people.append(u)
    admin = org.clients["OrganizationAdmin"]
    p = users_path(org.id)
    assert admin.get_json(p + "?role=Teacher")["meta"]["total_count"] == 2
    # Search: display name (first + space + last), case-insensitive, partial; and email.
    assert ids(admin.get_json(p + "?search=grace HOP")) == [people[1]["id"]]
    assert ids(admin.get_json(p + "?search=" + "turing" + tag.upper())) == [people[2]["id"]]
    email_part = people[3]["email"].split("@")[0][-6:]
    assert ids(admin.get_json(p + "?search=" + email_part.upper())) == [people[3]["id"]]
    assert admin.get_json(p + "?search=" + tag)["meta"]["total_count"] == 4
    assert admin.get_json(p + "?search=" + tag + "&role=Teacher")["meta"]["total_count"] == 2
    assert ids(admin.get_json(p + "?search=tU")) == [people[2]["id"]]  # short terms too
    assert ids(admin.get_json(p + "?search=" + tag + "&status=active&role=Teacher")) == [
        people[1]["id"], people[2]["id"]]
    assert admin.get_json(p + "?search=%25")["meta"]["total_count"] == 0  # wildcard is literal
    assert admin.get_json(p + "?search=a_a")["meta"]["total_count"] == 0
    assert admin.get_json(p + "?search=   ")["meta"]["total_count"] == 5  # blank: no filter
    # User status and membership status filters.
    psql("UPDATE users SET status = 'suspended' WHERE id = :'id'", id=people[0]["id"])
    assert ids(admin.get_json(p + "?status=suspended")) == [people[0]["id"]]
    admin.delete_json(users_path(org.id, people[2]["id"]))
    assert ids(admin.get_json(p + "?membershipStatus=disabled")) == [people[2]["id"]]
    assert admin.get_json(p + "?membershipStatus=active")["meta"]["total_count"] == 4
    # Paging: stable order, total_count over the whole filtered set.
    full = ids(admin.get_json(p))
    assert len(full) == 5
    page = admin.get_json(p + "?limit=2&offset=2")
    assert ids(page) == full[2:4] and page["meta"]["total_count"] == 5
    assert admin.get_json(p + "?offset=50") == {"data": [], "meta": {"total_count": 5}}


def test_list_validation(make_org):
    org = make_org(roles=("OrganizationAdmin",))
    admin = org.clients["OrganizationAdmin"]
    for q in ("limit=0", "limit=1001", "limit=ten", "offset=-5", "offset=1e3", "role=Owner",
              "status=gone", "membershipStatus=paused", "search=" + "x" * 201):
        assert_error(admin.get(users_path(org.id) + "?" + q), 400, "VALIDATION_ERROR")
    assert admin.get_json(users_path(org.id) + "?limit=1000")["meta"]["total_count"] == 1


# ---- PATCH ---------------------------------------------------------------------------------


def test_patch_member(make_org):
    org = make_org()
    admin = org.clients["OrganizationAdmin"]
    uid = org.users["Teacher"]["id"]
    d = admin.patch_json(users_path(org.id, uid), {"roleInOrganization": "Coach", "isPrimary": True})["data"]
    assert set(d) == {"organizationId", "userId", "roleInOrganization", "isPrimary",
                      "membershipStatus", "updatedAt"}
    assert d["organizationId"] == org.id and d["userId"] == uid
    assert d["roleInOrganization"] == "Coach" and d["isPrimary"] is True
    assert d["membershipStatus"] == "active" and ISO.match(d["updatedAt"])
    # The new role applies on the next request.
    assert org.clients["Teacher"].get_json("/api/users/me")["data"]["role"] == "Coach"
    d = admin.patch_json(users_path(org.id, uid), {})["data"]
    assert d["roleInOrganization"] == "Coach" and d["isPrimary"] is True


def test_patch_disable_and_restore(make_org):
    org = make_org()
    admin, teacher = org.clients["OrganizationAdmin"], org.clients["Teacher"]
    uid = org.users["Teacher"]["id"]
    d = admin.patch_json(users_path(org.id, uid), {"membershipStatus": "disabled"})["data"]
    assert d["membershipStatus"] == "disabled"
    assert_error(teacher.get("/api/me/current-organization"), 403, "FORBIDDEN")
    # Without the header the profile no longer points at the organization.
    teacher.org(None)
    assert teacher.get_json("/api/me/current-organization")["data"] is None
    d = admin.patch_json(users_path(org.id, uid), {"membershipStatus": "active"})["data"]
    assert d["membershipStatus"] == "active"
    assert teacher.get_json("/api/me/current-organization")["data"]["id"] == org.id
    teacher.org(org.id)
    assert teacher.get_json("/api/users/me")["data"]["role"] == "Teacher"


def test_patch_errors(make_org, platform_admin):
    org, other = make_org(), make_org()
    admin = org.clients["OrganizationAdmin"]
    uid = org.users["Teacher"]["id"]
    for body in ({"roleInOrganization": "Owner"}, {"roleInOrganization": None},
                 {"isPrimary": "true"}, {"membershipStatus": "archived"},
                 {"membershipStatus": None}):
        assert_error(admin.patch(users_path(org.id, uid), json=body), 400, "VALIDATION_ERROR")
    assert_error(admin.patch(users_path(org.id, "bad-id"), json={}), 400, "VALIDATION_ERROR")
    # Not a member of this organization / unknown user: 404.
    assert_error(admin.patch(users_path(org.id, other.users["Teacher"]["id"]),
                             json={"isPrimary": True}), 404, "NOT_FOUND")
    assert_error(admin.patch(users_path(org.id, "c" + "1" * 24), json={}), 404, "NOT_FOUND")
    # Another organization or a lower role: 403.
    assert_error(admin.patch(users_path(other.id, other.users["Teacher"]["id"]),
                             json={"roleInOrganization": "OrganizationAdmin"}), 403, "FORBIDDEN")
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].patch(users_path(org.id, uid),
                                             json={"roleInOrganization": "Manager"}), 403, "FORBIDDEN")
    assert psql_value("SELECT role_in_organization FROM organization_memberships"
                      " WHERE organization_id = :'o' AND user_id = :'u'", o=org.id, u=uid) == "Teacher"
    pa = platform_admin[0]
    assert pa.patch_json(users_path(other.id, other.users["Teacher"]["id"]),
                         {"roleInOrganization": "Coach"})["data"]["roleInOrganization"] == "Coach"
    assert_error(pa.patch(users_path(uuid.uuid4(), uid), json={}), 404, "NOT_FOUND")


# ---- DELETE --------------------------------------------------------------------------------


def test_delete_disables_and_publishes(make_org):
    org = make_org()
    admin, teacher = org.clients["OrganizationAdmin"], org.clients["Teacher"]
    uid = org.users["Teacher"]["id"]
    assert teacher.get_json("/api/me/current-organization")["data"]["id"] == org.id
    with RedisSub("user:%s:control" % uid) as sub:
        r, body = admin.call("DELETE", users_path(org.id, uid))
        assert r.status_code == 200, r.text
        assert body["data"]["membershipStatus"] == "disabled" and body["data"]["userId"] == uid
        assert sub.messages(wait=5) == [{"type": "membership-disabled", "organizationId": org.id}]
        # Disabling again is idempotent and publishes nothing more.
        assert admin.delete_json(users_path(org.id, uid))["data"]["membershipStatus"] == "disabled"
        time.sleep(0.3)
        assert len(sub.messages()) == 1
    # Org-scoped access is gone at once; the data is kept.
    assert_error(teacher.get("/api/users/me"), 403, "FORBIDDEN")
    assert psql_value("SELECT membership_status FROM organization_memberships"
                      " WHERE organization_id = :'o' AND user_id = :'u'", o=org.id, u=uid) == "disabled"
    teacher.org(None)
    assert teacher.get_json("/api/me/organizations")["data"]["organizations"] == []
    # Restored through PATCH.
    admin.patch_json(users_path(org.id, uid), {"membershipStatus": "active"})
    teacher.org(org.id)
    assert teacher.get_json("/api/users/me")["data"]["role"] == "Teacher"


def test_delete_moves_current_org_to_another_membership(make_org):
    a, b = make_org(), make_org(roles=())
    c, u = a.clients["Coach"], a.users["Coach"]
    b.admin.post_json(users_path(b.id), {"userId": u["id"], "roleInOrganization": "Teacher"},
                      expect=201)
    a.clients["OrganizationAdmin"].delete_json(users_path(a.id, u["id"]))
    c.org(None)
    cur = c.get_json("/api/me/current-organization")["data"]
    assert cur["id"] == b.id and cur["userRole"] == "Teacher"


def test_delete_errors(make_org, platform_admin):
    org, other = make_org(), make_org()
    admin = org.clients["OrganizationAdmin"]
    uid = org.users["Teacher"]["id"]
    assert_error(admin.delete(users_path(org.id, other.users["Coach"]["id"])), 404, "NOT_FOUND")
    assert_error(admin.delete(users_path(other.id, other.users["Coach"]["id"])), 403, "FORBIDDEN")
    assert_error(admin.delete(users_path(org.id, "nope")), 400, "VALIDATION_ERROR")
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].delete(users_path(org.id, uid)), 403, "FORBIDDEN")
    assert_error(platform_admin[0].delete(users_path(uuid.uuid4(), uid)), 404, "NOT_FOUND")
    assert platform_admin[0].delete_json(users_path(org.id, uid))["data"]["membershipStatus"] == "disabled"


def test_org_admin_can_manage_another_admin(make_org):
    org = make_org()
    _, u2 = org.add_member("OrganizationAdmin", key="Admin2")
    admin = org.clients["OrganizationAdmin"]
    d = admin.patch_json(users_path(org.id, u2["id"]), {"roleInOrganization": "Manager"})["data"]
    assert d["roleInOrganization"] == "Manager"


def test_total_count_matches_rows_after_changes(make_org, psql_value):
    """total_count without user-side filters comes from counts kept by triggers: it must equal
    a real count after adds, role changes, disables and restores."""
    org = make_org()
    admin = org.clients["OrganizationAdmin"]
    for i in range(3):
        org.add_member("Teacher", key="t%d" % i)
    p = users_path(org.id)
    admin.patch_json(users_path(org.id, org.users["t0"]["id"]), {"roleInOrganization": "Coach"})
    admin.delete_json(users_path(org.id, org.users["t1"]["id"]))
    admin.patch_json(users_path(org.id, org.users["Manager"]["id"]),
                     {"roleInOrganization": "OrganizationAdmin", "membershipStatus": "disabled"})
    admin.patch_json(users_path(org.id, org.users["Manager"]["id"]), {"membershipStatus": "active"})
    admin.patch_json(users_path(org.id, org.users["t2"]["id"]), {"isPrimary": True})
    for q in ("", "?role=Teacher", "?role=Coach", "?role=OrganizationAdmin", "?membershipStatus=active",
              "?membershipStatus=disabled", "?role=Teacher&membershipStatus=disabled"):
        body = admin.get_json(p + q + ("&" if "?" in q else "?") + "limit=1000")
        assert body["meta"]["total_count"] == len(body["data"]), q
    assert admin.get_json(p)["meta"]["total_count"] == 7
    assert org.clients["Manager"].get_json(p)["meta"]["total_count"] == 7  # now an admin
    coach = org.clients["Coach"].get_json(p)
    assert coach["meta"]["total_count"] == len(coach["data"]) == 2  # Teacher, t2
    real = psql_value("SELECT count(*) FROM organization_memberships WHERE organization_id = :'o'",
                      o=org.id)
    kept = psql_value("SELECT sum(n) FROM organization_member_counts WHERE organization_id = :'o'",
                      o=org.id)
    assert real == kept == "7"


def test_list_never_stale(make_org, psql):
    """Member lists may be served from memory; every change that shows in them must show at
    once: user profile fields (whoever changes them), memberships, the caller's own role."""
    org = make_org()
    admin, mgr = org.clients["OrganizationAdmin"], org.clients["Manager"]
    p = users_path(org.id)
    uid = org.users["Teacher"]["id"]

    def teacher(client=admin):
        return [m for m in client.get_json(p)["data"] if m["id"] == uid][0]

    for _ in range(2):  # the second read may come from memory
        assert teacher()["firstName"] == "Member"
        assert teacher(mgr)["firstName"] == "Member"
    psql("UPDATE users SET first_name = 'Renamed', avatar_url = 'https://x.example/a.png'"
         " WHERE id = :'id'", id=uid)
    t = teacher()
    assert t["firstName"] == "Renamed" and t["avatarUrl"] == "https://x.example/a.png"
    assert teacher(mgr)["firstName"] == "Renamed"
    psql("UPDATE users SET status = 'suspended', email = :'e' WHERE id = :'id'",
         id=uid, e="changed-" + org.users["Teacher"]["email"])
    t = teacher()
    assert t["status"] == "suspended" and t["email"].startswith("changed-")
    admin.patch_json(users_path(org.id, uid), {"isPrimary": True})
    assert teacher()["isPrimary"] is True
    # The caller's own role: promoted, then demoted.
    assert all(m["roleInOrganization"] != "OrganizationAdmin" for m in mgr.get_json(p)["data"])
    admin.patch_json(users_path(org.id, org.users["Manager"]["id"]),
                     {"roleInOrganization": "OrganizationAdmin"})
    assert any(m["roleInOrganization"] == "OrganizationAdmin" for m in mgr.get_json(p)["data"])
    admin.patch_json(users_path(org.id, org.users["Manager"]["id"]), {"roleInOrganization": "Teacher"})
    assert_error(mgr.get(p), 403, "FORBIDDEN")
    # Removed from the organization: the cached list is not served.
    coach = org.clients["Coach"]
    assert coach.get_json(p)["meta"]["total_count"] == 2  # the teacher and the demoted manager
    admin.delete_json(users_path(org.id, org.users["Coach"]["id"]))
    assert_error(coach.get(p), 403, "FORBIDDEN")
    coach.org(None)
    assert_error(coach.get(p), 403, "FORBIDDEN")
