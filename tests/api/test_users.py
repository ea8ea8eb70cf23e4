"""Users (docs/api.md "Users"): PATCH /api/users/me, GET/POST /api/users, GET/PATCH/DELETE
/api/users/:id, and a role matrix over every endpoint of the area.

Organizations and memberships are made through the API (orgs.new_org)."""
import re
import time
import uuid

import pytest

from helpers import (PASSWORD, Client, RedisSub, assert_error, psql, psql_value, sign_in,
                     sign_up, unique_email)
from orgs import make_platform_admin, new_org
from users_support import add_pending_invite

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ME_KEYS = {"id", "firstName", "lastName", "phone", "birthDate", "countryCode", "avatarUrl",
           "currentOrganizationId", "createdAt", "updatedAt"}
USER_KEYS = {"id", "email", "status", "globalRole", "firstName", "lastName", "avatarUrl", "role",
             "orgRoles"}


@pytest.fixture
def org():
    return new_org()


def fields(err):
    return sorted(d["field"] for d in err.get("details", []))


# ---- PATCH /api/users/me -----------------------------------------------------------------------


def test_patch_me_updates_profile():
    c, u = sign_up(name="Ada Lovelace")
    data = c.patch_json("/api/users/me", {
        "firstName": "  Augusta ", "lastName": "King", "preferredLanguage": "es",
        "countryCode": "es", "phone": "612 34 56 78", "birthDate": "1990-12-10",
        "timezone": "Europe/Madrid"})["data"]
    assert set(data) == ME_KEYS
    assert data["id"] == u["id"]
    assert data["firstName"] == "Augusta" and data["lastName"] == "King"
    assert data["countryCode"] == "ES"
    assert data["phone"] == "+34612345678"
    assert data["birthDate"] == "1990-12-10"
    assert data["avatarUrl"] is None and data["currentOrganizationId"] is None
    assert ISO.match(data["createdAt"]) and ISO.match(data["updatedAt"])
    me = c.get_json("/api/users/me")["data"]
    assert me["timezone"] == "Europe/Madrid" and me["preferredLanguage"] == "es"
    assert me["phone"] == "+34612345678" and me["countryCode"] == "ES"
    # Nothing sent: nothing changes.
    again = c.patch_json("/api/users/me", {})["data"]
    assert again["phone"] == "+34612345678" and again["firstName"] == "Augusta"


def test_patch_me_phone_rules():
    c, _ = sign_up()
    # Without a country only the international format is accepted.
    err = assert_error(c.call("PATCH", "/api/users/me", {"phone": "612345678"})[0], 400,
                       "VALIDATION_ERROR")
    assert fields(err) == ["phone"]
    assert c.patch_json("/api/users/me", {"phone": "+44 20 7946 0958"})["data"]["phone"] == \
        "+442079460958"
    # The stored country applies to later national numbers.
    c.patch_json("/api/users/me", {"countryCode": "US"})
    assert c.patch_json("/api/users/me", {"phone": "(650) 253-0000"})["data"]["phone"] == \
        "+16502530000"
    # A country sent in the same request wins over the stored one.
    d = c.patch_json("/api/users/me", {"countryCode": "GB", "phone": "07400 123456"})["data"]
    assert d["phone"] == "+447400123456" and d["countryCode"] == "GB"
    # Argentine mobile in national format.
    d = c.patch_json("/api/users/me", {"countryCode": "AR", "phone": "011 15-2345-6789"})["data"]
    assert d["phone"] == "+5491123456789"
    # Not a number of that country.
    assert_error(c.call("PATCH", "/api/users/me", {"countryCode": "US", "phone": "555-1234"})[0],
                 400, "VALIDATION_ERROR")
    assert_error(c.call("PATCH", "/api/users/me", {"phone": "call me"})[0], 400)
    assert_error(c.call("PATCH", "/api/users/me", {"phone": "+1" + "2" * 60})[0], 400)
    # "" and null clear it.
    assert c.patch_json("/api/users/me", {"phone": ""})["data"]["phone"] is None
    c.patch_json("/api/users/me", {"phone": "+34612345678"})
    assert c.patch_json("/api/users/me", {"phone": None})["data"]["phone"] is None
    assert psql_value("SELECT phone FROM users WHERE id = :'id'", id=c.user["id"]) is None


def test_patch_me_validation():
    c, _ = sign_up()
    bad = [
        ({"firstName": ""}, "firstName"), ({"firstName": "x" * 101}, "firstName"),
        ({"firstName": None}, "firstName"), ({"lastName": 5}, "lastName"),
        ({"lastName": "a\u0007b"}, "lastName"),
        ({"preferredLanguage": "fr"}, "preferredLanguage"),
        ({"preferredLanguage": None}, "preferredLanguage"),
        ({"birthDate": "2023-02-30"}, "birthDate"), ({"birthDate": "1990/01/01"}, "birthDate"),
        ({"birthDate": "2999-01-01"}, "birthDate"), ({"birthDate": "1800-01-01"}, "birthDate"),
        ({"countryCode": "XX"}, "countryCode"), ({"countryCode": "USA"}, "countryCode"),
        ({"countryCode": ""}, "countryCode"),
        ({"timezone": "Mars/Olympus"}, "timezone"), ({"timezone": ""}, "timezone"),
    ]
    for body, field in bad:
        err = assert_error(c.call("PATCH", "/api/users/me", body)[0], 400, "VALIDATION_ERROR")
        assert fields(err) == [field], (body, err)
    # Every failure in one answer; nothing is stored.
    err = assert_error(c.call("PATCH", "/api/users/me", {
        "firstName": "", "timezone": "Nowhere", "birthDate": "x", "firstName2": 1})[0], 400)
    assert fields(err) == ["birthDate", "firstName", "timezone"]
    assert c.get_json("/api/users/me")["data"]["firstName"] == "Test"
    # Leap day, today and clearing with null are fine.
    d = c.patch_json("/api/users/me", {"birthDate": "2000-02-29", "timezone": None,
                                       "countryCode": None})["data"]
    assert d["birthDate"] == "2000-02-29" and d["countryCode"] is None
    assert c.patch_json("/api/users/me", {"birthDate": None})["data"]["birthDate"] is None
    assert_error(c.call("PATCH", "/api/users/me", data="{nope",
                        headers={"Content-Type": "application/json"})[0], 400)


def test_timezone_one_rule_for_users_and_organizations():
    """A user's timezone and an organization's defaultTimezone pass one validator: the same
    trimming and the same message."""
    c, _ = sign_up()
    c.patch_json("/api/users/me", {"timezone": " Europe/Madrid "})
    assert c.get_json("/api/users/me")["data"]["timezone"] == "Europe/Madrid"
    user_err = assert_error(c.call("PATCH", "/api/users/me", {"timezone": "Mars/Olympus"})[0],
                            400, "VALIDATION_ERROR")
    org = new_org()
    org_err = assert_error(org.admin.call("PATCH", "/api/organizations/%s" % org.id,
                                          {"defaultTimezone": "Mars/Olympus"})[0],
                           400, "VALIDATION_ERROR")
    assert [d["message"] for d in user_err["details"]] == \
        [d["message"] for d in org_err["details"]] == \
        ["must be an IANA time zone such as Europe/Madrid"]


# The fields PATCH /api/users/me takes (the rest of an answer is not a profile field).
PATCH_ME_FIELDS = {"firstName", "lastName", "preferredLanguage", "phone", "birthDate",
                   "countryCode", "timezone"}


def test_one_word_name_round_trips():
    """Sign-up's `name` is split at the first space; a one-word name stores lastName null, and
    what GET /api/users/me answers is accepted back by PATCH as it is (null clears a field)."""
    c, u = sign_up(name="Plato")
    me = c.get_json("/api/users/me")["data"]
    assert me["firstName"] == "Plato" and me["lastName"] is None
    assert psql_value("SELECT last_name FROM users WHERE id = :'id'", id=u["id"]) is None
    back = {k: v for k, v in me.items() if k in PATCH_ME_FIELDS}
    assert back["lastName"] is None and back["phone"] is None and back["birthDate"] is None
    d = c.patch_json("/api/users/me", back)["data"]
    assert d["firstName"] == "Plato" and d["lastName"] is None
    again = c.get_json("/api/users/me")["data"]
    assert {k: again[k] for k in back} == back
    # null clears a last name that is set; firstName null stays a validation failure.
    assert c.patch_json("/api/users/me", {"lastName": "of Athens"})["data"]["lastName"] == \
        "of Athens"
    assert c.patch_json("/api/users/me", {"lastName": None})["data"]["lastName"] is None
    assert psql_value("SELECT last_name FROM users WHERE id = :'id'", id=u["id"]) is None
    err = assert_error(c.call("PATCH", "/api/users/me", {"firstName": None})[0], 400,
                       "VALIDATION_ERROR")
    assert fields(err) == ["firstName"]
    # Two words and more: the first word, then the rest.
    _, u2 = sign_up(name="Ana Maria de la Cruz")
    assert (u2.get("firstName"), u2.get("lastName")) in (("Ana", "Maria de la Cruz"), (None, None))
    assert psql("SELECT first_name, last_name FROM users WHERE id = :'id'", id=u2["id"]) == \
        [("Ana", "Maria de la Cruz")]


def test_patch_user_by_id_accepts_null_last_name(org):
    oa = org.clients["OrganizationAdmin"]
    tid = org.uid("Teacher")
    oa.patch_json("/api/users/%s" % tid, {"lastName": "Set"})
    assert oa.get_json("/api/users/%s" % tid)["data"]["lastName"] == "Set"
    oa.patch_json("/api/users/%s" % tid, {"lastName": None, "phone": None, "birthDate": None})
    assert oa.get_json("/api/users/%s" % tid)["data"]["lastName"] is None
    err = assert_error(oa.call("PATCH", "/api/users/%s" % tid, {"firstName": None})[0], 400)
    assert fields(err) == ["firstName"]


def test_patch_me_needs_session_and_passes_invite_gate_rules(org):
    assert_error(Client().call("PATCH", "/api/users/me", {"firstName": "X"})[0], 401,
                 "UNAUTHENTICATED")
    c, u = sign_up()
    add_pending_invite(u["email"], org.id)
    assert_error(c.call("PATCH", "/api/users/me", {"firstName": "X"})[0], 403, "INVITE_GATE")


def test_patch_me_wins_over_patch_by_id():
    c, u = sign_up()
    d = c.patch_json("/api/users/me", {"lastName": "Literal"})
    assert "data" in d and d["data"]["lastName"] == "Literal"
    # The by-id route answers {success: true}, also for "me".
    assert c.patch_json("/api/users/%s" % u["id"], {"lastName": "ById"}) == {"success": True}
    assert c.get_json("/api/users/me")["data"]["lastName"] == "ById"


# ---- GET /api/users ----------------------------------------------------------------------------


def test_list_all_users_as_platform_admin(org):
    pa, _ = make_platform_admin()
    tag = "zq" + unique_email()[5:15]
    ua = sign_up(email=tag + "-a@example.com", name="Listy Alpha")[1]
    ub = sign_up(email=tag + "-b@example.com", name="Listy Beta")[1]
    org.add_member("Coach", key="extra", user=(None, ub))
    body = pa.get_json("/api/users?search=%s" % tag)
    assert body["meta"]["total_count"] == 2
    assert [x["id"] for x in body["data"]] == [ub["id"], ua["id"]]  # newest first
    item = body["data"][0]
    assert set(item) == USER_KEYS
    assert item["orgRoles"] == [{"orgId": org.id, "orgName": org.name, "role": "Coach",
                                 "membershipStatus": "active"}]
    assert item["role"] == "Coach" and item["globalRole"] is None and item["status"] == "active"
    assert body["data"][1]["orgRoles"] == [] and body["data"][1]["role"] is None
    # Pages.
    page = pa.get_json("/api/users?search=%s&limit=1&offset=1" % tag)
    assert page["meta"]["total_count"] == 2 and [x["id"] for x in page["data"]] == [ua["id"]]
    assert pa.get_json("/api/users?search=%s&offset=5" % tag) == {
        "data": [], "meta": {"total_count": 2}}
    # Search by display name, case-insensitive; by email part.
    assert pa.get_json("/api/users?search=LISTY%20beta&limit=1000")["data"][0]["id"] == ub["id"]
    # Filters.
    psql("UPDATE users SET status = 'suspended' WHERE id = :'id'", id=ua["id"])
    s = pa.get_json("/api/users?search=%s&status=suspended" % tag)
    assert [x["id"] for x in s["data"]] == [ua["id"]]
    r = pa.get_json("/api/users?search=%s&role=Coach" % tag)
    assert [x["id"] for x in r["data"]] == [ub["id"]]
    admins = pa.get_json("/api/users?role=PlatformAdmin&limit=1000")["data"]
    assert admins and all(x["globalRole"] == "PlatformAdmin" for x in admins)
    # Owner sees everyone as well.
    ow, _ = make_platform_admin("Owner")
    assert ow.get_json("/api/users?search=%s" % tag)["meta"]["total_count"] == 2


def test_list_search_escapes_like_wildcards():
    pa, _ = make_platform_admin()
    tag = unique_email()[5:17]
    u = sign_up(name="Pct%s 50%%_off" % tag)[1]
    sign_up(name="Pct%s 500off" % tag)
    got = pa.get_json("/api/users?search=%s%%2050%%25_" % ("Pct" + tag))
    assert [x["id"] for x in got["data"]] == [u["id"]]
    total = int(psql_value("SELECT count(*) FROM users WHERE email LIKE '%\\_%' OR"
                           " concat_ws(' ', first_name, last_name) LIKE '%\\_%'"))
    assert pa.get_json("/api/users?search=_&limit=1")["meta"]["total_count"] == total


def test_list_validation():
    pa, _ = make_platform_admin()
    for q in ("limit=0", "limit=1001", "limit=abc", "limit=1.5", "offset=-1", "offset=x",
              "status=deleted", "role=Boss", "limit="):
        assert_error(pa.get("/api/users?" + q), 400, "VALIDATION_ERROR")
    assert len(pa.get_json("/api/users?limit=1000&offset=0")["data"]) <= 1000
    # An unknown query parameter is ignored (sent on purpose, so the request check lets it pass).
    assert pa.get_json("/api/users?unknown=1&search=",
                       openapi_loose=True)["meta"]["total_count"] >= 1


def test_list_org_scoped(org):
    extra_c, extra = org.add_member("Teacher", key="t2", first="Zed")
    psql("UPDATE organization_memberships SET membership_status = 'disabled'"
         " WHERE user_id = :'u'", u=extra["id"])
    other = new_org()
    pa_member = make_platform_admin()
    org.add_member("Coach", key="pa", user=pa_member)
    oa = org.clients["OrganizationAdmin"]
    body = oa.get_json("/api/users")
    ids = {x["id"] for x in body["data"]}
    assert ids == {u["id"] for u in org.users.values()}
    assert body["meta"]["total_count"] == len(ids)
    assert not ids & {u["id"] for u in other.users.values()}
    for x in body["data"]:
        assert "orgRoles" not in x
        assert set(x) == USER_KEYS - {"orgRoles"} | {"membershipStatus"}
    by_id = {x["id"]: x for x in body["data"]}
    assert by_id[org.users["Manager"]["id"]]["role"] == "Manager"
    assert by_id[extra["id"]]["membershipStatus"] == "disabled"
    # Manager: no OrganizationAdmin, no global users.
    mids = {x["id"] for x in org.clients["Manager"].get_json("/api/users")["data"]}
    assert org.users["OrganizationAdmin"]["id"] not in mids
    assert pa_member[1]["id"] not in mids
    assert org.users["Teacher"]["id"] in mids and org.users["Manager"]["id"] in mids
    # Filters in the organization.
    t = oa.get_json("/api/users?role=Teacher")["data"]
    assert {x["id"] for x in t} == {org.users["Teacher"]["id"], extra["id"]}
    assert_error(oa.get("/api/users?role=PlatformAdmin"), 400, "VALIDATION_ERROR")
    s = oa.get_json("/api/users?search=zed")["data"]
    assert [x["id"] for x in s] == [extra["id"]]


def test_list_org_cached_page_sees_changes(org):
    """The organization-scoped list keeps rendered pages per worker; a page listed before a
    change must not be served after it (a name change, and a global role, which shows as
    globalRole and hides the user from Managers)."""
    tag = "Cachy" + uuid.uuid4().hex[:8]
    c, u = org.add_member("Teacher", key="cached", first=tag, last="Before")
    oa, mgr = org.clients["OrganizationAdmin"], org.clients["Manager"]
    path = "/api/users?limit=100&search=%s" % tag.lower()
    for _ in range(3):  # fill the caches (and hit them) of whichever workers answer
        assert [(x["id"], x["lastName"]) for x in oa.get_json(path)["data"]] == [
            (u["id"], "Before")]
        assert [x["id"] for x in mgr.get_json(path)["data"]] == [u["id"]]
    c.patch_json("/api/users/me", {"lastName": "After"})
    for _ in range(3):
        assert [x["lastName"] for x in oa.get_json(path)["data"]] == ["After"]
        assert [x["lastName"] for x in mgr.get_json(path)["data"]] == ["After"]
    psql("UPDATE users SET global_role = 'PlatformAdmin' WHERE id = :'u'", u=u["id"])
    for _ in range(3):
        body = oa.get_json(path)
        assert [x["globalRole"] for x in body["data"]] == ["PlatformAdmin"]
        assert body["meta"]["total_count"] == 1
        assert mgr.get_json(path) == {"data": [], "meta": {"total_count": 0}}


def test_list_requires_org_context_and_role(org):
    c, u = sign_up()
    assert_error(c.get("/api/users"), 400, "ORG_CONTEXT_REQUIRED")
    oa = org.clients["OrganizationAdmin"]
    psql("UPDATE users SET current_organization_id = NULL WHERE id = :'id'",
         id=org.users["OrganizationAdmin"]["id"])
    oa.org(None)
    assert_error(oa.get("/api/users"), 400, "ORG_CONTEXT_REQUIRED")
    # The profile's current organization is an organization context too.
    psql("UPDATE users SET current_organization_id = :'o' WHERE id = :'id'", o=org.id,
         id=org.users["OrganizationAdmin"]["id"])
    assert oa.get_json("/api/users")["meta"]["total_count"] == 4
    for role in ("Coach", "Teacher"):
        assert_error(org.clients[role].get("/api/users"), 403, "FORBIDDEN")
    assert_error(Client().get("/api/users"), 401, "UNAUTHENTICATED")


# ---- POST /api/users ---------------------------------------------------------------------------


def test_create_user(org):
    m = org.clients["Manager"]
    email = unique_email("Created")
    r, body = m.call("POST", "/api/users", {"email": email.upper(), "firstName": " Nia ",
                                             "lastName": "Okafor", "password": PASSWORD},
                     headers={"Accept-Language": "es-MX,en;q=0.5"})
    assert r.status_code == 201, r.text
    d = body["data"]
    assert set(d) == {"id", "email", "firstName", "lastName", "preferredLanguage"}
    assert d["email"] == email.lower() and d["firstName"] == "Nia" and d["lastName"] == "Okafor"
    assert d["preferredLanguage"] == "es"
    assert re.match(r"^c[0-9a-z]{24}$", d["id"])
    # No role anywhere, and the password works.
    assert psql_value("SELECT count(*) FROM organization_memberships WHERE user_id = :'id'",
                      id=d["id"]) == "0"
    assert psql_value("SELECT global_role FROM users WHERE id = :'id'", id=d["id"]) is None
    h = psql_value("SELECT password_hash FROM accounts WHERE user_id = :'id'", id=d["id"])
    assert h.startswith("$argon2id$")
    sign_in(email, PASSWORD)
    # Language: explicit, else Accept-Language, else en.
    d2 = m.post_json("/api/users", {"email": unique_email(), "firstName": "A", "lastName": "B",
                                    "password": PASSWORD, "preferredLanguage": "en"},
                     expect=201, headers={"Accept-Language": "es"})["data"]
    assert d2["preferredLanguage"] == "en"
    d3 = m.post_json("/api/users", {"email": unique_email(), "firstName": "A", "lastName": "B",
                                    "password": PASSWORD}, expect=201)["data"]
    assert d3["preferredLanguage"] == "en"
    # Taken, case-insensitively.
    assert_error(m.call("POST", "/api/users", {"email": email, "firstName": "A", "lastName": "B",
                                               "password": PASSWORD})[0], 409, "EMAIL_TAKEN")


def test_create_user_validation_and_roles(org):
    pa, _ = make_platform_admin()
    err = assert_error(pa.call("POST", "/api/users", {})[0], 400, "VALIDATION_ERROR")
    assert fields(err) == ["email", "firstName", "lastName", "password"]
    err = assert_error(pa.call("POST", "/api/users", {
        "email": "nope", "firstName": "x" * 101, "lastName": "", "password": "short",
        "preferredLanguage": "de"})[0], 400)
    assert fields(err) == ["email", "firstName", "lastName", "password", "preferredLanguage"]
    body = {"email": unique_email(), "firstName": "A", "lastName": "B", "password": PASSWORD}
    for role in ("Coach", "Teacher"):
        assert_error(org.clients[role].call("POST", "/api/users", body)[0], 403, "FORBIDDEN")
    c, _ = sign_up()
    assert_error(c.call("POST", "/api/users", body)[0], 400, "ORG_CONTEXT_REQUIRED")
    assert_error(Client().call("POST", "/api/users", body)[0], 401)
    pa.post_json("/api/users", body, expect=201)


# ---- GET /api/users/:id ------------------------------------------------------------------------


def test_get_user_self_and_scope(org):
    t = org.clients["Teacher"]
    tid = org.users["Teacher"]["id"]
    t.patch_json("/api/users/me", {"phone": "+34612345678", "birthDate": "1991-01-02"})
    other = new_org()
    other.add_member("Teacher", key="dual", user=(None, org.users["Teacher"]))
    own = t.get_json("/api/users/%s" % tid)["data"]
    assert set(own) == USER_KEYS | {"phone", "birthDate"}
    assert own["phone"] == "+34612345678" and own["birthDate"] == "1991-01-02"
    assert own["role"] == "Teacher"
    assert {r["orgId"] for r in own["orgRoles"]} == {org.id, other.id}
    assert all(set(r) == {"orgId", "orgName", "role"} for r in own["orgRoles"])
    # A Manager sees the user without phone and birthDate, and only this organization's role.
    seen = org.clients["Manager"].get_json("/api/users/%s" % tid)["data"]
    assert set(seen) == USER_KEYS
    assert seen["orgRoles"] == [{"orgId": org.id, "orgName": org.name, "role": "Teacher"}]
    assert seen["email"] == org.users["Teacher"]["email"] and seen["role"] == "Teacher"
    # PlatformAdmin: every organization.
    pa, _ = make_platform_admin()
    seen = pa.get_json("/api/users/%s" % tid)["data"]
    assert len(seen["orgRoles"]) == 2 and "phone" not in seen
    # Manager cannot read an OrganizationAdmin; OrganizationAdmin can read a Manager.
    assert_error(org.clients["Manager"].get("/api/users/%s" % org.users["OrganizationAdmin"]["id"]),
                 403, "FORBIDDEN")
    org.clients["OrganizationAdmin"].get_json("/api/users/%s" % org.users["Manager"]["id"])
    # Another organization's user: 403; unknown: 404.
    assert_error(org.clients["OrganizationAdmin"].get(
        "/api/users/%s" % other.users["Manager"]["id"]), 403, "FORBIDDEN")
    assert_error(org.clients["Manager"].get("/api/users/cnotauser0000000000000000"), 404,
                 "NOT_FOUND")
    assert_error(t.get("/api/users/%s" % org.users["Coach"]["id"]), 403, "FORBIDDEN")


# ---- PATCH /api/users/:id ----------------------------------------------------------------------


def test_patch_user_profile(org):
    tid = org.users["Teacher"]["id"]
    m = org.clients["Manager"]
    assert m.patch_json("/api/users/%s" % tid, {"firstName": "Renamed", "lastName": "ByManager",
                                                 "birthDate": "1980-05-06"}) == {"success": True}
    row = psql("SELECT first_name, last_name, to_char(birth_date, 'YYYY-MM-DD') FROM users"
               " WHERE id = :'id'", id=tid)[0]
    assert row == ("Renamed", "ByManager", "1980-05-06")
    # The phone is read with the target's country and stored as E.164.
    psql("UPDATE users SET country_code = 'MX' WHERE id = :'id'", id=tid)
    m.patch_json("/api/users/%s" % tid, {"phone": "55 1234 5678"})
    assert psql_value("SELECT phone FROM users WHERE id = :'id'", id=tid) == "+525512345678"
    m.patch_json("/api/users/%s" % tid, {"phone": ""})
    assert psql_value("SELECT phone FROM users WHERE id = :'id'", id=tid) is None
    err = assert_error(m.call("PATCH", "/api/users/%s" % tid, {"phone": "1" * 51})[0], 400)
    assert fields(err) == ["phone"]
    assert_error(m.call("PATCH", "/api/users/%s" % tid, {"phone": "12"})[0], 400)
    err = assert_error(m.call("PATCH", "/api/users/%s" % tid,
                              {"firstName": "", "status": "gone", "birthDate": "3000-01-01"})[0],
                       400)
    assert fields(err) == ["birthDate", "firstName", "status"]
    # Self through the by-id route.
    t = org.clients["Teacher"]
    assert t.patch_json("/api/users/%s" % tid, {"firstName": "Me"}) == {"success": True}
    # Manager cannot touch an OrganizationAdmin; a Coach nobody else; unknown: 404.
    assert_error(m.call("PATCH", "/api/users/%s" % org.users["OrganizationAdmin"]["id"],
                        {"firstName": "X"})[0], 403, "FORBIDDEN")
    assert_error(org.clients["Coach"].call("PATCH", "/api/users/%s" % tid,
                                           {"firstName": "X"})[0], 403, "FORBIDDEN")
    assert_error(m.call("PATCH", "/api/users/cnotauser0000000000000000", {"firstName": "X"})[0],
                 404, "NOT_FOUND")
    other = new_org()
    assert_error(other.clients["OrganizationAdmin"].call(
        "PATCH", "/api/users/%s" % tid, {"firstName": "X"})[0], 403, "FORBIDDEN")


def test_patch_user_status(org):
    tc, t = org.clients["Teacher"], org.users["Teacher"]
    m, oa = org.clients["Manager"], org.clients["OrganizationAdmin"]
    assert_error(m.call("PATCH", "/api/users/%s" % t["id"], {"status": "suspended"})[0], 403,
                 "FORBIDDEN")
    assert_error(tc.call("PATCH", "/api/users/%s" % t["id"], {"status": "inactive"})[0], 403)
    assert_error(oa.call("PATCH", "/api/users/%s" % org.users["OrganizationAdmin"]["id"],
                         {"status": "inactive"})[0], 403)  # never one's own status
    with RedisSub("user:%s:control" % t["id"]) as sub:
        assert oa.patch_json("/api/users/%s" % t["id"], {"status": "suspended"}) == {
            "success": True}
        assert sub.messages() == [{"type": "user-inactive"}]
        # Same again: no second message (the status did not leave active this time).
        oa.patch_json("/api/users/%s" % t["id"], {"status": "inactive"})
        time.sleep(0.5)
        assert sub.messages() == [{"type": "user-inactive"}]
    assert psql_value("SELECT status FROM users WHERE id = :'id'", id=t["id"]) == "inactive"
    assert_error(tc.get("/api/users/me"), 401, "UNAUTHENTICATED")
    sign_in(t["email"], expect=401)
    oa.patch_json("/api/users/%s" % t["id"], {"status": "active"})
    tc.get_json("/api/users/me")
    sign_in(t["email"])


def test_global_users_are_protected(org):
    pa_c, pa_u = make_platform_admin()
    org.add_member("Teacher", key="pa", user=(pa_c, pa_u))
    oa = org.clients["OrganizationAdmin"]
    oa.get_json("/api/users/%s" % pa_u["id"])  # readable by the organization's admin
    assert_error(oa.call("PATCH", "/api/users/%s" % pa_u["id"], {"firstName": "X"})[0], 403)
    assert_error(oa.call("DELETE", "/api/users/%s" % pa_u["id"])[0], 403)
    assert_error(org.clients["Manager"].get("/api/users/%s" % pa_u["id"]), 403)
    ow_c, ow_u = make_platform_admin("Owner")
    assert_error(pa_c.call("PATCH", "/api/users/%s" % ow_u["id"], {"status": "inactive"})[0], 403)
    assert ow_c.patch_json("/api/users/%s" % pa_u["id"], {"firstName": "Plat"}) == {
        "success": True}


# ---- DELETE /api/users/:id ---------------------------------------------------------------------


def test_delete_user_archives(org):
    tc, t = org.clients["Teacher"], org.users["Teacher"]
    for role in ("Manager", "Coach", "Teacher"):
        assert_error(org.clients[role].call("DELETE", "/api/users/%s" % t["id"])[0], 403,
                     "FORBIDDEN")
    oa = org.clients["OrganizationAdmin"]
    with RedisSub("user:%s:control" % t["id"]) as sub:
        assert oa.delete_json("/api/users/%s" % t["id"]) == {"success": True}
        assert sub.messages() == [{"type": "user-inactive"}]
    assert psql_value("SELECT status FROM users WHERE id = :'id'", id=t["id"]) == "archived"
    assert psql_value("SELECT count(*) FROM users WHERE id = :'id'", id=t["id"]) == "1"
    assert_error(tc.get("/api/users/me"), 401, "UNAUTHENTICATED")
    sign_in(t["email"], expect=401)
    # Again: still archived, still 200.
    assert oa.delete_json("/api/users/%s" % t["id"]) == {"success": True}
    assert_error(oa.call("DELETE", "/api/users/cnotauser0000000000000000")[0], 404, "NOT_FOUND")
    assert_error(oa.call("DELETE", "/api/users/%s" % org.users["OrganizationAdmin"]["id"])[0], 403)
    assert_error(oa.call("DELETE", "/api/users/me")[0], 403)
    other = new_org()
    assert_error(other.clients["OrganizationAdmin"].call(
        "DELETE", "/api/users/%s" % org.users["Coach"]["id"])[0], 403)
    pa, _ = make_platform_admin()
    assert pa.delete_json("/api/users/%s" % org.users["Coach"]["id"]) == {"success": True}


def test_invite_gate_applies(org):
    c, u = org.clients["Manager"], org.users["Manager"]
    add_pending_invite(u["email"], new_org(roles=()).id)
    for method, path in (("GET", "/api/users"), ("GET", "/api/users/%s" % u["id"]),
                         ("PATCH", "/api/users/%s" % u["id"]), ("POST", "/api/users")):
        assert_error(c.call(method, path, {} if method != "GET" else None)[0], 403, "INVITE_GATE")
    c.get_json("/api/users/me")  # exempt


# ---- role matrix -------------------------------------------------------------------------------

ROLES = ("Teacher", "Coach", "Manager", "OrganizationAdmin", "PlatformAdmin", "Owner", "outsider",
         "other_org_admin")

# Expected status per endpoint and caller; the target is a Teacher of the organization.
MATRIX = {
    "GET /api/users": dict(Teacher=403, Coach=403, Manager=200, OrganizationAdmin=200,
                           PlatformAdmin=200, Owner=200, outsider=400, other_org_admin=200),
    "POST /api/users": dict(Teacher=403, Coach=403, Manager=201, OrganizationAdmin=201,
                            PlatformAdmin=201, Owner=201, outsider=400, other_org_admin=201),
    "GET /api/users/:id": dict(Teacher=403, Coach=403, Manager=200, OrganizationAdmin=200,
                               PlatformAdmin=200, Owner=200, outsider=403, other_org_admin=403),
    "PATCH /api/users/:id": dict(Teacher=403, Coach=403, Manager=200, OrganizationAdmin=200,
                                 PlatformAdmin=200, Owner=200, outsider=403, other_org_admin=403),
    "PATCH /api/users/:id status": dict(Teacher=403, Coach=403, Manager=403,
                                        OrganizationAdmin=200, PlatformAdmin=200, Owner=200,
                                        outsider=403, other_org_admin=403),
    "DELETE /api/users/:id": dict(Teacher=403, Coach=403, Manager=403, OrganizationAdmin=200,
                                  PlatformAdmin=200, Owner=200, outsider=403, other_org_admin=403),
    "GET /api/users/:id/presence": dict(Teacher=403, Coach=403, Manager=200,
                                        OrganizationAdmin=200, PlatformAdmin=200, Owner=200,
                                        outsider=403, other_org_admin=403),
    "GET /api/users/:id (self)": {r: 200 for r in ROLES},
    "GET /api/users/:id/presence (self)": {r: 200 for r in ROLES},
    "PATCH /api/users/me": {r: 200 for r in ROLES},
    "PATCH /api/users/:id (self)": {r: 200 for r in ROLES},
    "DELETE /api/users/:id (self)": {r: 403 for r in ROLES},
    "POST /api/users/me/push-tokens": {r: 201 for r in ROLES},
    "DELETE /api/users/me/push-tokens/:token": {r: 204 for r in ROLES},
}


def test_role_matrix():
    org = new_org()
    other = new_org(roles=("OrganizationAdmin",))
    callers = {r: (org.clients[r], org.users[r]) for r in ("Teacher", "Coach", "Manager",
                                                           "OrganizationAdmin")}
    callers["PlatformAdmin"] = make_platform_admin()
    callers["Owner"] = make_platform_admin("Owner")
    callers["outsider"] = sign_up()
    callers["other_org_admin"] = (other.clients["OrganizationAdmin"],
                                  other.users["OrganizationAdmin"])
    problems = []
    for role in ROLES:
        c, me = callers[role]

        def target():
            return org.add_member("Teacher", key="target-%s" % role)[1]["id"]

        def new_user():
            return {"email": unique_email(), "firstName": "N", "lastName": "U",
                    "password": PASSWORD}

        token = "ExponentPushToken[%s]" % unique_email()[5:20]
        calls = {
            "GET /api/users": lambda: c.get("/api/users?limit=1"),
            "POST /api/users": lambda: c.post("/api/users", json=new_user()),
            "GET /api/users/:id": lambda: c.get("/api/users/%s" % target()),
            "PATCH /api/users/:id": lambda: c.patch("/api/users/%s" % target(),
                                                    json={"firstName": "M"}),
            "PATCH /api/users/:id status": lambda: c.patch("/api/users/%s" % target(),
                                                           json={"status": "suspended"}),
            "DELETE /api/users/:id": lambda: c.delete("/api/users/%s" % target()),
            "GET /api/users/:id/presence": lambda: c.get("/api/users/%s/presence" % target()),
            "GET /api/users/:id (self)": lambda: c.get("/api/users/%s" % me["id"]),
            "GET /api/users/:id/presence (self)":
                lambda: c.get("/api/users/%s/presence" % me["id"]),
            "PATCH /api/users/me": lambda: c.patch("/api/users/me", json={"lastName": "L"}),
            "PATCH /api/users/:id (self)": lambda: c.patch("/api/users/%s" % me["id"],
                                                           json={"lastName": "L"}),
            "DELETE /api/users/:id (self)": lambda: c.delete("/api/users/%s" % me["id"]),
            "POST /api/users/me/push-tokens": lambda: c.post(
                "/api/users/me/push-tokens", json={"token": token, "platform": "ios"}),
            "DELETE /api/users/me/push-tokens/:token": lambda: c.delete(
                "/api/users/me/push-tokens/%s" % token),
        }
        for name, expected in MATRIX.items():
            r = calls[name]()
            if r.status_code != expected[role]:
                problems.append("%s as %s: %d (want %d) %s" % (
                    name, role, r.status_code, expected[role], r.text[:200]))
    assert not problems, "\n".join(problems)
    # Unauthenticated: 401 everywhere.
    anon = Client()
    tid = org.users["Teacher"]["id"]
    for method, path in (("GET", "/api/users"), ("POST", "/api/users"), ("PATCH", "/api/users/me"),
                         ("GET", "/api/users/" + tid), ("PATCH", "/api/users/" + tid),
                         ("DELETE", "/api/users/" + tid), ("GET", "/api/users/%s/presence" % tid),
                         ("POST", "/api/users/me/push-tokens"),
                         ("DELETE", "/api/users/me/push-tokens/x")):
        assert_error(anon.request(method, path, json={}), 401, "UNAUTHENTICATED")
